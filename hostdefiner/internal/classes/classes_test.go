package classes

import (
	"maps"
	"testing"

	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	kubeinformers "k8s.io/client-go/informers"
	k8sfake "k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2/ktesting"
	"k8s.io/utils/ptr"

	hostpathv1 "hostpath.dev/api/hostpath/v1"
	"hostpath.dev/api/runtime/worker/workertest"
)

const (
	testNamespace = "hostpath-system"
	otherProvider = "example.com/other"
)

var names = hostpathv1.NewProvisionerNames(hostpathv1.DefaultProvisionerName)

// class is a StorageClass of provisioner with the parameters params.
func class(name, provisioner string, params map[string]string) *storagev1.StorageClass {
	return &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Provisioner: provisioner, Parameters: params}
}

// configMap is the ConfigMap of the classes with data and labels.
func configMap(data, labels map[string]string) *v1.ConfigMap {
	return &v1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: hostpathv1.ClassesConfigMap, Namespace: testNamespace, Labels: labels, ResourceVersion: "1"},
		Data:       data,
	}
}

// testClasses are classes of every kind: node mode (said or not), multihost,
// an unknown mode, the capacity name, and another provisioner's; each binds
// Immediate but hostpath (WaitForFirstConsumer) and plain (no mode said,
// as the API server never leaves it).
func testClasses() []*storagev1.StorageClass {
	hostpath := class("hostpath", hostpathv1.DefaultProvisionerName, map[string]string{hostpathv1.ParamMode: hostpathv1.ModeNode})
	hostpath.VolumeBindingMode = ptr.To(storagev1.VolumeBindingWaitForFirstConsumer)
	immediate := func(sc *storagev1.StorageClass) *storagev1.StorageClass {
		sc.VolumeBindingMode = ptr.To(storagev1.VolumeBindingImmediate)
		return sc
	}
	return []*storagev1.StorageClass{
		hostpath,
		class("plain", hostpathv1.DefaultProvisionerName, nil),
		immediate(class("shared", hostpathv1.DefaultProvisionerName, map[string]string{hostpathv1.ParamMode: hostpathv1.ModeMultihost})),
		immediate(class("odd", hostpathv1.DefaultProvisionerName, map[string]string{hostpathv1.ParamMode: "Multihost"})),
		immediate(class("capacity", hostpathv1.CapacityProvisionerName, map[string]string{hostpathv1.ParamMode: hostpathv1.ModeMultihost})),
		immediate(class("other", otherProvider, map[string]string{hostpathv1.ParamMode: hostpathv1.ModeMultihost})),
	}
}

// wantData is Data of testClasses.
var wantData = map[string]string{
	"provisioners":         "hostpath.dev/provisioner hostpath.dev",
	"class.hostpath":       "node",
	"provisioner.hostpath": "hostpath.dev/provisioner",
	"class.plain":          "node",
	"provisioner.plain":    "hostpath.dev/provisioner",
	"immediate.plain":      "",
	"class.shared":         "multihost",
	"provisioner.shared":   "hostpath.dev/provisioner",
	"immediate.shared":     "",
	"class.odd":            "node",
	"provisioner.odd":      "hostpath.dev/provisioner",
	"immediate.odd":        "",
	"class.capacity":       "multihost",
	"provisioner.capacity": "hostpath.dev",
	"immediate.capacity":   "",
}

