// Command releases checks RELEASES, the record of the repository's releases
// (e2e/internal/releases), for make verify:
//
//	releases check [REPO]
//	    the record is well formed (semantic versions, increasing, full
//	    commits, dates, upgrade values), each commit is an ancestor of HEAD
//	    with the recorded date, and CHANGELOG.md has a section for each
//	    release; REPO is the repository's root (default: the working
//	    directory)
package main

import (
	"context"
	"errors"
	"fmt"
	"os"

	"hostpath.dev/e2e/internal/cli"
	"hostpath.dev/e2e/internal/releases"
)

func main() {
	cli.Main("releases", "check [REPO]", map[string]cli.Command{"check": check})
}

func check(ctx context.Context, args []string) error {
	if len(args) > 1 {
		return errors.New("usage: releases check [REPO]")
	}
	root := "."
	if len(args) == 1 {
		root = args[0]
	}
	rels, err := releases.Read(root)
	if err != nil {
		return err
	}
	if err := releases.Check(ctx, root, rels); err != nil {
		return err
	}
	fmt.Fprintf(os.Stdout, "releases: ok (%d recorded, newest %s)\n", len(rels), rels[len(rels)-1].Version)
	return nil
}
