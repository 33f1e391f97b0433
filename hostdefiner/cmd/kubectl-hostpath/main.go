// Command kubectl-hostpath is the kubectl plugin of hostpath: on PATH, it
// runs as `kubectl hostpath COMMAND`. Its one command, orphans, lists the
// volume directories no PersistentVolume refers to and the
// PersistentVolumes whose directory is missing, per node and pool; it never
// deletes anything. See hostdefiner/internal/orphans and
// docs/kubectl-hostpath.md.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"hostpath.dev/hostdefiner/internal/orphans"
	"hostpath.dev/hostdefiner/internal/plugin"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := plugin.Main(ctx, os.Args[1:], os.Stdout, os.Stderr, plugin.Command{
		Name: "orphans", Summary: orphans.Summary, Help: orphans.Help,
		New: func() plugin.Program { return orphans.NewOptions() },
	})
	stop()
	os.Exit(code)
}
