package app

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"

	hostpathv1 "hostpath.dev/api/hostpath/v1"
	"hostpath.dev/provisioner/internal/app/cachetrim"
)

// TestPodNode: the node of an instance's pod, as cached (the stub), is
// the one it is scheduled to, else the one its DaemonSet's affinity
// names; a tombstone's too.
func TestPodNode(t *testing.T) {
	daemon := func(node string) *v1.Affinity {
		return &v1.Affinity{NodeAffinity: &v1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &v1.NodeSelector{
			NodeSelectorTerms: []v1.NodeSelectorTerm{{
				MatchExpressions: []v1.NodeSelectorRequirement{{Key: "hostpath.dev/provisioner", Operator: v1.NodeSelectorOpNotIn, Values: []string{"false"}}},
				MatchFields:      []v1.NodeSelectorRequirement{{Key: metav1.ObjectNameField, Operator: v1.NodeSelectorOpIn, Values: []string{node}}},
			}}}}}
	}
	trim := cachetrim.New(hostpathv1.NewProvisionerNames(hostpathv1.DefaultProvisionerName))
	for _, tc := range []struct {
		name string
		pod  *v1.Pod
		want string
	}{
		{"scheduled", &v1.Pod{Spec: v1.PodSpec{NodeName: "n1", Affinity: daemon("n1")}}, "n1"},
		{"not scheduled yet", &v1.Pod{Spec: v1.PodSpec{Affinity: daemon("n2")}}, "n2"},
		{"no node at all", &v1.Pod{}, ""},
		{"an affinity by label only", &v1.Pod{Spec: v1.PodSpec{Affinity: &v1.Affinity{NodeAffinity: &v1.NodeAffinity{
			RequiredDuringSchedulingIgnoredDuringExecution: &v1.NodeSelector{NodeSelectorTerms: []v1.NodeSelectorTerm{{
				MatchExpressions: []v1.NodeSelectorRequirement{{Key: "zone", Operator: v1.NodeSelectorOpIn, Values: []string{"z1"}}}}}}}}}}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			stub, err := trim(tc.pod)
			if err != nil {
				t.Fatal(err)
			}
			if got := podNode(stub); got != tc.want {
				t.Errorf("podNode(stub) = %q, want %q", got, tc.want)
			}
			if got := podNode(cache.DeletedFinalStateUnknown{Key: "ns/p", Obj: stub}); got != tc.want {
				t.Errorf("podNode(tombstone) = %q, want %q", got, tc.want)
			}
		})
	}
}

// TestLibraryContext: the library's event broadcaster, made as
// NewProvisionController makes it (StartStructuredLogging(0) on the
// context's logger), logs the events it records only from --v=3 on.
func TestLibraryContext(t *testing.T) {
	for _, tc := range []struct {
		verbosity int
		logged    bool
	}{
		{0, false},
		{2, false}, // the DaemonSet's
		{3, true},
		{5, true},
	} {
		t.Run(fmt.Sprintf("v=%d", tc.verbosity), func(t *testing.T) {
			logger := ktesting.NewLogger(t, ktesting.NewConfig(ktesting.Verbosity(tc.verbosity), ktesting.BufferLogs(true)))
			ctx, cancel := context.WithCancel(klog.NewContext(context.Background(), logger))
			t.Cleanup(cancel)
			ctx = libraryContext(ctx)
			if got := klog.FromContext(ctx).V(0).Enabled(); got != tc.logged {
				t.Fatalf("the library's V(0) is enabled at --v=%d: %v, want %v", tc.verbosity, got, tc.logged)
			}
			if !tc.logged {
				return
			}
			b := record.NewBroadcaster(record.WithContext(ctx))
			t.Cleanup(b.Shutdown)
			b.StartStructuredLogging(0)
			claim := &v1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "c1"}}
			b.NewRecorder(scheme.Scheme, v1.EventSource{Component: "test"}).Event(claim, v1.EventTypeNormal, "Provisioning", "External provisioner is provisioning volume for claim")
			buf := logger.GetSink().(ktesting.Underlier).GetBuffer()
			if err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, wait.ForeverTestTimeout, true, func(context.Context) (bool, error) {
				return strings.Contains(buf.String(), "Event occurred") && strings.Contains(buf.String(), `reason="Provisioning"`), nil
			}); err != nil {
				t.Fatalf("the event was not logged at --v=%d: %v; log:\n%s", tc.verbosity, err, buf.String())
			}
		})
	}
}
