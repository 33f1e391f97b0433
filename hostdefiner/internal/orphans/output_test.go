package orphans

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	hostpathv1 "hostpath.dev/api/hostpath/v1"
	"hostpath.dev/api/managerapi"
)

// sampleReport is a report with one finding of each kind (the example of
// docs/kubectl-hostpath.md).
func sampleReport() *Report {
	pvs := []corev1.PersistentVolume{
		nodePV(testProvisioner, "pvc-5b0c7e21", "hostpath-node-1", "default", "team-a-data-pvc-5b0c7e21"),
		multihostPV("pvc-b7fb56e2", "default", "team-a-cache-pvc-b7fb56e2", []string{"hostpath-node-1"}, []string{"hostpath-node-2"}),
	}
	pvs[0].Annotations[hostpathv1.AnnotationClaimNamespace], pvs[0].Annotations[hostpathv1.AnnotationClaimName] = "team-a", "data"
	pvs[1].Spec.ClaimRef.Namespace, pvs[1].Spec.ClaimRef.Name = "team-a", "cache"
	listings := []NodeListing{
		listed("hostpath-node-1", map[string][]managerapi.Volume{"default": {
			vol("team-a-cache-pvc-b7fb56e2", "pvc-b7fb56e2"),
			withPolicy(vol("team-b-old-pvc-0f3d9a10", "pvc-0f3d9a10"), managerapi.ReclaimDelete, false),
			withPolicy(vol("team-c-db-pvc-77aa01c2", "pvc-77aa01c2"), managerapi.ReclaimRetain, true),
		}}),
		listed("hostpath-node-2", map[string][]managerapi.Volume{"default": nil}),
		{Node: "hostpath-node-3", Err: errRefused},
	}
	r := &Report{
		Provisioner: testNames.String(), Namespace: DefaultNamespace,
		Token:    "a TokenRequest for service account hostpath-system/hostpath-orphans (audience hostpath.dev/manager, 10m0s)",
		Findings: Classify(testNames, pvs, pvs, listings),
		Nodes: []NodeSummary{
			{Node: "hostpath-node-1", Address: "198.18.1.2:8443", Pools: []string{"default"}},
			{Node: "hostpath-node-2", Address: "198.18.2.2:8443", Pools: []string{"default"}},
			{Node: "hostpath-node-3", Error: errRefused.Error()},
		},
	}
	r.count()
	return r
}

func TestWriteTable(t *testing.T) {
	var b bytes.Buffer
	if err := Write(&b, sampleReport(), OutputTable); err != nil {
		t.Fatal(err)
	}
	want := `Provisioners hostpath.dev/provisioner, hostpath.dev; managers in namespace hostpath-system; token: a TokenRequest for service account hostpath-system/hostpath-orphans (audience hostpath.dev/manager, 10m0s)
NODE             POOL     DIRECTORY                  FINDING      DETAIL
hostpath-node-1  default  team-a-data-pvc-5b0c7e21   missing      PV pvc-5b0c7e21 (claim team-a/data), node mode: the node has no directory
hostpath-node-1  default  team-b-old-pvc-0f3d9a10    orphan       owner pvc-0f3d9a10 (no such PV), ownedSince 2026-11-23T05:41:03Z, reclaimPolicy Delete
hostpath-node-1  default  team-c-db-pvc-77aa01c2     retained     owner pvc-77aa01c2 (no such PV), ownedSince 2026-11-23T05:41:03Z, retained, reclaimPolicy Retain
hostpath-node-2  default  team-a-cache-pvc-b7fb56e2  pending      PV pvc-b7fb56e2 (claim team-a/cache), multihost: the node is in hostpath.dev/pending-nodes and has not got the directory yet
hostpath-node-3  -        -                          unreachable  dial tcp 10.0.0.3:8443: connect: connection refused
5 findings (1 orphan, 1 retained, 1 missing, 1 pending, 1 unreachable) on 3 nodes (1 unreachable), pool default. Nothing was deleted.
`
	if got := b.String(); got != want {
		t.Errorf("Table:\n%s\nwant:\n%s", got, want)
	}
	t.Logf("Sample output:\n%s", b.String())
}

func TestWriteNothingFound(t *testing.T) {
	var b bytes.Buffer
	r := &Report{Provisioner: testNames.String(), Namespace: DefaultNamespace, Token: "the file /t",
		Nodes: []NodeSummary{{Node: "n1", Pools: []string{"default", "fast"}}, {Node: "n2", Pools: []string{"default"}}}}
	r.count()
	if err := Write(&b, r, OutputTable); err != nil {
		t.Fatal(err)
	}
	want := "Provisioners hostpath.dev/provisioner, hostpath.dev; managers in namespace hostpath-system; token: the file /t\n" +
		"Nothing found on 2 nodes, pools default, fast.\n"
	if got := b.String(); got != want {
		t.Errorf("Output %q, want %q", got, want)
	}
}

func TestWriteJSON(t *testing.T) {
	var b bytes.Buffer
	if err := Write(&b, sampleReport(), OutputJSON); err != nil {
		t.Fatal(err)
	}
	// What scripts read, by the documented keys.
	var r struct {
		Token    string `json:"token"`
		Findings []struct {
			Node, Pool, Directory, Finding, PV, Claim, Owner, OwnedSince, ReclaimPolicy, Error string
			Retained                                                                           bool
		} `json:"findings"`
		Counts map[string]int `json:"counts"`
	}
	if err := json.Unmarshal(b.Bytes(), &r); err != nil {
		t.Fatalf("Not JSON: %v\n%s", err, b.String())
	}
	var got []string
	for _, f := range r.Findings {
		got = append(got, strings.Join([]string{f.Node, f.Pool, f.Directory, f.Finding, f.PV, f.Claim, f.Owner, f.OwnedSince, f.ReclaimPolicy, f.Error}, "|"))
	}
	want := []string{
		"hostpath-node-1|default|team-a-data-pvc-5b0c7e21|missing|pvc-5b0c7e21|team-a/data||||",
		"hostpath-node-1|default|team-b-old-pvc-0f3d9a10|orphan|||pvc-0f3d9a10|2026-11-23T05:41:03Z|Delete|",
		"hostpath-node-1|default|team-c-db-pvc-77aa01c2|retained|||pvc-77aa01c2|2026-11-23T05:41:03Z|Retain|",
		"hostpath-node-2|default|team-a-cache-pvc-b7fb56e2|pending|pvc-b7fb56e2|team-a/cache||||",
		"hostpath-node-3|||unreachable||||||dial tcp 10.0.0.3:8443: connect: connection refused",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("Findings:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if !r.Findings[2].Retained || r.Findings[1].Retained {
		t.Errorf("retained = %v, %v; want false, true", r.Findings[1].Retained, r.Findings[2].Retained)
	}
	if r.Counts["total"] != 5 || r.Counts["orphan"] != 1 || r.Counts["unreachable"] != 1 {
		t.Errorf("Counts = %v", r.Counts)
	}
}
