package classes

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	storagelisters "k8s.io/client-go/listers/storage/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	hostpathv1 "hostpath.dev/api/hostpath/v1"
	"hostpath.dev/api/runtime/worker"
)

// FieldManager names the host definer in the managed fields of the
// ConfigMap.
const FieldManager = "hostpath-hostdefiner"

// The label every object of the product carries.
const (
	partOfLabel = "app.kubernetes.io/part-of"
	partOfValue = "hostpath"
)

// touchPatch is the merge patch of a touch (touchAll): the watch label
// set to hostpathv1.NodeLabelUnsorted. An empty patch would not do: the
// claim-labelling policy skips an update of a claim labelled with a node
// that changes neither that label, nor the class, nor the node's
// annotations (manifests/base/policies/claim-labels.yaml).
var touchPatch = []byte(`{"metadata":{"labels":{"` + hostpathv1.LabelNode + `":"` + hostpathv1.NodeLabelUnsorted + `"}}}`)

// touchTries is how many syncs try to get the pending claims of a node
// that is no longer served relabelled before the controller gives up on
// them (touch): the queue's backoff makes them about five seconds.
const touchTries = 10

// key is the queue's single key: there is one ConfigMap to keep.
type key struct{}

// Informers are what the Controller reads: every StorageClass; the
// ConfigMaps and the Pods of its namespace (the ConfigMaps informer needs
// to hold only hostpathv1.ClassesConfigMap, the Pods one at least the
// provisioner pods, with their labels, spec.nodeName and
// deletionTimestamp).
type Informers struct {
	Classes    cache.SharedIndexInformer
	ConfigMaps cache.SharedIndexInformer
	Pods       cache.SharedIndexInformer
}

// Controller keeps the ConfigMap hostpathv1.ClassesConfigMap of its
// namespace.
type Controller struct {
	names hostpathv1.ProvisionerNames
	kube  kubernetes.Interface
	// namespace is the namespace of the ConfigMap and of the provisioner
	// pods, which provisioners selects.
	namespace    string
	provisioners labels.Selector
	classes      storagelisters.StorageClassLister
	configMaps   corelisters.ConfigMapNamespaceLister
	pods         corelisters.PodNamespaceLister
	synced       []cache.InformerSynced
	queue        *worker.Queue[key]
	// unserved holds the nodes whose served key a sync removed and whose
	// pending claims are not all relabelled yet, with the syncs that
	// tried (touch). Only the queue's single worker reads and writes it.
	unserved map[string]int
	// resort is owed when a sync added keys (a class, a served node)
	// since the Unsorted claims were last sorted (resort.go). Only the
	// queue's single worker reads and writes it, and unlabelled.
	resort owed
	// unlabelled is owed when a sync created the ConfigMap: claims of
	// hostpath made while it was missing have no label (the policy skips
	// a claim without its parameters), resort.go.
	unlabelled owed
}

// New returns a Controller for the classes of names and the provisioner
// pods that provisioners selects in namespace, reading inf and writing
// through kube; it registers its event handlers on inf.
func New(names hostpathv1.ProvisionerNames, kube kubernetes.Interface, namespace string, provisioners labels.Selector,
	inf Informers) (*Controller, error) {
	c := &Controller{
		names: names, kube: kube, namespace: namespace, provisioners: provisioners,
		classes:    storagelisters.NewStorageClassLister(inf.Classes.GetIndexer()),
		configMaps: corelisters.NewConfigMapLister(inf.ConfigMaps.GetIndexer()).ConfigMaps(namespace),
		pods:       corelisters.NewPodLister(inf.Pods.GetIndexer()).Pods(namespace),
		unserved:   map[string]int{},
	}
	c.queue = worker.NewQueue("classes", c.sync)
	for _, h := range []struct {
		inf     cache.SharedIndexInformer
		handler cache.ResourceEventHandler
	}{
		{inf.Classes, cache.ResourceEventHandlerFuncs{
			AddFunc:    c.onClass,
			UpdateFunc: func(old, obj any) { c.onClass(old); c.onClass(obj) },
			DeleteFunc: c.onClass,
		}},
		{inf.ConfigMaps, cache.ResourceEventHandlerFuncs{
			AddFunc:    c.onConfigMap,
			UpdateFunc: func(_, obj any) { c.onConfigMap(obj) },
			DeleteFunc: c.onConfigMap,
		}},
		{inf.Pods, cache.ResourceEventHandlerFuncs{
			AddFunc:    c.onPod,
			UpdateFunc: c.onPodUpdate,
			DeleteFunc: c.onPodDelete,
		}},
	} {
		reg, err := h.inf.AddEventHandler(h.handler)
		if err != nil {
			return nil, fmt.Errorf("add an event handler: %w", err)
		}
		c.synced = append(c.synced, reg.HasSynced)
	}
	return c, nil
}

