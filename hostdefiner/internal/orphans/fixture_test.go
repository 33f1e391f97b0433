package orphans

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	storagehelpers "k8s.io/component-helpers/storage/volume"

	hostpathv1 "hostpath.dev/api/hostpath/v1"
	"hostpath.dev/api/managerapi"
)

const testProvisioner = hostpathv1.DefaultProvisionerName

// testNames are the provisioner names the tests compare.
var testNames = hostpathv1.NewProvisionerNames(testProvisioner)

// since is the time of every owner record of the tests.
var since = time.Date(2026, 11, 23, 5, 41, 3, 0, time.UTC)

// nodePV is a node-mode PV of provisioner on node, for pool/dir, made for
// claim ns/<name>.
func nodePV(provisioner, name, node, pool, dir string) corev1.PersistentVolume {
	return corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID("uid-" + name), Annotations: map[string]string{
		storagehelpers.AnnDynamicallyProvisioned: provisioner, hostpathv1.AnnotationMode: hostpathv1.ModeNode,
		hostpathv1.AnnotationNode: node, hostpathv1.AnnotationPool: pool, hostpathv1.AnnotationDirectory: dir,
		hostpathv1.AnnotationClaimNamespace: "ns", hostpathv1.AnnotationClaimName: "claim-" + name,
	}}}
}

// multihostPV is a multihost PV of the test provisioner for pool/dir on
// nodes, pending on pending.
func multihostPV(name, pool, dir string, nodes, pending []string) corev1.PersistentVolume {
	pv := corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID("uid-" + name), Annotations: map[string]string{
		storagehelpers.AnnDynamicallyProvisioned: testProvisioner, hostpathv1.AnnotationMode: hostpathv1.ModeMultihost,
		hostpathv1.AnnotationPool: pool, hostpathv1.AnnotationDirectory: dir,
		hostpathv1.AnnotationNodes: hostpathv1.JoinNodes(nodes),
	}}}
	if len(pending) > 0 {
		pv.Annotations[hostpathv1.AnnotationPendingNodes] = hostpathv1.JoinNodes(pending)
	}
	pv.Spec.ClaimRef = &corev1.ObjectReference{Namespace: "ns", Name: "claim-" + name}
	return pv
}

// vol is a directory owned by owner ("" for none) since since.
func vol(name, owner string) managerapi.Volume {
	v := managerapi.Volume{Name: name, Pool: "default", Mode: "0777", Owner: owner}
	if owner != "" {
		v.OwnedSince = &since
	}
	return v
}

// withPolicy returns v with a reclaim policy and retained mark.
func withPolicy(v managerapi.Volume, policy string, retained bool) managerapi.Volume {
	v.ReclaimPolicy, v.Retained = policy, retained
	return v
}

// lines renders findings as "node pool dir kind pv: detail" lines, "-" for
// empty fields.
func lines(fs []Finding) []string {
	out := []string{}
	for _, f := range fs {
		out = append(out, fmt.Sprintf("%s %s %s %s %s: %s", dash(f.Node), dash(f.Pool), dash(f.Directory), f.Kind, dash(f.PV), f.Detail))
	}
	return out
}

// checkLines compares findings with want, each want line being a prefix of
// (or equal to) its finding's line.
func checkLines(t *testing.T, got []Finding, want []string) {
	t.Helper()
	g := lines(got)
	ok := len(g) == len(want)
	for i := 0; ok && i < len(g); i++ {
		ok = strings.HasPrefix(g[i], want[i])
	}
	if !ok {
		t.Errorf("Findings:\n  %s\nwant (prefixes):\n  %s", strings.Join(g, "\n  "), strings.Join(want, "\n  "))
	}
}

// fakeManager is a Manager that answers from memory.
type fakeManager struct {
	// pools are the volumes of each pool; a pool not in it is NotFound.
	pools map[string][]managerapi.Volume
	// hostPools are the pools GET /v1/host names.
	hostPools []string
	// hostErr fails GET /v1/host; poolErr fails the listing of a pool.
	hostErr error
	poolErr map[string]error
	// onHost runs at GET /v1/host (to change the cluster meanwhile).
	onHost func()

	mu     sync.Mutex
	listed []string
}

func (m *fakeManager) Host(context.Context) (*managerapi.Host, error) {
	if m.onHost != nil {
		m.onHost()
	}
	if m.hostErr != nil {
		return nil, m.hostErr
	}
	h := &managerapi.Host{}
	for _, p := range m.hostPools {
		h.Pools = append(h.Pools, managerapi.Pool{Name: p})
	}
	return h, nil
}

func (m *fakeManager) ListVolumes(_ context.Context, pool string) (*managerapi.VolumeList, error) {
	m.mu.Lock()
	m.listed = append(m.listed, pool)
	m.mu.Unlock()
	if err := m.poolErr[pool]; err != nil {
		return nil, err
	}
	vols, ok := m.pools[pool]
	if !ok {
		return nil, fmt.Errorf("GET /v1/pools/%s/volumes: %w", pool, managerapi.Errorf(managerapi.ReasonNotFound, "pool %q not found", pool))
	}
	return &managerapi.VolumeList{Items: slices.Clone(vols)}, nil
}

// Errors of managers: a bad token, a refused connection.
var (
	errUnauthorized = fmt.Errorf("GET /v1/pools/fast/volumes: %w", managerapi.Errorf(managerapi.ReasonUnauthorized, "token rejected"))
	errRefused      = errors.New("dial tcp 10.0.0.3:8443: connect: connection refused")
)
