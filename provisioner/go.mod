module hostpath.dev/provisioner

go 1.25.0

require hostpath.dev/manager v0.0.0

replace hostpath.dev/manager => ../manager
