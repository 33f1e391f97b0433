package manifests

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"
)

// The OpenShift overlay and its SecurityContextConstraints.
const (
	openshift       = "openshift"
	sccKind         = "SecurityContextConstraints"
	sccAPIVersion   = "security.openshift.io/v1"
	sccManager      = "hostpath-manager"
	sccRestricted   = "hostpath-restricted"
	selinuxOnArg    = "--selinux=on"
	selinuxArgFlag  = "--selinux="
	allCapabilities = "ALL"
)

// scc is a security.openshift.io/v1 SecurityContextConstraints, the fields
// OpenShift defines (decoded strictly: a misspelled field fails the test).
type scc struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata"`

	Priority                        *int32              `json:"priority"`
	AllowPrivilegedContainer        bool                `json:"allowPrivilegedContainer"`
	DefaultAddCapabilities          []corev1.Capability `json:"defaultAddCapabilities"`
	RequiredDropCapabilities        []corev1.Capability `json:"requiredDropCapabilities"`
	AllowedCapabilities             []corev1.Capability `json:"allowedCapabilities"`
	AllowHostDirVolumePlugin        bool                `json:"allowHostDirVolumePlugin"`
	Volumes                         []string            `json:"volumes"`
	AllowedFlexVolumes              []map[string]string `json:"allowedFlexVolumes"`
	AllowHostNetwork                bool                `json:"allowHostNetwork"`
	AllowHostPorts                  bool                `json:"allowHostPorts"`
	AllowHostPID                    bool                `json:"allowHostPID"`
	AllowHostIPC                    bool                `json:"allowHostIPC"`
	DefaultAllowPrivilegeEscalation *bool               `json:"defaultAllowPrivilegeEscalation"`
	AllowPrivilegeEscalation        *bool               `json:"allowPrivilegeEscalation"`
	SELinuxContext                  struct {
		Type           string                 `json:"type"`
		SELinuxOptions *corev1.SELinuxOptions `json:"seLinuxOptions"`
	} `json:"seLinuxContext"`
	RunAsUser struct {
		Type        string `json:"type"`
		UID         *int64 `json:"uid"`
		UIDRangeMin *int64 `json:"uidRangeMin"`
		UIDRangeMax *int64 `json:"uidRangeMax"`
	} `json:"runAsUser"`
	SupplementalGroups     groupsStrategy `json:"supplementalGroups"`
	FSGroup                groupsStrategy `json:"fsGroup"`
	ReadOnlyRootFilesystem bool           `json:"readOnlyRootFilesystem"`
	Users                  []string       `json:"users"`
	Groups                 []string       `json:"groups"`
	SeccompProfiles        []string       `json:"seccompProfiles"`
	AllowedUnsafeSysctls   []string       `json:"allowedUnsafeSysctls"`
	ForbiddenSysctls       []string       `json:"forbiddenSysctls"`
	UserNamespaceLevel     string         `json:"userNamespaceLevel"`
}

type groupsStrategy struct {
	Type   string `json:"type"`
	Ranges []struct {
		Min int64 `json:"min"`
		Max int64 `json:"max"`
	} `json:"ranges"`
}

func (m *manifests) scc(t *testing.T, name string) *scc {
	t.Helper()
	s := &scc{}
	m.decode(t, key{sccKind, "", name}, s)
	if s.APIVersion != sccAPIVersion {
		t.Errorf("SCC %s: apiVersion %q, want %q", name, s.APIVersion, sccAPIVersion)
	}
	return s
}

// workload is one of the product's pod templates with its kind and name.
type workload struct {
	kind, name string
	spec       corev1.PodSpec
}

// workloads returns the product's three workloads as rendered in m.
func (m *manifests) workloads(t *testing.T) []workload {
	t.Helper()
	return []workload{
		{"DaemonSet", managerName, m.daemonSet(t, managerName).Spec.Template.Spec},
		{"DaemonSet", provisionerName, m.daemonSet(t, provisionerName).Spec.Template.Spec},
		{"Deployment", hostdefinerName, m.deployment(t, hostdefinerName).Spec.Template.Spec},
	}
}

