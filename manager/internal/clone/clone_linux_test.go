//go:build linux

package clone

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
	"k8s.io/klog/v2/ktesting"
)

const secret = "SECRET: outside the source"

// fsEntry is what the tests compare of an entry: what Contents copies.
type fsEntry struct {
	Mode       fs.FileMode
	UID, GID   uint32
	Size       int64
	Mtime      int64
	Atime      int64 // not for directories and symlinks: walking and readlink update it
	Target     string
	Rdev       uint64
	Xattrs     map[string]string
	Nlink      uint64
	FirstLink  string // the first path (in walk order) of an inode with several links
	DataBlocks int64  // st_blocks, for sparse files
}

// scan describes every entry under dir (dir itself as "."), without
// reading any file's data.
func scan(t *testing.T, dir string) map[string]fsEntry {
	t.Helper()
	out := map[string]fsEntry{}
	first := map[uint64]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		var st unix.Stat_t
		if err := unix.Lstat(p, &st); err != nil {
			return err
		}
		fi, _ := d.Info()
		e := fsEntry{Mode: fi.Mode(), UID: st.Uid, GID: st.Gid, Size: st.Size, Mtime: st.Mtim.Nano(), Nlink: st.Nlink, Xattrs: listXattrs(t, p)}
		if fi.Mode()&fs.ModeSymlink != 0 {
			e.Target, _ = os.Readlink(p)
		} else if !d.IsDir() {
			e.Atime = st.Atim.Nano()
			e.Rdev = st.Rdev
		}
		if st.Nlink > 1 && !d.IsDir() {
			if _, ok := first[st.Ino]; !ok {
				first[st.Ino] = rel
			}
			e.FirstLink = first[st.Ino]
		}
		if d.IsDir() {
			e.Size, e.Nlink = 0, 0 // directory sizes differ between filesystems
		}
		out[rel] = e
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// listXattrs returns the extended attributes of p (nil: none).
func listXattrs(t *testing.T, p string) map[string]string {
	t.Helper()
	buf := make([]byte, 64<<10)
	n, err := unix.Llistxattr(p, buf)
	if err != nil {
		if errors.Is(err, unix.EOPNOTSUPP) {
			return nil
		}
		t.Fatalf("llistxattr %s: %v", p, err)
	}
	var m map[string]string
	for name := range strings.SplitSeq(string(buf[:n]), "\x00") {
		if name == "" {
			continue
		}
		v := make([]byte, 64<<10)
		k, err := unix.Lgetxattr(p, name, v)
		if err != nil {
			t.Fatalf("lgetxattr %s %s: %v", p, name, err)
		}
		if m == nil {
			m = map[string]string{}
		}
		m[name] = string(v[:k])
	}
	return m
}

// compareTrees fails the test where the entries of got differ from want.
func compareTrees(t *testing.T, want, got map[string]fsEntry) {
	t.Helper()
	for _, rel := range slices.Sorted(maps.Keys(want)) {
		g, ok := got[rel]
		if !ok {
			t.Errorf("%s: missing in the copy", rel)
			continue
		}
		w := want[rel]
		if !entriesEqual(w, g) {
			t.Errorf("%s:\n got %+v\nwant %+v", rel, g, w)
		}
	}
	for rel := range got {
		if _, ok := want[rel]; !ok {
			t.Errorf("%s: in the copy, not in the source", rel)
		}
	}
}

// entriesEqual compares all but the blocks.
func entriesEqual(a, b fsEntry) bool {
	a.DataBlocks, b.DataBlocks = 0, 0
	return a.Mode == b.Mode && a.UID == b.UID && a.GID == b.GID && a.Size == b.Size && a.Mtime == b.Mtime &&
		a.Atime == b.Atime && a.Target == b.Target && a.Rdev == b.Rdev && maps.Equal(a.Xattrs, b.Xattrs) &&
		a.Nlink == b.Nlink && a.FirstLink == b.FirstLink
}

// contents returns the data of the regular files under dir.
func contents(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		b, err := os.ReadFile(p)
		rel, _ := filepath.Rel(dir, p)
		out[rel] = string(b)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// must fails the test on err.
func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// writeFile writes data to p with mode perm (umask aside).
func writeFile(t *testing.T, p, data string, perm uint32) {
	t.Helper()
	must(t, os.WriteFile(p, []byte(data), 0o600))
	must(t, unix.Chmod(p, perm))
}

// setTimes gives p (not followed) fixed times, distinct per entry.
func setTimes(t *testing.T, p string, i int) {
	t.Helper()
	at := unix.NsecToTimespec(time.Date(2020, 1, 2, 3, 4, 5, 0, time.UTC).UnixNano() + int64(i)*1_000_000_123)
	mt := unix.NsecToTimespec(time.Date(2021, 6, 7, 8, 9, 10, 0, time.UTC).UnixNano() + int64(i)*2_000_000_321)
	must(t, unix.UtimesNanoAt(unix.AT_FDCWD, p, []unix.Timespec{at, mt}, unix.AT_SYMLINK_NOFOLLOW))
}

// setXattr sets a user. attribute, or skips the test if the filesystem
// refuses.
func setXattr(t *testing.T, p, name, value string) {
	t.Helper()
	if err := unix.Lsetxattr(p, name, []byte(value), 0); err != nil {
		if errors.Is(err, unix.EOPNOTSUPP) {
			t.Skipf("the filesystem of %s refuses %s: %v", p, name, err)
		}
		t.Fatalf("setxattr %s %s: %v", p, name, err)
	}
}

// acl encodes a POSIX ACL as the kernel stores it in system.posix_acl_*:
// version 2, then (tag, perm, id) entries sorted by tag; the owner, group,
// mask and other entries have no id.
func acl(user uint32, perm uint16) []byte {
	const undefined = 0xffffffff
	var b []byte
	b = binary.LittleEndian.AppendUint32(b, 2)
	for _, e := range []struct {
		tag, perm uint16
		id        uint32
	}{{1, 7, undefined}, {2, perm, user}, {4, 5, undefined}, {0x10, 7, undefined}, {0x20, 5, undefined}} {
		b = binary.LittleEndian.AppendUint16(b, e.tag)
		b = binary.LittleEndian.AppendUint16(b, e.perm)
		b = binary.LittleEndian.AppendUint32(b, e.id)
	}
	return b
}

// makeTree fills src with every kind of entry Contents copies, owners and
// device nodes only as root.
func makeTree(t *testing.T, src, outside string) {
	t.Helper()
	for _, d := range []string{"a", "a/b", "a/b/c", "sticky", "setgid", "empty"} {
		must(t, os.Mkdir(filepath.Join(src, d), 0o755))
	}
	must(t, unix.Chmod(filepath.Join(src, "sticky"), 0o1777))
	must(t, unix.Chmod(filepath.Join(src, "setgid"), 0o2750))
	must(t, unix.Chmod(filepath.Join(src, "a/b/c"), 0o500))
	writeFile(t, filepath.Join(src, "file"), "hello", 0o644)
	writeFile(t, filepath.Join(src, "setuid"), "#!/bin/true\n", 0o4755)
	writeFile(t, filepath.Join(src, "a/b/deep"), strings.Repeat("deep", 10000), 0o640)
	writeFile(t, filepath.Join(src, "no-access"), "private", 0o000)
	writeFile(t, filepath.Join(src, "empty-file"), "", 0o600)
	writeFile(t, filepath.Join(src, "linked"), "one inode, three names", 0o664)
	must(t, os.Link(filepath.Join(src, "linked"), filepath.Join(src, "a/linked2")))
	must(t, os.Link(filepath.Join(src, "linked"), filepath.Join(src, "a/b/linked3")))
	rel, err := filepath.Rel(src, filepath.Join(outside, "secret"))
	must(t, err)
	for name, target := range map[string]string{
		"root-link": "/", "etc-link": "../../etc", "dangling": "nowhere/at/all",
		"secret-abs": filepath.Join(outside, "secret"), "a/secret-rel": "../" + rel, "outside-dir": outside,
	} {
		must(t, os.Symlink(target, filepath.Join(src, name)))
	}
	must(t, os.Link(filepath.Join(src, "root-link"), filepath.Join(src, "a/root-link2")))
	must(t, unix.Mkfifo(filepath.Join(src, "fifo"), 0o620))
	if os.Geteuid() == 0 {
		must(t, unix.Mknod(filepath.Join(src, "null"), unix.S_IFCHR|0o666, int(unix.Mkdev(1, 3))))
		must(t, os.Chown(filepath.Join(src, "file"), 1234, 5678))
		must(t, os.Chown(filepath.Join(src, "setgid"), 1234, 5678))
		must(t, unix.Chmod(filepath.Join(src, "setgid"), 0o2750))
		must(t, os.Chown(filepath.Join(src, "setuid"), 1234, 5678))
		must(t, unix.Chmod(filepath.Join(src, "setuid"), 0o6755)) // chown cleared the bits
		must(t, os.Lchown(filepath.Join(src, "root-link"), 4321, 8765))
		must(t, os.Chown(filepath.Join(src, "fifo"), 99, 98))
		must(t, os.Chown(src, 1111, 2222))
	} else {
		t.Log("Not root: no owners other than ours, no device nodes")
	}
	must(t, os.Chmod(src, 0o750))
	i := 0
	must(t, filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if p != src {
			i++
			setTimes(t, p, i)
		}
		return err
	}))
	for _, d := range []string{"a/b", "a", "."} { // parents after their entries
		setTimes(t, filepath.Join(src, d), 100+len(d))
	}
}

