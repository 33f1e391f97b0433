package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"hostpath.dev/api/managerapi"
	"hostpath.dev/e2e/framework"
	"hostpath.dev/e2e/internal/btrfs"
)

const (
	// classBtrfs is the StorageClass of the btrfs variant
	// (manifests/components/btrfs): pool btrfs, enforceSize, expansion.
	classBtrfs = "hostpath-btrfs"
	// poolBtrfs is its pool, which scripts/quota-pool.sh mounts.
	poolBtrfs = "btrfs"
	// annSizeEnforcement is the PV annotation saying how the size is
	// enforced.
	annSizeEnforcement = "hostpath.dev/size-enforcement"
	// annSizeUsed is the PV annotation saying what the volume uses.
	annSizeUsed = "hostpath.dev/size-used"
)

// quotaPool mounts a pool on a filesystem of type fs (btrfs, xfs, ext4),
// named fs, on every real node for the test (scripts/quota-pool.sh up) and
// removes it when the test ends, after everything the test made (so call
// it before making anything).
func quotaPool(ctx context.Context, t *testing.T, f *framework.Framework, fs string) {
	t.Helper()
	if out, err := runScript(ctx, f, "quota-pool.sh", "up", "--fs", fs); err != nil {
		t.Fatalf("scripts/quota-pool.sh up --fs %s: %v\n%s", fs, err, out)
	}
	t.Cleanup(func() {
		cctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if out, err := runScript(cctx, f, "quota-pool.sh", "down", "--fs", fs); err != nil {
			t.Errorf("scripts/quota-pool.sh down --fs %s: %v\n%s", fs, err, out)
		}
	})
}

// levelOneQgroups counts the level-1 qgroups of every btrfs filesystem of
// this machine (the manager makes one per volume of a btrfs pool): the
// leak check.
func levelOneQgroups(t *testing.T) []string {
	t.Helper()
	dirs, err := filepath.Glob("/sys/fs/btrfs/*/qgroups/1_*")
	if err != nil {
		t.Fatal(err)
	}
	return dirs
}