// Run syncs the ConfigMap once the caches are synced, and after every
// change of a class of the installation, of the nodes that run a
// provisioner pod, or of the ConfigMap, until ctx is done. One worker:
// there is one key.
func (c *Controller) Run(ctx context.Context) error {
	c.queue.Add(key{})
	return c.queue.Run(ctx, 1, c.synced...)
}

// onClass queues the key when obj is a class of the installation (the
// old and the new class of an update are both passed, so that a class
// that leaves the installation is seen).
func (c *Controller) onClass(obj any) {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	if sc, ok := obj.(*storagev1.StorageClass); ok && c.names.Has(sc.Provisioner) {
		c.queue.Add(key{})
	}
}

// onConfigMap queues the key when the ConfigMap changes or goes.
func (c *Controller) onConfigMap(obj any) {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	if cm, ok := obj.(*v1.ConfigMap); ok && cm.Name == hostpathv1.ClassesConfigMap {
		c.queue.Add(key{})
	}
}

// servedNode is the node that pod serves, a pod that provisioners
// selects: its spec.nodeName, or "" for a pod of another selection, one
// not scheduled yet (it runs nowhere), and one being deleted (its
// instance is stopping).
func servedNode(provisioners labels.Selector, pod *v1.Pod) string {
	if pod.DeletionTimestamp != nil || !provisioners.Matches(labels.Set(pod.Labels)) {
		return ""
	}
	return pod.Spec.NodeName
}

// onPod queues the key when a provisioner pod that serves a node comes.
func (c *Controller) onPod(obj any) {
	if pod, ok := obj.(*v1.Pod); ok && servedNode(c.provisioners, pod) != "" {
		c.queue.Add(key{})
	}
}

// onPodUpdate queues the key when the node a pod serves changes: it is
// scheduled, relabelled in or out of the selection, or being deleted.
func (c *Controller) onPodUpdate(old, obj any) {
	o, ok1 := old.(*v1.Pod)
	n, ok2 := obj.(*v1.Pod)
	if ok1 && ok2 && servedNode(c.provisioners, o) != servedNode(c.provisioners, n) {
		c.queue.Add(key{})
	}
}

// onPodDelete queues the key when a scheduled provisioner pod goes: even
// one already being deleted (its update queued the key then), in case
// that update was missed.
func (c *Controller) onPodDelete(obj any) {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	if pod, ok := obj.(*v1.Pod); ok && pod.Spec.NodeName != "" && c.provisioners.Matches(labels.Set(pod.Labels)) {
		c.queue.Add(key{})
	}
}

// ServedNodes are the nodes that pods serve (servedNode), pods that
// provisioners selects, sorted and each once.
func ServedNodes(provisioners labels.Selector, pods []*v1.Pod) []string {
	var nodes []string
	for _, pod := range pods {
		if node := servedNode(provisioners, pod); node != "" {
			nodes = append(nodes, node)
		}
	}
	slices.Sort(nodes)
	return slices.Compact(nodes)
}