func TestData(t *testing.T) {
	for _, tc := range []struct {
		name    string
		names   hostpathv1.ProvisionerNames
		classes []*storagev1.StorageClass
		want    map[string]string
	}{
		{name: "no class", names: names, want: map[string]string{"provisioners": "hostpath.dev/provisioner hostpath.dev"}},
		{name: "every kind of class", names: names, classes: testClasses(), want: wantData},
		{
			name: "the capacity name alone", names: hostpathv1.NewProvisionerNames(hostpathv1.CapacityProvisionerName), classes: testClasses(),
			want: map[string]string{"provisioners": "hostpath.dev", "class.capacity": "multihost", "provisioner.capacity": "hostpath.dev", "immediate.capacity": ""},
		},
		{
			name: "another name", names: hostpathv1.NewProvisionerNames(otherProvider), classes: testClasses(),
			want: map[string]string{"provisioners": "example.com/other hostpath.dev", "class.capacity": "multihost", "provisioner.capacity": "hostpath.dev",
				"immediate.capacity": "", "class.other": "multihost", "provisioner.other": "example.com/other", "immediate.other": ""},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Data(tc.names, tc.classes, nil); !maps.Equal(got, tc.want) {
				t.Errorf("Data = %v, want %v", got, tc.want)
			}
		})
	}
}

// fixture is a Controller on a fake clientset whose caches hold what a
// test put in them.
type fixture struct {
	c    *Controller
	kube *k8sfake.Clientset
	inf  Informers
}

