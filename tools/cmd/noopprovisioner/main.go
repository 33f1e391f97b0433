// Command noopprovisioner is the floor of the provisioning benchmark
// (scripts/bench-provision.sh runs it on this machine): a provisioner on the
// same library as hostpath's that only writes PV objects and deletes
// nothing. By default its PVs carry the library's finalizer, as Kubernetes
// 1.33 and later expect (the fair floor); --finalizer=false is the old
// floor without it.
//
//	noopprovisioner --kubeconfig .cluster/kubeconfig --kube-api-qps 100 --kube-api-burst 200 --workers 16 \
//	    [--provisioner-name hostpath.dev/noop-bench] [--metrics-address 127.0.0.1:18089] [--finalizer=false]
//
// The flags and the program live in tools/internal/noopprovisioner (Options).
package main

import (
	"hostpath.dev/api/runtime/component"
	"hostpath.dev/tools/internal/noopprovisioner"
)

func main() { component.Main("noopprovisioner", noopprovisioner.NewOptions()) }
