package e2e

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"

	"hostpath.dev/api/managerapi"
	"hostpath.dev/e2e/framework/localcluster"
)

// Clone events (docs/clones.md, "Events on the clone claim").
const (
	reasonCloneStarted       = "CloneStarted"
	reasonCloneFinished      = "CloneFinished"
	reasonCloneSourceInvalid = "CloneSourceInvalid"
)

// cloneClaim creates claim name of class and size whose data source is
// claim source.
func (e *provEnv) cloneClaim(ctx context.Context, t *testing.T, name, class, size string, mode corev1.PersistentVolumeAccessMode, source string) *corev1.PersistentVolumeClaim {
	t.Helper()
	pvc := e.claimObject(name, class, size, mode, nil)
	pvc.Spec.DataSource = &corev1.TypedLocalObjectReference{Kind: "PersistentVolumeClaim", Name: source}
	created, err := e.f.Client.CoreV1().PersistentVolumeClaims(e.ns).Create(ctx, pvc, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("Create clone %s/%s: %v", e.ns, name, err)
	}
	return created
}

// plantTree writes into dir what a clone must keep: a file with an owner,
// a mode and an xattr, a hard link to it, a subdirectory with a sticky,
// setgid mode, a symlink to / and a relative one, and a 64 MiB sparse
// file with 4 KiB of data in its middle.
func plantTree(t *testing.T, dir string) {
	t.Helper()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	a := filepath.Join(dir, "a.txt")
	must(os.WriteFile(a, []byte("source content\n"), 0o640))
	must(os.Chown(a, 1234, 5678))
	must(unix.Setxattr(a, "user.hostpath", []byte("cloned"), 0))
	must(os.Link(a, filepath.Join(dir, "hard")))
	must(os.Mkdir(filepath.Join(dir, "sub"), 0o755))
	must(os.Chmod(filepath.Join(dir, "sub"), 0o2775|os.ModeSticky))
	must(os.WriteFile(filepath.Join(dir, "sub", "b.txt"), []byte("b\n"), 0o600))
	must(os.Symlink("/", filepath.Join(dir, "root-link")))
	must(os.Symlink("../a.txt", filepath.Join(dir, "sub", "rel-link")))
	f, err := os.Create(filepath.Join(dir, "sparse"))
	must(err)
	must(f.Truncate(64 << 20))
	_, err = f.WriteAt(bytes.Repeat([]byte("x"), 4096), 32<<20)
	must(err)
	must(f.Close())
}

// treeEntry is what a clone must keep of one entry of a tree.
type treeEntry struct {
	mode     fs.FileMode
	uid, gid uint32
	link     string
	sum      [32]byte
	xattr    string
}