// Data is the content of the ConfigMap for the classes of names among
// classes and the nodes that run a provisioner pod: a key per class
// (hostpathv1.ClassKey) with its mode, its provisioner
// (hostpathv1.ProvisionerKey) and, when it binds Immediate,
// hostpathv1.ImmediateKey; hostpathv1.ProvisionersKey; and a key per node
// (hostpathv1.ServedKey) with an empty value, which the policy looks up in
// O(1) whatever the number of nodes.
func Data(names hostpathv1.ProvisionerNames, classes []*storagev1.StorageClass, nodes []string) map[string]string {
	data := map[string]string{
		hostpathv1.ProvisionersKey: strings.Join(append([]string{names.Name()}, names.Additional()...), " "),
	}
	for _, node := range nodes {
		// A name that is not a label value (longer than 63 characters)
		// is left out: the policy labels its claims Unsorted anyway, and
		// its key could exceed the 253 characters of a ConfigMap key.
		if hostpathv1.NodeLabelValue(node) == node {
			data[hostpathv1.ServedKey(node)] = ""
		}
	}
	for _, sc := range classes {
		if !names.Has(sc.Provisioner) {
			continue
		}
		mode := hostpathv1.ModeNode
		if sc.Parameters[hostpathv1.ParamMode] == hostpathv1.ModeMultihost {
			mode = hostpathv1.ModeMultihost
		}
		data[hostpathv1.ClassKey(sc.Name)] = mode
		data[hostpathv1.ProvisionerKey(sc.Name)] = sc.Provisioner
		if sc.VolumeBindingMode == nil || *sc.VolumeBindingMode == storagev1.VolumeBindingImmediate {
			data[hostpathv1.ImmediateKey(sc.Name)] = ""
		}
	}
	return data
}

// sync makes the ConfigMap hold Data of the cached classes and
// provisioner pods: created when missing, updated when it differs, left
// alone when equal. Then it touches the pending claims of the nodes whose
// served key it removed (touch).
func (c *Controller) sync(ctx context.Context, _ key) error {
	classes, err := c.classes.List(labels.Everything())
	if err != nil {
		return fmt.Errorf("list StorageClasses: %w", err)
	}
	pods, err := c.pods.List(c.provisioners)
	if err != nil {
		return fmt.Errorf("list the provisioner pods: %w", err)
	}
	want := Data(c.names, classes, ServedNodes(c.provisioners, pods))
	if err := c.write(ctx, want); err != nil {
		return err
	}
	return errors.Join(c.touchUnserved(ctx, want), c.sortUnlabelled(ctx, want), c.sortUnsorted(ctx, want))
}

