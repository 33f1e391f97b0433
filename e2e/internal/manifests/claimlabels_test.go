package manifests

import (
	"maps"
	"slices"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"

	hostpathv1 "hostpath.dev/api/hostpath/v1"
)

// kubernetes135 is the component of installs on Kubernetes 1.35, which
// does not serve MutatingAdmissionPolicies.
const kubernetes135 = "components/kubernetes-1.35"

// TestClaimLabelsPolicy checks the claim-labelling policy, its binding and
// its parameters as the base renders them. Its CEL is not evaluated here
// (no CEL evaluator is a dependency of the repository): the expressions
// are checked on a cluster.
func TestClaimLabelsPolicy(t *testing.T) {
	m := render(t, "")
	policy := &admissionv1.MutatingAdmissionPolicy{}
	m.decode(t, key{"MutatingAdmissionPolicy", "", hostpathv1.ClaimLabelsPolicy}, policy)
	binding := &admissionv1.MutatingAdmissionPolicyBinding{}
	m.decode(t, key{"MutatingAdmissionPolicyBinding", "", hostpathv1.ClaimLabelsPolicy}, binding)
	params := &corev1.ConfigMap{}
	m.decode(t, key{"ConfigMap", namespace, hostpathv1.ClassesConfigMap}, params)

	s := policy.Spec
	if s.FailurePolicy == nil || *s.FailurePolicy != admissionv1.Fail || s.ParamKind == nil ||
		s.ParamKind.APIVersion != "v1" || s.ParamKind.Kind != "ConfigMap" || len(s.Mutations) != 1 ||
		s.Mutations[0].PatchType != admissionv1.PatchTypeJSONPatch || s.Mutations[0].JSONPatch == nil {
		t.Fatalf("policy spec %+v: want failurePolicy Fail, ConfigMap parameters, one JSON patch (not an apply configuration: its structured merge slowed claims down)", s)
	}
	if s.MatchConstraints == nil || len(s.MatchConstraints.ResourceRules) != 1 {
		t.Fatalf("policy matchConstraints %+v: want one rule", s.MatchConstraints)
	}
	rule := s.MatchConstraints.ResourceRules[0]
	ops := []admissionv1.OperationType{admissionv1.Create, admissionv1.Update}
	if !slices.Equal(rule.Operations, ops) || !slices.Equal(rule.Resources, []string{"persistentvolumeclaims"}) ||
		!slices.Equal(rule.APIGroups, []string{""}) {
		t.Errorf("policy rule %+v: want CREATE and UPDATE of persistentvolumeclaims (not their status)", rule)
	}
	// The expressions name the label, its values and the node annotations
	// in hostpathv1's order.
	var all strings.Builder
	for _, v := range s.Variables {
		all.WriteString(v.Expression + "\n")
	}
	all.WriteString(s.Mutations[0].JSONPatch.Expression)
	exprs := all.String()
	for _, want := range []string{"'/metadata/labels/" + strings.ReplaceAll(hostpathv1.LabelNode, "/", "~1") + "'", "'" + hostpathv1.LabelNode + "'", "'" + hostpathv1.NodeLabelMultihost + "'", "'" + hostpathv1.NodeLabelUnsorted + "'",
		"'" + hostpathv1.ClassKeyPrefix + "'", "'" + hostpathv1.ServedKeyPrefix + "'", "'" + hostpathv1.ModeMultihost + "'", "'" + hostpathv1.ModeNode + "'", "spec.?volumeName",
		"['" + strings.Join(hostpathv1.ClaimNodeAnnotations, "', '") + "']",
		// The storage-provisioner annotations, named where the PV
		// controller would (the class's keys).
		"'" + hostpathv1.ProvisionerKeyPrefix + "'", "'" + hostpathv1.ImmediateKeyPrefix + "'",
		"'/metadata/annotations/volume.kubernetes.io~1storage-provisioner'", "'/metadata/annotations/volume.beta.kubernetes.io~1storage-provisioner'",
		"['volume.kubernetes.io/storage-provisioner', 'volume.beta.kubernetes.io/storage-provisioner'].all("} {
		if !strings.Contains(exprs, want) {
			t.Errorf("the policy's expressions do not contain %s", want)
		}
	}
	// Two match conditions: whether the update may change the label (a
	// creation; no label or Unsorted; the label, the class or a node
	// annotation changed), so that kube-controller-manager's updates of a
	// settled claim skip the policy; and whether the claim is of hostpath.
	if len(s.MatchConditions) != 2 {
		t.Fatalf("policy matchConditions %+v: want label-may-change and hostpath-claim", s.MatchConditions)
	}
	mayChange := s.MatchConditions[0].Expression
	for _, want := range []string{"request.operation == 'CREATE'", "oldObject.metadata.?labels[?'" + hostpathv1.LabelNode + "']",
		"['', '" + hostpathv1.NodeLabelUnsorted + "']", "oldObject.spec.?storageClassName",
		"['" + strings.Join(hostpathv1.ClaimNodeAnnotations, "', '") + "']", "oldObject.metadata.?annotations[?k]"} {
		if s.MatchConditions[0].Name != "label-may-change" || !strings.Contains(mayChange, want) {
			t.Errorf("policy matchCondition %s (%s): want label-may-change, containing %s", s.MatchConditions[0].Name, mayChange, want)
		}
	}
	if s.MatchConditions[1].Name != "hostpath-claim" || !strings.Contains(s.MatchConditions[1].Expression, "'"+hostpathv1.ProvisionersKey+"'") {
		t.Errorf("policy matchCondition %+v: want hostpath-claim, reading the provisioners", s.MatchConditions[1])
	}

	if binding.Spec.PolicyName != policy.Name || binding.Spec.ParamRef == nil || binding.Spec.ParamRef.Name != params.Name ||
		binding.Spec.ParamRef.Namespace != params.Namespace || binding.Spec.ParamRef.ParameterNotFoundAction == nil ||
		*binding.Spec.ParamRef.ParameterNotFoundAction != admissionv1.AllowAction {
		t.Errorf("binding spec %+v: want policy %s, parameters %s/%s, Allow when missing", binding.Spec, policy.Name, params.Namespace, params.Name)
	}
	// Shipped with the provisioner names only; the host definer adds the
	// classes.
	names := hostpathv1.NewProvisionerNames(hostpathv1.DefaultProvisionerName)
	want := map[string]string{hostpathv1.ProvisionersKey: strings.Join(append([]string{names.Name()}, names.Additional()...), " ")}
	if !maps.Equal(params.Data, want) || params.Labels["app.kubernetes.io/part-of"] != "hostpath" {
		t.Errorf("ConfigMap %s data %v labels %v: want data %v, part of hostpath", params.Name, params.Data, params.Labels, want)
	}
}

