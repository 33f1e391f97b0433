package e2e

// Hostile and odd input gets a clear error and changes nothing on disk
// (issue "Faults lose nothing", the hostile-input bullet).
//
// Already covered by other tests, and not repeated here:
//   - TestProvisionerFailures: the pathPattern "../${pvc.metadata.name}", an
//     unknown parameter ("size"), a claim of 8Pi that does not fit, a claim
//     naming the missing node "no-such-node", a node without a provisioner,
//     no node at all, ReadWriteMany in node mode; each a Warning event, the
//     claim Pending and no pool entry with the claim's UID.
//   - TestProvisionerSharedDirectoryRefused: a pattern without
//     ${pv.metadata.name} cannot hand a second claim the first one's
//     directory. TestProvisionerReuseRetainedDirectory: a Released PV's
//     directory is not reused while that PV exists.
//   - TestManager: no token and a forged token on GET /v1/host (401); a
//     token without the ClusterRole on GET /v1/host and on the PUT of a new
//     volume (403); the volume names "..", "%2e%2e", "..%2Fstate",
//     "a%2F..%2F..%2Fescape", "%2Fetc", ".hidden", "a%00b" and the pool
//     "..%2F..%2Fetc" in PUT and DELETE (400, the node's pool unchanged);
//     symlinks planted by hand as a volume and inside a volume are not
//     followed by the manager. TestManagerTokenAudience: a plain service
//     account token (401). TestManagerJunkTokenFlood: 1,000 junk tokens
//     (429 or 401) do not starve a legitimate caller. TestManagerTLS: plain
//     HTTP to the TLS port gets no /v1 answer.
//
// New here, each asserting the user-visible error and that every real
// node's pools (the default pool, and every pool under the pool root) hold
// what they held before:
//   - TestHostileStorageClasses: pathPattern traversal, absolute, nested,
//     hidden, empty, control, Unicode lookalike, shell-like and broken
//     patterns, a slash beyond byte 255; invalid dirMode, enforceSize, mode
//     and pool values; parameter keys that only look like known ones.
//   - TestHostileClaims: negative and zero sizes (the API server refuses
//     them), sizes the API server caps at 2^63-1 bytes; claim names it refuses;
//     invalid, look-alike, Unicode, control and 300-character node names in
//     both node annotations; invalid, 256-byte, missing and another live
//     volume's directory in hostpath.dev/reuse-directory.
//   - TestHostileLongNames: names at and over 255 bytes that are valid: the
//     longest namespace and claim names, a literal pattern of 317 bytes; the
//     directory is at most 255 bytes, inside the pool, distinct for names
//     that differ only past the cut, and removed with its claim.
//   - TestHostileManagerRequests: Unicode, control, encoded, 256-byte and
//     hidden names of volumes and pools (PUT of a pool creates directories);
//     malformed queries of a DELETE by the right owner; malformed JSON bodies;
//     bodies and headers over the limits; malformed HTTP; symlinks planted
//     as pools under the pool root; unauthenticated (no token, junk, Basic,
//     API-audience) and unauthorised (valid token, no ClusterRole) deletes,
//     take-overs, resizes and pool creations of existing data.
//   - TestHostileManagerSlowClients: 40 connections dribbling their headers
//     and 8 stalled TLS handshakes do not delay a normal caller from the
//     same address, and the manager closes them all.
//   - TestHostilePodSymlinks: a pod plants symlinks to /, to the pool, to
//     another claim's directory, to the manager's state, to a directory of
//     this machine, a FIFO and an unreadable directory in its volume; the
//     claim's deletion removes the volume and nothing else.

import (
	"bufio"
	"context"
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	hostpathv1 "hostpath.dev/api/hostpath/v1"
	"hostpath.dev/api/managerapi"
	"hostpath.dev/api/runtime/filetest"
	"hostpath.dev/e2e/framework"
	"hostpath.dev/e2e/framework/localcluster"
)

const (
	// hostileClassPrefix starts the name of every StorageClass this file
	// makes, so that the disk check never takes one of them as the reason
	// a pool directory appeared.
	hostileClassPrefix = "e2e-hostile"
	// hostileMaxName is the longest directory name (NAME_MAX), and
	// hostileCut how much of a longer expanded pathPattern is kept before
	// "-" and 16 hex digits of its SHA-256 (docs/volumes.md, "StorageClass
	// parameters").
	hostileMaxName = 255
	hostileCut     = 238
	// hostileSlowHeaders is how many connections dribble their headers:
	// more than the manager's --max-in-flight-per-address (32).
	hostileSlowHeaders = 40
	// hostileStalledHandshakes is how many connections never send a TLS
	// ClientHello.
	hostileStalledHandshakes = 8
	// hostileSlowBound bounds the wait for the manager to close them all:
	// its --read-header-timeout (10s, which also bounds the TLS handshake)
	// and a margin.
	hostileSlowBound = 25 * time.Second
)

// hostileDiskEntry is an entry of a pool seen from this machine: its kind
// and the PV its owner record names ("" without one; for what is inside a
// volume, the volume's).
type hostileDiskEntry struct {
	kind, owner string
}

func (d hostileDiskEntry) String() string {
	if d.owner == "" {
		return d.kind
	}
	return d.kind + " owned by " + d.owner
}

// hostileSnapshot lists what the pools of nodes hold, keyed
// "<node>:<path on the node>": in the default pool, every entry with its
// owner record (a record without a directory too) and the names inside
// each volume directory; under the pool root, every entry and, in each pool
// directory, its entries with their records. The metadata directory itself
// and the records' temporary files are left out.
func hostileSnapshot(t *testing.T, f *framework.Framework, nodes []string) map[string]hostileDiskEntry {
	t.Helper()
	out := map[string]hostileDiskEntry{}
	for _, n := range nodes {
		hostileScanPool(t, f, n, localcluster.PoolPath, true, out)
		root := f.MustNodeDir(t, n, localcluster.PoolRootPath)
		for _, en := range hostileReadDir(t, root) {
			p := path.Join(localcluster.PoolRootPath, en.Name())
			out[n+":"+p] = hostileDiskEntry{kind: hostileKind(en)}
			if en.IsDir() {
				hostileScanPool(t, f, n, p, false, out)
			}
		}
	}
	return out
}

// hostileScanPool adds the entries of the pool directory pool of node to
// out, with the names inside its volume directories when inside is true.
// The records are read before the directory is listed: the manager writes
// a record before it makes the directory and removes it after removing the
// directory, so a volume being made or removed meanwhile is seen with its
// owner.
func hostileScanPool(t *testing.T, f *framework.Framework, node, pool string, inside bool, out map[string]hostileDiskEntry) {
	t.Helper()
	dir := f.MustNodeDir(t, node, pool)
	owners := filepath.Join(dir, ".hostpath", "owners")
	recorded := map[string]string{}
	for _, rec := range hostileReadDir(t, owners) {
		if strings.HasPrefix(rec.Name(), ".tmp-") || rec.IsDir() {
			continue
		}
		owner, err := hostileRecordOwner(filepath.Join(owners, rec.Name()))
		if errors.Is(err, fs.ErrNotExist) {
			continue // removed since listed: its directory is gone
		}
		recorded[rec.Name()] = owner
	}
	key := func(name string) string { return node + ":" + path.Join(pool, name) }
	entries := hostileReadDir(t, dir)
	for _, en := range entries {
		if en.Name() == ".hostpath" {
			continue
		}
		out[key(en.Name())] = hostileDiskEntry{kind: hostileKind(en), owner: recorded[en.Name()]}
	}
	for name, owner := range recorded {
		if _, ok := out[key(name)]; !ok {
			out[key(name)] = hostileDiskEntry{kind: "record without directory", owner: owner}
		}
	}
	if !inside {
		return
	}
	for _, en := range entries {
		if !en.IsDir() || en.Name() == ".hostpath" {
			continue
		}
		for _, in := range hostileReadDir(t, filepath.Join(dir, en.Name())) {
			out[key(en.Name())+"/"+in.Name()] = hostileDiskEntry{kind: hostileKind(in), owner: recorded[en.Name()]}
		}
	}
}

// hostileReadDir lists dir, nothing when it does not exist (any more).
func hostileReadDir(t *testing.T, dir string) []fs.DirEntry {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("List %s: %v", dir, err)
	}
	return entries
}

// hostileKind names the type of a directory entry.
func hostileKind(en fs.DirEntry) string {
	switch m := en.Type(); {
	case m.IsDir():
		return "directory"
	case m&fs.ModeSymlink != 0:
		return "symlink"
	case m.IsRegular():
		return "file"
	default:
		return "special file " + m.String()
	}
}

// readRecordFile reads the owner record file; the error says what is
// wrong with it.
func readRecordFile(file string) (ownerRecord, error) {
	var rec ownerRecord
	data, err := os.ReadFile(file)
	if err != nil {
		return rec, err
	}
	if err := json.Unmarshal(data, &rec); err != nil {
		return rec, fmt.Errorf("owner record %s: %w", file, err)
	}
	return rec, nil
}