// serviceAccountUser is the user name OpenShift gives a pod's service
// account in SCC users lists.
func serviceAccountUser(ns string, spec corev1.PodSpec) string {
	sa := spec.ServiceAccountName
	if sa == "" {
		sa = "default"
	}
	return "system:serviceaccount:" + ns + ":" + sa
}

// TestBaseLayout checks that manifests/ is only a way to the base: both
// render the same objects, byte for byte (`kubectl apply -k manifests/`
// installs what it did before the base moved to manifests/base).
func TestBaseLayout(t *testing.T) {
	top, base := render(t, ""), renderDir(t, "base")
	if !slices.Equal(slices.Sorted(maps.Keys(keyStrings(top))), slices.Sorted(maps.Keys(keyStrings(base)))) {
		t.Errorf("manifests/ renders %v, manifests/base %v: want the same objects", slices.Sorted(maps.Keys(keyStrings(top))), slices.Sorted(maps.Keys(keyStrings(base))))
	}
	for k, doc := range base.docs {
		if got, ok := top.docs[k]; ok && string(got) != string(doc) {
			t.Errorf("%v differs between manifests/ and manifests/base:\n%s\nwant:\n%s", k, got, doc)
		}
	}
	for _, k := range []key{
		{"Namespace", "", namespace},
		{"DaemonSet", namespace, managerName},
		{"DaemonSet", namespace, provisionerName},
		{"Deployment", namespace, hostdefinerName},
		{"CustomResourceDefinition", "", "hostdefinitions.hostpath.dev"},
		{"StorageClass", "", "hostpath"},
	} {
		if _, ok := base.docs[k]; !ok {
			t.Errorf("manifests/base does not render %v", k)
		}
	}
}

func keyStrings(m *manifests) map[string]bool {
	s := map[string]bool{}
	for k := range m.docs {
		s[k.String()] = true
	}
	return s
}

// TestOpenShiftObjects checks that the overlay renders the base's objects
// and the two SCCs, and changes nothing in the base but the manager's
// --selinux=on.
func TestOpenShiftObjects(t *testing.T) {
	base, m := renderDir(t, "base"), renderDir(t, openshift)
	sccs := []key{{sccKind, "", sccManager}, {sccKind, "", sccRestricted}}
	for k := range base.docs {
		if _, ok := m.docs[k]; !ok {
			t.Errorf("%v is missing from the OpenShift overlay", k)
		}
	}
	for k := range m.docs {
		if _, ok := base.docs[k]; !ok && !slices.Contains(sccs, k) {
			t.Errorf("the OpenShift overlay adds %v", k)
		}
	}
	for _, k := range sccs {
		if _, ok := m.docs[k]; !ok {
			t.Errorf("the OpenShift overlay does not render %v", k)
		}
	}
	if n := len(m.docs); n != len(base.docs)+len(sccs) {
		t.Errorf("the OpenShift overlay renders %d objects, want the base's %d and %d SCCs", n, len(base.docs), len(sccs))
	}

	managerKey := key{"DaemonSet", namespace, managerName}
	for k, doc := range base.docs {
		if got, ok := m.docs[k]; ok && k != managerKey && string(got) != string(doc) {
			t.Errorf("%v changes in the OpenShift overlay:\n%s\nwant:\n%s", k, got, doc)
		}
	}
	// The manager: the same DaemonSet once --selinux=on is taken out.
	want, got := base.daemonSet(t, managerName), m.daemonSet(t, managerName)
	c := container(t, got.Spec.Template.Spec, managerContainer)
	c.Args = slices.DeleteFunc(c.Args, func(a string) bool { return a == selinuxOnArg })
	if !equality.Semantic.DeepEqual(want, got) {
		t.Errorf("the OpenShift overlay changes the manager DaemonSet beyond %s", selinuxOnArg)
	}
}

