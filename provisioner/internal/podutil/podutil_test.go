package podutil

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestServing(t *testing.T) {
	ready := []v1.PodCondition{{Type: v1.PodScheduled, Status: v1.ConditionTrue}, {Type: v1.PodReady, Status: v1.ConditionTrue}}
	notReady := []v1.PodCondition{{Type: v1.PodReady, Status: v1.ConditionFalse}}
	now := metav1.Now()
	for _, tc := range []struct {
		name string
		pod  v1.Pod
		want bool
	}{
		{"ready", v1.Pod{Spec: v1.PodSpec{NodeName: "n"}, Status: v1.PodStatus{Conditions: ready}}, true},
		{"not ready", v1.Pod{Spec: v1.PodSpec{NodeName: "n"}, Status: v1.PodStatus{Conditions: notReady}}, false},
		{"no conditions", v1.Pod{Spec: v1.PodSpec{NodeName: "n"}}, false},
		{"unscheduled", v1.Pod{Status: v1.PodStatus{Conditions: ready}}, false},
		{"terminating", v1.Pod{ObjectMeta: metav1.ObjectMeta{DeletionTimestamp: &now}, Spec: v1.PodSpec{NodeName: "n"}, Status: v1.PodStatus{Conditions: ready}}, false},
	} {
		if got := Serving(&tc.pod); got != tc.want {
			t.Errorf("%s: Serving = %v, want %v", tc.name, got, tc.want)
		}
	}
}
