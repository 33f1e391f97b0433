// Command provisioner is the hostpath provisioner: one instance per node
// creates and deletes the node-local volumes of that node through the node's
// hostpath manager. See docs/provisioner.md.
package main

import (
	"hostpath.dev/api/runtime/component"
	"hostpath.dev/provisioner/internal/app"
)

func main() { component.Main("provisioner", app.NewOptions()) }