// roots opens src and dst as roots.
func roots(t *testing.T, src, dst string) (*os.Root, *os.Root) {
	t.Helper()
	s, err := os.OpenRoot(src)
	must(t, err)
	t.Cleanup(func() { s.Close() })
	d, err := os.OpenRoot(dst)
	must(t, err)
	t.Cleanup(func() { d.Close() })
	return s, d
}

// newDirs returns an empty source, an empty destination and a directory
// outside both holding a file with the secret.
func newDirs(t *testing.T) (src, dst, outside string) {
	t.Helper()
	base := t.TempDir()
	src, dst, outside = filepath.Join(base, "src"), filepath.Join(base, "dst"), filepath.Join(base, "outside")
	for _, d := range []string{src, dst, outside} {
		must(t, os.Mkdir(d, 0o700))
	}
	writeFile(t, filepath.Join(outside, "secret"), secret, 0o644)
	must(t, os.Mkdir(filepath.Join(outside, "sub"), 0o755))
	writeFile(t, filepath.Join(outside, "sub", "secret"), secret, 0o644)
	return src, dst, outside
}

// noSecret fails the test if a regular file under dir holds the secret.
func noSecret(t *testing.T, dir string) {
	t.Helper()
	for rel, data := range contents(t, dir) {
		if strings.Contains(data, secret) {
			t.Errorf("%s in the copy holds data from outside the source", rel)
		}
	}
}