// TestOpenShiftManagerSELinux checks that the overlay's manager labels
// directories (--selinux=on, given once) and the base's does not force it.
func TestOpenShiftManagerSELinux(t *testing.T) {
	args := container(t, renderDir(t, openshift).daemonSet(t, managerName).Spec.Template.Spec, managerContainer).Args
	var selinux []string
	for _, a := range args {
		if strings.HasPrefix(a, selinuxArgFlag) {
			selinux = append(selinux, a)
		}
	}
	if !slices.Equal(selinux, []string{selinuxOnArg}) {
		t.Errorf("OpenShift manager args %q: --selinux given as %q, want exactly [%s]", args, selinux, selinuxOnArg)
	}
	baseArgs := container(t, renderDir(t, "base").daemonSet(t, managerName).Spec.Template.Spec, managerContainer).Args
	if slices.Contains(baseArgs, selinuxOnArg) {
		t.Errorf("base manager args %q: %s belongs to the OpenShift overlay (the base keeps auto)", baseArgs, selinuxOnArg)
	}
}

// TestOpenShiftSCCUsers checks that each workload's service account is
// allowed by exactly one SCC, the one meant for it, by name in its users
// list (no groups, which would let others in), that the SCCs name no one
// else, and that each SCC admits its workloads' pod specs.
func TestOpenShiftSCCUsers(t *testing.T) {
	m := renderDir(t, openshift)
	sccs := []*scc{m.scc(t, sccManager), m.scc(t, sccRestricted)}
	want := map[string]string{managerName: sccManager, provisionerName: sccRestricted, hostdefinerName: sccRestricted}

	ours := sets.New[string]()
	for _, w := range m.workloads(t) {
		user := serviceAccountUser(namespace, w.spec)
		ours.Insert(user)
		var allowing []string
		for _, s := range sccs {
			if slices.Contains(s.Users, user) {
				allowing = append(allowing, s.Name)
			}
		}
		if !slices.Equal(allowing, []string{want[w.name]}) {
			t.Errorf("%s %s (%s) is allowed by SCCs %v, want exactly [%s]", w.kind, w.name, user, allowing, want[w.name])
		}
	}
	for _, s := range sccs {
		if len(s.Groups) != 0 {
			t.Errorf("SCC %s: groups %v, want none (only our service accounts, by name)", s.Name, s.Groups)
		}
		if extra := sets.New(s.Users...).Difference(ours); extra.Len() != 0 {
			t.Errorf("SCC %s: users %v are none of our workloads' service accounts", s.Name, sets.List(extra))
		}
		if s.Priority != nil {
			t.Errorf("SCC %s: priority %d, want null (ordered by restrictiveness)", s.Name, *s.Priority)
		}
	}
	for _, w := range m.workloads(t) {
		s := m.scc(t, want[w.name])
		if why := sccRefuses(s, w.spec); len(why) != 0 {
			t.Errorf("SCC %s refuses %s %s: %s", s.Name, w.kind, w.name, strings.Join(why, "; "))
		}
	}
	// And the restricted SCC would refuse the manager.
	if why := sccRefuses(m.scc(t, sccRestricted), m.daemonSet(t, managerName).Spec.Template.Spec); len(why) == 0 {
		t.Errorf("SCC %s admits the manager's pods", sccRestricted)
	}
}

