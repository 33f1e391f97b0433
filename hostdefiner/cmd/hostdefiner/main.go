// Command hostdefiner will keep one HostDefinition per (node, storage pool)
// and bring new nodes up to date. Today it only validates its flags and
// serves /healthz, /readyz and /metrics; see hostdefiner/internal/app.
package main

import (
	"hostpath.dev/hostdefiner/internal/app"
	"hostpath.dev/manager/pkg/component"
)

func main() { component.Main("hostdefiner", app.NewOptions()) }