// TestKubernetes135 checks that the component of 1.35 installs leaves out
// the claim-labelling policy and its binding, and nothing else.
func TestKubernetes135(t *testing.T) {
	base, old := render(t, ""), render(t, kubernetes135)
	gone := []key{{"MutatingAdmissionPolicy", "", hostpathv1.ClaimLabelsPolicy}, {"MutatingAdmissionPolicyBinding", "", hostpathv1.ClaimLabelsPolicy}}
	for k, doc := range base.docs {
		if slices.Contains(gone, k) {
			if _, ok := old.docs[k]; ok {
				t.Errorf("%v rendered with %s", k, kubernetes135)
			}
			continue
		}
		if string(old.docs[k]) != string(doc) {
			t.Errorf("%v differs with %s", k, kubernetes135)
		}
	}
	if len(old.docs) != len(base.docs)-len(gone) {
		t.Errorf("%d objects with %s, %d without: want %d fewer", len(old.docs), kubernetes135, len(base.docs), len(gone))
	}
}

// TestClassesConfigMapWriters checks who may write the ConfigMap of the
// classes: the host definer may create and update it; the provisioner
// (whose instances run on every node) may write no ConfigMap.
func TestClassesConfigMapWriters(t *testing.T) {
	m := render(t, "")
	can := func(rules []rbacv1.PolicyRule, verb string) bool {
		return slices.ContainsFunc(rules, func(r rbacv1.PolicyRule) bool {
			return slices.Contains(r.APIGroups, "") && slices.Contains(r.Resources, "configmaps") && slices.Contains(r.Verbs, verb) &&
				(len(r.ResourceNames) == 0 || slices.Contains(r.ResourceNames, hostpathv1.ClassesConfigMap))
		})
	}
	role := &rbacv1.Role{}
	m.decode(t, key{"Role", namespace, hostdefinerName}, role)
	for _, verb := range []string{"get", "list", "watch", "create", "update"} {
		if !can(role.Rules, verb) {
			t.Errorf("Role %s may not %s ConfigMap %s", hostdefinerName, verb, hostpathv1.ClassesConfigMap)
		}
	}
	for k := range m.docs {
		if k.kind != "Role" && k.kind != "ClusterRole" || !strings.HasPrefix(k.name, provisionerName) {
			continue
		}
		// A Role decodes as a ClusterRole: the same fields, but one.
		r := &rbacv1.ClusterRole{}
		m.decode(t, k, r)
		for _, verb := range []string{"create", "update", "patch", "delete", "deletecollection", "*"} {
			if can(r.Rules, verb) {
				t.Errorf("%v may %s ConfigMap %s", k, verb, hostpathv1.ClassesConfigMap)
			}
		}
	}
}