// newFixture returns a fixture holding classes, cm, pods (in the caches
// and the API server) and claims (in the API server only: the controller
// lists them there).
func newFixture(t *testing.T, classes []*storagev1.StorageClass, cm *v1.ConfigMap, pods []*v1.Pod, claims ...*v1.PersistentVolumeClaim) *fixture {
	t.Helper()
	var objs []runtime.Object
	for _, sc := range classes {
		objs = append(objs, sc)
	}
	if cm != nil {
		objs = append(objs, cm)
	}
	for _, p := range pods {
		objs = append(objs, p)
	}
	for _, claim := range claims {
		objs = append(objs, claim)
	}
	kube := k8sfake.NewClientset(objs...)
	factory := kubeinformers.NewSharedInformerFactory(kube, 0)
	f := &fixture{kube: kube, inf: Informers{
		Classes:    factory.Storage().V1().StorageClasses().Informer(),
		ConfigMaps: factory.Core().V1().ConfigMaps().Informer(),
		Pods:       factory.Core().V1().Pods().Informer(),
	}}
	for _, sc := range classes {
		if err := f.inf.Classes.GetIndexer().Add(sc); err != nil {
			t.Fatal(err)
		}
	}
	if cm != nil {
		if err := f.inf.ConfigMaps.GetIndexer().Add(cm); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range pods {
		if err := f.inf.Pods.GetIndexer().Add(p); err != nil {
			t.Fatal(err)
		}
	}
	c, err := New(names, kube, testNamespace, provisioners, f.inf)
	if err != nil {
		t.Fatal(err)
	}
	f.c = c
	kube.ClearActions()
	return f
}

func TestSync(t *testing.T) {
	partOf := map[string]string{"app.kubernetes.io/part-of": "hostpath"}
	withClasses := maps.Clone(wantData)
	withClasses["class.gone"] = "node"
	for _, tc := range []struct {
		name string
		cm   *v1.ConfigMap
		// want is the verb of the one write, "" for none.
		want       string
		wantLabels map[string]string
	}{
		{name: "missing: created", want: "create", wantLabels: partOf},
		{name: "equal: no write", cm: configMap(wantData, partOf)},
		{name: "as shipped: classes added", cm: configMap(map[string]string{"provisioners": "hostpath.dev/provisioner hostpath.dev"}, partOf), want: "update", wantLabels: partOf},
		{name: "a deleted class: its key goes", cm: configMap(withClasses, partOf), want: "update", wantLabels: partOf},
		{name: "edited: put back", cm: configMap(map[string]string{"class.shared": "node", "provisioners": "x"}, partOf), want: "update", wantLabels: partOf},
		{name: "empty", cm: configMap(nil, nil), want: "update", wantLabels: partOf},
		{
			name: "label missing, other labels kept", cm: configMap(wantData, map[string]string{"team": "storage"}),
			want: "update", wantLabels: map[string]string{"team": "storage", "app.kubernetes.io/part-of": "hostpath"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, ctx := ktesting.NewTestContext(t)
			f := newFixture(t, testClasses(), tc.cm, nil)
			if err := f.c.sync(ctx, key{}); err != nil {
				t.Fatalf("sync: %v", err)
			}
			var writes []clienttesting.Action
			for _, a := range f.kube.Actions() {
				if a.GetVerb() != "get" && a.GetVerb() != "list" && a.GetVerb() != "watch" {
					writes = append(writes, a)
				}
			}
			if tc.want == "" {
				if len(writes) != 0 {
					t.Fatalf("writes %v, want none", writes)
				}
				return
			}
			if len(writes) != 1 || writes[0].GetVerb() != tc.want || writes[0].GetNamespace() != testNamespace {
				t.Fatalf("writes %v, want one %s in %s", writes, tc.want, testNamespace)
			}
			got := writes[0].(interface{ GetObject() runtime.Object }).GetObject().(*v1.ConfigMap)
			if got.Name != hostpathv1.ClassesConfigMap || !maps.Equal(got.Data, wantData) || !maps.Equal(got.Labels, tc.wantLabels) {
				t.Errorf("wrote %s data %v labels %v, want %s data %v labels %v",
					got.Name, got.Data, got.Labels, hostpathv1.ClassesConfigMap, wantData, tc.wantLabels)
			}
		})
	}
}

// TestSyncKeepsBinaryData: only data is the host definer's.
func TestSyncKeepsBinaryData(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	cm := configMap(nil, nil)
	cm.BinaryData = map[string][]byte{"note": []byte("x")}
	f := newFixture(t, testClasses(), cm, nil)
	if err := f.c.sync(ctx, key{}); err != nil {
		t.Fatalf("sync: %v", err)
	}
	got, err := f.kube.CoreV1().ConfigMaps(testNamespace).Get(ctx, hostpathv1.ClassesConfigMap, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if string(got.BinaryData["note"]) != "x" || !maps.Equal(got.Data, wantData) {
		t.Errorf("after sync: data %v, binaryData %v", got.Data, got.BinaryData)
	}
}

// TestSyncCreateFails: an error is returned, so that the queue retries.
func TestSyncCreateFails(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	f := newFixture(t, testClasses(), nil, nil)
	// The ConfigMap exists in the API server, not yet in the cache.
	if _, err := f.kube.CoreV1().ConfigMaps(testNamespace).Create(ctx, configMap(nil, nil), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := f.c.sync(ctx, key{}); err == nil {
		t.Fatal("sync: no error, want AlreadyExists")
	}
}

func TestEvents(t *testing.T) {
	ours := class("shared", hostpathv1.DefaultProvisionerName, nil)
	capacity := class("capacity", hostpathv1.CapacityProvisionerName, nil)
	other := class("other", otherProvider, nil)
	otherCM := configMap(nil, nil)
	otherCM.Name = "hostpath-pools"
	for _, tc := range []struct {
		name  string
		event func(c *Controller)
		want  int
	}{
		{name: "class of ours added", event: func(c *Controller) { c.onClass(ours) }, want: 1},
		{name: "class of the capacity name", event: func(c *Controller) { c.onClass(capacity) }, want: 1},
		{name: "class of another provisioner", event: func(c *Controller) { c.onClass(other) }},
		{name: "class of ours deleted, state unknown", event: func(c *Controller) { c.onClass(cache.DeletedFinalStateUnknown{Obj: ours}) }, want: 1},
		{name: "the ConfigMap", event: func(c *Controller) { c.onConfigMap(configMap(nil, nil)) }, want: 1},
		{name: "the ConfigMap deleted, state unknown", event: func(c *Controller) { c.onConfigMap(cache.DeletedFinalStateUnknown{Obj: configMap(nil, nil)}) }, want: 1},
		{name: "another ConfigMap", event: func(c *Controller) { c.onConfigMap(otherCM) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, nil, nil, nil)
			tc.event(f.c)
			if got := len(workertest.Queued(f.c.queue)); got != tc.want {
				t.Errorf("queued %d keys, want %d", got, tc.want)
			}
		})
	}
}
