package relabel

import (
	"context"
	"errors"
	"maps"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/klog/v2/ktesting"

	hostpathv1 "hostpath.dev/api/hostpath/v1"
	"hostpath.dev/api/hostpath/v1/hostpathtest"
	"hostpath.dev/provisioner/internal/responsibility/responsibilitytest"
)

// TestVolumes: the upgrade step labels the unlabelled node-mode PVs of
// hostpath on its node, and the multihost ones when elected; not another
// node's, not another provisioner's, not a PV labelled already (which it
// does not even list), and it writes nothing more when run again.
func TestVolumes(t *testing.T) {
	const self, other = "node-a", "node-b"
	foreign := hostpathtest.NodePV("foreign", self, hostpathtest.ProvisionedBy("other.example/provisioner"))
	labelled := hostpathtest.NodePV("labelled", self)
	labelled.Labels = map[string]string{hostpathv1.LabelNode: self}
	pvs := []*v1.PersistentVolume{
		hostpathtest.NodePV("mine", self),
		hostpathtest.NodePV("mine-marked", self, hostpathtest.Annotation(hostpathv1.AnnotationNodeGoneSince, "2026-11-29T00:00:00Z")),
		hostpathtest.NodePV("theirs", other),
		hostpathtest.MultihostPV("shared", []string{self, other}),
		foreign, labelled,
	}
	for _, tc := range []struct {
		name    string
		elected bool
		want    map[string]string
	}{
		{name: "elected", elected: true, want: map[string]string{
			"mine": self, "mine-marked": hostpathv1.NodeLabelNodeGone, "shared": hostpathv1.NodeLabelMultihost, "labelled": self}},
		{name: "not elected", want: map[string]string{"mine": self, "mine-marked": hostpathv1.NodeLabelNodeGone, "labelled": self}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, ctx := ktesting.NewTestContext(t)
			client := fake.NewClientset()
			for _, pv := range pvs {
				if _, err := client.CoreV1().PersistentVolumes().Create(ctx, pv, metav1.CreateOptions{}); err != nil {
					t.Fatal(err)
				}
			}
			cfg := Config{Client: client, Names: hostpathv1.NewProvisionerNames(hostpathv1.DefaultProvisionerName), Node: self,
				Instances: responsibilitytest.Instances{Wins: tc.elected}, FieldManager: "test"}
			n, err := Volumes(ctx, cfg)
			if err != nil {
				t.Fatal(err)
			}
			if n != len(tc.want)-1 {
				t.Errorf("labelled %d, want %d", n, len(tc.want)-1)
			}
			if got := labels(t, client); !maps.Equal(got, tc.want) {
				t.Errorf("labels %v, want %v", got, tc.want)
			}
			client.ClearActions()
			if n, err := Volumes(ctx, cfg); err != nil || n != 0 {
				t.Errorf("again: labelled %d (%v), want 0", n, err)
			}
			for _, a := range client.Actions() {
				if a.GetVerb() != "list" {
					t.Errorf("again: %s %s, want only the list", a.GetVerb(), a.GetResource().Resource)
				}
			}
		})
	}
}

// TestVolumesElectionFails: a failed election is reported and the other
// PVs are labelled still.
func TestVolumesElectionFails(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	client := fake.NewClientset(hostpathtest.NodePV("mine", "node-a"), hostpathtest.MultihostPV("shared", []string{"node-a"}))
	boom := errors.New("no peers yet")
	_, err := Volumes(ctx, Config{Client: client, Names: hostpathv1.NewProvisionerNames(hostpathv1.DefaultProvisionerName), Node: "node-a",
		Instances: responsibilitytest.Instances{Err: boom}})
	if !errors.Is(err, boom) {
		t.Errorf("error %v, want %v", err, boom)
	}
	if got := labels(t, client); got["mine"] != "node-a" {
		t.Errorf("labels %v: mine not labelled", got)
	}
}

// labels returns the watch label of each PV that has it.
func labels(t *testing.T, client *fake.Clientset) map[string]string {
	t.Helper()
	list, err := client.CoreV1().PersistentVolumes().List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, pv := range list.Items {
		if v, ok := pv.Labels[hostpathv1.LabelNode]; ok {
			got[pv.Name] = v
		}
	}
	return got
}