// hostileRecordOwner is the owner an owner record file names; for a record
// that cannot be read, the error and an owner saying so.
func hostileRecordOwner(file string) (string, error) {
	rec, err := readRecordFile(file)
	if err != nil {
		return "(unreadable record: " + err.Error() + ")", err
	}
	return rec.Owner, nil
}

// hostileCheckDisk compares what the pools of nodes hold with before: an
// entry that appeared, went or changed is an error, unless someone else
// explains it: a volume whose PV belongs to a claim outside namespaces
// (made meanwhile), a volume whose PV is gone or released (the claims of
// a test that just ended go after it), a pool directory that a StorageClass
// of another test names.
func hostileCheckDisk(ctx context.Context, t *testing.T, f *framework.Framework, nodes []string, before map[string]hostileDiskEntry, namespaces ...string) {
	t.Helper()
	after := hostileSnapshot(t, f, nodes)
	keys := make([]string, 0, len(before)+len(after))
	for k := range before {
		keys = append(keys, k)
	}
	for k := range after {
		if _, ok := before[k]; !ok {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	var problems []string
	for _, k := range keys {
		b, inBefore := before[k]
		a, inAfter := after[k]
		if inBefore && inAfter && a == b {
			continue
		}
		var why string
		var ok bool
		switch {
		case !inBefore:
			why, ok = hostileAppeared(ctx, f, k, a, namespaces)
		case !inAfter:
			why, ok = hostileVanished(ctx, f, b)
		case a.owner == b.owner:
			// The same volume, made or removed meanwhile.
			if why, ok = hostileAppeared(ctx, f, k, a, namespaces); !ok {
				why, ok = hostileVanished(ctx, f, b)
			}
		default:
			gone, okGone := hostileVanished(ctx, f, b)
			came, okCame := hostileAppeared(ctx, f, k, a, namespaces)
			why, ok = gone+"; "+came, okGone && okCame
		}
		change := fmt.Sprintf("%s: %s -> %s (%s)", k, hostileDescribe(b, inBefore), hostileDescribe(a, inAfter), why)
		if ok {
			t.Logf("Not this test's doing: %s", change)
			continue
		}
		problems = append(problems, change)
	}
	if len(problems) > 0 {
		t.Errorf("The pools changed:\n  %s", strings.Join(problems, "\n  "))
	}
}

func hostileDescribe(e hostileDiskEntry, present bool) string {
	if !present {
		return "nothing"
	}
	return e.String()
}

// hostileAppeared explains an entry that is new or changed: a volume of a
// claim outside namespaces, or a pool directory a StorageClass of another
// test names.
func hostileAppeared(ctx context.Context, f *framework.Framework, key string, e hostileDiskEntry, namespaces []string) (string, bool) {
	if e.owner != "" {
		pv, err := f.Client.CoreV1().PersistentVolumes().Get(ctx, e.owner, metav1.GetOptions{})
		if err != nil {
			return fmt.Sprintf("its owner PV %s: %v", e.owner, err), false
		}
		if ref := pv.Spec.ClaimRef; ref != nil && !slices.Contains(namespaces, ref.Namespace) {
			return fmt.Sprintf("the volume of claim %s/%s", ref.Namespace, ref.Name), true
		}
		return fmt.Sprintf("its owner PV %s is this test's", e.owner), false
	}
	onNode := key[strings.Index(key, ":")+1:]
	if e.kind != "directory" || path.Dir(onNode) != localcluster.PoolRootPath {
		return "no owner record", false
	}
	classes, err := f.Client.StorageV1().StorageClasses().List(ctx, metav1.ListOptions{})
	if err != nil {
		return err.Error(), false
	}
	for _, sc := range classes.Items {
		if hostpathv1.NewProvisionerNames(provisionerName).Has(sc.Provisioner) && sc.Parameters["pool"] == path.Base(onNode) && !strings.HasPrefix(sc.Name, hostileClassPrefix) {
			return "the pool of StorageClass " + sc.Name, true
		}
	}
	return "no StorageClass of another test names the pool", false
}

// hostileVanished explains an entry that went: its owner PV is gone or
// released.
func hostileVanished(ctx context.Context, f *framework.Framework, e hostileDiskEntry) (string, bool) {
	if e.owner == "" {
		return "no owner record", false
	}
	pv, err := f.Client.CoreV1().PersistentVolumes().Get(ctx, e.owner, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return "its owner PV " + e.owner + " is gone", true
	case err != nil:
		return fmt.Sprintf("its owner PV %s: %v", e.owner, err), false
	case pv.DeletionTimestamp != nil || pv.Status.Phase == corev1.VolumeReleased || pv.Status.Phase == corev1.VolumeFailed:
		return fmt.Sprintf("its owner PV %s is %s", e.owner, pv.Status.Phase), true
	}
	return fmt.Sprintf("its owner PV %s is %s", e.owner, pv.Status.Phase), false
}

// hostileClass creates a StorageClass of the provisioner (Immediate,
// Delete) with params, deleted when the test ends; the error is the API
// server's refusal.
func (e *provEnv) hostileClass(ctx context.Context, t *testing.T, params map[string]string) (string, error) {
	t.Helper()
	binding := storagev1.VolumeBindingImmediate
	reclaim := corev1.PersistentVolumeReclaimDelete
	sc := &storagev1.StorageClass{
		ObjectMeta:        metav1.ObjectMeta{Name: hostileClassPrefix + "-" + framework.RandomSuffix()},
		Provisioner:       provisionerName,
		Parameters:        params,
		VolumeBindingMode: &binding,
		ReclaimPolicy:     &reclaim,
	}
	if _, err := e.f.Client.StorageV1().StorageClasses().Create(ctx, sc, metav1.CreateOptions{}); err != nil {
		return "", err
	}
	t.Cleanup(func() {
		_ = e.f.Client.StorageV1().StorageClasses().Delete(context.Background(), sc.Name, metav1.DeleteOptions{})
	})
	return sc.Name, nil
}

// hostileRefusal is a claim the provisioner must refuse: its Warning event
// has reason and contains text (and also, when not empty, detail).
type hostileRefusal struct {
	claim, reason, text, detail string
	// fromNode is the instance that must be the only one to report, ""
	// when any one may (the elected one).
	fromNode string
}

// hostileCheckRefusals waits for each refusal's event, then checks that its claim
// is Pending and unbound and, for a claim of a node, that only that node's
// instance spoke about it.
func (e *provEnv) hostileCheckRefusals(ctx context.Context, t *testing.T, refusals []hostileRefusal) {
	t.Helper()
	for _, r := range refusals {
		t.Run(r.claim, func(t *testing.T) {
			ev := e.waitEvent(ctx, t, r.claim, corev1.EventTypeWarning, r.reason, r.text)
			if !strings.Contains(ev.Message, r.detail) {
				t.Errorf("Event %s %q does not say %q", ev.Reason, ev.Message, r.detail)
			}
			got, err := e.f.Client.CoreV1().PersistentVolumeClaims(e.ns).Get(ctx, r.claim, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if got.Status.Phase != corev1.ClaimPending || got.Spec.VolumeName != "" {
				t.Errorf("Claim is %s bound to %q, want Pending and unbound", got.Status.Phase, got.Spec.VolumeName)
			}
			if r.fromNode != "" {
				e.checkOneSource(ctx, t, r.claim, r.fromNode)
			}
		})
	}
}

// TestHostileStorageClasses: a class whose parameters are hostile or odd
// fails its claims with a ProvisioningFailed event naming the parameter,
// from the instance of the claim's node only, and nothing appears in any
// pool.
func TestHostileStorageClasses(t *testing.T) {
	ctx := t.Context()
	e := setupProvisioner(ctx, t)
	node := e.nodes[0]
	pinned := map[string]string{annProvisionOnNode: node}

	type classCase struct {
		name   string
		params map[string]string
		// text and detail are in the ProvisioningFailed event.
		text, detail string
		// apiMayRefuse: the API server may refuse the class itself.
		apiMayRefuse bool
		// anyNode: the class is multihost, so the instance elected for
		// the claim speaks, not that of the node it names.
		anyNode bool
	}
	var cases []classCase
	const (
		notOne     = "which is not one directory name"
		dotDot     = `which contains ".."`
		unknownVar = "uses unknown variable"
	)
	for _, p := range []struct{ name, pattern, detail string }{
		{"dotdot-inside", "${pvc.metadata.name}/../../etc", dotDot},
		{"dotdot", "..", dotDot},
		{"absolute", "/abs/${pv.metadata.name}", notOne},
		{"root", "/", notOne},
		{"dot", ".", notOne},
		{"slash", "a/b", notOne},
		{"nested", "${pvc.metadata.namespace}/${pvc.metadata.name}", notOne},
		{"metadata", ".hostpath", notOne},
		{"owner-records", ".hostpath/owners/${pv.metadata.name}", notOne},
		{"option", "-${pvc.metadata.name}", notOne},
		{"empty", "", "gives an empty directory name"},
		{"nul", "x\x00y", notOne},
		{"newline", "a\nb", notOne},
		{"tab", "a\tb", notOne},
		{"delete-char", "a\x7f", notOne},
		{"division-slash", "a\u2215b", notOne},
		{"fullwidth-dots", "\uff0e\uff0e", notOne},
		{"dot-leader", "\u2024\u2024", notOne},
		{"accent", "caf\u00e9", notOne},
		{"backslash", `a\b`, notOne},
		{"percent", "%2e%2e", notOne},
		{"tilde", "~", notOne},
		{"shell", "$(pvc.metadata.name)", notOne},
		{"unterminated", "${pvc.metadata.name", `has an unterminated "${"`},
		{"uid", "${pvc.metadata.uid}", unknownVar},
		{"environment", "${env.HOME}", unknownVar},
		{"slash-past-255", strings.Repeat("x", 300) + "/etc", notOne},
	} {
		cases = append(cases, classCase{
			name: "pattern-" + p.name, params: map[string]string{"pathPattern": p.pattern},
			text: fmt.Sprintf("StorageClass parameter %q: pattern %q", "pathPattern", p.pattern), detail: p.detail,
			apiMayRefuse: strings.ContainsRune(p.pattern, 0),
		})
	}
	cases = append(cases, classCase{
		name: "multihost-pattern", params: map[string]string{"mode": "multihost", "pathPattern": "../${pv.metadata.name}"},
		text: fmt.Sprintf("StorageClass parameter %q: pattern %q", "pathPattern", "../${pv.metadata.name}"), detail: dotDot, anyNode: true,
	})
	// A multihost directory must carry its claim's UID (the admission
	// policy lets a PV name no other claim's directory).
	cases = append(cases, classCase{
		name: "multihost-no-uid", params: map[string]string{"mode": "multihost", "pathPattern": "${pvc.metadata.namespace}-${pvc.metadata.name}"},
		text: fmt.Sprintf("StorageClass parameter %q: the directory", "pathPattern"), detail: "of a multihost volume must contain the claim's UID", anyNode: true,
	})
	for i, v := range []string{"0800", "-1", "777777", "rwxrwxrwx", "", "0x1ff", "+0777", " 0777", "0777\n", "10000", "\uff10\uff17\uff17\uff17"} {
		cases = append(cases, classCase{name: fmt.Sprintf("dirmode-%d", i), params: map[string]string{"dirMode": v},
			text: fmt.Sprintf("StorageClass parameter %q: %q is not an octal mode from 0 to 07777", "dirMode", v)})
	}
	for i, v := range []string{"maybe", "TRUE", "1", ""} {
		cases = append(cases, classCase{name: fmt.Sprintf("enforcesize-%d", i), params: map[string]string{"enforceSize": v},
			text: fmt.Sprintf("StorageClass parameter %q: %q is not \"true\" or \"false\"", "enforceSize", v)})
	}
	for i, v := range []string{"Multihost", "node\n", ""} {
		cases = append(cases, classCase{name: fmt.Sprintf("mode-%d", i), params: map[string]string{"mode": v},
			text: fmt.Sprintf("StorageClass parameter %q: %q is not a mode", "mode", v)})
	}
	for i, v := range []string{"../../etc", ".hostpath", "UPPER", "a/b", "", strings.Repeat("p", 64), "default\x00"} {
		cases = append(cases, classCase{name: fmt.Sprintf("pool-%d", i), params: map[string]string{"pool": v},
			text:         fmt.Sprintf("StorageClass parameter %q: pool name %q is invalid", "pool", v),
			apiMayRefuse: strings.ContainsRune(v, 0)})
	}
	for i, k := range []string{"PathPattern", "dirmode", "pathPattern\u200b"} {
		cases = append(cases, classCase{name: fmt.Sprintf("key-%d", i), params: map[string]string{k: "x"},
			text: fmt.Sprintf("StorageClass parameter %q: unknown parameter", k)})
	}

	before := hostileSnapshot(t, e.f, e.nodes)
	var refusals []hostileRefusal
	for _, tc := range cases {
		class, err := e.hostileClass(ctx, t, tc.params)
		if err != nil {
			if tc.apiMayRefuse && (apierrors.IsInvalid(err) || apierrors.IsBadRequest(err)) {
				t.Logf("%s: the API server refuses the class: %v", tc.name, err)
				continue
			}
			t.Fatalf("%s: create a StorageClass with parameters %q: %v", tc.name, tc.params, err)
		}
		e.claim(ctx, t, tc.name, class, "1Mi", corev1.ReadWriteOnce, pinned)
		r := hostileRefusal{claim: tc.name, reason: eventProvisioningFail, text: tc.text, detail: tc.detail, fromNode: node}
		if tc.anyNode {
			r.fromNode = ""
		}
		refusals = append(refusals, r)
	}
	e.hostileCheckRefusals(ctx, t, refusals)
	hostileCheckDisk(ctx, t, e.f, e.nodes, before, e.ns)
}

// victim makes the claim "victim" on node, waits for its PV and writes
// keep.txt ("victim\n") in its directory: the live volume that hostile
// claims and pods go after. It returns the PV, its directory's name and
// keep.txt's path.
func (e *provEnv) victim(ctx context.Context, t *testing.T, node string) (pv *corev1.PersistentVolume, dir, keep string) {
	t.Helper()
	e.claim(ctx, t, "victim", classImmediate, "1Mi", corev1.ReadWriteOnce, map[string]string{annProvisionOnNode: node})
	_, pv = e.waitBound(ctx, t, "victim")
	keep = e.nodePath(t, node, pv, "keep.txt")
	filetest.Write(t, keep, "victim\n")
	return pv, pv.Annotations[annPVDirectory], keep
}

// checkVictim checks that the victim volume (see victim) on node is
// intact: keep.txt as written, the owner record naming its PV.
func (e *provEnv) checkVictim(t *testing.T, node string, pv *corev1.PersistentVolume, keep string) {
	t.Helper()
	if data, err := os.ReadFile(keep); err != nil || string(data) != "victim\n" {
		t.Errorf("The victim's file %s = %q, %v; want \"victim\\n\"", keep, data, err)
	}
	pool := e.f.MustNodeDir(t, node, localcluster.PoolPath)
	if owner, _ := hostileRecordOwner(filepath.Join(pool, ".hostpath", "owners", pv.Annotations[annPVDirectory])); owner != pv.Name {
		t.Errorf("The victim's directory is owned by %q, want %q", owner, pv.Name)
	}
}

// TestHostileClaims: hostile sizes, names and annotations of claims are
// refused by the API server or get a Warning event saying what is wrong;
// no pool changes and another claim's volume is left alone.
func TestHostileClaims(t *testing.T) {
	ctx := t.Context()
	e := setupProvisioner(ctx, t)
	node := e.nodes[0]
	pinned := map[string]string{annProvisionOnNode: node}

	// A live volume that a claim tries to take over.
	victimPV, victimDir, keep := e.victim(ctx, t, node)

	t.Run("the API server refuses", func(t *testing.T) {
		for _, size := range []string{"-1Mi", "0", "-1"} {
			pvc := e.claimObject("size-"+framework.RandomSuffix(), classImmediate, size, corev1.ReadWriteOnce, pinned)
			_, err := e.f.Client.CoreV1().PersistentVolumeClaims(e.ns).Create(ctx, pvc, metav1.CreateOptions{})
			if !apierrors.IsInvalid(err) {
				t.Errorf("Create a claim of %s: %v, want Invalid", size, err)
			}
		}
		for _, name := range []string{"..", "a/b", "Upper", strings.Repeat("n", 254), "x\x00", "caf\u00e9"} {
			pvc := e.claimObject(name, classImmediate, "1Mi", corev1.ReadWriteOnce, pinned)
			_, err := e.f.Client.CoreV1().PersistentVolumeClaims(e.ns).Create(ctx, pvc, metav1.CreateOptions{})
			if !apierrors.IsInvalid(err) && !apierrors.IsBadRequest(err) {
				t.Errorf("Create a claim named %q: %v, want Invalid", name, err)
			}
		}
	})

	before := hostileSnapshot(t, e.f, e.nodes)
	var refusals []hostileRefusal
	// The API server caps quantities at 2^63-1 (9Ei is stored as that):
	// the manager refuses the size as more than the pool holds.
	for i, size := range []string{"9Ei", "8Ei"} {
		name := fmt.Sprintf("size-%d", i)
		e.claim(ctx, t, name, classImmediate, size, corev1.ReadWriteOnce, pinned)
		refusals = append(refusals, hostileRefusal{claim: name, reason: eventProvisioningFail,
			text:   "the volume does not fit in the pool",
			detail: "8Ei requested", fromNode: node})
	}
	for i, v := range []string{"../../x", strings.ToUpper(node), " " + node, node + "\n", "n\u00f6de", "/etc/passwd", strings.Repeat("n", 300)} {
		name := fmt.Sprintf("node-%d", i)
		e.claim(ctx, t, name, classImmediate, "1Mi", corev1.ReadWriteOnce, map[string]string{annProvisionOnNode: v})
		refusals = append(refusals, hostileRefusal{claim: name, reason: "NodeNotFound",
			text: fmt.Sprintf("Node %q named by %s does not exist", v, annProvisionOnNode)})
	}
	e.claim(ctx, t, "node-kubevirt", classImmediate, "1Mi", corev1.ReadWriteOnce, map[string]string{annKubevirtOnNode: "../x"})
	refusals = append(refusals, hostileRefusal{claim: "node-kubevirt", reason: "NodeNotFound",
		text: fmt.Sprintf("Node %q named by %s does not exist", "../x", annKubevirtOnNode)})
	reuse := func(name, dir, text string) {
		e.claim(ctx, t, name, classImmediate, "1Mi", corev1.ReadWriteOnce, map[string]string{annProvisionOnNode: node, annReuseDirectory: dir})
		refusals = append(refusals, hostileRefusal{claim: name, reason: eventProvisioningFail, text: text, fromNode: node})
	}
	for i, dir := range []string{"..", "../x", ".hostpath", ".hostpath/owners", "/etc", "a/b", "x\ny", "caf\u00e9", "-rf"} {
		reuse(fmt.Sprintf("reuse-%d", i), dir, fmt.Sprintf("claim annotation %s: volume name %q is invalid", annReuseDirectory, dir))
	}
	reuse("reuse-empty", "", fmt.Sprintf("claim annotation %s: volume name is empty", annReuseDirectory))
	reuse("reuse-256", strings.Repeat("r", hostileMaxName+1),
		fmt.Sprintf("claim annotation %s: volume name is %d bytes long, the limit is %d", annReuseDirectory, hostileMaxName+1, hostileMaxName))
	missing := "missing-" + framework.RandomSuffix() + "-"
	missing += strings.Repeat("m", hostileMaxName-len(missing))
	// A missing directory reads as one of another namespace (the claim
	// learns nothing of other namespaces' directories).
	reuse("reuse-missing", missing, fmt.Sprintf("cannot reuse directory %q in pool %q on node %q from namespace %q: it does not exist, or its owner record does not name this namespace", missing, "default", node, e.ns))
	reuse("reuse-live", victimDir, fmt.Sprintf("the PersistentVolumes %q use it", victimPV.Name))

	e.hostileCheckRefusals(ctx, t, refusals)
	hostileCheckDisk(ctx, t, e.f, e.nodes, before, e.ns)
	e.checkVictim(t, node, victimPV, keep)
}

// hostileDirectory is the directory the docs promise for an expanded
// pathPattern: itself up to 255 bytes, else its first 238 bytes, "-" and
// 16 hex digits of the SHA-256 of all of it (255 bytes).
func hostileDirectory(expanded string) string {
	if len(expanded) <= hostileMaxName {
		return expanded
	}
	sum := sha256.Sum256([]byte(expanded))
	return expanded[:hostileCut] + "-" + hex.EncodeToString(sum[:])[:16]
}

// hostileName is a claim name of n bytes: prefix, x's and last.
func hostileName(prefix string, n int, last byte) string {
	return prefix + strings.Repeat("x", n-len(prefix)-1) + string(last)
}

// hostileLongNamespace creates a namespace with a name of 63 characters,
// the longest, and deletes it when the test ends.
func hostileLongNamespace(ctx context.Context, t *testing.T, f *framework.Framework) string {
	t.Helper()
	name := "e2e-hostile-" + framework.RandomSuffix() + "-"
	name += strings.Repeat("n", 62-len(name)) + "s"
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"hostpath.dev/e2e": "true"}}}
	if _, err := f.Client.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
		t.Fatalf("Create namespace %s: %v", name, err)
	}
	t.Cleanup(func() {
		cctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if t.Failed() {
			f.DumpOnFailure(cctx, t, name)
		}
		if err := f.Client.CoreV1().Namespaces().Delete(cctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("Delete namespace %s: %v", name, err)
		}
	})
	return name
}