func TestContents(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts Options
	}{
		{"default", Options{}},
		{"no reflink", Options{NoReflink: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, ctx := ktesting.NewTestContext(t)
			src, dst, outside := newDirs(t)
			makeTree(t, src, outside)
			must(t, unix.Mknod(filepath.Join(src, "socket"), unix.S_IFSOCK|0o600, 0))
			want := scan(t, src)
			delete(want, "socket")
			sr, dr := roots(t, src, dst)

			method, err := Contents(ctx, sr, dr, tc.opts)
			if err != nil {
				t.Fatalf("Contents: %v", err)
			}
			if method != MethodCopy {
				t.Errorf("method = %q on %s, want %q", method, fsType(t, dst), MethodCopy)
			}
			compareTrees(t, want, scan(t, dst))
			if got := contents(t, dst); !maps.Equal(got, contents(t, src)) {
				t.Errorf("the copy's files differ from the source's")
			}
			noSecret(t, dst)
			if _, err := Contents(ctx, sr, dr, tc.opts); !errors.Is(err, ErrNotEmpty) {
				t.Errorf("Contents into a full directory: %v, want ErrNotEmpty", err)
			}
		})
	}
}

// fsType names the filesystem of p for messages.
func fsType(t *testing.T, p string) string {
	var st unix.Statfs_t
	must(t, unix.Statfs(p, &st))
	return fsName(st.Type)
}