// TestOpenShiftManagerSCC checks the manager's SCC against its container:
// the same capabilities, hostPath, and nothing privileged.
func TestOpenShiftManagerSCC(t *testing.T) {
	m := renderDir(t, openshift)
	s := m.scc(t, sccManager)
	spec := m.daemonSet(t, managerName).Spec.Template.Spec
	c := container(t, spec, managerContainer)
	if c.SecurityContext == nil || c.SecurityContext.Capabilities == nil {
		t.Fatalf("the manager container sets no capabilities")
	}
	caps := c.SecurityContext.Capabilities
	if got, want := sortedCaps(s.AllowedCapabilities), sortedCaps(caps.Add); !slices.Equal(got, want) || len(want) == 0 {
		t.Errorf("SCC %s: allowedCapabilities %v, want the manager container's capabilities.add %v", s.Name, got, want)
	}
	if len(s.DefaultAddCapabilities) != 0 {
		t.Errorf("SCC %s: defaultAddCapabilities %v, want none", s.Name, s.DefaultAddCapabilities)
	}
	if !slices.Equal(s.RequiredDropCapabilities, []corev1.Capability{allCapabilities}) {
		t.Errorf("SCC %s: requiredDropCapabilities %v, want [ALL]", s.Name, s.RequiredDropCapabilities)
	}
	if !slices.Equal(caps.Drop, []corev1.Capability{allCapabilities}) {
		t.Errorf("manager container drops %v, want [ALL]", caps.Drop)
	}
	for _, d := range s.RequiredDropCapabilities {
		if slices.Contains(s.AllowedCapabilities, d) {
			t.Errorf("SCC %s: %s is both allowed and required to be dropped", s.Name, d)
		}
	}
	if !s.AllowHostDirVolumePlugin || !slices.Contains(s.Volumes, "hostPath") {
		t.Errorf("SCC %s: allowHostDirVolumePlugin %v, volumes %v: want hostPath allowed", s.Name, s.AllowHostDirVolumePlugin, s.Volumes)
	}
	if slices.Contains(s.Volumes, "*") {
		t.Errorf("SCC %s: volumes %v allow every type", s.Name, s.Volumes)
	}
	if s.AllowPrivilegedContainer || s.AllowHostNetwork || s.AllowHostPorts || s.AllowHostPID || s.AllowHostIPC {
		t.Errorf("SCC %s allows privileged containers or host namespaces: %+v", s.Name, s)
	}
	if s.AllowPrivilegeEscalation == nil || *s.AllowPrivilegeEscalation {
		t.Errorf("SCC %s: allowPrivilegeEscalation %v, want false", s.Name, s.AllowPrivilegeEscalation)
	}
	if !s.ReadOnlyRootFilesystem {
		t.Errorf("SCC %s: readOnlyRootFilesystem false, want true (the manager's is read-only)", s.Name)
	}
	if s.SELinuxContext.Type != "MustRunAs" || s.SELinuxContext.SELinuxOptions == nil || s.SELinuxContext.SELinuxOptions.Type != "spc_t" {
		t.Errorf("SCC %s: seLinuxContext %+v, want MustRunAs type spc_t (the manager relabels)", s.Name, s.SELinuxContext)
	}
}

// TestOpenShiftRestrictedSCC checks that the provisioner's and host
// definer's SCC allows no host access and no capabilities.
func TestOpenShiftRestrictedSCC(t *testing.T) {
	s := renderDir(t, openshift).scc(t, sccRestricted)
	if s.AllowHostDirVolumePlugin || slices.Contains(s.Volumes, "hostPath") || slices.Contains(s.Volumes, "*") {
		t.Errorf("SCC %s: allowHostDirVolumePlugin %v, volumes %v: want no host directories", s.Name, s.AllowHostDirVolumePlugin, s.Volumes)
	}
	if len(s.AllowedCapabilities) != 0 || len(s.DefaultAddCapabilities) != 0 {
		t.Errorf("SCC %s: allowedCapabilities %v, defaultAddCapabilities %v: want none", s.Name, s.AllowedCapabilities, s.DefaultAddCapabilities)
	}
	if !slices.Equal(s.RequiredDropCapabilities, []corev1.Capability{allCapabilities}) {
		t.Errorf("SCC %s: requiredDropCapabilities %v, want [ALL]", s.Name, s.RequiredDropCapabilities)
	}
	if s.AllowPrivilegedContainer || s.AllowHostNetwork || s.AllowHostPorts || s.AllowHostPID || s.AllowHostIPC {
		t.Errorf("SCC %s allows privileged containers or host namespaces: %+v", s.Name, s)
	}
	if s.AllowPrivilegeEscalation == nil || *s.AllowPrivilegeEscalation {
		t.Errorf("SCC %s: allowPrivilegeEscalation %v, want false", s.Name, s.AllowPrivilegeEscalation)
	}
	if s.RunAsUser.Type == "RunAsAny" {
		t.Errorf("SCC %s: runAsUser RunAsAny admits root", s.Name)
	}
	if s.SELinuxContext.Type != "MustRunAs" || s.SELinuxContext.SELinuxOptions != nil {
		t.Errorf("SCC %s: seLinuxContext %+v, want MustRunAs with the namespace's context (restricted-v2's)", s.Name, s.SELinuxContext)
	}
	if !slices.Equal(s.SeccompProfiles, []string{"runtime/default"}) {
		t.Errorf("SCC %s: seccompProfiles %v, want [runtime/default]", s.Name, s.SeccompProfiles)
	}
}

