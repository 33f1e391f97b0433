// Command manager is the only hostpath program that touches host disks: on
// each node it serves an authenticated HTTP API that creates, lists, hands
// over and removes volume directories in the node's storage pools, each
// directory owned by one PersistentVolume. See manager/internal/app for its
// flags, docs/manager.md and docs/api.md.
package main

import (
	"hostpath.dev/api/runtime/component"
	"hostpath.dev/manager/internal/app"
)

func main() { component.Main("manager", app.NewOptions()) }
