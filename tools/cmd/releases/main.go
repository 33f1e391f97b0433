// Command releases reads RELEASES, the record of the repository's releases
// (e2e/framework/releases; the commands are tools/internal/releasetool),
// for make verify and make release:
//
//	releases check [REPO]
//	    the record is well formed (semantic versions, increasing, full
//	    commits, dates, upgrade values), each commit is an ancestor of HEAD
//	    with the recorded date, and CHANGELOG.md has a section for each
//	    release; REPO is the repository's root (default: the working
//	    directory)
//	releases commit VERSION [REPO]
//	    the same checks, then prints the commit of release VERSION (fails
//	    when RELEASES does not record it)
//	releases set-values FILE KEY.PATH=VALUE...
//	    sets keys that the YAML file FILE has (a Helm chart's values.yaml)
//	    to string values, keeping its comments
package main

import (
	"os"

	"hostpath.dev/e2e/framework/cli"
	"hostpath.dev/tools/internal/releasetool"
)

func main() {
	cli.Main("releases", releasetool.Usage, releasetool.Commands(os.Stdout))
}