func sortedCaps(caps []corev1.Capability) []corev1.Capability {
	return slices.Sorted(slices.Values(caps))
}

// sccRefuses returns why OpenShift's SCC admission would refuse a pod spec
// under s, none when it admits it. It checks what our pod specs can get
// wrong: volume types, host namespaces and ports, privileged containers,
// capabilities, privilege escalation, a read-only root, the user, the
// SELinux options and the seccomp profile. Fields the pod spec leaves unset
// are ones admission fills in from the SCC.
func sccRefuses(s *scc, spec corev1.PodSpec) []string {
	var why []string
	allowedVolumes := sets.New(s.Volumes...)
	for _, v := range spec.Volumes {
		typ := volumeType(v)
		if !allowedVolumes.Has(typ) && !allowedVolumes.Has("*") || typ == "hostPath" && !s.AllowHostDirVolumePlugin {
			why = append(why, fmt.Sprintf("volume %s of type %s", v.Name, typ))
		}
	}
	if spec.HostNetwork && !s.AllowHostNetwork || spec.HostPID && !s.AllowHostPID || spec.HostIPC && !s.AllowHostIPC {
		why = append(why, "host namespaces")
	}
	podSC := spec.SecurityContext
	if podSC == nil {
		podSC = &corev1.PodSecurityContext{}
	}
	if podSC.SELinuxOptions != nil && !selinuxAdmits(s, podSC.SELinuxOptions) {
		why = append(why, fmt.Sprintf("pod SELinux options %+v", podSC.SELinuxOptions))
	}
	if podSC.SeccompProfile != nil && !seccompAdmits(s, podSC.SeccompProfile) {
		why = append(why, fmt.Sprintf("pod seccomp profile %+v", podSC.SeccompProfile))
	}
	allowedCaps := sets.New(s.AllowedCapabilities...).Insert(s.DefaultAddCapabilities...)
	for _, c := range slices.Concat(spec.InitContainers, spec.Containers) {
		sc := c.SecurityContext
		if sc == nil {
			sc = &corev1.SecurityContext{}
		}
		for _, p := range c.Ports {
			if p.HostPort != 0 && !s.AllowHostPorts {
				why = append(why, fmt.Sprintf("container %s: host port %d", c.Name, p.HostPort))
			}
		}
		if sc.Privileged != nil && *sc.Privileged && !s.AllowPrivilegedContainer {
			why = append(why, fmt.Sprintf("container %s: privileged", c.Name))
		}
		var add, drop []corev1.Capability
		if sc.Capabilities != nil {
			add, drop = sc.Capabilities.Add, sc.Capabilities.Drop
		}
		for _, a := range add {
			if !allowedCaps.Has(a) && !allowedCaps.Has("*") {
				why = append(why, fmt.Sprintf("container %s: capability %s", c.Name, a))
			}
		}
		for _, d := range s.RequiredDropCapabilities {
			if !slices.Contains(drop, d) && !slices.Contains(drop, allCapabilities) {
				why = append(why, fmt.Sprintf("container %s: does not drop %s", c.Name, d))
			}
		}
		if s.AllowPrivilegeEscalation != nil && !*s.AllowPrivilegeEscalation && sc.AllowPrivilegeEscalation != nil && *sc.AllowPrivilegeEscalation {
			why = append(why, fmt.Sprintf("container %s: privilege escalation", c.Name))
		}
		if s.ReadOnlyRootFilesystem && sc.ReadOnlyRootFilesystem != nil && !*sc.ReadOnlyRootFilesystem {
			why = append(why, fmt.Sprintf("container %s: writable root filesystem", c.Name))
		}
		uid, nonRoot := sc.RunAsUser, sc.RunAsNonRoot
		if uid == nil {
			uid = podSC.RunAsUser
		}
		if nonRoot == nil {
			nonRoot = podSC.RunAsNonRoot
		}
		switch s.RunAsUser.Type {
		case "RunAsAny":
		case "MustRunAs":
			if s.RunAsUser.UID == nil || uid != nil && *uid != *s.RunAsUser.UID {
				why = append(why, fmt.Sprintf("container %s: uid %v, the SCC's %v", c.Name, ptrString(uid), ptrString(s.RunAsUser.UID)))
			}
		case "MustRunAsNonRoot":
			if uid != nil && *uid == 0 || uid == nil && (nonRoot == nil || !*nonRoot) {
				why = append(why, fmt.Sprintf("container %s: may run as root", c.Name))
			}
		default:
			// MustRunAsRange: a range per namespace, which the pod specs
			// cannot know; they all fix their uid.
			why = append(why, fmt.Sprintf("container %s: runAsUser %s", c.Name, s.RunAsUser.Type))
		}
		if sc.SELinuxOptions != nil && !selinuxAdmits(s, sc.SELinuxOptions) {
			why = append(why, fmt.Sprintf("container %s: SELinux options %+v", c.Name, sc.SELinuxOptions))
		}
		if sc.SeccompProfile != nil && !seccompAdmits(s, sc.SeccompProfile) {
			why = append(why, fmt.Sprintf("container %s: seccomp profile %+v", c.Name, sc.SeccompProfile))
		}
	}
	return why
}