// TestHostDefinerClaimTouch checks what lets the host definer touch the
// pending claims of a node that no longer runs a provisioner pod: its
// ClusterRole lists and patches claims and does nothing else with them,
// and a ValidatingAdmissionPolicy, bound with Deny, matches its account's
// writes of claims.
func TestHostDefinerClaimTouch(t *testing.T) {
	m := render(t, "")
	role := &rbacv1.ClusterRole{}
	m.decode(t, key{"ClusterRole", "", hostdefinerName}, role)
	var verbs []string
	for _, r := range role.Rules {
		if slices.Contains(r.APIGroups, "") && (slices.Contains(r.Resources, "persistentvolumeclaims") || slices.Contains(r.Resources, "*")) {
			verbs = append(verbs, r.Verbs...)
		}
	}
	slices.Sort(verbs)
	if want := []string{"list", "patch"}; !slices.Equal(verbs, want) {
		t.Errorf("ClusterRole %s verbs on claims %v, want %v", hostdefinerName, verbs, want)
	}
	const name = "hostpath-hostdefiner-claims"
	policy := &admissionv1.ValidatingAdmissionPolicy{}
	m.decode(t, key{"ValidatingAdmissionPolicy", "", name}, policy)
	binding := &admissionv1.ValidatingAdmissionPolicyBinding{}
	m.decode(t, key{"ValidatingAdmissionPolicyBinding", "", name}, binding)
	s := policy.Spec
	if s.FailurePolicy == nil || *s.FailurePolicy != admissionv1.Fail || s.MatchConstraints == nil || len(s.MatchConstraints.ResourceRules) != 1 ||
		!slices.Equal(s.MatchConstraints.ResourceRules[0].Resources, []string{"persistentvolumeclaims"}) ||
		!slices.Contains(s.MatchConstraints.ResourceRules[0].Operations, admissionv1.Update) {
		t.Errorf("policy %s spec %+v: want failurePolicy Fail, the updates of claims", name, s)
	}
	if len(s.MatchConditions) != 1 || !strings.Contains(s.MatchConditions[0].Expression, "serviceaccount:"+namespace+":"+hostdefinerName) {
		t.Errorf("policy %s matchConditions %+v: want the host definer's account", name, s.MatchConditions)
	}
	if binding.Spec.PolicyName != name || !slices.Equal(binding.Spec.ValidationActions, []admissionv1.ValidationAction{admissionv1.Deny}) {
		t.Errorf("binding %s spec %+v: want policy %s, Deny", name, binding.Spec, name)
	}
}
