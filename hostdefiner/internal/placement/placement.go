// Package placement decides, the way the Kubernetes DaemonSet controller
// does, whether a DaemonSet would run (or keep running) its daemon pod on a
// node. The host definer uses it to tell a node that leaves the manager
// DaemonSet for good (relabelled, tainted NoExecute) from a node that only
// restarts or is briefly unhealthy (NotReady, unreachable, cordoned, under
// pressure), where the daemon pod stays.
//
// It mirrors NodeShouldRunDaemonPod in kubernetes/pkg/controller/daemon: the
// would-be pod is the template's spec bound to the node, plus the
// tolerations the controller adds to every daemon pod
// (AddOrUpdateDaemonPodTolerations). Node affinity is checked with
// GetRequiredNodeAffinity(pod).Match from
// k8s.io/component-helpers/scheduling/corev1/nodeaffinity, which covers both
// nodeSelector and requiredDuringSchedulingIgnoredDuringExecution. Taints are
// checked with FindMatchingUntoleratedTaint from
// k8s.io/component-helpers/scheduling/corev1, keeping NoExecute taints only:
// a NoSchedule or PreferNoSchedule taint keeps a new daemon pod off the node
// but never evicts a running one, so here it never counts.
//
// Tolerations are matched without the numeric comparison operators (Gt, Lt)
// of the TaintTolerationComparisonOperators feature gate, off by default: a
// toleration with one of them tolerates nothing here. The helpers log only
// when such a value does not parse, so they get klog.Background().
package placement

import (
	"fmt"
	"sort"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
	"k8s.io/klog/v2"
)

// Reasons a Decision gives when Runs is false.
const (
	// ReasonNodeAffinity: the template's nodeSelector or required node
	// affinity does not match the node (or cannot be evaluated).
	ReasonNodeAffinity = "NodeAffinity"
	// ReasonTaint: the node has a NoExecute taint the pod does not tolerate.
	ReasonTaint = "Taint"
	// ReasonNodeName: the template sets spec.nodeName to another node.
	ReasonNodeName = "NodeName"
	// ReasonNoDaemonSet: ShouldRun was given a nil DaemonSet.
	ReasonNoDaemonSet = "NoDaemonSet"
	// ReasonNoNode: ShouldRun was given a nil Node.
	ReasonNoNode = "NoNode"
)

// Decision says whether a DaemonSet's pod belongs on a node and, if not, why.
type Decision struct {
	// Runs is true when the DaemonSet would run (or keep running) its pod on the node.
	Runs bool
	// Reason is a short CamelCase reason when Runs is false: "NodeAffinity"
	// (node selector or required node affinity of the pod template does not
	// match) or "Taint" (an untolerated NoExecute taint). It is "NodeName"
	// when the template pins its pods to another node by spec.nodeName, and
	// "NoDaemonSet" or "NoNode" when ShouldRun got a nil argument. It is
	// empty when Runs is true.
	Reason string
	// Message is a full sentence for events/conditions naming the selector
	// or the taint (key=value:effect). It is empty when Runs is true.
	Message string
}

// ShouldRun reports whether ds would keep running its pod on node: a pod
// that runs there stays (NoSchedule taints do not count).
//
// A nil ds gives Runs=false with Reason "NoDaemonSet"; a nil node gives
// Runs=false with Reason "NoNode". Neither argument is modified.
func ShouldRun(ds *appsv1.DaemonSet, node *v1.Node) Decision {
	return decide(ds, node, isNoExecute)
}

// ShouldSchedule reports whether ds would start a new pod on node: as
// ShouldRun, and a NoSchedule taint the pod does not tolerate also keeps it
// off (Reason "Taint").
func ShouldSchedule(ds *appsv1.DaemonSet, node *v1.Node) Decision {
	return decide(ds, node, func(t *v1.Taint) bool {
		return t.Effect == v1.TaintEffectNoExecute || t.Effect == v1.TaintEffectNoSchedule
	})
}

// decide is ShouldRun and ShouldSchedule, with the taints that count.
func decide(ds *appsv1.DaemonSet, node *v1.Node, counts func(*v1.Taint) bool) Decision {
	if ds == nil {
		return Decision{Reason: ReasonNoDaemonSet, Message: "No DaemonSet was given."}
	}
	if node == nil {
		return Decision{Reason: ReasonNoNode, Message: fmt.Sprintf("No node was given for DaemonSet %s.", dsName(ds))}
	}
	if want := ds.Spec.Template.Spec.NodeName; want != "" && want != node.Name {
		return Decision{Reason: ReasonNodeName, Message: fmt.Sprintf(
			"DaemonSet %s pins its pods to node %q by spec.nodeName, not to node %q.", dsName(ds), want, node.Name)}
	}
	pod := daemonPod(ds, node.Name)
	if ok, err := nodeaffinity.GetRequiredNodeAffinity(pod).Match(node); err != nil || !ok {
		msg := fmt.Sprintf("Node %q does not match the %s of DaemonSet %s.", node.Name, describeSelector(&pod.Spec), dsName(ds))
		if err != nil {
			msg = fmt.Sprintf("Node %q cannot be matched against the %s of DaemonSet %s: %v.",
				node.Name, describeSelector(&pod.Spec), dsName(ds), err)
		}
		return Decision{Reason: ReasonNodeAffinity, Message: msg}
	}
	taint, found := corev1helpers.FindMatchingUntoleratedTaint(klog.Background(), node.Spec.Taints, pod.Spec.Tolerations, counts, false)
	if found {
		return Decision{Reason: ReasonTaint, Message: fmt.Sprintf(
			"Node %q has the taint %s, which DaemonSet %s does not tolerate.", node.Name, taint.ToString(), dsName(ds))}
	}
	return Decision{Runs: true}
}

