//go:build linux

package clone

import (
	"encoding/binary"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
	"k8s.io/klog/v2/ktesting"
	"unsafe"

	"hostpath.dev/manager/internal/quota/quotatest"
)

// TestReflink copies trees on loop-mounted btrfs and xfs, which share
// extents between files: every file with data is cloned (MethodReflink)
// unless reflinks are off, and the copy is the same either way.
func TestReflink(t *testing.T) {
	mounts := map[string]func(t *testing.T) string{
		"btrfs": func(t *testing.T) string { return quotatest.MountBtrfs(t) },
		"xfs":   func(t *testing.T) string { return quotatest.MountXFS(t, 300<<20) },
	}
	for _, tc := range []struct {
		name string
		fs   string
		opts Options
		// tree makes the source in src.
		tree func(t *testing.T, src string)
		want Method
	}{
		{"btrfs", "btrfs", Options{}, reflinkTree, MethodReflink},
		{"btrfs, reflinks off", "btrfs", Options{NoReflink: true}, reflinkTree, MethodCopy},
		{"btrfs, no file data", "btrfs", Options{}, emptyFiles, MethodCopy},
		{"xfs", "xfs", Options{}, reflinkTree, MethodReflink},
		{"xfs, reflinks off", "xfs", Options{NoReflink: true}, reflinkTree, MethodCopy},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, ctx := ktesting.NewTestContext(t)
			mnt := mounts[tc.fs](t)
			src, dst := filepath.Join(mnt, "src"), filepath.Join(mnt, "dst")
			must(t, os.Mkdir(src, 0o755))
			must(t, os.Mkdir(dst, 0o700))
			tc.tree(t, src)
			want := scan(t, src)
			sr, dr := roots(t, src, dst)
			got, err := Contents(ctx, sr, dr, tc.opts)
			if err != nil {
				t.Fatalf("Contents: %v", err)
			}
			if got != tc.want {
				t.Errorf("method = %q, want %q", got, tc.want)
			}
			compareTrees(t, want, scan(t, dst))
			if !maps.Equal(contents(t, dst), contents(t, src)) {
				t.Error("the copy's files differ from the source's")
			}
			if _, err := os.Stat(filepath.Join(src, "big")); err != nil {
				return
			}
			if got, want := shared(t, filepath.Join(dst, "big")), tc.want == MethodReflink; got != want {
				t.Errorf("big in the copy shares its first extent: %v, want %v", got, want)
			}
		})
	}
}

// reflinkTree makes files with data, an empty one, a sparse one and a
// symlink in src.
func reflinkTree(t *testing.T, src string) {
	must(t, os.Mkdir(filepath.Join(src, "d"), 0o755))
	writeFile(t, filepath.Join(src, "big"), strings.Repeat("0123456789abcdef", 1<<16), 0o644) // 1 MiB
	writeFile(t, filepath.Join(src, "d/small"), "x", 0o600)
	writeFile(t, filepath.Join(src, "d/empty"), "", 0o600)
	f, err := os.Create(filepath.Join(src, "sparse"))
	must(t, err)
	_, err = f.WriteAt([]byte("end"), 8<<20)
	must(t, err)
	must(t, f.Close())
	must(t, os.Symlink("big", filepath.Join(src, "link")))
}

// emptyFiles makes a directory and empty files in src.
func emptyFiles(t *testing.T, src string) {
	must(t, os.Mkdir(filepath.Join(src, "d"), 0o755))
	writeFile(t, filepath.Join(src, "d/empty"), "", 0o600)
}

// shared reports whether the first extent of p is shared with another
// file (FIEMAP_EXTENT_SHARED), as filefrag -v shows it.
func shared(t *testing.T, p string) bool {
	t.Helper()
	f, err := os.Open(p)
	must(t, err)
	defer f.Close()
	const (
		fsIocFiemap  = 0xc020660b // FS_IOC_FIEMAP = _IOWR('f', 11, struct fiemap)
		extentShared = 0x2000     // FIEMAP_EXTENT_SHARED
		flagSync     = 1          // FIEMAP_FLAG_SYNC
	)
	// struct fiemap (32 bytes) and one struct fiemap_extent (56 bytes).
	var buf [32 + 56]byte
	le := binary.LittleEndian
	le.PutUint64(buf[8:], ^uint64(0)) // fm_length
	le.PutUint32(buf[16:], flagSync)  // fm_flags
	le.PutUint32(buf[24:], 1)         // fm_extent_count
	_, _, errno := unix.Syscall(unix.SYS_IOCTL, f.Fd(), fsIocFiemap, uintptr(unsafe.Pointer(&buf[0])))
	if errno != 0 {
		t.Fatalf("FIEMAP %s: %v", p, errno)
	}
	if le.Uint32(buf[20:]) == 0 { // fm_mapped_extents
		t.Fatalf("FIEMAP %s: no extent", p)
	}
	return le.Uint32(buf[32+40:])&extentShared != 0 // fe_flags
}
