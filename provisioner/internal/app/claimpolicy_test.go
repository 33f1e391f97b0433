package app

import (
	"context"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	fakediscovery "k8s.io/client-go/discovery/fake"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/klog/v2/ktesting"

	hostpathv1 "hostpath.dev/api/hostpath/v1"
)

// TestFindClaimPolicy: an instance watches claims by label only where the
// API server serves the bindings and has the policy's.
func TestFindClaimPolicy(t *testing.T) {
	binding := &admissionv1.MutatingAdmissionPolicyBinding{ObjectMeta: metav1.ObjectMeta{Name: hostpathv1.ClaimLabelsPolicy}}
	for _, tc := range []struct {
		name    string
		served  bool
		objects bool
		want    ClaimPolicy
	}{
		{name: "Kubernetes 1.35: not served", want: ClaimPolicy{}},
		{name: "served, not bound", served: true, want: ClaimPolicy{Served: true}},
		{name: "served and bound", served: true, objects: true, want: ClaimPolicy{Served: true, Active: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			kube := fake.NewClientset()
			if tc.objects {
				kube = fake.NewClientset(binding)
			}
			resources := []metav1.APIResource{{Name: "validatingadmissionpolicies"}}
			if tc.served {
				resources = append(resources, metav1.APIResource{Name: "mutatingadmissionpolicybindings"})
			}
			kube.Discovery().(*fakediscovery.FakeDiscovery).Resources = []*metav1.APIResourceList{
				{GroupVersion: admissionv1.SchemeGroupVersion.String(), APIResources: resources}}
			got, err := findClaimPolicy(context.Background(), kube)
			if err != nil || got != tc.want {
				t.Errorf("findClaimPolicy = %+v, %v; want %+v", got, err, tc.want)
			}
		})
	}
}

// TestWatchClaimPolicy: the instance is told once the binding comes while
// it watches every claim, or goes while it watches by label.
func TestWatchClaimPolicy(t *testing.T) {
	binding := &admissionv1.MutatingAdmissionPolicyBinding{ObjectMeta: metav1.ObjectMeta{Name: hostpathv1.ClaimLabelsPolicy}}
	for _, tc := range []struct {
		name   string
		active bool
	}{
		{name: "the binding comes"},
		{name: "the binding goes", active: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, ctx := ktesting.NewTestContext(t)
			// A guard, not a wait: the change comes at once.
			ctx, cancel := context.WithTimeout(ctx, time.Minute)
			defer cancel()
			kube := fake.NewClientset()
			if tc.active {
				kube = fake.NewClientset(binding)
			}
			changed := make(chan struct{}, 10)
			if err := watchClaimPolicy(ctx, kube, ClaimPolicy{Served: true, Active: tc.active}, func() { changed <- struct{}{} }); err != nil {
				t.Fatal(err)
			}
			api := kube.AdmissionregistrationV1().MutatingAdmissionPolicyBindings()
			var err error
			if tc.active {
				err = api.Delete(ctx, binding.Name, metav1.DeleteOptions{})
			} else {
				_, err = api.Create(ctx, binding, metav1.CreateOptions{})
			}
			if err != nil {
				t.Fatal(err)
			}
			select {
			case <-changed:
			case <-ctx.Done():
				t.Fatal(ctx.Err())
			}
		})
	}
}