// TestHostileLongNames: names at and over 255 bytes that are valid give a
// directory of at most 255 bytes inside the pool: a namespace and claim
// name whose default pattern gives exactly 255 bytes keep it, one more byte
// is shortened with a hash, the longest names that differ only past the
// cut get distinct directories, and a literal pattern of 317 bytes is
// shortened too; each directory is removed with its claim.
func TestHostileLongNames(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	e := setupProvisioner(ctx, t)
	node := e.nodes[0]
	pinned := map[string]string{annProvisionOnNode: node}
	long := *e
	long.ns = hostileLongNamespace(ctx, t, e.f)
	const pvNameLength = len("pvc-") + 36 // "pvc-" and the claim's UID
	fixed := len(long.ns) + 2 + pvNameLength

	type nameCase struct {
		env     *provEnv
		claim   string
		pattern string // "" for the default
		// length is the length of the expanded pattern.
		length int
	}
	literal := "hostile-" + framework.RandomSuffix() + "-" + strings.Repeat("l", 300)
	literalClass := e.storageClass(ctx, t, "hostile-literal", storagev1.VolumeBindingImmediate, map[string]string{"pathPattern": literal})
	cases := []nameCase{
		{env: &long, claim: hostileName("fits-", hostileMaxName-fixed, 'a'), length: hostileMaxName},
		{env: &long, claim: hostileName("over-", hostileMaxName+1-fixed, 'a'), length: hostileMaxName + 1},
		{env: &long, claim: hostileName("longest-", 253, 'a'), length: fixed + 253},
		{env: &long, claim: hostileName("longest-", 253, 'b'), length: fixed + 253},
		{env: e, claim: "literal", pattern: literal, length: len(literal)},
	}
	for _, c := range cases {
		class := classImmediate
		if c.pattern != "" {
			class = literalClass
		}
		c.env.claim(ctx, t, c.claim, class, "1Mi", corev1.ReadWriteOnce, pinned)
	}
	pool := e.f.MustNodeDir(t, node, localcluster.PoolPath)
	dirs := map[string]string{}
	pvs := map[string]*corev1.PersistentVolume{}
	for _, c := range cases {
		_, pv := c.env.waitBound(ctx, t, c.claim)
		pvs[c.claim] = pv
		expanded := c.pattern
		if expanded == "" {
			expanded = c.env.ns + "-" + c.claim + "-" + pv.Name
		}
		if len(expanded) != c.length {
			t.Fatalf("Claim %s: the pattern expands to %d bytes, the test meant %d", c.claim, len(expanded), c.length)
		}
		want := hostileDirectory(expanded)
		dir := pv.Annotations[annPVDirectory]
		dirs[c.claim] = dir
		switch {
		case dir != want:
			t.Errorf("Claim %s (%d bytes expanded): directory %q, want %q", c.claim, len(expanded), dir, want)
		case len(dir) > hostileMaxName:
			t.Errorf("Claim %s: directory of %d bytes", c.claim, len(dir))
		}
		if hp := pv.Spec.HostPath; hp == nil || hp.Path != localcluster.PoolPath+"/"+dir {
			t.Errorf("PV %s hostPath = %+v, want %s/%s", pv.Name, hp, localcluster.PoolPath, dir)
			continue
		}
		if fi, err := os.Lstat(filepath.Join(pool, dir)); err != nil || !fi.IsDir() {
			t.Errorf("Claim %s: %s on %s is not a directory: %v", c.claim, dir, node, err)
		}
		if owner, _ := hostileRecordOwner(filepath.Join(pool, ".hostpath", "owners", dir)); owner != pv.Name {
			t.Errorf("Claim %s: the owner record of %s names %q, want %q", c.claim, dir, owner, pv.Name)
		}
		if _, err := os.Lstat(e.nodePath(t, e.other(node), pv)); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("Claim %s: directory on the other node %s: %v, want none", c.claim, e.other(node), err)
		}
	}
	a, b := dirs[cases[2].claim], dirs[cases[3].claim]
	if a == b || len(a) < hostileCut || len(b) < hostileCut || a[:hostileCut] != b[:hostileCut] {
		t.Errorf("Claims that differ past the cut: directories %q and %q, want the same first %d bytes and distinct names", a, b, hostileCut)
	}

	for _, c := range cases {
		c.env.deleteAndWaitGone(ctx, t, "", c.claim)
	}
	for _, c := range cases {
		pv, dir := pvs[c.claim], dirs[c.claim]
		framework.WaitFor(ctx, t, provisionTimeout, "PV "+pv.Name+" and directory "+dir+" to be gone", func(ctx context.Context) (bool, error) {
			if _, err := e.f.Client.CoreV1().PersistentVolumes().Get(ctx, pv.Name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				return false, fmt.Errorf("PV still there (%v)", err)
			}
			for _, p := range []string{filepath.Join(pool, dir), filepath.Join(pool, ".hostpath", "owners", dir)} {
				if _, err := os.Lstat(p); !errors.Is(err, fs.ErrNotExist) {
					return false, fmt.Errorf("%s still there (%v)", p, err)
				}
			}
			return true, nil
		})
	}
}

