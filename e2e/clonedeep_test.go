package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"hostpath.dev/e2e/framework"
)

// deepNameBytes is the length of each directory name of the deep trees:
// the 250 bytes, so that a walker that kept whole paths would hold
// depth times 250 bytes per level.
const deepNameBytes = 250

// plantDeepTree makes a chain of depth directories under dir, each named
// with deepNameBytes bytes, the way a pod does it: each level made and
// entered relative to the one above (the whole path is far beyond
// PATH_MAX), with a small file at the bottom.
func plantDeepTree(t *testing.T, dir string, depth int) {
	t.Helper()
	fd, err := unix.Open(dir, unix.O_DIRECTORY|unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	for i := range depth {
		name := fmt.Sprintf("%04d-", i) + strings.Repeat("d", deepNameBytes-5)
		if err := unix.Mkdirat(fd, name, 0o755); err != nil {
			unix.Close(fd)
			t.Fatalf("mkdir level %d: %v", i, err)
		}
		next, err := unix.Openat(fd, name, unix.O_DIRECTORY|unix.O_RDONLY|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0)
		unix.Close(fd)
		if err != nil {
			t.Fatalf("open level %d: %v", i, err)
		}
		fd = next
	}
	defer unix.Close(fd)
	f, err := unix.Openat(fd, "bottom", unix.O_CREAT|unix.O_WRONLY|unix.O_CLOEXEC, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = unix.Write(f, []byte("bottom\n"))
	unix.Close(f)
}

// readDeepBottom reads the file "bottom" at the end of the chain of depth
// directories that plantDeepTree made under dir (one directory per level).
func readDeepBottom(dir string, depth int) (string, error) {
	fd, err := unix.Open(dir, unix.O_DIRECTORY|unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return "", err
	}
	for i := range depth {
		name := fmt.Sprintf("%04d-", i) + strings.Repeat("d", deepNameBytes-5)
		next, err := unix.Openat(fd, name, unix.O_DIRECTORY|unix.O_RDONLY|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0)
		unix.Close(fd)
		if err != nil {
			return "", fmt.Errorf("level %d: %w", i, err)
		}
		fd = next
	}
	defer unix.Close(fd)
	f, err := unix.Openat(fd, "bottom", unix.O_RDONLY|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0)
	if err != nil {
		return "", err
	}
	defer unix.Close(f)
	buf := make([]byte, 64)
	n, err := unix.Read(f, buf)
	if err != nil {
		return "", err
	}
	return string(buf[:n]), nil
}

// managerRestarts returns the restart count of node's manager pod, and the
// pod's UID (a new pod would restart the count).
func (e *provEnv) managerRestarts(ctx context.Context, t *testing.T, node string) (int32, string) {
	t.Helper()
	pods, err := e.f.Client.CoreV1().Pods(framework.SystemNamespace).List(ctx, metav1.ListOptions{
		LabelSelector: managerSelector, FieldSelector: "spec.nodeName=" + node})
	if err != nil || len(pods.Items) != 1 || len(pods.Items[0].Status.ContainerStatuses) == 0 {
		t.Fatalf("The manager pod of %s: %v, %d pods", node, err, len(pods.Items))
	}
	p := pods.Items[0]
	return p.Status.ContainerStatuses[0].RestartCount, string(p.UID)
}

// TestCloneDeepTree: a tenant's pod plants a chain of directories deeper
// than a clone by copy goes (docs/clones.md, "Limits"), with 250-byte
// names: the clone is refused with a Warning naming the limit, nothing is
// left of it in the pool, and the node's manager never restarts; a chain
// within the limit, as long in names, is cloned whole.
func TestCloneDeepTree(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	e := setupProvisioner(ctx, t)
	node := e.nodes[0]
	restarts, uid := e.managerRestarts(ctx, t, node)
	for _, tc := range []struct {
		name    string
		depth   int
		refused bool
	}{
		{name: "too-deep", depth: 1100, refused: true},
		{name: "deep", depth: 1000},
	} {
		src := e.claim(ctx, t, tc.name+"-source", classImmediate, "64Mi", corev1.ReadWriteOnce, map[string]string{annProvisionOnNode: node})
		_, srcPV := e.waitBound(ctx, t, src.Name)
		plantDeepTree(t, e.nodePath(t, node, srcPV), tc.depth)
		clone := e.cloneClaim(ctx, t, tc.name+"-copy", classImmediate, "64Mi", corev1.ReadWriteOnce, src.Name)
		if tc.refused {
			e.waitEvent(ctx, t, clone.Name, corev1.EventTypeWarning, eventProvisioningFail, "directories nest too deep")
			e.waitEvent(ctx, t, clone.Name, corev1.EventTypeWarning, eventProvisioningFail, "more than 1024 levels")
			if got := e.poolEntries(t, e.ns+"-"+clone.Name); len(got) > 0 {
				t.Errorf("What the refused clone left in the pools: %v", got)
			}
			continue
		}
		_, pv := e.waitBound(ctx, t, clone.Name)
		e.waitEvent(ctx, t, clone.Name, corev1.EventTypeNormal, reasonCloneFinished, "Cloned claim "+src.Name)
		if got, err := readDeepBottom(e.nodePath(t, node, pv), tc.depth); err != nil || got != "bottom\n" {
			t.Errorf("The clone's file %d levels down = %q, %v; want \"bottom\\n\"", tc.depth, got, err)
		}
		// The manager removes such a tree whole.
		e.deleteAndWaitGone(ctx, t, "", clone.Name)
		e.waitGoneEverywhere(ctx, t, pv)
	}
	if now, nowUID := e.managerRestarts(ctx, t, node); now != restarts || nowUID != uid {
		t.Errorf("The manager of %s restarted during the clones: %d restarts (pod %s), before %d (pod %s)", node, now, nowUID, restarts, uid)
	}
}