// TestSizesBtrfs: on a pool on btrfs with simple quotas, a claim's size is
// its volume's limit. A pod writing past it gets EDQUOT while another
// volume of the pool on the same node keeps writing; expanding the claim lets
// the pod write further (claim and PV capacities follow, an event says
// so); a subvolume made inside the volume counts against the same limit;
// shrinking is refused; a claim that does not fit gets an event
// naming the node and the figures; the manager reports limit and usage in
// its API and metrics; deleting the claims removes the subvolumes and
// their qgroups.
func TestSizesBtrfs(t *testing.T) {
	ctx := t.Context()
	e := setupProvisioner(ctx, t)
	if _, err := e.f.Client.StorageV1().StorageClasses().Get(ctx, classBtrfs, metav1.GetOptions{}); err != nil {
		t.Fatalf("StorageClass %s (the btrfs variant, which the suite installs): %v", classBtrfs, err)
	}
	quotaPool(ctx, t, e.f, poolBtrfs)
	qgroupsBefore := levelOneQgroups(t)

	// Two claims used by one pod, so both are on the same node.
	small := e.claim(ctx, t, "small", classBtrfs, "16Mi", corev1.ReadWriteOnce, nil)
	other := e.claim(ctx, t, "other", classBtrfs, "16Mi", corev1.ReadWriteOnce, nil)
	pod := twoVolumePod(e.ns, "fill", "", small.Name, other.Name,
		"dd if=/dev/zero of=/a/f bs=1M count=32 conv=fsync 2>&1; echo a=$?; dd if=/dev/zero of=/b/f bs=1M count=8 conv=fsync 2>&1; echo b=$?")
	if _, err := e.f.Client.CoreV1().Pods(e.ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	done := e.f.WaitForPodSucceeded(ctx, t, e.ns, pod.Name, provisionTimeout)
	node := done.Spec.NodeName
	logs, err := e.f.PodLogs(ctx, e.ns, pod.Name, "main")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(logs, "Disk quota exceeded") || !strings.Contains(logs, "a=1") || !strings.Contains(logs, "b=0") {
		t.Fatalf("Pod output %q: want dd into the 16Mi volume to fail with Disk quota exceeded (a=1) and into the other to succeed (b=0)", logs)
	}
	_, smallPV := e.waitBound(ctx, t, small.Name)
	_, otherPV := e.waitBound(ctx, t, other.Name)
	for _, pv := range []*corev1.PersistentVolume{smallPV, otherPV} {
		if got := pv.Annotations[annSizeEnforcement]; got != managerapi.EnforcementBtrfs {
			t.Errorf("PV %s: %s = %q, want %q", pv.Name, annSizeEnforcement, got, managerapi.EnforcementBtrfs)
		}
	}
	// What the disk holds, seen from this machine.
	if fi, err := os.Stat(e.nodePath(t, node, smallPV, "f")); err != nil || fi.Size() > 16<<20 || fi.Size() < 8<<20 {
		t.Errorf("File in the 16Mi volume: %v, %v; want between 8Mi and 16Mi", fileSize(fi), err)
	}
	if fi, err := os.Stat(e.nodePath(t, node, otherPV, "f")); err != nil || fi.Size() != 8<<20 {
		t.Errorf("File in the other volume: %v, %v; want 8Mi", fileSize(fi), err)
	}

	t.Run("the manager reports limit and usage", func(t *testing.T) {
		urls := managerPods(ctx, t, e.f, []string{node})
		token := roleToken(ctx, t, e.f, e.ns, "sizes", managerapi.AdminClusterRole)
		waitAllowed(ctx, t, urls[node], token, "GET /v1/host to be allowed")
		code, body := callManager(ctx, t, "GET", urls[node], "/v1/pools/"+poolBtrfs+"/volumes/"+smallPV.Annotations[annPVDirectory], token, "")
		var v managerapi.Volume
		if code != http.StatusOK || json.Unmarshal(body, &v) != nil {
			t.Fatalf("GET the volume: %d %s", code, body)
		}
		if v.SizeBytes != 16<<20 || v.Enforcement != managerapi.EnforcementBtrfs || v.UsedBytes == nil || *v.UsedBytes < 8<<20 {
			t.Errorf("Volume = %s; want sizeBytes 16Mi, enforcement btrfs, usedBytes at least 8Mi", body)
		}
		code, body = callManager(ctx, t, "GET", urls[node], "/v1/host", token, "")
		var h managerapi.Host
		if code != http.StatusOK || json.Unmarshal(body, &h) != nil {
			t.Fatalf("GET /v1/host: %d %s", code, body)
		}
		var pool *managerapi.Pool
		for i := range h.Pools {
			if h.Pools[i].Name == poolBtrfs {
				pool = &h.Pools[i]
			}
		}
		if pool == nil || pool.Enforcement != managerapi.EnforcementBtrfs || pool.PromisedBytes < 32<<20 || pool.AvailableBytes <= 0 {
			t.Errorf("Pool %s in /v1/host = %+v; want enforcement btrfs, at least 32Mi promised, some available", poolBtrfs, pool)
		}
		// The usage figures are refreshed every --usage-metrics-interval
		// (5s in e2e/install), not at each scrape.
		want := fmt.Sprintf(`hostpath_manager_volume_used_bytes{pool=%q,volume=%q}`, poolBtrfs, smallPV.Annotations[annPVDirectory])
		scrapeToken := metricsToken(ctx, t, e.f)
		framework.WaitFor(ctx, t, provisionTimeout, "/metrics of the manager on "+node+" to show "+want, func(ctx context.Context) (bool, error) {
			return strings.Contains(scrapeOK(ctx, t, healthURL(urls[node])+"/metrics", scrapeToken), want), nil
		})
	})

	t.Run("a volume past 90% of its limit gets a health event", func(t *testing.T) {
		e.waitEvent(ctx, t, small.Name, corev1.EventTypeWarning, eventUsageHigh, node)
		series := fmt.Sprintf(`hostpath_provisioner_volume_used_bytes{namespace=%q,node=%q,persistentvolumeclaim=%q}`, e.ns, node, small.Name)
		framework.WaitFor(ctx, t, provisionTimeout, "the provisioner of "+node+" to export "+series, func(ctx context.Context) (bool, error) {
			return strings.Contains(e.get(ctx, t, node, "/metrics"), series), nil
		})
		if n := e.countEvents(ctx, t, other.Name, eventUsageHigh); n != 0 {
			t.Errorf("%d %s events on %s, which uses half its limit", n, eventUsageHigh, other.Name)
		}
	})

	t.Run("expansion lets the pod write further", func(t *testing.T) {
		resize(ctx, t, e, small.Name, "48Mi")
		framework.WaitFor(ctx, t, provisionTimeout, "claim "+small.Name+" to have capacity 48Mi", func(ctx context.Context) (bool, error) {
			c, err := e.f.Client.CoreV1().PersistentVolumeClaims(e.ns).Get(ctx, small.Name, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			got := c.Status.Capacity[corev1.ResourceStorage]
			if got.Cmp(resource.MustParse("48Mi")) != 0 {
				return false, fmt.Errorf("status.capacity is %s; %s", got.String(), e.f.EventReasons(ctx, e.ns, "PersistentVolumeClaim", small.Name))
			}
			for _, cond := range c.Status.Conditions {
				if cond.Type == corev1.PersistentVolumeClaimResizing && cond.Status == corev1.ConditionTrue {
					return false, errors.New("still Resizing")
				}
			}
			return true, nil
		})
		pv, err := e.f.Client.CoreV1().PersistentVolumes().Get(ctx, smallPV.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got := pv.Spec.Capacity[corev1.ResourceStorage]; got.Cmp(resource.MustParse("48Mi")) != 0 {
			t.Errorf("PV %s capacity = %s, want 48Mi", pv.Name, got.String())
		}
		e.waitEvent(ctx, t, small.Name, corev1.EventTypeNormal, "VolumeResizeSuccessful", "48Mi")
		more := writerPod(e.ns, "more", node, small.Name, "dd if=/dev/zero of=/data/g bs=1M count=24 conv=fsync 2>&1; echo rc=$?")
		if _, err := e.f.Client.CoreV1().Pods(e.ns).Create(ctx, more, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		e.f.WaitForPodSucceeded(ctx, t, e.ns, more.Name, provisionTimeout)
		if logs, err := e.f.PodLogs(ctx, e.ns, more.Name, "main"); err != nil || !strings.Contains(logs, "rc=0") {
			t.Errorf("Writing 24Mi more after expansion to 48Mi: %q, %v; want rc=0", logs, err)
		}
		if fi, err := os.Stat(e.nodePath(t, node, smallPV, "g")); err != nil || fi.Size() != 24<<20 {
			t.Errorf("File written after expansion: %v, %v; want 24Mi", fileSize(fi), err)
		}
	})

	t.Run("the PV shows the usage", func(t *testing.T) {
		// 16Mi (the first file) and 24Mi are written: btrfs counts them at
		// its next commit, the provisioner shows them at its next refresh.
		framework.WaitFor(ctx, t, provisionTimeout, "PV "+smallPV.Name+" to show at least 36Mi used", func(ctx context.Context) (bool, error) {
			pv, err := e.f.Client.CoreV1().PersistentVolumes().Get(ctx, smallPV.Name, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			v := pv.Annotations[annSizeUsed]
			used, err := resource.ParseQuantity(v)
			if err != nil || used.Cmp(resource.MustParse("36Mi")) < 0 {
				return false, fmt.Errorf("%s is %q", annSizeUsed, v)
			}
			return true, nil
		})
	})

	t.Run("a subvolume made inside counts against the limit", func(t *testing.T) {
		dir := e.nodePath(t, node, smallPV)
		if err := btrfs.CreateSubvolume(dir, "nested"); err != nil {
			t.Fatal(err)
		}
		// 16Mi + 24Mi are used of 48Mi: 16Mi more do not fit.
		err := writeZeros(filepath.Join(dir, "nested", "h"), 16<<20)
		if !errors.Is(err, syscall.EDQUOT) {
			t.Errorf("Writing 16Mi into a subvolume inside the volume (24Mi used of 48Mi): %v, want EDQUOT", err)
		}
	})

	t.Run("shrinking is refused", func(t *testing.T) {
		patch := []byte(`{"spec":{"resources":{"requests":{"storage":"8Mi"}}}}`)
		_, err := e.f.Client.CoreV1().PersistentVolumeClaims(e.ns).Patch(ctx, small.Name, types.MergePatchType, patch, metav1.PatchOptions{})
		if !apierrors.IsInvalid(err) && !apierrors.IsForbidden(err) {
			t.Errorf("Shrinking the claim to 8Mi: %v, want the API server to refuse it", err)
		}
	})

	t.Run("a claim that does not fit gets the figures", func(t *testing.T) {
		pinned := map[string]string{annProvisionOnNode: node}
		class := e.storageClass(ctx, t, "btrfs-now", storagev1.VolumeBindingImmediate, map[string]string{"pool": poolBtrfs, "enforceSize": "true"})
		big := e.claim(ctx, t, "too-big", class, "4Gi", corev1.ReadWriteOnce, pinned)
		e.waitEvent(ctx, t, big.Name, corev1.EventTypeWarning, eventProvisioningFail,
			fmt.Sprintf("pool %q on node %q has", poolBtrfs, node))
		ev := e.waitEvent(ctx, t, big.Name, corev1.EventTypeWarning, eventProvisioningFail, "4Gi requested")
		if !strings.Contains(ev.Message, "promised to") {
			t.Errorf("Event %q does not give the promised figure", ev.Message)
		}
		plain := e.storageClass(ctx, t, "default-enforced", storagev1.VolumeBindingImmediate, map[string]string{"enforceSize": "true"})
		unenforced := e.claim(ctx, t, "not-enforced", plain, "1Mi", corev1.ReadWriteOnce, pinned)
		e.waitEvent(ctx, t, unenforced.Name, corev1.EventTypeWarning, eventProvisioningFail, "does not enforce volume sizes")
		if entries := e.poolEntries(t, "not-enforced"); len(entries) != 0 {
			t.Errorf("Refused claim left directories %v", entries)
		}
	})

	// Deleting pods and claims removes the subvolumes and their qgroups.
	for _, p := range []string{"fill", "more"} {
		if err := e.f.Client.CoreV1().Pods(e.ns).Delete(ctx, p, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			t.Fatal(err)
		}
	}
	e.deleteAndWaitGone(ctx, t, "", small.Name)
	e.deleteAndWaitGone(ctx, t, "", other.Name)
	for _, pv := range []*corev1.PersistentVolume{smallPV, otherPV} {
		pv := pv
		framework.WaitFor(ctx, t, provisionTimeout, "PV "+pv.Name+" and its subvolume to be gone", func(ctx context.Context) (bool, error) {
			if _, err := e.f.Client.CoreV1().PersistentVolumes().Get(ctx, pv.Name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				return false, fmt.Errorf("PV still there (%v)", err)
			}
			if _, err := os.Lstat(e.nodePath(t, node, pv)); !errors.Is(err, os.ErrNotExist) {
				return false, fmt.Errorf("directory still there (%v)", err)
			}
			return true, nil
		})
	}
	if after := levelOneQgroups(t); len(after) != len(qgroupsBefore) {
		t.Errorf("Level-1 qgroups before the test %v, after deleting its volumes %v: want as many", qgroupsBefore, after)
	}
}

// twoVolumePod is a test tools pod with claim a at /a and claim b at /b.
func twoVolumePod(ns, name, node, a, b, command string) *corev1.Pod {
	p := framework.TestToolsPod(ns, name, node, command)
	for _, v := range []struct{ claim, dir string }{{a, "a"}, {b, "b"}} {
		p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: v.dir, VolumeSource: corev1.VolumeSource{
			PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: v.claim},
		}})
		p.Spec.Containers[0].VolumeMounts = append(p.Spec.Containers[0].VolumeMounts, corev1.VolumeMount{Name: v.dir, MountPath: "/" + v.dir})
	}
	return p
}

// resize sets the claim's storage request.
func resize(ctx context.Context, t *testing.T, e *provEnv, claim, size string) {
	t.Helper()
	patch := []byte(fmt.Sprintf(`{"spec":{"resources":{"requests":{"storage":%q}}}}`, size))
	if _, err := e.f.Client.CoreV1().PersistentVolumeClaims(e.ns).Patch(ctx, claim, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatalf("Resize claim %s to %s: %v", claim, size, err)
	}
}

// writeZeros writes n zero bytes to the new file path and syncs it.
func writeZeros(path string, n int) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	buf := make([]byte, 1<<20)
	for written := 0; written < n; written += len(buf) {
		if _, err := f.Write(buf); err != nil {
			f.Close()
			return err
		}
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// fileSize is fi's size for messages (-1 without fi).
func fileSize(fi os.FileInfo) int64 {
	if fi == nil {
		return -1
	}
	return fi.Size()
}

// runScript runs scripts/NAME with args and returns its standard output;
// its error carries the end of the standard error.
func runScript(ctx context.Context, f *framework.Framework, name string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, filepath.Join(f.RepoRoot, "scripts", name), args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("%w\n%s", err, tail(stderr.String(), 2000))
	}
	return stdout.String(), nil
}

// projectQuotaSupport returns why a filesystem of type fs (xfs, ext4)
// cannot be mounted with project quotas here, "" when it can: it makes one
// in a loop image and mounts it with prjquota, as scripts/quota-pool.sh
// does.
func projectQuotaSupport(ctx context.Context, t *testing.T, fs string) string {
	t.Helper()
	dir := t.TempDir()
	img, mnt := filepath.Join(dir, "fs.img"), filepath.Join(dir, "mnt")
	if err := os.Mkdir(mnt, 0o755); err != nil {
		t.Fatal(err)
	}
	mkfs := map[string][]string{"xfs": {"mkfs.xfs", "-q", "-f", img}, "ext4": {"mkfs.ext4", "-q", "-F", "-O", "project,quota", img}}[fs]
	if _, err := exec.LookPath(mkfs[0]); err != nil {
		return fmt.Sprintf("%s is not installed (scripts/ensure-packages.sh installs it)", mkfs[0])
	}
	if err := os.WriteFile(img, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(img, 300<<20); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.CommandContext(ctx, mkfs[0], mkfs[1:]...).CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", strings.Join(mkfs, " "), err, out)
	}
	out, err := exec.CommandContext(ctx, "mount", "-o", "loop,prjquota", img, mnt).CombinedOutput()
	if err != nil {
		return fmt.Sprintf("this kernel cannot mount %s with prjquota (a kernel without quota support refuses it): mount: %v: %s", fs, err, strings.TrimSpace(string(out)))
	}
	if out, err := exec.CommandContext(ctx, "umount", mnt).CombinedOutput(); err != nil {
		t.Fatalf("umount %s: %v\n%s", mnt, err, out)
	}
	return ""
}

// TestSizesProjectQuota: on a pool on XFS or ext4 mounted with prjquota,
// a claim's size is its volume's limit: a pod writing past it gets EDQUOT,
// another volume of the pool is unaffected, and deleting the claims removes
// the directories. Skips, saying why, where the kernel lacks quota support
// (this project's machines: the manager's project quota code is tested
// against a fake of the quota calls in manager/internal/quota).
func TestSizesProjectQuota(t *testing.T) {
	for _, fs := range []string{"xfs", "ext4"} {
		t.Run(fs, func(t *testing.T) {
			ctx := t.Context()
			if why := projectQuotaSupport(ctx, t, fs); why != "" {
				t.Skip(why)
			}
			e := setupProvisioner(ctx, t)
			quotaPool(ctx, t, e.f, fs)
			class := e.storageClass(ctx, t, fs, storagev1.VolumeBindingWaitForFirstConsumer, map[string]string{"pool": fs, "enforceSize": "true"})
			small := e.claim(ctx, t, "small", class, "16Mi", corev1.ReadWriteOnce, nil)
			other := e.claim(ctx, t, "other", class, "16Mi", corev1.ReadWriteOnce, nil)
			pod := twoVolumePod(e.ns, "fill", "", small.Name, other.Name,
				"dd if=/dev/zero of=/a/f bs=1M count=32 conv=fsync 2>&1; echo a=$?; dd if=/dev/zero of=/b/f bs=1M count=8 conv=fsync 2>&1; echo b=$?")
			if _, err := e.f.Client.CoreV1().Pods(e.ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			done := e.f.WaitForPodSucceeded(ctx, t, e.ns, pod.Name, provisionTimeout)
			logs, err := e.f.PodLogs(ctx, e.ns, pod.Name, "main")
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(logs, "Disk quota exceeded") || !strings.Contains(logs, "a=1") || !strings.Contains(logs, "b=0") {
				t.Fatalf("Pod output %q: want dd into the 16Mi volume to fail with Disk quota exceeded (a=1) and into the other to succeed (b=0)", logs)
			}
			_, pv := e.waitBound(ctx, t, small.Name)
			if got := pv.Annotations[annSizeEnforcement]; got != fs {
				t.Errorf("PV %s: %s = %q, want %q", pv.Name, annSizeEnforcement, got, fs)
			}
			e.deleteAndWaitGone(ctx, t, pod.Name, small.Name)
			e.deleteAndWaitGone(ctx, t, "", other.Name)
			framework.WaitFor(ctx, t, provisionTimeout, "the directory of "+pv.Name+" to be gone", func(ctx context.Context) (bool, error) {
				_, err := os.Lstat(e.nodePath(t, done.Spec.NodeName, pv))
				return errors.Is(err, os.ErrNotExist), nil
			})
		})
	}
}
