// Package releasetool is the releases command (tools/cmd/releases) of make
// verify and make release: check, commit and supported read RELEASES with
// hostpath.dev/e2e/framework/releases, the record the upgrade test reads
// too, and check it against the history and CHANGELOG.md; set-values pins
// the Helm chart's values of a release (SetValues).
package releasetool

import (
	"context"
	"errors"
	"fmt"
	"io"

	"hostpath.dev/e2e/framework/cli"
	"hostpath.dev/e2e/framework/releases"
)

// Usage is the usage of the releases command.
const Usage = "check [REPO] | commit VERSION [REPO] | supported [REPO] | set-values FILE KEY.PATH=VALUE..."

// Commands returns the subcommands of the releases command for cli.Main,
// which print their result to stdout:
//
//	check [REPO]           Read and Check; prints "releases: ok (...)"
//	commit VERSION [REPO]  Read, Check and Find; prints the release's commit
//	supported [REPO]       Read and Check; prints "VERSION COMMIT", a line for
//	                       each release the current code upgrades from
//	                       directly (Release.Supported: TestUpgrade's, which
//	                       scripts/precompile.sh compiles ahead)
//	set-values FILE KEY.PATH=VALUE...  SetValues
//
// REPO is the repository's root (default: the working directory).
func Commands(stdout io.Writer) map[string]cli.Command {
	return map[string]cli.Command{
		"check": func(ctx context.Context, args []string) error {
			if len(args) > 1 {
				return errors.New("usage: releases check [REPO]")
			}
			rels, err := readChecked(ctx, root(args))
			if err != nil {
				return err
			}
			_, err = fmt.Fprintf(stdout, "releases: ok (%d recorded, newest %s)\n", len(rels), rels[len(rels)-1].Version)
			return err
		},
		"commit": func(ctx context.Context, args []string) error {
			if len(args) < 1 || len(args) > 2 {
				return errors.New("usage: releases commit VERSION [REPO]")
			}
			rels, err := readChecked(ctx, root(args[1:]))
			if err != nil {
				return err
			}
			r, err := releases.Find(rels, args[0])
			if err != nil {
				return err
			}
			_, err = fmt.Fprintln(stdout, r.Commit)
			return err
		},
		"supported": func(ctx context.Context, args []string) error {
			if len(args) > 1 {
				return errors.New("usage: releases supported [REPO]")
			}
			rels, err := readChecked(ctx, root(args))
			if err != nil {
				return err
			}
			for _, r := range rels {
				if !r.Supported() {
					continue
				}
				if _, err := fmt.Fprintln(stdout, r.Version, r.Commit); err != nil {
					return err
				}
			}
			return nil
		},
		"set-values": func(_ context.Context, args []string) error {
			if len(args) < 2 {
				return errors.New("usage: releases set-values FILE KEY.PATH=VALUE [KEY.PATH=VALUE]")
			}
			settings, err := ParseSettings(args[1:])
			if err != nil {
				return err
			}
			return SetValues(args[0], settings)
		},
	}
}

// root is the REPO argument, or the working directory.
func root(args []string) string {
	if len(args) == 1 {
		return args[0]
	}
	return "."
}

// readChecked reads the record of the repository at root and checks it
// against its history and changelog.
func readChecked(ctx context.Context, root string) ([]releases.Release, error) {
	rels, err := releases.Read(root)
	if err != nil {
		return nil, err
	}
	if err := releases.Check(ctx, root, rels); err != nil {
		return nil, err
	}
	return rels, nil
}