// write makes the ConfigMap hold want, and records in c.unserved the
// nodes whose served key it removed.
func (c *Controller) write(ctx context.Context, want map[string]string) error {
	logger := klog.LoggerWithValues(klog.FromContext(ctx), "configMap", klog.KRef(c.namespace, hostpathv1.ClassesConfigMap))
	cm, err := c.configMaps.Get(hostpathv1.ClassesConfigMap)
	if apierrors.IsNotFound(err) {
		cm = &v1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{
				Name: hostpathv1.ClassesConfigMap, Namespace: c.namespace,
				Labels: map[string]string{partOfLabel: partOfValue},
			},
			Data: want,
		}
		if _, err := c.kube.CoreV1().ConfigMaps(c.namespace).Create(ctx, cm, metav1.CreateOptions{FieldManager: FieldManager}); err != nil {
			// AlreadyExists too: the informer sees it soon, and the
			// retry updates it.
			return fmt.Errorf("create ConfigMap %s/%s: %w", c.namespace, hostpathv1.ClassesConfigMap, err)
		}
		logger.Info("Created the ConfigMap of the classes", "classes", countKeys(want, hostpathv1.ClassKeyPrefix),
			"servedNodes", countKeys(want, hostpathv1.ServedKeyPrefix))
		c.resort.due, c.unlabelled.due = true, true
		return nil
	}
	if err != nil {
		return fmt.Errorf("get ConfigMap %s/%s from the cache: %w", c.namespace, hostpathv1.ClassesConfigMap, err)
	}
	if maps.Equal(cm.Data, want) && cm.Labels[partOfLabel] == partOfValue {
		return nil
	}
	var removed []string
	for k := range cm.Data {
		if node, ok := strings.CutPrefix(k, hostpathv1.ServedKeyPrefix); ok {
			if _, kept := want[k]; !kept {
				removed = append(removed, node)
			}
		}
	}
	slices.Sort(removed)
	grown := false
	for k, v := range want {
		if old, ok := cm.Data[k]; !ok || old != v {
			grown = true
			break
		}
	}
	cm = cm.DeepCopy()
	cm.Data = want
	if cm.Labels == nil {
		cm.Labels = map[string]string{}
	}
	cm.Labels[partOfLabel] = partOfValue
	if _, err := c.kube.CoreV1().ConfigMaps(c.namespace).Update(ctx, cm, metav1.UpdateOptions{FieldManager: FieldManager}); err != nil {
		return fmt.Errorf("update ConfigMap %s/%s: %w", c.namespace, hostpathv1.ClassesConfigMap, err)
	}
	logger.Info("Updated the ConfigMap of the classes", "classes", countKeys(want, hostpathv1.ClassKeyPrefix),
		"servedNodes", countKeys(want, hostpathv1.ServedKeyPrefix), "unservedNodes", len(removed))
	if len(removed) > 0 {
		logger.V(2).Info("Nodes that run no provisioner pod any more", "nodes", removed)
	}
	for _, node := range removed {
		c.unserved[node] = 0
	}
	c.resort.due = c.resort.due || grown
	return nil
}

// countKeys is the number of keys of data that begin with prefix.
func countKeys(data map[string]string, prefix string) int {
	n := 0
	for k := range data {
		if strings.HasPrefix(k, prefix) {
			n++
		}
	}
	return n
}

