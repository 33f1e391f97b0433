module hostpath.dev/hostdefiner

go 1.25.0

require (
	github.com/spf13/pflag v1.0.10
	k8s.io/klog/v2 v2.140.0
)

require github.com/go-logr/logr v1.4.2 // indirect

replace hostpath.dev/manager => ../manager
