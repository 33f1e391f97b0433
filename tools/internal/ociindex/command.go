package ociindex

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"hostpath.dev/e2e/framework/cli"
	"hostpath.dev/e2e/framework/ocilayout"
)

// Usage is the usage of the ociindex command.
const Usage = "combine LAYOUT TAG PLATFORM=REF... | digest LAYOUT REF"

// Commands returns the subcommands of the ociindex command for cli.Main,
// which print what they made or found to stdout:
//
//	combine LAYOUT TAG PLATFORM=REF...  Combine; prints the index's digest
//	digest LAYOUT REF                   the digest of what REF names
func Commands(stdout io.Writer) map[string]cli.Command {
	return map[string]cli.Command{
		"combine": func(_ context.Context, args []string) error {
			if len(args) < 3 {
				return errors.New("usage: ociindex combine LAYOUT TAG PLATFORM=REF [PLATFORM=REF]")
			}
			entries, err := ParseEntries(args[2:])
			if err != nil {
				return err
			}
			d, err := Combine(ocilayout.Layout{Dir: args[0]}, args[1], entries)
			if err != nil {
				return err
			}
			_, err = fmt.Fprintln(stdout, d.Digest)
			return err
		},
		"digest": func(_ context.Context, args []string) error {
			if len(args) != 2 {
				return errors.New("usage: ociindex digest LAYOUT REF")
			}
			d, err := ocilayout.Layout{Dir: args[0]}.Find(args[1])
			if err != nil {
				return err
			}
			_, err = fmt.Fprintln(stdout, d.Digest)
			return err
		},
	}
}

// ParseEntries parses arguments PLATFORM=REF, e.g. linux/arm64=linux-arm64.
func ParseEntries(args []string) ([]Entry, error) {
	entries := make([]Entry, 0, len(args))
	for _, a := range args {
		platform, ref, ok := strings.Cut(a, "=")
		if !ok || ref == "" {
			return nil, fmt.Errorf("%q is not PLATFORM=REF", a)
		}
		p, err := ocilayout.ParsePlatform(platform)
		if err != nil {
			return nil, err
		}
		entries = append(entries, Entry{Ref: ref, Platform: p})
	}
	return entries, nil
}