func TestXattrs(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	src, dst, _ := newDirs(t)
	must(t, os.Mkdir(filepath.Join(src, "dir"), 0o755))
	writeFile(t, filepath.Join(src, "dir", "file"), "x", 0o644)
	setXattr(t, filepath.Join(src, "dir", "file"), "user.one", "1")
	setXattr(t, filepath.Join(src, "dir", "file"), "user.big", strings.Repeat("b", 3000))
	setXattr(t, filepath.Join(src, "dir"), "user.dir", "on a directory")
	setXattr(t, src, "user.root", "on the source directory itself")
	withACL := unix.Lsetxattr(filepath.Join(src, "dir", "file"), "system.posix_acl_access", acl(1234, 6), 0) == nil
	if withACL {
		must(t, unix.Lsetxattr(filepath.Join(src, "dir"), "system.posix_acl_default", acl(1234, 7), 0))
	} else {
		t.Log("The filesystem refuses POSIX ACLs: not tested")
	}
	if os.Geteuid() == 0 {
		must(t, os.Symlink("dir/file", filepath.Join(src, "link")))
		setXattr(t, filepath.Join(src, "link"), "trusted.link", "on a symlink")
		must(t, unix.Mkfifo(filepath.Join(src, "fifo"), 0o600))
		setXattr(t, filepath.Join(src, "fifo"), "trusted.fifo", "on a FIFO")
	} else {
		t.Log("Not root: no trusted. attributes on a symlink and a FIFO")
	}
	want := scan(t, src)
	sr, dr := roots(t, src, dst)
	if _, err := Contents(ctx, sr, dr, Options{}); err != nil {
		t.Fatalf("Contents: %v", err)
	}
	got := scan(t, dst)
	compareTrees(t, want, got)
	if withACL && got["dir/file"].Xattrs["system.posix_acl_access"] == "" {
		t.Errorf("the ACL was not copied: %v", got["dir/file"].Xattrs)
	}
}

func TestSparse(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts Options
	}{
		{"default", Options{}},
		{"no reflink", Options{NoReflink: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, ctx := ktesting.NewTestContext(t)
			src, dst, _ := newDirs(t)
			f, err := os.Create(filepath.Join(src, "sparse"))
			must(t, err)
			data := bytes.Repeat([]byte("data"), 16<<10) // 64 KiB
			for _, off := range []int64{0, 8 << 20, 20<<20 + 4096} {
				_, err := f.WriteAt(data, off)
				must(t, err)
			}
			must(t, f.Truncate(64<<20)) // a trailing hole
			must(t, f.Close())
			sr, dr := roots(t, src, dst)
			if _, err := Contents(ctx, sr, dr, tc.opts); err != nil {
				t.Fatalf("Contents: %v", err)
			}
			want, got := blocks(t, filepath.Join(src, "sparse")), blocks(t, filepath.Join(dst, "sparse"))
			t.Logf("On %s: %d blocks of 512 bytes in the source, %d in the copy, for 64 MiB", fsType(t, src), want, got)
			if got > want+64 { // the filesystem may round an extent up
				t.Errorf("the copy takes %d blocks, the source %d: holes were filled", got, want)
			}
			a, err := os.ReadFile(filepath.Join(src, "sparse"))
			must(t, err)
			b, err := os.ReadFile(filepath.Join(dst, "sparse"))
			must(t, err)
			if !bytes.Equal(a, b) {
				t.Error("the copy's data differs")
			}
		})
	}
}

// blocks returns the 512-byte blocks p takes.
func blocks(t *testing.T, p string) int64 {
	t.Helper()
	var st unix.Stat_t
	must(t, unix.Lstat(p, &st))
	return st.Blocks
}

