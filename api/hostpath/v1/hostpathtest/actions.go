package hostpathtest

import (
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
)

// Writes returns the actions of a fake clientset (its Actions()) that are
// not reads (get, list, watch), in order.
func Writes(actions []k8stesting.Action) []k8stesting.Action {
	var out []k8stesting.Action
	for _, a := range actions {
		switch a.GetVerb() {
		case "get", "list", "watch":
		default:
			out = append(out, a)
		}
	}
	return out
}

// DescribeWrites returns the writes among actions (Writes) as "verb
// resource[/subresource] name": the name of the object created or
// updated, or of what is deleted or patched ("" for another action).
func DescribeWrites(actions []k8stesting.Action) []string {
	var out []string
	for _, a := range Writes(actions) {
		res := a.GetResource().Resource
		if sub := a.GetSubresource(); sub != "" {
			res += "/" + sub
		}
		name := ""
		switch a := a.(type) {
		case k8stesting.CreateAction: // and UpdateAction, of the same methods
			if m, err := meta.Accessor(a.GetObject()); err == nil {
				name = m.GetName()
			}
		case k8stesting.DeleteAction:
			name = a.GetName()
		case k8stesting.PatchAction:
			name = a.GetName()
		}
		out = append(out, a.GetVerb()+" "+res+" "+name)
	}
	return out
}

// Replace makes store hold the items of list (a List of a fake clientset
// or of its Tracker) and nothing else, as an informer's store after a
// relist.
func Replace(t testing.TB, store cache.Store, list runtime.Object) {
	t.Helper()
	items, err := meta.ExtractList(list)
	if err != nil {
		t.Fatalf("extract the items of a %T: %v", list, err)
	}
	objs := make([]any, len(items))
	for i := range items {
		objs[i] = items[i]
	}
	if err := store.Replace(objs, ""); err != nil {
		t.Fatalf("replace the store: %v", err)
	}
}

// Patches returns the patches among actions of the resource named
// resource ("persistentvolumes", say; "" for every resource), in order.
func Patches(actions []k8stesting.Action, resource string) []k8stesting.PatchActionImpl {
	var out []k8stesting.PatchActionImpl
	for _, a := range actions {
		if p, ok := a.(k8stesting.PatchActionImpl); ok && (resource == "" || p.GetResource().Resource == resource) {
			out = append(out, p)
		}
	}
	return out
}
