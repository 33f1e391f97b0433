// Command hostdefiner keeps one HostDefinition per (node, storage pool): it
// defines each node where the manager runs on each pool its StorageClasses
// name, brings joining nodes up to date (pool directory, multihost
// directories), notices reboots and cloned hosts, and undefines nodes that
// leave. See hostdefiner/internal/controller and docs/hostdefiner.md.
package main

import (
	"hostpath.dev/api/runtime/component"
	"hostpath.dev/hostdefiner/internal/app"
)

func main() { component.Main("hostdefiner", app.NewOptions()) }
