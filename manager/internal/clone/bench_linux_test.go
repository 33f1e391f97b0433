//go:build linux

package clone

import (
	"context"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"hostpath.dev/manager/internal/quota"
	"hostpath.dev/manager/internal/quota/quotatest"
)

// benchFileBytes is the size of the files of BenchmarkClone's source.
const benchFileBytes = 4 << 20

// benchEnv returns the integer environment variable name, or def.
func benchEnv(b *testing.B, name string, def int64) int64 {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n <= 0 {
		b.Fatalf("%s=%q: want a positive integer", name, v)
	}
	return n
}

// BenchmarkClone clones a volume of CLONE_BENCH_BYTES (default 1 GiB, in
// files of 4 MiB, 16 per directory) by every method on loop-mounted btrfs
// (simple quotas) and xfs (reflinks), and on the filesystem of the
// temporary directory: into a new volume made by the pool's enforcer as
// the manager would, flushed to disk (syncfs), with the source's data
// evicted from the page cache before each clone. It runs
// CLONE_BENCH_ROUNDS rounds (default 5) of every method of a filesystem in
// turn, so that drift hits all methods alike; each sample is a
// sub-benchmark FS/METHOD (#NN from the second round on), run once:
// -benchtime=1x. scripts/bench-clone.sh runs it and prints medians and
// ratios. Methods: snapshot (quota.Snapshotter), reflink and
// copy_file_range (Contents, which reflinks where it can and else copies
// with copy_file_range), read-write (Contents with NoReflink: the byte
// copy, baseline of the ratios).
func BenchmarkClone(b *testing.B) {
	size := benchEnv(b, "CLONE_BENCH_BYTES", 1<<30)
	rounds := int(benchEnv(b, "CLONE_BENCH_ROUNDS", 5))
	image := 2*size + 1<<30 // the source, one copy and room for metadata
	for _, fsys := range []struct {
		name    string
		mount   func(b *testing.B) string
		methods []string
	}{
		{"btrfs", func(b *testing.B) string { return quotatest.MountBtrfsSize(b, image) }, []string{"snapshot", "reflink", "read-write"}},
		{"xfs", func(b *testing.B) string { return quotatest.MountXFS(b, image) }, []string{"reflink", "read-write"}},
		{"host", func(b *testing.B) string { return b.TempDir() }, []string{"copy_file_range", "read-write"}},
	} {
		p := newBenchPool(b, fsys.mount(b), size)
		name := fsys.name
		if name == "host" {
			name = "host-" + p.fsType
		}
		for round := range rounds {
			for _, m := range fsys.methods {
				b.Run(name+"/"+m, func(b *testing.B) { p.clone(b, m, round) })
			}
		}
	}
}

// benchPool is a pool holding the volume src of BenchmarkClone.
type benchPool struct {
	dir    string
	root   *os.Root
	enf    quota.Enforcer
	size   int64
	fsType string
}

// newBenchPool makes the pool in mnt (with simple quotas on btrfs) and
// the source volume of size bytes in it.
func newBenchPool(b *testing.B, mnt string, size int64) *benchPool {
	var st unix.Statfs_t
	must(b, unix.Statfs(mnt, &st))
	p := &benchPool{dir: filepath.Join(mnt, "pool"), size: size, fsType: fsName(st.Type)}
	if st.Type == unix.BTRFS_SUPER_MAGIC {
		f, err := os.Open(mnt)
		must(b, err)
		err = quota.EnableSimpleQuotas(f)
		f.Close()
		must(b, err)
	}
	must(b, os.Mkdir(p.dir, 0o755))
	root, err := os.OpenRoot(p.dir)
	must(b, err)
	b.Cleanup(func() { root.Close() })
	p.root, p.enf = root, quota.Detect(root)
	_, err = p.enf.Make(root, "src", 4*size)
	must(b, err)
	rng := rand.NewChaCha8([32]byte{1})
	buf := make([]byte, benchFileBytes)
	for i := int64(0); i*benchFileBytes < size; i++ {
		dir := filepath.Join(p.dir, "src", fmt.Sprintf("d%03d", i/16))
		must(b, os.MkdirAll(dir, 0o755))
		n := min(benchFileBytes, size-i*benchFileBytes)
		_, _ = rng.Read(buf[:n])
		must(b, os.WriteFile(filepath.Join(dir, fmt.Sprintf("f%03d", i%16)), buf[:n], 0o644))
	}
	return p
}

// clone clones src b.N times by method m, each time into a new volume
// that it removes afterwards, outside the timer.
func (p *benchPool) clone(b *testing.B, m string, round int) {
	b.SetBytes(p.size)
	for i := range b.N {
		b.StopTimer()
		p.evict(b)
		name := fmt.Sprintf("clone-%d-%d", round, i)
		b.StartTimer()
		id, got := p.cloneOnce(b, m, name)
		b.StopTimer()
		if want := map[string]Method{"read-write": MethodCopy, "copy_file_range": MethodCopy}[m]; want != "" && got != want || want == "" && string(got) != m {
			b.Errorf("%s made a clone by %q", m, got)
		}
		must(b, p.root.RemoveAll(name))
		must(b, p.enf.Release(p.root, id))
		p.settle(b)
		b.StartTimer()
	}
}

// cloneOnce clones src as name by method m, and returns the new volume's
// quota ID and the method Contents reports.
func (p *benchPool) cloneOnce(b *testing.B, m, name string) (uint64, Method) {
	if m == "snapshot" {
		id, err := p.enf.(quota.Snapshotter).Snapshot(p.root, "src", name, 4*p.size)
		must(b, err)
		must(b, syncfs(p.root))
		return id, MethodSnapshot
	}
	id, err := p.enf.Make(p.root, name, 4*p.size)
	must(b, err)
	src, err := p.root.OpenRoot("src")
	must(b, err)
	defer src.Close()
	dst, err := p.root.OpenRoot(name)
	must(b, err)
	defer dst.Close()
	got, err := Contents(context.Background(), src, dst, Options{NoReflink: m == "read-write", TotalBytes: p.size})
	must(b, err)
	return id, got
}

// evict writes the pool to disk and drops the source's pages from the
// page cache, so that each clone reads from disk.
func (p *benchPool) evict(b *testing.B) {
	must(b, syncfs(p.root))
	must(b, filepath.WalkDir(filepath.Join(p.dir, "src"), func(path string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		f, err := os.Open(path)
		if err != nil {
			return err
		}
		defer f.Close()
		return unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED)
	}))
}

// settle waits until the removed clone's space is freed: on btrfs, until
// the cleaner dropped the deleted subvolumes.
func (p *benchPool) settle(b *testing.B) {
	must(b, syncfs(p.root))
	if p.fsType != "btrfs" {
		return
	}
	start := time.Now()
	if out, err := exec.Command("btrfs", "subvolume", "sync", p.dir).CombinedOutput(); err != nil {
		b.Logf("btrfs subvolume sync: %v: %s (after %v)", err, out, time.Since(start))
	}
}

// fsName names the filesystem of statfs type magic.
func fsName(magic int64) string {
	switch magic {
	case unix.TMPFS_MAGIC:
		return "tmpfs"
	case unix.EXT4_SUPER_MAGIC:
		return "ext4"
	case unix.BTRFS_SUPER_MAGIC:
		return "btrfs"
	case unix.XFS_SUPER_MAGIC:
		return "xfs"
	case unix.OVERLAYFS_SUPER_MAGIC:
		return "overlayfs"
	}
	return fmt.Sprintf("%#x", magic)
}