// hostileRaw sends request, as written, on a new TLS connection to the
// manager at base (trusting only the bundle, for the node's name) and
// returns the answer. The request is written while the answer is read: a
// server that stops reading at a limit answers and closes, and the rest of
// the write fails, which does not matter.
func hostileRaw(ctx context.Context, t *testing.T, base, request string) (int, []byte) {
	t.Helper()
	cfg := managerHTTP(t, base).Transport.(*http.Transport).TLSClientConfig.Clone()
	conn, err := (&tls.Dialer{Config: cfg}).DialContext(ctx, "tcp", strings.TrimPrefix(base, "https://"))
	if err != nil {
		t.Fatalf("TLS to %s: %v", base, err)
	}
	defer conn.Close()
	if err := conn.SetDeadline(time.Now().Add(30 * time.Second)); err != nil {
		t.Fatal(err)
	}
	go func() { _, _ = io.WriteString(conn, request) }()
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("Read the answer of %s: %v", base, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Logf("Read the body of the answer %d of %s: %v (%d bytes read)", resp.StatusCode, base, err, len(body))
	}
	return resp.StatusCode, body
}

// TestHostileManagerRequests calls a manager with hostile names, queries,
// bodies, HTTP and credentials: every call gets its status with a JSON
// reason (Go's own plain text for HTTP that never reaches the manager's
// handler), and the pools of every node, a volume of the test with its
// file and owner record, and the manager's state stay as they were.
func TestHostileManagerRequests(t *testing.T) {
	f := framework.Cluster()
	ctx := t.Context()
	nodes := f.TwoRealNodes(ctx, t)
	ns := f.Namespace(ctx, t)
	urls := managerPods(ctx, t, f, nodes)
	node, other := nodes[0], nodes[1]
	base := urls[node]

	allowed, denied := managerCallers(ctx, t, f, ns)
	plain, err := f.ServiceAccountToken(ctx, ns, "allowed")
	if err != nil {
		t.Fatal(err)
	}
	waitAllowed(ctx, t, base, allowed, "GET /v1/host on "+node+" to be allowed")

	// The victim: a volume with a file, and the manager's state.
	victim := newManagerVolume(t, f, base, allowed, node, other)
	victimOwner := "pv-" + victim.name
	if code, body := callManager(ctx, t, "PUT", base, "/v1/pools/default/volumes/"+victim.name, allowed, victim.owner()); code != http.StatusCreated {
		t.Fatalf("PUT %s: %d %s", victim.name, code, body)
	}
	if err := os.WriteFile(filepath.Join(victim.here, "data"), []byte("victim\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	pool := f.MustNodeDir(t, node, localcluster.PoolPath)
	stateDir := f.MustNodeDir(t, node, localcluster.StatePath)
	stateBefore := listDir(t, stateDir)
	victimIntact := func(t *testing.T) {
		t.Helper()
		if data, err := os.ReadFile(filepath.Join(victim.here, "data")); err != nil || string(data) != "victim\n" {
			t.Errorf("The victim's file = %q, %v; want \"victim\\n\"", data, err)
		}
		rec, err := readRecordFile(filepath.Join(pool, ".hostpath", "owners", victim.name))
		if err != nil || rec.Owner != victimOwner || rec.SizeBytes != 0 {
			t.Errorf("The victim's owner record = %+v, %v; want owner %s and no size", rec, err, victimOwner)
		}
		if got := listDir(t, stateDir); got != stateBefore {
			t.Errorf("The state directory of %s changed: %q -> %q", node, stateBefore, got)
		}
	}
	// fresh is a volume name no call may create.
	fresh := "e2e-hostile-" + framework.RandomSuffix()
	freshBody := `{"owner":"pv-hostile"}`
	freshAbsent := func(t *testing.T) {
		t.Helper()
		for _, n := range nodes {
			p := f.MustNodeDir(t, n, path.Join(localcluster.PoolPath, fresh))
			if _, err := os.Lstat(p); !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("%s appeared on %s: %v", fresh, n, err)
				_ = os.RemoveAll(p)
			}
		}
	}

	type call struct {
		method, path, token, body string
		code                      int
		reason                    managerapi.Reason
		text                      string
	}
	run := func(t *testing.T, calls []call) {
		t.Helper()
		before := hostileSnapshot(t, f, nodes)
		for _, c := range calls {
			what := fmt.Sprintf("%s %q with body %.80q", c.method, c.path, c.body)
			code, body := callManager(ctx, t, c.method, base, c.path, c.token, c.body)
			st := wantStatus(t, what, code, body, c.code, string(c.reason))
			if !strings.Contains(st.Message, c.text) {
				t.Errorf("%s: message %q does not say %q", what, st.Message, c.text)
			}
		}
		hostileCheckDisk(ctx, t, f, nodes, before, ns)
		victimIntact(t)
		freshAbsent(t)
	}
	bad := func(method, p, body, text string) call {
		return call{method: method, path: p, token: allowed, body: body, code: http.StatusBadRequest, reason: managerapi.ReasonBadRequest, text: text}
	}

	t.Run("names", func(t *testing.T) {
		const volumes = "/v1/pools/default/volumes/"
		const notClean = "is not clean"
		const volumeName = "volume name"
		const dnsLabel = "DNS label"
		run(t, []call{
			bad("PUT", volumes+strings.Repeat("v", hostileMaxName+1), freshBody, fmt.Sprintf("volume name is %d bytes long, the limit is %d", hostileMaxName+1, hostileMaxName)),
			bad("PUT", volumes+"%C3%A9t%C3%A9", freshBody, volumeName),
			bad("PUT", volumes+"a%E2%88%95b", freshBody, volumeName),
			bad("PUT", volumes+"%EF%BC%8E%EF%BC%8E", freshBody, volumeName),
			bad("PUT", volumes+"%E2%80%A4%E2%80%A4", freshBody, volumeName),
			bad("PUT", volumes+"a%5Cb", freshBody, volumeName),
			bad("PUT", volumes+"a%25b", freshBody, volumeName),
			bad("PUT", volumes+"%252e%252e", freshBody, volumeName),
			bad("PUT", volumes+"a%0Ab", freshBody, volumeName),
			bad("PUT", volumes+"a%20b", freshBody, volumeName),
			bad("PUT", volumes+"-rf", freshBody, volumeName),
			bad("PUT", volumes+".hostpath", freshBody, volumeName),
			bad("PUT", volumes+"a%2Fb", freshBody, volumeName),
			bad("PUT", volumes+".", freshBody, notClean),
			bad("PUT", volumes+"x%2F..%2F..%2F..%2Flib%2Fhostpath", freshBody, notClean),
			bad("PUT", volumes+"%2e%2e/owner", `{"owner":"pv-hostile","previous":""}`, notClean),
			bad("DELETE", volumes+".hostpath?owner=pv-hostile", "", volumeName),
			bad("DELETE", volumes+"%2e%2e%2F.hostpath?owner=pv-hostile", "", notClean),
			bad("GET", volumes+"..%2F..%2Flib%2Fhostpath%2Fhost-id", "", notClean),
			bad("PUT", "/v1/pools/%2e%2e", "", notClean),
			bad("PUT", "/v1/pools/.", "", notClean),
			bad("PUT", "/v1/pools/..%2Fhpvolumes", "", notClean),
			bad("PUT", "/v1/pools/%2Fetc", "", notClean),
			bad("PUT", "/v1/pools/a%2Fb", "", dnsLabel),
			bad("PUT", "/v1/pools/.hostpath", "", dnsLabel),
			bad("PUT", "/v1/pools/UPPER", "", dnsLabel),
			bad("PUT", "/v1/pools/"+strings.Repeat("p", 64), "", dnsLabel),
			bad("PUT", "/v1/pools/lost%2Bfound", "", dnsLabel),
			bad("PUT", "/v1/pools/a%00b", "", dnsLabel),
			bad("PUT", "/v1/pools/%C3%A9", "", dnsLabel),
			bad("PUT", "/v1/pools/-x", "", dnsLabel),
			bad("PUT", "/v1/pools/default%2F..%2F..%2Fetc/volumes/x", freshBody, notClean),
			bad("GET", "/v1/pools/..%2F..%2Fvar/volumes", "", notClean),
		})
	})

	t.Run("a 255-byte name is the longest", func(t *testing.T) {
		name := "e2e-hostile-" + framework.RandomSuffix() + "-"
		name += strings.Repeat("l", hostileMaxName-len(name))
		here := filepath.Join(pool, name)
		t.Cleanup(func() { _ = os.RemoveAll(here); _ = os.Remove(filepath.Join(pool, ".hostpath", "owners", name)) })
		code, body := callManager(ctx, t, "PUT", base, "/v1/pools/default/volumes/"+name, allowed, `{"owner":"pv-longest"}`)
		if code != http.StatusCreated {
			t.Fatalf("PUT a volume of %d bytes: %d %s", len(name), code, body)
		}
		if fi, err := os.Lstat(here); err != nil || !fi.IsDir() {
			t.Errorf("%s is not a directory: %v", here, err)
		}
		code, body = callManager(ctx, t, "DELETE", base, "/v1/pools/default/volumes/"+name+"?owner=pv-longest", allowed, "")
		if code != http.StatusNoContent {
			t.Fatalf("DELETE the volume of %d bytes: %d %s", len(name), code, body)
		}
		if _, err := os.Lstat(here); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s is still there: %v", here, err)
		}
	})

	t.Run("queries of a delete by the right owner", func(t *testing.T) {
		vol := "/v1/pools/default/volumes/" + victim.name
		run(t, []call{
			bad("DELETE", vol, "", "query parameter owner"),
			bad("DELETE", vol+"?owner=..%2F..%2Fetc", "", "query parameter owner"),
			bad("DELETE", vol+"?owner="+strings.Repeat("o", 254), "", "query parameter owner"),
			bad("DELETE", vol+"?owner="+victimOwner+"&owner="+victimOwner, "", "given 2 times"),
			bad("DELETE", vol+"?owner="+victimOwner+";ifEmpty=false", "", "invalid query"),
			bad("DELETE", vol+"?owner="+victimOwner+"&ifEmpty=maybe", "", "ifEmpty"),
			bad("DELETE", vol+"?owner="+victimOwner+"&recursive=true", "", "unknown query parameter"),
			bad("DELETE", vol+"?OWNER="+victimOwner, "", "unknown query parameter"),
			bad("DELETE", vol+"?owner=%zz", "", "invalid query"),
		})
	})

	t.Run("malformed bodies", func(t *testing.T) {
		create := "/v1/pools/default/volumes/" + fresh
		deep := `{"owner":` + strings.Repeat("[", 20000) + strings.Repeat("]", 20000) + `}`
		calls := []call{
			bad("PUT", create, "", "the body is empty"),
			bad("PUT", create, " \n\t", "the body is empty"),
			bad("PUT", create, `{"owner":"pv-hostile"`, "invalid request body"),
			bad("PUT", create, `{"owner":"pv-hostile","owner":"pv-other"}`, `field "owner" is given twice`),
			bad("PUT", create, `{"Owner":"pv-hostile"}`, "case-sensitive"),
			bad("PUT", create, `{"owner":"pv-hostile","path":"/etc"}`, `unknown field "path"`),
			bad("PUT", create, `{"owner":"pv-hostile","name":"../x"}`, `unknown field "name"`),
			bad("PUT", create, `{"owner":1}`, "cannot unmarshal"),
			bad("PUT", create, `{"owner":"pv-hostile","mode":511}`, "cannot unmarshal"),
			bad("PUT", create, `{"owner":"pv-hostile","mode":"0800"}`, `mode "0800" is invalid`),
			bad("PUT", create, `{"owner":"pv-hostile","mode":"-1"}`, `mode "-1" is invalid`),
			bad("PUT", create, `{"owner":"pv-hostile","mode":"077777"}`, `mode "077777" is invalid`),
			bad("PUT", create, `{"owner":"pv-hostile","mode":"0o777"}`, `mode "0o777" is invalid`),
			bad("PUT", create, `{"owner":"pv-hostile","requiredBytes":-1}`, "must not be negative"),
			bad("PUT", create, `{"owner":"pv-hostile","requiredBytes":"1"}`, "cannot unmarshal"),
			bad("PUT", create, `{"owner":"pv-hostile","requiredBytes":9223372036854775808}`, "cannot unmarshal"),
			bad("PUT", create, `{"owner":"pv-hostile","requiredBytes":1.5}`, "cannot unmarshal"),
			bad("PUT", create, `{"owner":"pv-hostile","requiredBytes":1e400}`, "cannot unmarshal"),
			bad("PUT", create, `{"owner":"pv-hostile","enforceSize":"true"}`, "cannot unmarshal"),
			bad("PUT", create, `{"owner":"pv-hostile","reclaimPolicy":"Recycle"}`, `reclaimPolicy "Recycle" is invalid`),
			bad("PUT", create, `{"owner":"../../etc"}`, "is not a PersistentVolume name"),
			bad("PUT", create, `{"owner":"PV-HOSTILE"}`, "is not a PersistentVolume name"),
			bad("PUT", create, `{"owner":"`+strings.Repeat("o", 254)+`"}`, "is not a PersistentVolume name"),
			bad("PUT", create, `{"owner":"pv-hostile\u0000"}`, "is not a PersistentVolume name"),
			bad("PUT", create, "{\"owner\":\"pv-\xff\"}", "is not a PersistentVolume name"),
			bad("PUT", create, `{"owner":"pv-hostile"}}`, "data after the JSON object"),
			bad("PUT", create, `{"owner":"pv-hostile"} {"owner":"pv-other"}`, "data after the JSON object"),
			bad("PUT", create, `{"owner":"pv-hostile"}garbage`, "data after the JSON object"),
			bad("PUT", create, `[{"owner":"pv-hostile"}]`, "not a JSON object"),
			bad("PUT", create, `null`, "not a JSON object"),
			bad("PUT", create, `"pv-hostile"`, "not a JSON object"),
			bad("PUT", create, "\xef\xbb\xbf"+`{"owner":"pv-hostile"}`, "invalid character"),
			bad("PUT", create, `{"owner":"pv-hostile",}`, "invalid character"),
			bad("PUT", create, `{'owner':'pv-hostile'}`, "invalid character"),
			bad("PUT", create, deep, "exceeded max depth"),
		}
		owner := "/v1/pools/default/volumes/" + victim.name + "/owner"
		size := "/v1/pools/default/volumes/" + victim.name + "/size"
		calls = append(calls,
			bad("PUT", owner, `{"owner":"pv-attacker","previous":"`+victimOwner+`","retained":"yes"}`, "cannot unmarshal"),
			bad("PUT", owner, `{"owner":"pv-attacker","previous":"`+victimOwner+`","previous":""}`, `field "previous" is given twice`),
			bad("PUT", owner, `{"owner":"pv-attacker","Previous":"`+victimOwner+`"}`, "case-sensitive"),
			bad("PUT", owner, `{"owner":"pv-attacker","previous":"../`+victimOwner+`"}`, "previous: owner"),
			bad("PUT", owner, `{"owner":"pv-attacker","previous":"`+victimOwner+`"}x`, "data after the JSON object"),
			bad("PUT", size, `{"owner":"`+victimOwner+`","sizeBytes":-1}`, "sizeBytes must be positive"),
			bad("PUT", size, `{"owner":"`+victimOwner+`","sizeBytes":0}`, "sizeBytes must be positive"),
			bad("PUT", size, `{"owner":"`+victimOwner+`","sizeBytes":9223372036854775808}`, "cannot unmarshal"),
			bad("PUT", size, `{"owner":"`+victimOwner+`","sizeBytes":"1"}`, "cannot unmarshal"),
		)
		run(t, calls)
	})

	t.Run("oversized and malformed HTTP", func(t *testing.T) {
		// Each request would be a valid, authorised create of fresh but
		// for what is wrong with it.
		target := "/v1/pools/default/volumes/" + fresh
		head := "PUT " + target + " HTTP/1.1\r\nHost: manager\r\nAuthorization: Bearer " + allowed + "\r\n"
		withBody := func(headers, body string) string {
			return head + headers + fmt.Sprintf("Content-Length: %d\r\n\r\n%s", len(body), body)
		}
		// Valid JSON (whitespace is allowed anywhere), over the default
		// --max-body-bytes of 64 KiB.
		big := `{"owner":"pv-hostile"` + strings.Repeat(" ", 64<<10) + `}`
		before := hostileSnapshot(t, f, nodes)
		for _, tc := range []struct {
			name, request string
			code          int
			// reason is the JSON reason of an answer of the manager's
			// handler, "" for Go's plain-text answers.
			reason managerapi.Reason
			text   string
		}{
			{name: "body over the limit", request: withBody("", big), code: http.StatusRequestEntityTooLarge, reason: managerapi.ReasonRequestTooLarge, text: "over the limit"},
			{name: "chunked body over the limit", request: head + "Transfer-Encoding: chunked\r\n\r\n" + fmt.Sprintf("%x\r\n%s\r\n0\r\n\r\n", len(big), big),
				code: http.StatusRequestEntityTooLarge, reason: managerapi.ReasonRequestTooLarge, text: "over the limit"},
			{name: "malformed chunk", request: head + "Transfer-Encoding: chunked\r\n\r\nzz\r\n" + freshBody + "\r\n0\r\n\r\n",
				code: http.StatusBadRequest, reason: managerapi.ReasonBadRequest, text: "read request body"},
			{name: "a header of 80 KiB", request: withBody("X-Pad: "+strings.Repeat("a", 80<<10)+"\r\n", freshBody), code: http.StatusRequestHeaderFieldsTooLarge},
			{name: "3000 headers", request: withBody(strings.Repeat("X-Many: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\r\n", 3000), freshBody), code: http.StatusRequestHeaderFieldsTooLarge},
			{name: "negative Content-Length", request: head + "Content-Length: -1\r\n\r\n" + freshBody, code: http.StatusBadRequest},
			{name: "two Content-Lengths", request: withBody(fmt.Sprintf("Content-Length: %d\r\n", len(freshBody)+1), freshBody), code: http.StatusBadRequest},
			{name: "Content-Length not a number", request: head + "Content-Length: 1e3\r\n\r\n" + freshBody, code: http.StatusBadRequest},
			{name: "no Host", request: "PUT " + target + " HTTP/1.1\r\nAuthorization: Bearer " + allowed + "\r\n" + fmt.Sprintf("Content-Length: %d\r\n\r\n%s", len(freshBody), freshBody), code: http.StatusBadRequest},
			{name: "two Hosts", request: withBody("Host: other\r\n", freshBody), code: http.StatusBadRequest},
			{name: "space in a header name", request: withBody("Bad Header: x\r\n", freshBody), code: http.StatusBadRequest},
			{name: "NUL in a header value", request: withBody("X-Nul: a\x00b\r\n", freshBody), code: http.StatusBadRequest},
			{name: "garbage request line", request: "\x16\x03\x01garbage\r\n\r\n", code: http.StatusBadRequest},
			{name: "relative target", request: strings.Replace(withBody("", freshBody), "PUT /", "PUT ", 1), code: http.StatusBadRequest},
			{name: "invalid escape", request: strings.Replace(withBody("", freshBody), target, target+"%zz", 1), code: http.StatusBadRequest},
			{name: "NUL in the target", request: strings.Replace(withBody("", freshBody), target, target+"\x00", 1), code: http.StatusBadRequest},
			{name: "HTTP/9.9", request: strings.Replace(withBody("", freshBody), "HTTP/1.1", "HTTP/9.9", 1), code: http.StatusHTTPVersionNotSupported},
			{name: "unsupported transfer coding", request: head + "Transfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n", code: http.StatusNotImplemented},
			{name: "CONNECT to another port", request: "CONNECT 127.0.0.1:22 HTTP/1.1\r\nHost: 127.0.0.1:22\r\nAuthorization: Bearer " + allowed + "\r\n\r\n",
				code: http.StatusBadRequest, reason: managerapi.ReasonBadRequest, text: "is not clean"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				code, body := hostileRaw(ctx, t, base, tc.request)
				if tc.reason == "" {
					if code != tc.code {
						t.Errorf("Status %d, want %d; body %.200q", code, tc.code, body)
					}
					return
				}
				st := wantStatus(t, tc.name, code, body, tc.code, string(tc.reason))
				if !strings.Contains(st.Message, tc.text) {
					t.Errorf("Message %q does not say %q", st.Message, tc.text)
				}
			})
		}
		hostileCheckDisk(ctx, t, f, nodes, before, ns)
		victimIntact(t)
		freshAbsent(t)
	})

	t.Run("symlinks planted as pools under the pool root", func(t *testing.T) {
		// If followed, the first would put volumes in the manager's state
		// (and DELETE .../tls remove its key), the second in the default
		// pool.
		suffix := framework.RandomSuffix()
		targets := map[string]string{
			"e2e-hostile-" + suffix + "-abs": localcluster.StatePath,
			"e2e-hostile-" + suffix + "-rel": "../hpvolumes",
		}
		links := map[string]string{}
		for name, target := range targets {
			link := f.MustNodeDir(t, node, path.Join(localcluster.PoolRootPath, name))
			if err := os.MkdirAll(filepath.Dir(link), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(target, link); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = os.Remove(link) })
			links[name] = link
		}
		before := hostileSnapshot(t, f, nodes)
		for name, target := range targets {
			for _, c := range []call{
				{method: "PUT", path: "/v1/pools/" + name},
				{method: "PUT", path: "/v1/pools/" + name + "/volumes/" + fresh, body: freshBody},
				{method: "GET", path: "/v1/pools/" + name + "/volumes"},
				{method: "DELETE", path: "/v1/pools/" + name + "/volumes/tls?owner=pv-hostile"},
				{method: "DELETE", path: "/v1/pools/" + name + "/volumes/" + victim.name + "?owner=" + victimOwner},
			} {
				code, body := callManager(ctx, t, c.method, base, c.path, allowed, c.body)
				st := wantStatus(t, c.method+" "+c.path, code, body, http.StatusConflict, string(managerapi.ReasonConflict))
				if !strings.Contains(st.Message, "not a directory") {
					t.Errorf("%s %s: message %q does not say the pool is not a directory", c.method, c.path, st.Message)
				}
			}
			if got, err := os.Readlink(links[name]); err != nil || got != target {
				t.Errorf("The planted symlink %s now points at %q (%v), want %q", links[name], got, err, target)
			}
		}
		hostileCheckDisk(ctx, t, f, nodes, before, ns)
		victimIntact(t)
		freshAbsent(t)
	})

	t.Run("without credentials or permission", func(t *testing.T) {
		newPool := "e2e-hostile-" + framework.RandomSuffix()
		vol := "/v1/pools/default/volumes/" + victim.name
		var calls []call
		for _, cred := range []struct {
			token  string
			code   int
			reason managerapi.Reason
		}{
			{"", http.StatusUnauthorized, managerapi.ReasonUnauthorized},
			{"junk-" + framework.RandomSuffix(), http.StatusUnauthorized, managerapi.ReasonUnauthorized},
			{plain, http.StatusUnauthorized, managerapi.ReasonUnauthorized},
			{denied, http.StatusForbidden, managerapi.ReasonForbidden},
		} {
			for _, c := range []call{
				{method: "PUT", path: "/v1/pools/default/volumes/" + fresh, body: freshBody},
				{method: "DELETE", path: vol + "?owner=" + victimOwner},
				{method: "PUT", path: vol + "/owner", body: `{"owner":"pv-attacker","previous":"` + victimOwner + `"}`},
				{method: "PUT", path: vol + "/size", body: `{"owner":"` + victimOwner + `","sizeBytes":1048576}`},
				{method: "GET", path: "/v1/pools/default/volumes"},
				{method: "PUT", path: "/v1/pools/" + newPool},
			} {
				c.token, c.code, c.reason = cred.token, cred.code, cred.reason
				calls = append(calls, c)
			}
		}
		run(t, calls)
		// Basic authentication is no bearer token.
		req, err := http.NewRequestWithContext(ctx, http.MethodDelete, base+vol+"?owner="+victimOwner, nil)
		if err != nil {
			t.Fatal(err)
		}
		req.SetBasicAuth("admin", "admin")
		resp, err := managerHTTP(t, base).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		wantStatus(t, "DELETE with Basic authentication", resp.StatusCode, body, http.StatusUnauthorized, string(managerapi.ReasonUnauthorized))
		victimIntact(t)
		for _, n := range nodes {
			p := f.MustNodeDir(t, n, path.Join(localcluster.PoolRootPath, newPool))
			if _, err := os.Lstat(p); !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("Pool directory %s appeared on %s: %v", newPool, n, err)
			}
		}
	})
}

