package placement

import (
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"hostpath.dev/api/hostpath/v1/hostpathtest"
)

const managerLabel = "hostpath.dev/manager"

// controlPlaneToleration is what manifests/components/control-plane adds to
// the node agents.
var controlPlaneToleration = v1.Toleration{Key: "node-role.kubernetes.io/control-plane", Operator: v1.TolerationOpExists, Effect: v1.TaintEffectNoSchedule}

// readyNode is a plain, Ready worker node.
func readyNode() *v1.Node {
	return &v1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "node-1", Labels: map[string]string{
			"kubernetes.io/hostname": "node-1", "kubernetes.io/os": "linux",
		}},
		Status: v1.NodeStatus{Conditions: []v1.NodeCondition{{Type: v1.NodeReady, Status: v1.ConditionTrue}}},
	}
}

func taint(key, value string, effect v1.TaintEffect) func(*v1.Node) {
	return func(n *v1.Node) {
		n.Spec.Taints = append(n.Spec.Taints, v1.Taint{Key: key, Value: value, Effect: effect})
	}
}

func label(key, value string) func(*v1.Node) {
	return func(n *v1.Node) { n.Labels[key] = value }
}

func ready(status v1.ConditionStatus) func(*v1.Node) {
	return func(n *v1.Node) { n.Status.Conditions[0].Status = status }
}

func tolerate(tol v1.Toleration) func(*appsv1.DaemonSet) {
	return func(ds *appsv1.DaemonSet) {
		ds.Spec.Template.Spec.Tolerations = append(ds.Spec.Template.Spec.Tolerations, tol)
	}
}

func nodeSelector(key, value string) func(*appsv1.DaemonSet) {
	return func(ds *appsv1.DaemonSet) { ds.Spec.Template.Spec.NodeSelector = map[string]string{key: value} }
}

func requirement(r v1.NodeSelectorRequirement, field bool) func(*appsv1.DaemonSet) {
	return func(ds *appsv1.DaemonSet) {
		term := &ds.Spec.Template.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms[0]
		if field {
			term.MatchFields = append(term.MatchFields, r)
			return
		}
		term.MatchExpressions = append(term.MatchExpressions, r)
	}
}

func hostNetwork(ds *appsv1.DaemonSet) { ds.Spec.Template.Spec.HostNetwork = true }

func cordon(n *v1.Node) {
	n.Spec.Unschedulable = true
	taint(v1.TaintNodeUnschedulable, "", v1.TaintEffectNoSchedule)(n)
}

// shouldRunCase is one row of the ShouldRun table: the manager DaemonSet
// and a Ready node, each changed by the given functions (or nil).
type shouldRunCase struct {
	name    string
	nilDS   bool
	nilNode bool
	ds      []func(*appsv1.DaemonSet)
	node    []func(*v1.Node)
	runs    bool
	reason  string
	// msgHas must appear in Message when Runs is false.
	msgHas string
	// noNewPod: ShouldSchedule says no although ShouldRun says yes (an
	// untolerated NoSchedule taint).
	noNewPod bool
}

