// Command chartcheck keeps the Helm chart charts/hostpath in step with
// manifests/, for make verify (tools/internal/chartcheck):
//
//	chartcheck check -helm PATH -helm4 PATH -kustomize PATH [ROOT]
//	    the chart's files/ are copies of their manifests/ sources; helm
//	    lint --strict passes; each case's values render as its
//	    kustomization (defaults as manifests/, ci/openshift-values.yaml as
//	    manifests/openshift, ...), and helm v4 renders the defaults as
//	    helm v3; every value is documented and docs/install.md's values
//	    table is up to date. ROOT is the repository's root (default: the
//	    working directory)
//	chartcheck sync [ROOT]
//	    rewrite the chart's files/ from manifests/ and docs/install.md's
//	    values table from values.yaml
package main

import (
	"os"

	"hostpath.dev/e2e/framework/cli"
	"hostpath.dev/tools/internal/chartcheck"
)

func main() {
	cli.Main("chartcheck", chartcheck.Usage, map[string]cli.Command{
		"check": chartcheck.CheckCommand(os.Stdout, os.Stderr),
		"sync":  chartcheck.SyncCommand(os.Stdout, os.Stderr),
	})
}