// TestHostileManagerSlowClients: 40 TLS connections that send their
// headers one byte every 100 ms (more than --max-in-flight-per-address)
// and 8 that never start the TLS handshake, all from this machine, do not
// stop a normal caller from the same address (each call answers 200; their
// latencies are printed, not asserted), and the manager closes every one
// of them (--read-header-timeout, 10 s, also bounds the handshake: the
// behaviour under test is that timeout, given a generous margin).
func TestHostileManagerSlowClients(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	f := framework.Cluster()
	nodes := f.TwoRealNodes(ctx, t)
	ns := f.Namespace(ctx, t)
	base := managerPods(ctx, t, f, nodes)[nodes[0]]
	token := roleToken(ctx, t, f, ns, "caller", managerapi.AdminClusterRole)
	waitAllowed(ctx, t, base, token, "the caller to be allowed")
	addr := strings.TrimPrefix(base, "https://")
	cfg := managerHTTP(t, base).Transport.(*http.Transport).TLSClientConfig.Clone()

	type closed struct {
		what  string
		after time.Duration
		read  int64
		err   error
	}
	const total = hostileSlowHeaders + hostileStalledHandshakes
	results := make(chan closed, total)
	// watch reports when the server closes c: its read ends (EOF, or a
	// reset) before the deadline.
	watch := func(what string, c net.Conn) {
		opened := time.Now()
		t.Cleanup(func() { _ = c.Close() })
		if err := c.SetReadDeadline(opened.Add(hostileSlowBound + 5*time.Second)); err != nil {
			t.Fatal(err)
		}
		go func() {
			n, err := io.Copy(io.Discard, c)
			results <- closed{what: what, after: time.Since(opened), read: n, err: err}
		}()
	}
	var slow []net.Conn
	for i := range hostileSlowHeaders {
		c, err := (&tls.Dialer{Config: cfg}).DialContext(ctx, "tcp", addr)
		if err != nil {
			t.Fatalf("TLS to %s: %v", addr, err)
		}
		if _, err := io.WriteString(c, "GET /v1/host HTTP/1.1\r\nHost: manager\r\nX-Slow: "); err != nil {
			t.Fatal(err)
		}
		slow = append(slow, c)
		watch(fmt.Sprintf("slow headers #%d", i), c)
	}
	for i := range hostileStalledHandshakes {
		c, err := (&net.Dialer{}).DialContext(ctx, "tcp", addr)
		if err != nil {
			t.Fatalf("TCP to %s: %v", addr, err)
		}
		watch(fmt.Sprintf("stalled handshake #%d", i), c)
	}
	// The attack: one more byte of header on every slow connection every
	// 100 ms.
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				for _, c := range slow {
					_ = c.SetWriteDeadline(time.Now().Add(time.Second))
					_, _ = c.Write([]byte("a"))
				}
			}
		}
	}()

	// A normal caller, every 500 ms, until the manager has closed them all.
	legit := time.NewTicker(500 * time.Millisecond)
	defer legit.Stop()
	bound := time.NewTimer(hostileSlowBound)
	defer bound.Stop()
	var got []closed
	var lat []time.Duration
	calls, callsWhileAllOpen := 0, -1
	for len(got) < total {
		select {
		case r := <-results:
			if callsWhileAllOpen < 0 {
				callsWhileAllOpen = calls
			}
			got = append(got, r)
		case <-legit.C:
			cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			start := time.Now()
			code, body := callManager(cctx, t, "GET", base, "/v1/host", token, "")
			lat = append(lat, time.Since(start))
			cancel()
			calls++
			if code != http.StatusOK {
				t.Errorf("Normal call %d while slow clients hold connections: %d, want 200; body %.200s", calls, code, body)
			}
		case <-bound.C:
			t.Fatalf("After %v, the manager still holds %d of the %d slow connections open", hostileSlowBound, total-len(got), total)
		}
	}
	if callsWhileAllOpen < 3 {
		t.Errorf("Only %d normal calls were made while every slow connection was open, want at least 3", callsWhileAllOpen)
	}
	var first, last time.Duration
	for i, r := range got {
		if errors.Is(r.err, os.ErrDeadlineExceeded) {
			t.Errorf("%s: not closed by the manager within %v", r.what, hostileSlowBound+5*time.Second)
		}
		if r.read > 0 {
			t.Logf("%s: the manager answered %d bytes before closing", r.what, r.read)
		}
		if i == 0 || r.after < first {
			first = r.after
		}
		last = max(last, r.after)
	}
	p50, p99, worst := percentiles(lat)
	t.Logf("The manager closed the %d slow connections after %v to %v; %d normal calls, %d of them while all were open, p50 %v, p99 %v, max %v",
		total, first.Round(time.Millisecond), last.Round(time.Millisecond), calls, callsWhileAllOpen, p50, p99, worst)
}

