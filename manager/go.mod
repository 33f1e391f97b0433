module hostpath.dev/manager

go 1.25.0

require (
	golang.org/x/sys v0.31.0
	k8s.io/klog/v2 v2.140.0
)

require github.com/go-logr/logr v1.4.1 // indirect
