// Command btrfsquota enables simple quotas on a mounted btrfs filesystem,
// for scripts/quota-pool.sh (Debian bookworm's btrfs-progs predates `btrfs
// quota enable --simple`):
//
//	btrfsquota MOUNTPOINT
package main

import (
	"fmt"
	"os"

	"hostpath.dev/e2e/internal/btrfs"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: btrfsquota MOUNTPOINT")
		os.Exit(2)
	}
	if err := btrfs.EnableSimpleQuotas(os.Args[1]); err != nil {
		fmt.Fprintln(os.Stderr, "btrfsquota:", err)
		os.Exit(1)
	}
}