// volumeType is the SCC's name for a volume's type.
func volumeType(v corev1.Volume) string {
	switch {
	case v.HostPath != nil:
		return "hostPath"
	case v.EmptyDir != nil:
		return "emptyDir"
	case v.Secret != nil:
		return "secret"
	case v.ConfigMap != nil:
		return "configMap"
	case v.Projected != nil:
		return "projected"
	case v.DownwardAPI != nil:
		return "downwardAPI"
	case v.PersistentVolumeClaim != nil:
		return "persistentVolumeClaim"
	case v.Ephemeral != nil:
		return "ephemeral"
	case v.CSI != nil:
		return "csi"
	default:
		return fmt.Sprintf("unknown (%+v)", v.VolumeSource)
	}
}

// selinuxAdmits tells whether SELinux options a pod spec sets itself agree
// with the SCC's.
func selinuxAdmits(s *scc, o *corev1.SELinuxOptions) bool {
	if s.SELinuxContext.Type == "RunAsAny" {
		return true
	}
	want := s.SELinuxContext.SELinuxOptions
	return want != nil && (want.User == "" || want.User == o.User) && (want.Role == "" || want.Role == o.Role) &&
		(want.Type == "" || want.Type == o.Type) && (want.Level == "" || want.Level == o.Level)
}

// seccompAdmits tells whether a seccomp profile a pod spec sets is one the
// SCC allows, by the SCC's names for them.
func seccompAdmits(s *scc, p *corev1.SeccompProfile) bool {
	var name string
	switch p.Type {
	case corev1.SeccompProfileTypeRuntimeDefault:
		name = "runtime/default"
	case corev1.SeccompProfileTypeUnconfined:
		name = "unconfined"
	case corev1.SeccompProfileTypeLocalhost:
		if p.LocalhostProfile != nil {
			name = "localhost/" + *p.LocalhostProfile
		}
	}
	return slices.Contains(s.SeccompProfiles, name) || slices.Contains(s.SeccompProfiles, "*") ||
		name == "runtime/default" && slices.Contains(s.SeccompProfiles, "docker/default")
}

func ptrString(p *int64) string {
	if p == nil {
		return "unset"
	}
	return fmt.Sprint(*p)
}