// touchUnserved touches the pending claims of each node of c.unserved
// (touch) that want does not list again, and forgets the node once they
// are all relabelled, or after touchTries syncs. It returns the errors,
// so that the queue retries.
func (c *Controller) touchUnserved(ctx context.Context, want map[string]string) error {
	var nodes []string
	for _, node := range slices.Sorted(maps.Keys(c.unserved)) {
		if _, served := want[hostpathv1.ServedKey(node)]; served {
			// Served again: the label naming it is right again.
			delete(c.unserved, node)
			continue
		}
		nodes = append(nodes, node)
	}
	if len(nodes) == 0 {
		return nil
	}
	pending, err := c.pendingClaims(ctx, nodes)
	var errs []error
	for _, node := range nodes {
		nodeErr := err
		if err == nil {
			nodeErr = c.touch(ctx, node, pending[node])
		}
		if nodeErr == nil {
			delete(c.unserved, node)
			continue
		}
		c.unserved[node]++
		if c.unserved[node] >= touchTries {
			klog.FromContext(ctx).Error(nodeErr, "Gave up relabelling the pending claims of a node that runs no provisioner pod any more: each keeps its label until an update changes its node",
				"node", node, "tries", c.unserved[node])
			delete(c.unserved, node)
			continue
		}
		if err == nil {
			errs = append(errs, nodeErr)
		}
	}
	if err != nil && len(c.unserved) > 0 {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// perNodeLists is the most nodes whose claims pendingClaims lists node by
// node; for more it lists every claim labelled with a node at once.
const perNodeLists = 8

// pendingClaims returns the pending claims (no spec.volumeName) labelled
// with each of nodes, listed from the API server: the API server filters
// a label selector by scanning its cache of claims, so a few nodes are
// listed one by one (little is sent), and more, as when the provisioner
// DaemonSet is deleted, in one list of every claim labelled with a node.
func (c *Controller) pendingClaims(ctx context.Context, nodes []string) (map[string][]v1.PersistentVolumeClaim, error) {
	var selectors []labels.Selector
	if len(nodes) <= perNodeLists {
		for _, node := range nodes {
			selectors = append(selectors, labels.SelectorFromSet(labels.Set{hostpathv1.LabelNode: node}))
		}
	} else {
		labelled, err := labels.NewRequirement(hostpathv1.LabelNode, selection.Exists, nil)
		if err != nil {
			return nil, fmt.Errorf("the selector of the claims labelled with a node: %w", err)
		}
		byNode, err := labels.NewRequirement(hostpathv1.LabelNode, selection.NotIn,
			[]string{hostpathv1.NodeLabelMultihost, hostpathv1.NodeLabelNodeGone, hostpathv1.NodeLabelUnsorted})
		if err != nil {
			return nil, fmt.Errorf("the selector of the claims labelled with a node: %w", err)
		}
		selectors = append(selectors, labels.NewSelector().Add(*labelled, *byNode))
	}
	wanted := make(map[string]bool, len(nodes))
	for _, node := range nodes {
		wanted[node] = true
	}
	pending := map[string][]v1.PersistentVolumeClaim{}
	for _, sel := range selectors {
		claims, err := c.kube.CoreV1().PersistentVolumeClaims(metav1.NamespaceAll).List(ctx, metav1.ListOptions{LabelSelector: sel.String()})
		if err != nil {
			return nil, fmt.Errorf("list the claims of selector %s: %w", sel, err)
		}
		for _, claim := range claims.Items {
			if node := claim.Labels[hostpathv1.LabelNode]; claim.Spec.VolumeName == "" && wanted[node] {
				pending[node] = append(pending[node], claim)
			}
		}
	}
	return pending, nil
}

// touch sets hostpathv1.NodeLabelUnsorted on each of claims, the pending
// claims labelled with node (hostpathv1.LabelNode), a node whose served
// key the ConfigMap no longer holds (touchAll): every instance then sees
// the claim and the elected one speaks for it. A claim gone meanwhile, or
// bound, is done. A claim that comes back still pending and labelled with
// node (the API server has not seen the new ConfigMap yet, and its policy
// labelled it with node again) is an error, so that the queue retries.
func (c *Controller) touch(ctx context.Context, node string, claims []v1.PersistentVolumeClaim) error {
	if len(claims) == 0 {
		return nil
	}
	touched, err := c.touchAll(ctx, claims, func(got *v1.PersistentVolumeClaim) bool {
		return got.Spec.VolumeName != "" || got.Labels[hostpathv1.LabelNode] != node
	})
	klog.FromContext(ctx).V(2).Info("Touched the pending claims of a node that runs no provisioner pod any more", "node", node, "claims", touched)
	return err
}

// touchAll sets the label hostpathv1.NodeLabelUnsorted on each of claims
// (touchPatch) and returns how many came back as done says, and the
// errors joined: a patch that failed, a claim that did not come back done.
// A claim gone meanwhile is done. The claim-labelling policy runs on the
// update, because it changes the label or the claim is Unsorted, and
// labels the claim from the parameters the API server has; without the
// policy (its binding removed) the claim stays Unsorted, which every
// instance watches.
func (c *Controller) touchAll(ctx context.Context, claims []v1.PersistentVolumeClaim, done func(*v1.PersistentVolumeClaim) bool) (int, error) {
	var errs []error
	touched := 0
	for _, claim := range claims {
		got, err := c.kube.CoreV1().PersistentVolumeClaims(claim.Namespace).Patch(ctx, claim.Name, types.MergePatchType, touchPatch,
			metav1.PatchOptions{FieldManager: FieldManager})
		switch {
		case apierrors.IsNotFound(err):
		case err != nil:
			errs = append(errs, fmt.Errorf("touch claim %s/%s: %w", claim.Namespace, claim.Name, err))
		case !done(got):
			errs = append(errs, fmt.Errorf("touch claim %s/%s: still labelled %s=%s", claim.Namespace, claim.Name, hostpathv1.LabelNode, got.Labels[hostpathv1.LabelNode]))
		default:
			touched++
		}
	}
	return touched, errors.Join(errs...)
}