// swapForSymlink moves p aside and puts a symlink to target in its place.
func swapForSymlink(t *testing.T, p, target string) {
	t.Helper()
	must(t, os.Rename(p, p+".moved"))
	must(t, os.Symlink(target, p))
}

// swapForFile renames a new file over p, holding data.
func swapForFile(t *testing.T, p, data string) {
	t.Helper()
	writeFile(t, p+".new", data, 0o644)
	must(t, os.Rename(p+".new", p))
}

// TestSwapped replaces a directory or a file right before Contents opens
// it: a symlink swapped in is never followed, another file is noticed.
func TestSwapped(t *testing.T) {
	for _, tc := range []struct {
		name string
		// at is the path whose opening triggers swap; swap runs once
		// unless always.
		at     string
		always bool
		swap   func(t *testing.T, src, outside string)
		// wantErr is the error wanted, else wantLink is the target
		// wanted for wantAt in the copy, else wantData its data.
		wantErr          error
		wantAt, wantLink string
		wantData         string
	}{{
		name: "directory for a symlink to outside", at: "d",
		swap:   func(t *testing.T, src, outside string) { swapForSymlink(t, filepath.Join(src, "d"), outside) },
		wantAt: "d", wantLink: "OUTSIDE",
	}, {
		name: "file for a symlink to outside", at: "d/f",
		swap: func(t *testing.T, src, outside string) {
			swapForSymlink(t, filepath.Join(src, "d/f"), outside+"/secret")
		},
		wantAt: "d/f", wantLink: "OUTSIDE/secret",
	}, {
		name: "file for a relative symlink to outside", at: "d/f",
		swap: func(t *testing.T, src, outside string) {
			swapForSymlink(t, filepath.Join(src, "d/f"), "../../outside/secret")
		},
		wantAt: "d/f", wantLink: "../../outside/secret",
	}, {
		name: "parent for a symlink while its entries are copied", at: "d/e",
		swap: func(t *testing.T, src, outside string) {
			// The walk holds d open: it goes on in the real d,
			// now d.moved, and never sees outside/e.
			swapForSymlink(t, filepath.Join(src, "d"), outside)
			must(t, os.Mkdir(filepath.Join(outside, "e"), 0o755))
			writeFile(t, filepath.Join(outside, "e", "secret"), secret, 0o644)
		},
		wantAt: "d/e/g", wantData: "inner",
	}, {
		name: "file for another file", at: "d/f",
		swap:   func(t *testing.T, src, _ string) { swapForFile(t, filepath.Join(src, "d/f"), "replaced") },
		wantAt: "d/f", wantData: "replaced",
	}, {
		name: "file for another file, twice", at: "d/f", always: true,
		swap:    func(t *testing.T, src, _ string) { swapForFile(t, filepath.Join(src, "d/f"), "replaced") },
		wantErr: ErrChanged,
	}} {
		t.Run(tc.name, func(t *testing.T) {
			_, ctx := ktesting.NewTestContext(t)
			src, dst, outside := newDirs(t)
			for _, d := range []string{"d", "d/e"} {
				must(t, os.Mkdir(filepath.Join(src, d), 0o755))
			}
			writeFile(t, filepath.Join(src, "d/f"), "original", 0o644)
			writeFile(t, filepath.Join(src, "d/e/g"), "inner", 0o644)
			swaps := 0
			beforeOpen = func(at node) {
				if at.path() == tc.at && (tc.always || swaps == 0) {
					swaps++
					tc.swap(t, src, outside)
				}
			}
			t.Cleanup(func() { beforeOpen = nil })
			sr, dr := roots(t, src, dst)

			_, err := Contents(ctx, sr, dr, Options{})
			if swaps == 0 {
				t.Fatal("the hook never ran")
			}
			noSecret(t, dst)
			if tc.wantErr != nil {
				if !errors.Is(err, tc.wantErr) {
					t.Fatalf("Contents: %v, want %v", err, tc.wantErr)
				}
				t.Logf("Contents: %v", err)
				return
			}
			if err != nil {
				t.Fatalf("Contents: %v", err)
			}
			p := filepath.Join(dst, tc.wantAt)
			if tc.wantLink != "" {
				got, err := os.Readlink(p)
				if want := strings.ReplaceAll(tc.wantLink, "OUTSIDE", outside); err != nil || got != want {
					t.Errorf("%s in the copy: link to %q, %v; want a link to %q", tc.wantAt, got, err, want)
				}
				return
			}
			if got, err := os.ReadFile(p); err != nil || string(got) != tc.wantData {
				t.Errorf("%s in the copy: %q, %v; want %q", tc.wantAt, got, err, tc.wantData)
			}
		})
	}
}

