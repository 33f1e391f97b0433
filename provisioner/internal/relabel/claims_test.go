package relabel

import (
	"context"
	"maps"
	"testing"

	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	storagelisters "k8s.io/client-go/listers/storage/v1"
	"k8s.io/client-go/tools/cache"
	storagehelpers "k8s.io/component-helpers/storage/volume"
	"k8s.io/klog/v2/ktesting"

	hostpathv1 "hostpath.dev/api/hostpath/v1"
	"hostpath.dev/api/hostpath/v1/hostpathtest"
	"hostpath.dev/provisioner/internal/responsibility/responsibilitytest"
)

// TestClaims: the upgrade step labels, as the policy would, the unlabelled
// hostpath claims of its node (pending ones too: it runs there), and, when
// elected, those of no single node and of a node that runs no instance (a
// pending one Unsorted); not those of another node with an instance, nor
// another provisioner's, nor a claim labelled already.
func TestClaims(t *testing.T) {
	const self, other, unserved = "node-a", "node-b", "node-c"
	ns := "team"
	onNode := func(n string) func(*v1.PersistentVolumeClaim) {
		return hostpathtest.ClaimAnnotation(storagehelpers.AnnSelectedNode, n)
	}
	labelled := hostpathtest.Claim(ns, "labelled", hostpathtest.ClaimOfClass("node"), hostpathtest.BoundToPV("pv-l", "1Gi"), onNode(self))
	labelled.Labels = map[string]string{hostpathv1.LabelNode: self}
	claims := []*v1.PersistentVolumeClaim{
		hostpathtest.Claim(ns, "mine", hostpathtest.ClaimOfClass("node"), hostpathtest.BoundToPV("pv-1", "1Gi"), onNode(self)),
		hostpathtest.Claim(ns, "mine-pending", hostpathtest.ClaimOfClass("node"), onNode(self)),
		hostpathtest.Claim(ns, "theirs", hostpathtest.ClaimOfClass("node"), hostpathtest.BoundToPV("pv-2", "1Gi"), onNode(other)),
		hostpathtest.Claim(ns, "unserved", hostpathtest.ClaimOfClass("node"), hostpathtest.BoundToPV("pv-3", "1Gi"), onNode(unserved)),
		hostpathtest.Claim(ns, "unserved-pending", hostpathtest.ClaimOfClass("node"), onNode(unserved)),
		hostpathtest.Claim(ns, "theirs-pending", hostpathtest.ClaimOfClass("node"), onNode(other)),
		hostpathtest.Claim(ns, "shared", hostpathtest.ClaimOfClass("shared"), hostpathtest.BoundToPV("pv-4", "1Gi"), onNode(other)),
		hostpathtest.Claim(ns, "waiting", hostpathtest.ClaimOfClass("node")),
		hostpathtest.Claim(ns, "foreign", hostpathtest.ClaimOfClass("gp3"), onNode(self)),
		labelled,
	}
	classes := []*storagev1.StorageClass{
		hostpathtest.Class("node", hostpathv1.DefaultProvisionerName),
		hostpathtest.Class("shared", hostpathv1.DefaultProvisionerName, func(c *storagev1.StorageClass) {
			c.Parameters = map[string]string{hostpathv1.ParamMode: hostpathv1.ModeMultihost}
		}),
		hostpathtest.Class("gp3", "ebs.csi.aws.com"),
	}
	for _, tc := range []struct {
		name    string
		elected bool
		want    map[string]string
	}{
		{name: "elected", elected: true, want: map[string]string{"mine": self, "mine-pending": self,
			"unserved": unserved, "unserved-pending": hostpathv1.NodeLabelUnsorted, "shared": hostpathv1.NodeLabelMultihost,
			"waiting": hostpathv1.NodeLabelUnsorted, "labelled": self}},
		{name: "not elected", want: map[string]string{"mine": self, "mine-pending": self, "labelled": self}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, ctx := ktesting.NewTestContext(t)
			client := fake.NewClientset()
			for _, c := range claims {
				if _, err := client.CoreV1().PersistentVolumeClaims(ns).Create(ctx, c, metav1.CreateOptions{}); err != nil {
					t.Fatal(err)
				}
			}
			index := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
			for _, c := range classes {
				if err := index.Add(c); err != nil {
					t.Fatal(err)
				}
			}
			cfg := ClaimConfig{Config: Config{Client: client, Names: hostpathv1.NewProvisionerNames(hostpathv1.DefaultProvisionerName), Node: self,
				Instances: responsibilitytest.Instances{Wins: tc.elected, On: []string{self, other}}, FieldManager: "test"},
				Classes: storagelisters.NewStorageClassLister(index)}
			n, err := Claims(ctx, cfg)
			if err != nil {
				t.Fatal(err)
			}
			if n != len(tc.want)-1 {
				t.Errorf("labelled %d, want %d", n, len(tc.want)-1)
			}
			list, err := client.CoreV1().PersistentVolumeClaims(ns).List(context.Background(), metav1.ListOptions{})
			if err != nil {
				t.Fatal(err)
			}
			got := map[string]string{}
			for _, c := range list.Items {
				if v, ok := c.Labels[hostpathv1.LabelNode]; ok {
					got[c.Name] = v
				}
			}
			if !maps.Equal(got, tc.want) {
				t.Errorf("labels %v, want %v", got, tc.want)
			}
		})
	}
}