// TestHostilePodSymlinks: a pod plants, in its own volume, symlinks to /,
// to the pool (absolute and relative), to another claim's directory
// (absolute and relative), to the manager's state, to the pool root, to a
// directory of this machine outside every pool, and deeper ones, plus a
// FIFO and an unreadable directory; deleting the claim removes the volume
// and follows none of them: the other claim's file and owner record, the
// manager's host ID, the directory of this machine and the pools stay.
func TestHostilePodSymlinks(t *testing.T) {
	ctx := t.Context()
	e := setupProvisioner(ctx, t)
	node := e.nodes[0]
	pinned := map[string]string{annProvisionOnNode: node}

	victimPV, victimDir, keep := e.victim(ctx, t, node)
	// A directory of this machine, outside every pool, which the nodes
	// see at the same path.
	sentinel := t.TempDir()
	sentinelFiles := map[string]string{"a.txt": "sentinel a\n", "sub/b.txt": "sentinel b\n"}
	for name, content := range sentinelFiles {
		filetest.Write(t, filepath.Join(sentinel, name), content)
	}
	hostIDFile := e.f.MustNodeDir(t, node, path.Join(localcluster.StatePath, "host-id"))
	hostID, err := os.ReadFile(hostIDFile)
	if err != nil {
		t.Fatal(err)
	}
	before := hostileSnapshot(t, e.f, e.nodes)

	e.claim(ctx, t, "attacker", classImmediate, "1Mi", corev1.ReadWriteOnce, pinned)
	_, attackerPV := e.waitBound(ctx, t, "attacker")
	links := map[string]string{
		"root":                             "/",
		"pool":                             localcluster.PoolPath,
		"pool-up":                          "..",
		"victim":                           localcluster.PoolPath + "/" + victimDir,
		"victim-up":                        "../" + victimDir,
		"state":                            localcluster.StatePath,
		"pools":                            localcluster.PoolRootPath,
		"sentinel":                         sentinel,
		"passwd":                           "/etc/passwd",
		"d/e/f/up":                         "../../../..",
		"d/e/f/root":                       "/",
		"d/e/f/victim":                     "../../../../" + victimDir,
		".hostpath-rm-0000000000000000":    "/",
		".hostpath-rm-dir/root":            "/",
		"locked/victim":                    "../../" + victimDir,
		".hostpath/owners/" + victimDir:    "/",
		"victim-named/" + victimDir + "/x": "/",
	}
	script := []string{"set -e", "mkdir -p /data/d/e/f /data/.hostpath-rm-dir /data/locked /data/.hostpath/owners /data/victim-named/" + victimDir}
	names := make([]string, 0, len(links))
	for name := range links {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		script = append(script, fmt.Sprintf("ln -s '%s' '/data/%s'", links[name], name))
	}
	script = append(script, "mkfifo /data/fifo", "chmod 000 /data/locked", "echo planted")
	pod := writerPod(e.ns, "planter", node, "attacker", strings.Join(script, "\n"))
	if _, err := e.f.Client.CoreV1().Pods(e.ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.f.WaitForPodSucceeded(ctx, t, e.ns, pod.Name, provisionTimeout)
	for _, name := range names {
		p := e.nodePath(t, node, attackerPV, name)
		if got, err := os.Readlink(p); err != nil || got != links[name] {
			t.Fatalf("The pod's symlink %s = %q, %v; want it to point at %q", p, got, err, links[name])
		}
	}

	e.deleteAndWaitGone(ctx, t, pod.Name, "attacker")
	dir := e.nodePath(t, node, attackerPV)
	framework.WaitFor(ctx, t, provisionTimeout, "the PV and directory "+dir+" to be deleted", func(ctx context.Context) (bool, error) {
		if _, err := e.f.Client.CoreV1().PersistentVolumes().Get(ctx, attackerPV.Name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			return false, fmt.Errorf("PV %s still exists (%v)", attackerPV.Name, err)
		}
		if _, err := os.Lstat(dir); !errors.Is(err, fs.ErrNotExist) {
			return false, fmt.Errorf("directory still there (%v)", err)
		}
		return true, nil
	})

	for name, content := range sentinelFiles {
		p := filepath.Join(sentinel, name)
		if data, err := os.ReadFile(p); err != nil || string(data) != content {
			t.Errorf("Sentinel %s = %q, %v; want %q", p, data, err, content)
		}
	}
	e.checkVictim(t, node, victimPV, keep)
	if data, err := os.ReadFile(hostIDFile); err != nil || string(data) != string(hostID) {
		t.Errorf("The manager's host ID %s = %q, %v; want %q", hostIDFile, data, err, hostID)
	}
	for _, p := range []string{"/etc/passwd", "/usr/bin"} {
		if _, err := os.Stat(p); err != nil {
			t.Errorf("%s on this machine: %v", p, err)
		}
	}
	hostileCheckDisk(ctx, t, e.f, e.nodes, before, e.ns)
}