// nest makes a chain of depth directories "d" in dir through descriptors
// (its path outgrows PATH_MAX).
func nest(t *testing.T, dir string, depth int) {
	t.Helper()
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	must(t, err)
	for range depth {
		must(t, unix.Mkdirat(fd, "d", 0o755))
		next, err := unix.Openat(fd, "d", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW, 0)
		unix.Close(fd)
		must(t, err)
		fd = next
	}
	must(t, unix.Close(fd))
}

// TestDepth: a tree as deep as Limits.MaxDepth is copied; a deeper one
// is refused by Contents and Size with a short error that wraps
// ErrTooDeep and ErrLimit.
func TestDepth(t *testing.T) {
	for _, tc := range []struct {
		name         string
		limit, depth int
		wantErr      bool
	}{
		{"at a lowered limit", 8, 8, false},
		{"beyond a lowered limit", 8, 9, true},
		{"beyond DefaultMaxDepth", 0, DefaultMaxDepth + 1, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.depth > 100 && testing.Short() {
				t.Skip("a deep tree takes seconds to make")
			}
			_, ctx := ktesting.NewTestContext(t)
			lim := Limits{MaxDepth: tc.limit}
			src, dst, _ := newDirs(t)
			nest(t, src, tc.depth)
			sr, dr := roots(t, src, dst)
			_, err := Contents(ctx, sr, dr, Options{Limits: lim})
			_, serr := Size(ctx, sr, lim)
			if tc.wantErr {
				for _, e := range []error{err, serr} {
					if !errors.Is(e, ErrTooDeep) || !errors.Is(e, ErrLimit) {
						t.Fatalf("Contents: %v; Size: %v; want ErrTooDeep and ErrLimit", err, serr)
					}
				}
				if len(err.Error()) > 600 {
					t.Errorf("the error is %d bytes long", len(err.Error()))
				}
				t.Logf("Contents: %v", err)
				return
			}
			if err != nil || serr != nil {
				t.Fatalf("Contents: %v; Size: %v", err, serr)
			}
			if _, err := os.Stat(filepath.Join(dst, strings.Repeat("d/", tc.depth))); err != nil {
				t.Errorf("the deepest directory was not copied: %v", err)
			}
		})
	}
}

