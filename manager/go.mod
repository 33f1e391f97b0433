module hostpath.dev/manager

go 1.25.0
