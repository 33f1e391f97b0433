//go:build linux

package clone

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
	"k8s.io/klog/v2/ktesting"
)

// deepTree makes in dir a chain of depth directories, each named with
// nameLen bytes but the last, "bottom", which holds the file "leaf"; each
// directory of the chain but "bottom" also holds a file "f". The file
// "top" of dir has a second link "bottom/leaf-link", so a walk remembers
// it from one end of the chain to the other. It returns the number of
// entries: what a walk meets.
func deepTree(t *testing.T, dir string, depth, nameLen int) int {
	t.Helper()
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	must(t, err)
	top, err := unix.Openat(fd, "top", unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL, 0o644)
	must(t, err)
	must(t, unix.Close(top))
	topFD, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	must(t, err)
	defer unix.Close(topFD)
	entries := 1
	name := strings.Repeat("n", nameLen)
	for level := 1; level <= depth; level++ {
		d := name
		if level == depth {
			d = "bottom"
		} else {
			f, err := unix.Openat(fd, "f", unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL, 0o644)
			must(t, err)
			must(t, unix.Close(f))
			entries++
		}
		must(t, unix.Mkdirat(fd, d, 0o755))
		next, err := unix.Openat(fd, d, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW, 0)
		unix.Close(fd)
		must(t, err)
		fd = next
		entries++
	}
	leaf, err := unix.Openat(fd, "leaf", unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL, 0o644)
	must(t, err)
	must(t, unix.Close(leaf))
	must(t, unix.Linkat(topFD, "top", fd, "leaf-link", 0))
	must(t, unix.Close(fd))
	return entries + 2
}

// liveHeap returns the bytes of the heap in use after a collection.
func liveHeap() int64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return int64(ms.HeapAlloc)
}

// TestDeepTreeHeap: what Contents and Size hold while deep in a tree of
// long names grows with its entries, not with its depth times the length
// of its paths. A chain of 1,000 directories of 250-byte names has paths
// of 125 KB on average: a walk that kept each level's path would hold
// some 125 MB at the bottom (and as much again for a hard link map of
// paths); this one holds its buffers and a few hundred bytes a level.
// The heap is measured, after a collection, when the walk opens the
// deepest directory: the moment it holds the most.
func TestDeepTreeHeap(t *testing.T) {
	const (
		depth   = 1000
		nameLen = 250
		// perEntry and fixed bound the heap a walk may hold: a level
		// costs its name (256), its node, its frame and its pending
		// names (some 600 bytes); the copy's buffers are 1 MiB.
		perEntry = 1 << 10
		fixed    = 2 << 20
	)
	_, ctx := ktesting.NewTestContext(t)
	src, dst, _ := newDirs(t)
	entries := deepTree(t, src, depth, nameLen)
	sr, dr := roots(t, src, dst)
	limit := int64(fixed + perEntry*entries)
	for _, tc := range []struct {
		name string
		walk func(context.Context) error
	}{
		{"Size", func(ctx context.Context) error { _, err := Size(ctx, sr, Limits{}); return err }},
		{"Contents", func(ctx context.Context) error {
			_, err := Contents(ctx, sr, dr, Options{NoReflink: true})
			return err
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			base := liveHeap()
			var peak int64 = -1
			beforeOpen = func(at node) {
				if at.name == "bottom" {
					peak = liveHeap() - base
				}
			}
			t.Cleanup(func() { beforeOpen = nil })
			if err := tc.walk(ctx); err != nil {
				t.Fatal(err)
			}
			if peak < 0 {
				t.Fatal("the walk never opened the deepest directory")
			}
			t.Logf("%d entries, depth %d, names of %d bytes: %d KiB held at the bottom (%d bytes an entry), limit %d KiB",
				entries, depth, nameLen, peak>>10, peak/int64(entries), limit>>10)
			if peak > limit {
				t.Errorf("the walk holds %s at depth %d, more than %s (%d bytes for each of %d entries and %s)",
					mib(peak), depth, mib(limit), perEntry, entries, mib(fixed))
			}
		})
	}
}

// mib writes n bytes in MiB.
func mib(n int64) string { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) }
