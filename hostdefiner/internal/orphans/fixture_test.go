package orphans

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	hostpathv1 "hostpath.dev/api/hostpath/v1"
	"hostpath.dev/api/hostpath/v1/hostpathtest"
	"hostpath.dev/api/managerapi"
)

const testProvisioner = hostpathv1.DefaultProvisionerName

// testNames are the provisioner names the tests compare.
var testNames = hostpathv1.NewProvisionerNames(testProvisioner)

// since is the time of every owner record of the tests.
var since = time.Date(2026, 11, 23, 5, 41, 3, 0, time.UTC)

// nodePV is a node-mode PV of provisioner on node, for pool/dir, made for
// claim ns/claim-<name>.
func nodePV(provisioner, name, node, pool, dir string) corev1.PersistentVolume {
	return *hostpathtest.NodePV(name, node, hostpathtest.ProvisionedBy(provisioner), hostpathtest.InPool(pool), hostpathtest.InDirectory(dir),
		hostpathtest.MadeFor("ns", "claim-"+name))
}

// multihostPV is a multihost PV of the test provisioner for pool/dir on
// nodes, pending on pending, bound to claim ns/claim-<name>.
func multihostPV(name, pool, dir string, nodes, pending []string) corev1.PersistentVolume {
	return *hostpathtest.MultihostPV(name, nodes, hostpathtest.InPool(pool), hostpathtest.InDirectory(dir), hostpathtest.PendingOn(pending...),
		hostpathtest.ClaimRef("ns", "claim-"+name))
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

// Errors of managers: a bad token, a refused connection.
var (
	errUnauthorized = fmt.Errorf("GET /v1/pools/fast/volumes: %w", managerapi.Errorf(managerapi.ReasonUnauthorized, "token rejected"))
	errRefused      = errors.New("dial tcp 10.0.0.3:8443: connect: connection refused")
)