// shouldRunCases is the ShouldRun table.
func shouldRunCases() []shouldRunCase {
	const maintenance = "example.com/maintenance"
	return []shouldRunCase{
		{name: "plain node", runs: true},
		{name: "node selector matches", ds: fns(nodeSelector("disk", "ssd")), node: nodes(label("disk", "ssd")), runs: true},
		{name: "node selector does not match", ds: fns(nodeSelector("disk", "ssd")), node: nodes(label("disk", "hdd")),
			reason: ReasonNodeAffinity, msgHas: "disk=ssd"},
		{name: "node selector label missing", ds: fns(nodeSelector("disk", "ssd")), reason: ReasonNodeAffinity, msgHas: "disk"},
		{name: "manager label true", node: nodes(label(managerLabel, "true")), runs: true},
		{name: "manager label false", node: nodes(label(managerLabel, "false")),
			reason: ReasonNodeAffinity, msgHas: managerLabel + " NotIn [false]"},
		{name: "match field excludes node", ds: fns(requirement(v1.NodeSelectorRequirement{
			Key: "metadata.name", Operator: v1.NodeSelectorOpNotIn, Values: []string{"node-1"}}, true)),
			reason: ReasonNodeAffinity, msgHas: "metadata.name"},
		{name: "affinity error", ds: fns(requirement(v1.NodeSelectorRequirement{
			Key: "cpus", Operator: v1.NodeSelectorOpGt, Values: []string{"many"}}, false)),
			node: nodes(label("cpus", "4")), reason: ReasonNodeAffinity, msgHas: "cpus"},
		{name: "control-plane node: no new pod by default, a running one stays (NoSchedule)",
			node: nodes(taint("node-role.kubernetes.io/control-plane", "", v1.TaintEffectNoSchedule), label("node-role.kubernetes.io/control-plane", "")),
			runs: true, noNewPod: true},
		{name: "control-plane node with the control-plane component", ds: fns(tolerate(controlPlaneToleration)),
			node: nodes(taint("node-role.kubernetes.io/control-plane", "", v1.TaintEffectNoSchedule), label("node-role.kubernetes.io/control-plane", "")),
			runs: true},
		{name: "untainted control-plane node (it admits ordinary pods)",
			node: nodes(label("node-role.kubernetes.io/control-plane", "")), runs: true},
		{name: "cordoned", node: nodes(cordon), runs: true},
		{name: "not ready", node: nodes(ready(v1.ConditionFalse), taint(v1.TaintNodeNotReady, "", v1.TaintEffectNoExecute),
			taint(v1.TaintNodeNotReady, "", v1.TaintEffectNoSchedule)), runs: true, noNewPod: true},
		{name: "unreachable", node: nodes(ready(v1.ConditionUnknown), taint(v1.TaintNodeUnreachable, "", v1.TaintEffectNoExecute),
			taint(v1.TaintNodeUnreachable, "", v1.TaintEffectNoSchedule)), runs: true, noNewPod: true},
		{name: "not ready with template tolerationSeconds",
			ds: fns(tolerate(v1.Toleration{Key: v1.TaintNodeNotReady, Operator: v1.TolerationOpExists,
				Effect: v1.TaintEffectNoExecute, TolerationSeconds: ptr.To[int64](30)})),
			node: nodes(taint(v1.TaintNodeNotReady, "", v1.TaintEffectNoExecute)), runs: true},
		{name: "disk pressure", node: nodes(taint(v1.TaintNodeDiskPressure, "", v1.TaintEffectNoSchedule)), runs: true},
		{name: "memory and pid pressure", node: nodes(taint(v1.TaintNodeMemoryPressure, "", v1.TaintEffectNoSchedule),
			taint(v1.TaintNodePIDPressure, "", v1.TaintEffectNoSchedule)), runs: true},
		{name: "arbitrary NoSchedule taint", node: nodes(taint("hostpath.dev/fake-node", "true", v1.TaintEffectNoSchedule)), runs: true, noNewPod: true},
		{name: "PreferNoSchedule taint", node: nodes(taint("example.com/busy", "", v1.TaintEffectPreferNoSchedule)), runs: true},
		{name: "untolerated NoExecute taint", node: nodes(taint(maintenance, "drain", v1.TaintEffectNoExecute)),
			reason: ReasonTaint, msgHas: maintenance + "=drain:NoExecute"},
		{name: "NoExecute taint tolerated by template",
			ds:   fns(tolerate(v1.Toleration{Key: maintenance, Operator: v1.TolerationOpExists, Effect: v1.TaintEffectNoExecute})),
			node: nodes(taint(maintenance, "drain", v1.TaintEffectNoExecute)), runs: true},
		{name: "NoExecute taint with other value than tolerated",
			ds: fns(tolerate(v1.Toleration{Key: maintenance, Operator: v1.TolerationOpEqual, Value: "soon",
				Effect: v1.TaintEffectNoExecute})),
			node: nodes(taint(maintenance, "drain", v1.TaintEffectNoExecute)), reason: ReasonTaint, msgHas: maintenance},
		{name: "affinity checked before taints", node: nodes(label(managerLabel, "false"),
			taint(maintenance, "drain", v1.TaintEffectNoExecute)), reason: ReasonNodeAffinity, msgHas: managerLabel},
		{name: "hostNetwork and network unavailable", ds: fns(hostNetwork),
			node: nodes(taint(v1.TaintNodeNetworkUnavailable, "", v1.TaintEffectNoSchedule)), runs: true},
		{name: "network unavailable without hostNetwork",
			node: nodes(taint(v1.TaintNodeNetworkUnavailable, "", v1.TaintEffectNoSchedule)), runs: true, noNewPod: true},
		{name: "template nodeName is this node", ds: fns(func(ds *appsv1.DaemonSet) { ds.Spec.Template.Spec.NodeName = "node-1" }),
			runs: true},
		{name: "template nodeName is another node", ds: fns(func(ds *appsv1.DaemonSet) { ds.Spec.Template.Spec.NodeName = "node-2" }),
			reason: ReasonNodeName, msgHas: "node-2"},
		{name: "nil DaemonSet", nilDS: true, reason: ReasonNoDaemonSet, msgHas: "DaemonSet"},
		{name: "nil node", nilNode: true, reason: ReasonNoNode, msgHas: "hostpath-system/hostpath-manager"},
		{name: "nil both", nilDS: true, nilNode: true, reason: ReasonNoDaemonSet, msgHas: "DaemonSet"},
	}
}

func TestShouldRun(t *testing.T) {
	for _, tt := range shouldRunCases() {
		t.Run(tt.name, func(t *testing.T) {
			var ds *appsv1.DaemonSet
			if !tt.nilDS {
				ds = hostpathtest.ManagerDaemonSet("hostpath-system", "hostpath-manager")
				for _, f := range tt.ds {
					f(ds)
				}
			}
			var node *v1.Node
			if !tt.nilNode {
				node = readyNode()
				for _, f := range tt.node {
					f(node)
				}
			}
			dsBefore, nodeBefore := ds.DeepCopy(), node.DeepCopy()

			got := ShouldRun(ds, node)

			if got.Runs != tt.runs || got.Reason != tt.reason {
				t.Fatalf("ShouldRun() = %+v, want Runs=%v Reason=%q", got, tt.runs, tt.reason)
			}
			if tt.runs && got.Message != "" {
				t.Errorf("Message = %q, want empty when Runs", got.Message)
			}
			if !tt.runs && !strings.Contains(got.Message, tt.msgHas) {
				t.Errorf("Message = %q, want it to mention %q", got.Message, tt.msgHas)
			}
			if !tt.runs && !strings.HasSuffix(got.Message, ".") {
				t.Errorf("Message = %q, want a full sentence", got.Message)
			}
			if sched := ShouldSchedule(ds, node); sched.Runs != (tt.runs && !tt.noNewPod) {
				t.Errorf("ShouldSchedule() = %+v, want Runs=%v", sched, tt.runs && !tt.noNewPod)
			}
			if !equality.Semantic.DeepEqual(ds, dsBefore) || !equality.Semantic.DeepEqual(node, nodeBefore) {
				t.Errorf("ShouldRun modified its arguments")
			}
		})
	}
}

func fns(f ...func(*appsv1.DaemonSet)) []func(*appsv1.DaemonSet) { return f }

func nodes(f ...func(*v1.Node)) []func(*v1.Node) { return f }