// TestEntryAndLinkLimits: Contents and Size refuse a tree of more entries
// than Limits.MaxEntries, or with more files of several links remembered
// at once than Limits.MaxLinks; a file whose links were all met is
// forgotten, so that many such files in turn stay within MaxLinks.
func TestEntryAndLinkLimits(t *testing.T) {
	for _, tc := range []struct {
		name string
		// pairs files get a second link each: with apart, the files
		// are in "a" and their links in "b", so all are remembered at
		// once; else each file and its link are in a directory of
		// their own, met one after the other (a directory's entries
		// are all handled before its next sibling).
		pairs   int
		apart   bool
		lim     Limits
		wantErr error
	}{
		{name: "entries at the limit", pairs: 2, lim: Limits{MaxEntries: 6}},
		{name: "entries beyond the limit", pairs: 2, lim: Limits{MaxEntries: 5}, wantErr: ErrTooManyEntries},
		{name: "links met in turn", pairs: 20, lim: Limits{MaxLinks: 1}},
		{name: "links beyond the limit", pairs: 3, apart: true, lim: Limits{MaxLinks: 2}, wantErr: ErrTooManyLinks},
		{name: "links at the limit", pairs: 3, apart: true, lim: Limits{MaxLinks: 3}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, ctx := ktesting.NewTestContext(t)
			src, dst, _ := newDirs(t)
			for i := range tc.pairs {
				first, second := filepath.Join(src, fmt.Sprintf("d%d", i), "f"), filepath.Join(src, fmt.Sprintf("d%d", i), "l")
				if tc.apart {
					first, second = filepath.Join(src, "a", fmt.Sprintf("f%d", i)), filepath.Join(src, "b", fmt.Sprintf("l%d", i))
				}
				must(t, os.MkdirAll(filepath.Dir(first), 0o755))
				must(t, os.MkdirAll(filepath.Dir(second), 0o755))
				writeFile(t, first, "x", 0o644)
				must(t, os.Link(first, second))
			}
			sr, dr := roots(t, src, dst)
			_, err := Contents(ctx, sr, dr, Options{Limits: tc.lim})
			_, serr := Size(ctx, sr, tc.lim)
			if tc.wantErr != nil {
				if !errors.Is(err, tc.wantErr) || !errors.Is(err, ErrLimit) || !errors.Is(serr, tc.wantErr) {
					t.Fatalf("Contents: %v; Size: %v; want %v", err, serr, tc.wantErr)
				}
				t.Logf("Contents: %v", err)
				return
			}
			if err != nil || serr != nil {
				t.Fatalf("Contents: %v; Size: %v", err, serr)
			}
			compareTrees(t, scan(t, src), scan(t, dst))
		})
	}
}

func TestCancel(t *testing.T) {
	for _, tc := range []struct {
		name string
		// at is the path whose opening cancels the context ("": before
		// the copy).
		at string
		// wantMissing must not be in the copy; wantShort must be in
		// it, shorter than in the source.
		wantMissing, wantShort string
	}{
		{"before the copy", "", "1", ""},
		{"between entries", "1/2/3", "1/2/3/c", ""},
		{"between chunks", "1/2/big", "", "1/2/big"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, ctx := ktesting.NewTestContext(t)
			ctx, cancel := context.WithCancel(ctx)
			defer cancel()
			src, dst, _ := newDirs(t)
			must(t, os.MkdirAll(filepath.Join(src, "1/2/3"), 0o755))
			writeFile(t, filepath.Join(src, "1/a"), "a", 0o644)
			writeFile(t, filepath.Join(src, "1/2/b"), "b", 0o644)
			writeFile(t, filepath.Join(src, "1/2/big"), strings.Repeat("x", 3*chunkBytes), 0o644)
			writeFile(t, filepath.Join(src, "1/2/3/c"), "c", 0o644)
			if tc.at == "" {
				cancel()
			}
			beforeOpen = func(at node) {
				if at.path() == tc.at {
					cancel()
				}
			}
			t.Cleanup(func() { beforeOpen = nil })
			sr, dr := roots(t, src, dst)
			_, err := Contents(ctx, sr, dr, Options{NoReflink: true})
			if !errors.Is(err, context.Canceled) {
				t.Fatalf("Contents: %v, want context.Canceled", err)
			}
			t.Logf("Contents: %v", err)
			if _, err := os.Lstat(filepath.Join(dst, tc.wantMissing)); tc.wantMissing != "" && err == nil {
				t.Errorf("%s is in the copy: the copy went on after the cancellation", tc.wantMissing)
			}
			if tc.wantShort != "" {
				fi, err := os.Stat(filepath.Join(dst, tc.wantShort))
				if err != nil || fi.Size() >= 3*chunkBytes {
					t.Errorf("%s in the copy: %v, %v; want it shorter than in the source", tc.wantShort, fi, err)
				}
			}
		})
	}
}

