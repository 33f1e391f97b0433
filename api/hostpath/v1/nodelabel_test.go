package v1

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

func TestVolumeNodeLabel(t *testing.T) {
	long := strings.Repeat("a", 64)
	for _, tc := range []struct {
		name        string
		annotations map[string]string
		want        string
	}{
		{name: "node mode", annotations: map[string]string{AnnotationNode: "worker-1"}, want: "worker-1"},
		{name: "old PV without a mode", annotations: map[string]string{AnnotationNode: "worker-1", AnnotationMode: ""}, want: "worker-1"},
		{name: "multihost", annotations: map[string]string{AnnotationMode: ModeMultihost, AnnotationNode: "worker-1"}, want: NodeLabelMultihost},
		{name: "marked gone", annotations: map[string]string{AnnotationNode: "worker-1", AnnotationNodeGoneSince: "2026-11-29T00:00:00Z"}, want: NodeLabelNodeGone},
		{name: "multihost marked gone stays multihost", annotations: map[string]string{AnnotationMode: ModeMultihost, AnnotationNodeGoneSince: "x"}, want: NodeLabelMultihost},
		{name: "node name too long for a label", annotations: map[string]string{AnnotationNode: long}, want: NodeLabelUnsorted},
		{name: "no node", annotations: nil, want: NodeLabelUnsorted},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pv := &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Annotations: tc.annotations}}
			if got := VolumeNodeLabel(pv); got != tc.want {
				t.Errorf("VolumeNodeLabel = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestWatchSelector(t *testing.T) {
	sel := WatchSelector("worker-1")
	for value, want := range map[string]bool{
		"worker-1": true, "worker-2": false, NodeLabelMultihost: true, NodeLabelNodeGone: true, NodeLabelUnsorted: true,
	} {
		if got := sel.Matches(labels.Set{LabelNode: value}); got != want {
			t.Errorf("%s matches %q = %v, want %v", sel, value, got, want)
		}
	}
	if sel.Matches(labels.Set{}) {
		t.Errorf("%s matches an unlabelled object", sel)
	}
	if !UnlabelledSelector().Matches(labels.Set{}) || UnlabelledSelector().Matches(labels.Set{LabelNode: "worker-1"}) {
		t.Errorf("UnlabelledSelector %s does not select exactly the unlabelled objects", UnlabelledSelector())
	}
	// A node whose name is no label value watches the Unsorted objects,
	// where its own go.
	long := WatchSelector(strings.Repeat("a", 64))
	if !long.Matches(labels.Set{LabelNode: NodeLabelUnsorted}) || long.Matches(labels.Set{LabelNode: "worker-1"}) {
		t.Errorf("%s: a long node name's selector", long)
	}
}

func TestClassKey(t *testing.T) {
	if got := ClassKey("fast"); got != "class.fast" || got == ProvisionersKey {
		t.Errorf("ClassKey(fast) = %q", got)
	}
}

func TestClaimNodeLabel(t *testing.T) {
	long := strings.Repeat("a", 64)
	longest := strings.Repeat("a", 63)
	selected := ClaimNodeAnnotations[2] // volume.kubernetes.io/selected-node
	for _, tc := range []struct {
		name        string
		annotations map[string]string
		volume      string
		multihost   bool
		want        string
	}{
		{name: "multihost pending", multihost: true, want: NodeLabelMultihost},
		{name: "multihost bound with a node", annotations: map[string]string{AnnotationProvisionOnNode: "worker-1"}, volume: "pvc-1", multihost: true, want: NodeLabelMultihost},
		{name: "pending pinned to a node with an instance", annotations: map[string]string{AnnotationProvisionOnNode: "worker-1"}, want: "worker-1"},
		{name: "pending selected, a node with an instance", annotations: map[string]string{selected: "worker-1"}, want: "worker-1"},
		{name: "pending pinned to a node without an instance", annotations: map[string]string{AnnotationProvisionOnNode: "worker-9"}, want: NodeLabelUnsorted},
		{name: "bound on a node without an instance", annotations: map[string]string{AnnotationProvisionOnNode: "worker-9"}, volume: "pvc-1", want: "worker-9"},
		{name: "pending without a node", want: NodeLabelUnsorted},
		{name: "bound pinned", annotations: map[string]string{AnnotationProvisionOnNode: "worker-1", selected: "worker-2"}, volume: "pvc-1", want: "worker-1"},
		{name: "bound pinned by kubevirt", annotations: map[string]string{AnnotationKubevirtProvisionOnNode: "worker-3", selected: "worker-2"}, volume: "pvc-1", want: "worker-3"},
		{name: "hostpath pin before kubevirt's", annotations: map[string]string{AnnotationKubevirtProvisionOnNode: "worker-3", AnnotationProvisionOnNode: "worker-1"}, volume: "pvc-1", want: "worker-1"},
		{name: "empty pin skipped", annotations: map[string]string{AnnotationProvisionOnNode: "", selected: "worker-2"}, volume: "pvc-1", want: "worker-2"},
		{name: "bound selected", annotations: map[string]string{selected: "worker-2"}, volume: "pvc-1", want: "worker-2"},
		{name: "bound without a node", volume: "pvc-1", want: NodeLabelUnsorted},
		{name: "node name of 63", annotations: map[string]string{selected: longest}, volume: "pvc-1", want: longest},
		{name: "node name too long for a label", annotations: map[string]string{selected: long}, volume: "pvc-1", want: NodeLabelUnsorted},
		{name: "not a label value", annotations: map[string]string{AnnotationProvisionOnNode: "a b"}, volume: "pvc-1", want: NodeLabelUnsorted},
	} {
		t.Run(tc.name, func(t *testing.T) {
			claim := &corev1.PersistentVolumeClaim{
				ObjectMeta: metav1.ObjectMeta{Annotations: tc.annotations},
				Spec:       corev1.PersistentVolumeClaimSpec{VolumeName: tc.volume},
			}
			served := func(node string) bool { return node != "worker-9" }
			if got := ClaimNodeLabel(claim, tc.multihost, served); got != tc.want {
				t.Errorf("ClaimNodeLabel = %q, want %q", got, tc.want)
			}
		})
	}
}