// readTree describes every entry under dir, and the inode of each path.
func readTree(t *testing.T, dir string) (map[string]treeEntry, map[string]uint64) {
	t.Helper()
	entries, inodes := map[string]treeEntry{}, map[string]uint64{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == dir {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		st := fi.Sys().(*syscall.Stat_t)
		e := treeEntry{mode: fi.Mode(), uid: st.Uid, gid: st.Gid}
		inodes[rel] = st.Ino
		switch {
		case fi.Mode()&fs.ModeSymlink != 0:
			e.link, err = os.Readlink(p)
		case fi.Mode().IsRegular():
			var b []byte
			if b, err = os.ReadFile(p); err == nil {
				e.sum = sha256.Sum256(b)
			}
			buf := make([]byte, 64)
			if n, xerr := unix.Lgetxattr(p, "user.hostpath", buf); xerr == nil {
				e.xattr = string(buf[:n])
			}
		}
		entries[rel] = e
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return entries, inodes
}

// checkSameTree checks that clone holds what source holds, entry by entry
// (modes, owners, link targets, content, the xattr), that the hard link is
// still one, and that the sparse file is still sparse.
func checkSameTree(t *testing.T, source, clone string) {
	t.Helper()
	want, _ := readTree(t, source)
	got, inodes := readTree(t, clone)
	for name, w := range want {
		if g, ok := got[name]; !ok || g != w {
			t.Errorf("clone's %s = %+v (present %t), want the source's %+v", name, g, ok, w)
		}
	}
	for name := range got {
		if _, ok := want[name]; !ok {
			t.Errorf("clone has %s, which the source does not", name)
		}
	}
	if inodes["a.txt"] != inodes["hard"] {
		t.Errorf("clone's a.txt and hard are inodes %d and %d, want one hard-linked file", inodes["a.txt"], inodes["hard"])
	}
	var st unix.Stat_t
	if err := unix.Lstat(filepath.Join(clone, "sparse"), &st); err != nil {
		t.Fatal(err)
	}
	if used := st.Blocks * 512; used > 1<<20 {
		t.Errorf("clone's 64 MiB sparse file uses %d bytes, want it sparse (4 KiB of data)", used)
	}
}

// cloneSeconds reads the copy's time from a CloneFinished message.
var cloneSeconds = regexp.MustCompile(` by ([a-z+]+) in ([0-9.]+)s `)

func finishedMethod(t *testing.T, ev corev1.Event) (string, float64) {
	t.Helper()
	m := cloneSeconds.FindStringSubmatch(ev.Message)
	if m == nil {
		t.Fatalf("CloneFinished message %q names no method and time", ev.Message)
	}
	s, err := strconv.ParseFloat(m[2], 64)
	if err != nil {
		t.Fatal(err)
	}
	return m[1], s
}

// TestClone: a claim whose dataSource is a claim of the same namespace and
// class is a clone on the source's node, holding what the source held:
// owners, modes, an xattr, a hard link, symlinks (one to /, not followed),
// a sparse file still sparse. A pod placed by the scheduler reads it on
// that node; writes to the clone leave the source alone. A source in
// another namespace, of another class (hostpath's or another
// provisioner's, which no instance caches), or larger than the clone is
// refused with a CloneSourceInvalid event and no volume.
func TestClone(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	e := setupProvisioner(ctx, t)
	node := e.nodes[1]
	src := e.claim(ctx, t, "source", classImmediate, "64Mi", corev1.ReadWriteOnce, map[string]string{annProvisionOnNode: node})
	_, srcPV := e.waitBound(ctx, t, src.Name)
	srcDir := e.nodePath(t, node, srcPV)
	plantTree(t, srcDir)

	clone := e.cloneClaim(ctx, t, "copy", classImmediate, "64Mi", corev1.ReadWriteOnce, src.Name)
	_, pv := e.waitBound(ctx, t, clone.Name)
	e.checkPV(ctx, t, clone, pv, node, corev1.PersistentVolumeReclaimDelete)
	e.waitEvent(ctx, t, clone.Name, corev1.EventTypeNormal, reasonCloneStarted, "node "+node)
	method, _ := finishedMethod(t, e.waitEvent(ctx, t, clone.Name, corev1.EventTypeNormal, reasonCloneFinished, "Cloned claim "+src.Name))
	if method != "copy" && method != "reflink" {
		t.Errorf("clone method on the default pool = %q, want copy or reflink", method)
	}
	cloneDir := e.nodePath(t, node, pv)
	checkSameTree(t, srcDir, cloneDir)

	// The scheduler puts a reader where the clone is; its writes stay in
	// the clone.
	reader := writerPod(e.ns, "reader", "", clone.Name, "cat /data/a.txt && echo changed > /data/a.txt && echo new > /data/new.txt")
	if _, err := e.f.Client.CoreV1().Pods(e.ns).Create(ctx, reader, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	done := e.f.WaitForPodSucceeded(ctx, t, e.ns, reader.Name, provisionTimeout)
	if done.Spec.NodeName != node {
		t.Errorf("pod of the clone ran on %s, want the source's node %s", done.Spec.NodeName, node)
	}
	if b, err := os.ReadFile(filepath.Join(srcDir, "a.txt")); err != nil || string(b) != "source content\n" {
		t.Errorf("source's a.txt after a write to the clone = %q, %v", b, err)
	}
	if _, err := os.Lstat(filepath.Join(srcDir, "new.txt")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a file written to the clone is in the source: %v", err)
	}
	e.deleteAndWaitGone(ctx, t, reader.Name, clone.Name)
	e.waitGoneEverywhere(ctx, t, pv)
	if _, err := os.Stat(filepath.Join(srcDir, "a.txt")); err != nil {
		t.Errorf("source after the clone's deletion: %v", err)
	}

	t.Run("refused", func(t *testing.T) {
		other := *e
		other.ns = e.f.Namespace(ctx, t)
		elsewhere := other.cloneClaim(ctx, t, "from-elsewhere", classImmediate, "64Mi", corev1.ReadWriteOnce, src.Name)
		otherClass := e.storageClass(ctx, t, "clone-class", storagev1.VolumeBindingImmediate, nil)
		wrongClass := e.cloneClaim(ctx, t, "other-class", otherClass, "64Mi", corev1.ReadWriteOnce, src.Name)
		small := e.cloneClaim(ctx, t, "small", classImmediate, "32Mi", corev1.ReadWriteOnce, src.Name)
		// A source of another provisioner's class: no instance caches
		// it, so the refusal names its class only if the instance reads
		// it from the API server.
		foreignClass := e.createStorageClass(ctx, t, &storagev1.StorageClass{
			ObjectMeta:        metav1.ObjectMeta{Name: "e2e-foreign-" + e.ns},
			Provisioner:       "foreign.e2e.example",
			VolumeBindingMode: ptr.To(storagev1.VolumeBindingImmediate),
		})
		foreignSrc := e.claim(ctx, t, "foreign-source", foreignClass, "64Mi", corev1.ReadWriteOnce, nil)
		fromForeign := e.cloneClaim(ctx, t, "from-foreign", classImmediate, "64Mi", corev1.ReadWriteOnce, foreignSrc.Name)
		other.waitEvent(ctx, t, elsewhere.Name, corev1.EventTypeWarning, reasonCloneSourceInvalid, "source claim "+other.ns+"/"+src.Name+" does not exist")
		e.waitEvent(ctx, t, wrongClass.Name, corev1.EventTypeWarning, reasonCloneSourceInvalid, "is of StorageClass \""+classImmediate+"\"")
		e.waitEvent(ctx, t, small.Name, corev1.EventTypeWarning, reasonCloneSourceInvalid, "requests 32Mi, less than the 64Mi")
		e.waitEvent(ctx, t, fromForeign.Name, corev1.EventTypeWarning, reasonCloneSourceInvalid, "is of StorageClass \""+foreignClass+"\"")
		other.checkNoVolume(ctx, t, elsewhere)
		e.checkNoVolume(ctx, t, wrongClass)
		e.checkNoVolume(ctx, t, small)
		e.checkNoVolume(ctx, t, fromForeign)
	})
}

// TestCloneBtrfsSnapshot: on a btrfs pool with simple quotas, a clone is
// a snapshot of the source subvolume, which the manager reports as such
// and which takes much less time than the copy of the same data on the
// default pool; the clone's qgroup limits it to the clone's size.
func TestCloneBtrfsSnapshot(t *testing.T) {
	ctx := t.Context()
	e := setupProvisioner(ctx, t)
	quotaPool(ctx, t, e.f, poolBtrfs)
	node := e.nodes[0]
	const data = 256 << 20
	fill := func(class string) (string, string) {
		src := e.claim(ctx, t, "src-"+strings.TrimPrefix(class, "hostpath-"), class, "512Mi", corev1.ReadWriteOnce, map[string]string{annProvisionOnNode: node})
		_, pv := e.waitBound(ctx, t, src.Name)
		dir := e.nodePath(t, node, pv)
		if err := writeZeros(filepath.Join(dir, "data"), data); err != nil {
			t.Fatal(err)
		}
		plantTree(t, dir)
		return src.Name, dir
	}
	clone := func(src, class string) (string, float64, string) {
		c := e.cloneClaim(ctx, t, "clone-of-"+src, class, "512Mi", corev1.ReadWriteOnce, src)
		_, pv := e.waitBound(ctx, t, c.Name)
		m, s := finishedMethod(t, e.waitEvent(ctx, t, c.Name, corev1.EventTypeNormal, reasonCloneFinished, "Cloned claim "+src))
		return m, s, e.nodePath(t, node, pv)
	}
	btrfsSrc, btrfsDir := fill(classBtrfs)
	defSrc, defDir := fill(classImmediate)
	snapMethod, snapSeconds, snapDir := clone(btrfsSrc, classBtrfs)
	copyMethod, copySeconds, copyDir := clone(defSrc, classImmediate)
	t.Logf("clone of %d MiB: btrfs %s in %.3fs, default pool %s in %.3fs", data>>20, snapMethod, snapSeconds, copyMethod, copySeconds)
	if snapMethod != "snapshot" {
		t.Errorf("btrfs clone method = %q, want snapshot", snapMethod)
	}
	if copyMethod != "copy" {
		t.Errorf("default pool clone method = %q, want copy (this machine's default pool has no reflink)", copyMethod)
	}
	checkSameTree(t, btrfsDir, snapDir)
	checkSameTree(t, defDir, copyDir)
	vol := e.managerVolume(ctx, t, node, poolBtrfs, filepath.Base(snapDir))
	if vol.CloneMethod != "snapshot" || vol.Enforcement != "btrfs" || vol.SizeBytes != 512<<20 {
		t.Errorf("manager reports the snapshot clone as %+v, want cloneMethod snapshot, btrfs enforcement of 512 MiB", vol)
	}
}

// TestCloneMultihost: a clone of a multihost claim is a multihost volume
// whose directory on each node is a copy of that node's directory of the
// source.
func TestCloneMultihost(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	e := setupProvisioner(ctx, t)
	src := e.claim(ctx, t, "shared-src", classShared, "16Mi", corev1.ReadWriteMany, nil)
	_, srcPV := e.waitBound(ctx, t, src.Name)
	for _, n := range e.nodes {
		if err := os.WriteFile(e.nodePath(t, n, srcPV, "node.txt"), []byte(n+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	clone := e.cloneClaim(ctx, t, "shared-copy", classShared, "16Mi", corev1.ReadWriteMany, src.Name)
	_, pv := e.waitBound(ctx, t, clone.Name)
	e.checkMultihostPV(t, clone, pv)
	e.waitEvent(ctx, t, clone.Name, corev1.EventTypeNormal, reasonCloneFinished, fmt.Sprintf("on %d nodes", len(e.nodes)))
	for _, n := range e.nodes {
		if b, err := os.ReadFile(e.nodePath(t, n, pv, "node.txt")); err != nil || string(b) != n+"\n" {
			t.Errorf("node %s: clone's node.txt = %q, %v; want that node's copy %q", n, b, err, n+"\n")
		}
	}
	e.deleteAndWaitGone(ctx, t, "", clone.Name)
	e.waitGoneEverywhere(ctx, t, pv)
	for _, n := range e.nodes {
		if _, err := os.Stat(e.nodePath(t, n, srcPV, "node.txt")); err != nil {
			t.Errorf("node %s: source after the clone's deletion: %v", n, err)
		}
	}
}

// managerVolume is what node's manager answers to GET
// /v1/pools/{pool}/volumes/{name}, asked with the token of a service
// account bound to the reader ClusterRole.
func (e *provEnv) managerVolume(ctx context.Context, t *testing.T, node, pool, name string) managerapi.Volume {
	t.Helper()
	urls := managerPods(ctx, t, e.f, e.nodes)
	token := roleToken(ctx, t, e.f, e.ns, "reader", managerapi.ReaderClusterRole)
	waitAllowed(ctx, t, urls[node], token, "the reader's token to be allowed")
	code, body := callManager(ctx, t, "GET", urls[node], "/v1/pools/"+pool+"/volumes/"+name, token, "")
	var v managerapi.Volume
	if code != 200 || json.Unmarshal(body, &v) != nil {
		t.Fatalf("GET volume %s of pool %s on %s: %d %s", name, pool, node, code, body)
	}
	return v
}

// TestFaultCloneManagerKilled: the manager of the source's node is killed
// while it copies a 2 GiB clone. Until the copy is whole, the clone's
// directory does not exist (the copy is in a staging directory) and no PV
// names it; after the restart the clone starts over, is Bound with the
// source's content, and no staging directory is left.
func TestFaultCloneManagerKilled(t *testing.T) {
	ctx := t.Context()
	e := setupProvisioner(ctx, t)
	node := e.nodes[0]
	src := e.claim(ctx, t, "big", classImmediate, "3Gi", corev1.ReadWriteOnce, map[string]string{annProvisionOnNode: node})
	_, srcPV := e.waitBound(ctx, t, src.Name)
	const size = 2 << 30
	want := writePattern(t, e.nodePath(t, node, srcPV, "data"), size)
	pool := e.f.MustNodeDir(t, node, localcluster.PoolPath)

	clone := e.cloneClaim(ctx, t, "big-copy", classImmediate, "3Gi", corev1.ReadWriteOnce, src.Name)
	// Watch the pool until the clone is Bound: the clone's directory, once
	// there, must hold the whole file.
	watchCtx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	partial := make(chan string, 1)
	go watchClone(watchCtx, pool, string(clone.UID), size, partial)
	staging := waitStaging(ctx, t, pool)
	e.killAndWaitReady(ctx, t, node, "manager", managerSelector)
	if got := e.poolEntries(t, string(clone.UID)); len(got) != 0 {
		t.Errorf("clone directories right after the manager's restart: %v, want none (the copy is in %s)", got, staging)
	}
	if c, err := e.f.Client.CoreV1().PersistentVolumeClaims(e.ns).Get(ctx, clone.Name, metav1.GetOptions{}); err != nil || c.Spec.VolumeName != "" {
		t.Errorf("clone claim after the kill: %v, bound to %q; want it unbound", err, c.Spec.VolumeName)
	}

	_, pv := e.waitBound(ctx, t, clone.Name)
	stopWatch()
	select {
	case msg := <-partial:
		t.Error(msg)
	default:
	}
	if got := fileSum(t, e.nodePath(t, node, pv, "data")); got != want {
		t.Errorf("clone's data differs from the source's after the restart")
	}
	entries, err := os.ReadDir(pool)
	if err != nil {
		t.Fatal(err)
	}
	for _, en := range entries {
		if strings.HasPrefix(en.Name(), ".hostpath-clone-") {
			t.Errorf("staging directory %s left in the pool", en.Name())
		}
	}
}

// writePattern writes n bytes of a repeated random 1 MiB block to path
// and returns their SHA-256.
func writePattern(t *testing.T, path string, n int) [32]byte {
	t.Helper()
	block := make([]byte, 1<<20)
	for i := range block {
		block[i] = byte(i*7 + i>>8)
	}
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	h := sha256.New()
	for written := 0; written < n; written += len(block) {
		if _, err := f.Write(block); err != nil {
			t.Fatal(err)
		}
		h.Write(block)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	return [32]byte(h.Sum(nil))
}

// fileSum returns the SHA-256 of the file at path.
func fileSum(t *testing.T, path string) [32]byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return sha256.Sum256(b)
}

// waitStaging waits until pool holds a clone's staging directory and
// returns its name.
func waitStaging(ctx context.Context, t *testing.T, pool string) string {
	t.Helper()
	var name string
	var last []string
	err := wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, provisionTimeout, true, func(context.Context) (bool, error) {
		entries, err := os.ReadDir(pool)
		if err != nil {
			return false, err
		}
		var seen []string
		for _, en := range entries {
			if strings.HasPrefix(en.Name(), ".hostpath-clone-") {
				name = en.Name()
				return true, nil
			}
			seen = append(seen, en.Name())
		}
		last = seen
		return false, nil
	})
	if err != nil {
		t.Fatalf("no clone staging directory in %s: %v; last seen there: %v", pool, err, last)
	}
	return name
}

// watchClone looks at pool every few milliseconds until ctx ends: a
// directory whose name contains uid must hold a file data of size bytes;
// the first time one does not, it says so on partial.
func watchClone(ctx context.Context, pool, uid string, size int64, partial chan<- string) {
	_ = wait.PollUntilContextCancel(ctx, 10*time.Millisecond, true, func(context.Context) (bool, error) {
		entries, err := os.ReadDir(pool)
		if err != nil {
			return false, nil
		}
		for _, en := range entries {
			if !strings.Contains(en.Name(), uid) {
				continue
			}
			fi, err := os.Stat(filepath.Join(pool, en.Name(), "data"))
			if err != nil || fi.Size() != size {
				partial <- fmt.Sprintf("the clone's directory %s held a partial copy: %v (size %v)", en.Name(), err, fi)
				return true, nil
			}
		}
		return false, nil
	})
}