func TestSize(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	src, _, outside := newDirs(t)
	must(t, os.Mkdir(filepath.Join(src, "d"), 0o755))
	writeFile(t, filepath.Join(src, "a"), "12345", 0o644)
	writeFile(t, filepath.Join(src, "d/b"), "123", 0o644)
	must(t, os.Link(filepath.Join(src, "d/b"), filepath.Join(src, "b2"))) // counted once
	must(t, os.Symlink(filepath.Join(outside, "secret"), filepath.Join(src, "s")))
	must(t, os.Symlink(outside, filepath.Join(src, "o")))
	f, err := os.Create(filepath.Join(src, "sparse"))
	must(t, err)
	must(t, f.Truncate(1<<30))
	must(t, f.Close())
	sr, err := os.OpenRoot(src)
	must(t, err)
	defer sr.Close()
	got, err := Size(ctx, sr, Limits{})
	if want := int64(5 + 3 + 1<<30); err != nil || got != want {
		t.Errorf("Size = %d, %v; want %d", got, err, want)
	}
	ctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := Size(ctx, sr, Limits{}); !errors.Is(err, context.Canceled) {
		t.Errorf("Size with a cancelled context: %v", err)
	}
}

func TestProgress(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	src, dst, _ := newDirs(t)
	writeFile(t, filepath.Join(src, "a"), strings.Repeat("a", 100<<10), 0o644)
	writeFile(t, filepath.Join(src, "b"), strings.Repeat("b", 200<<10), 0o644)
	sr, dr := roots(t, src, dst)
	var got []Progress
	if _, err := Contents(ctx, sr, dr, Options{Progress: func(p Progress) { got = append(got, p) }}); err != nil {
		t.Fatal(err)
	}
	if want := (Progress{CopiedBytes: 300 << 10, TotalBytes: 300 << 10}); len(got) == 0 || got[len(got)-1] != want {
		t.Errorf("progress reported %v, want it to end with %+v", got, want)
	}
}

func TestMeter(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name string
		// steps are the bytes added and the time elapsed before each.
		steps []struct {
			n  int64
			at time.Duration
		}
		want []int64 // CopiedBytes of each report
	}{
		{"small and fast: none", []struct {
			n  int64
			at time.Duration
		}{{1 << 20, 0}, {1 << 20, 100 * time.Millisecond}, {1 << 20, 900 * time.Millisecond}}, nil},
		{"a second passes", []struct {
			n  int64
			at time.Duration
		}{{1 << 20, 0}, {1 << 20, time.Second}, {1 << 20, 1500 * time.Millisecond}}, []int64{2 << 20}},
		{"every 64 MiB", []struct {
			n  int64
			at time.Duration
		}{{32 << 20, 0}, {32 << 20, 0}, {32 << 20, 0}, {40 << 20, 0}}, []int64{64 << 20, 136 << 20}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			now := t0
			var got []int64
			m := meter{fn: func(p Progress) { got = append(got, p.CopiedBytes) }, total: 1 << 30, last: t0, now: func() time.Time { return now }}
			for _, s := range tc.steps {
				now = t0.Add(s.at)
				m.add(s.n)
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("reports at %v, want %v", got, tc.want)
			}
		})
	}
}

func TestMountPoint(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("mounting a tmpfs needs root")
	}
	_, ctx := ktesting.NewTestContext(t)
	src, dst, _ := newDirs(t)
	mnt := filepath.Join(src, "mnt")
	must(t, os.Mkdir(mnt, 0o755))
	if err := unix.Mount("tmpfs", mnt, "tmpfs", 0, "size=1m"); err != nil {
		t.Skipf("cannot mount a tmpfs: %v", err)
	}
	t.Cleanup(func() { must(t, unix.Unmount(mnt, 0)) })
	writeFile(t, filepath.Join(mnt, "secret"), secret, 0o644)
	sr, dr := roots(t, src, dst)
	if _, err := Contents(ctx, sr, dr, Options{}); err != nil {
		t.Fatalf("Contents: %v", err)
	}
	entries, err := os.ReadDir(filepath.Join(dst, "mnt"))
	if err != nil || len(entries) != 0 {
		t.Errorf("the copy of a mount point: %v, %v; want an empty directory", entries, err)
	}
	if n, err := Size(ctx, sr, Limits{}); err != nil || n != 0 {
		t.Errorf("Size = %d, %v; want 0: the mount is not the source's", n, err)
	}
}