// isNoExecute keeps only taints that evict running pods.
func isNoExecute(t *v1.Taint) bool {
	return t.Effect == v1.TaintEffectNoExecute
}

// daemonTolerations are the tolerations the DaemonSet controller adds to
// every daemon pod; networkUnavailable is added only for hostNetwork pods.
var (
	daemonTolerations = []v1.Toleration{
		{Key: v1.TaintNodeNotReady, Operator: v1.TolerationOpExists, Effect: v1.TaintEffectNoExecute},
		{Key: v1.TaintNodeUnreachable, Operator: v1.TolerationOpExists, Effect: v1.TaintEffectNoExecute},
		{Key: v1.TaintNodeDiskPressure, Operator: v1.TolerationOpExists, Effect: v1.TaintEffectNoSchedule},
		{Key: v1.TaintNodeMemoryPressure, Operator: v1.TolerationOpExists, Effect: v1.TaintEffectNoSchedule},
		{Key: v1.TaintNodePIDPressure, Operator: v1.TolerationOpExists, Effect: v1.TaintEffectNoSchedule},
		{Key: v1.TaintNodeUnschedulable, Operator: v1.TolerationOpExists, Effect: v1.TaintEffectNoSchedule},
	}
	networkUnavailableToleration = v1.Toleration{
		Key: v1.TaintNodeNetworkUnavailable, Operator: v1.TolerationOpExists, Effect: v1.TaintEffectNoSchedule,
	}
)

// daemonPod builds the pod the DaemonSet controller would create on the
// node: the template bound to nodeName, with the daemon tolerations added.
// The template's slices are not modified.
func daemonPod(ds *appsv1.DaemonSet, nodeName string) *v1.Pod {
	pod := &v1.Pod{ObjectMeta: ds.Spec.Template.ObjectMeta, Spec: ds.Spec.Template.Spec}
	pod.Namespace = ds.Namespace
	pod.Spec.NodeName = nodeName
	tols := append([]v1.Toleration(nil), pod.Spec.Tolerations...)
	for _, t := range daemonTolerations {
		tols = addOrUpdateToleration(tols, t)
	}
	if pod.Spec.HostNetwork {
		tols = addOrUpdateToleration(tols, networkUnavailableToleration)
	}
	pod.Spec.Tolerations = tols
	return pod
}

// addOrUpdateToleration replaces the toleration in tols that matches t (same
// key, operator, value and effect) by t, or appends t if none matches, as
// the DaemonSet controller does. It may modify tols in place.
func addOrUpdateToleration(tols []v1.Toleration, t v1.Toleration) []v1.Toleration {
	for i := range tols {
		if t.MatchToleration(&tols[i]) {
			tols[i] = t
			return tols
		}
	}
	return append(tols, t)
}

// describeSelector names the pod spec's nodeSelector and required node
// affinity for a message, e.g. `nodeSelector disk=ssd and required node
// affinity (hostpath.dev/manager NotIn [false])`.
func describeSelector(spec *v1.PodSpec) string {
	var parts []string
	if len(spec.NodeSelector) > 0 {
		keys := make([]string, 0, len(spec.NodeSelector))
		for k := range spec.NodeSelector {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		pairs := make([]string, len(keys))
		for i, k := range keys {
			pairs[i] = k + "=" + spec.NodeSelector[k]
		}
		parts = append(parts, "nodeSelector "+strings.Join(pairs, ","))
	}
	if a := spec.Affinity; a != nil && a.NodeAffinity != nil && a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution != nil {
		terms := a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
		parts = append(parts, "required node affinity "+describeTerms(terms))
	}
	if len(parts) == 0 {
		return "node selection"
	}
	return strings.Join(parts, " and ")
}

// describeTerms renders node selector terms, ORed, each term's
// requirements ANDed, e.g. `(a In [x,y], metadata.name NotIn [n1]) or (b Exists)`.
func describeTerms(terms []v1.NodeSelectorTerm) string {
	if len(terms) == 0 {
		return "(no terms)"
	}
	out := make([]string, len(terms))
	for i, term := range terms {
		var reqs []string
		for _, r := range term.MatchExpressions {
			reqs = append(reqs, describeRequirement(r))
		}
		for _, r := range term.MatchFields {
			reqs = append(reqs, describeRequirement(r))
		}
		out[i] = "(" + strings.Join(reqs, ", ") + ")"
	}
	return strings.Join(out, " or ")
}

// describeRequirement renders one requirement as `key Op [v1,v2]`, leaving
// out the values for Exists and DoesNotExist.
func describeRequirement(r v1.NodeSelectorRequirement) string {
	if len(r.Values) == 0 {
		return fmt.Sprintf("%s %s", r.Key, r.Operator)
	}
	return fmt.Sprintf("%s %s [%s]", r.Key, r.Operator, strings.Join(r.Values, ","))
}

// dsName is ds's namespace/name.
func dsName(ds *appsv1.DaemonSet) string {
	if ds.Namespace == "" {
		return ds.Name
	}
	return ds.Namespace + "/" + ds.Name
}
