package provisioner

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"sort"
	"strings"

	hostpathv1 "hostpath.dev/api/hostpath/v1"
	"hostpath.dev/api/managerapi"
)

// StorageClass parameter keys that only the provisioner reads. The others
// (mode, pool, dirMode, enforceSize) are hostpathv1's ParamMode, ParamPool,
// ParamDirMode and ParamEnforceSize, which the host definer reads too.
const (
	// ParamPathPattern is the template of the volume's directory name.
	ParamPathPattern = "pathPattern"
	// ParamVolumeType is the kind of PersistentVolume a class's volumes
	// are: VolumeTypeHostPath (the default) or VolumeTypeLocal. The host
	// definer does not read it: a volume's directories are the same
	// whatever the type of its PV.
	ParamVolumeType = "volumeType"
)

// The values of ParamVolumeType.
const (
	// VolumeTypeHostPath makes PVs with spec.hostPath of type Directory.
	VolumeTypeHostPath = "hostPath"
	// VolumeTypeLocal makes PVs with spec.local on the same directory, and
	// required node affinity: the kubelet then applies fsGroup and SELinux
	// labels and reports the volume's statistics. A node-mode PV's affinity
	// names its node, as a hostPath one's does. Kubernetes requires node
	// affinity on a local PV, and a PV's affinity cannot change once set
	// (ValidatePersistentVolumeUpdate in k8s.io/kubernetes
	// pkg/apis/core/validation refuses any change but a beta-to-GA label key
	// up to 1.34, and from 1.35 allows it only with the alpha feature gate
	// MutablePVNodeAffinity, off by default), while the host definer gives a
	// multihost volume the nodes that join its pool later. So a multihost
	// PV's affinity names no node: it is hostpathv1.ManagerNodeSelector, the
	// nodes that run a manager, which is what the manager DaemonSet selects.
	VolumeTypeLocal = "local"
)

// Defaults of the StorageClass parameters that have no hostpathv1 default;
// the pool's and the dirMode's are hostpathv1.DefaultPool and
// hostpathv1.DefaultDirMode, which the host definer uses too.
const (
	DefaultMode        = hostpathv1.ModeNode
	DefaultPathPattern = "${pvc.metadata.namespace}-${pvc.metadata.name}-${pv.metadata.name}"
	DefaultVolumeType  = VolumeTypeHostPath
)

// The variables a pathPattern may use.
const (
	VarClaimNamespace = "pvc.metadata.namespace"
	VarClaimName      = "pvc.metadata.name"
	VarVolumeName     = "pv.metadata.name"
)

// MaxDirectoryLength is the longest directory name: the manager's limit for
// a volume name. A longer expanded pathPattern is shortened to it (see
// Parameters.Directory).
const MaxDirectoryLength = managerapi.MaxVolumeNameLength

// hashSuffixLength is the number of hex digits of SHA-256 that end a
// shortened directory name.
const hashSuffixLength = 16

var knownParams = []string{hostpathv1.ParamMode, hostpathv1.ParamPool, ParamPathPattern, hostpathv1.ParamDirMode, hostpathv1.ParamEnforceSize, ParamVolumeType}

// Parameters are a StorageClass's validated parameters.
type Parameters struct {
	// Mode is hostpathv1.ModeNode or hostpathv1.ModeMultihost.
	Mode string
	// Pool is the storage pool's name.
	Pool string
	// PathPattern is the directory name template.
	PathPattern string
	// DirMode is the directory's permission bits in octal, as the manager
	// expects them (e.g. "0777").
	DirMode string
	// EnforceSize asks the manager to refuse a pool that cannot enforce
	// the volume's size.
	EnforceSize bool
	// VolumeType is VolumeTypeHostPath or VolumeTypeLocal.
	VolumeType string
}

// ParameterError is a StorageClass parameter that is unknown or has a bad
// value.
type ParameterError struct {
	// Parameter is the parameter's key.
	Parameter string
	// Problem says what is wrong and what is allowed.
	Problem string
}

func (e *ParameterError) Error() string {
	return fmt.Sprintf("StorageClass parameter %q: %s", e.Parameter, e.Problem)
}

// ParseParameters validates a StorageClass's parameters and fills in the
// defaults. The error is a *ParameterError naming the first bad parameter
// in key order.
func ParseParameters(params map[string]string) (Parameters, error) {
	keys := make([]string, 0, len(params))
	for k := range params {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if !slices.Contains(knownParams, k) {
			return Parameters{}, &ParameterError{Parameter: k, Problem: "unknown parameter; the known parameters are " + strings.Join(knownParams, ", ")}
		}
	}
	p := Parameters{Mode: DefaultMode, Pool: hostpathv1.DefaultPool, PathPattern: DefaultPathPattern, DirMode: hostpathv1.DefaultDirMode, VolumeType: DefaultVolumeType}
	if v, ok := params[hostpathv1.ParamMode]; ok {
		switch v {
		case hostpathv1.ModeNode, hostpathv1.ModeMultihost:
			p.Mode = v
		default:
			return Parameters{}, &ParameterError{Parameter: hostpathv1.ParamMode, Problem: fmt.Sprintf("%q is not a mode; use %q or %q", v, hostpathv1.ModeNode, hostpathv1.ModeMultihost)}
		}
	}
	if v, ok := params[hostpathv1.ParamPool]; ok {
		if err := managerapi.ValidatePoolName(v); err != nil {
			return Parameters{}, &ParameterError{Parameter: hostpathv1.ParamPool, Problem: err.Error()}
		}
		p.Pool = v
	}
	if v, ok := params[ParamPathPattern]; ok {
		// Expanding with example values checks the syntax, the variables
		// and the literal text; Directory checks the real name again.
		if _, err := expand(v, "namespace", "claim", "pvc-00000000-0000-0000-0000-000000000000"); err != nil {
			return Parameters{}, &ParameterError{Parameter: ParamPathPattern, Problem: err.Error()}
		}
		p.PathPattern = v
	}
	if v, ok := params[hostpathv1.ParamDirMode]; ok {
		perm, err := managerapi.ParseMode(v)
		if err != nil || v == "" {
			return Parameters{}, &ParameterError{Parameter: hostpathv1.ParamDirMode, Problem: fmt.Sprintf("%q is not an octal mode from 0 to 07777, such as 0770", v)}
		}
		p.DirMode = managerapi.FormatMode(perm)
	}
	if v, ok := params[hostpathv1.ParamEnforceSize]; ok {
		switch v {
		case "true":
			p.EnforceSize = true
		case "false":
		default:
			return Parameters{}, &ParameterError{Parameter: hostpathv1.ParamEnforceSize, Problem: fmt.Sprintf("%q is not \"true\" or \"false\"", v)}
		}
	}
	if v, ok := params[ParamVolumeType]; ok {
		switch v {
		case VolumeTypeHostPath, VolumeTypeLocal:
			p.VolumeType = v
		default:
			return Parameters{}, &ParameterError{Parameter: ParamVolumeType, Problem: fmt.Sprintf("%q is not a volume type; use %q or %q", v, VolumeTypeHostPath, VolumeTypeLocal)}
		}
	}
	return p, nil
}

// Directory expands the pathPattern for a claim and its volume. A result
// longer than MaxDirectoryLength bytes (a long namespace and claim name in
// the default pattern, say) is shortened to its first bytes, "-" and 16 hex
// digits of the SHA-256 of the whole result, 255 bytes in all; a name that
// fits is never changed. The error is a *ParameterError when the result is
// not one safe directory name.
func (p Parameters) Directory(claimNamespace, claimName, pvName string) (string, error) {
	dir, err := expand(p.PathPattern, claimNamespace, claimName, pvName)
	if err != nil {
		return "", &ParameterError{Parameter: ParamPathPattern, Problem: err.Error()}
	}
	return dir, nil
}

// expand substitutes the variables of pattern and checks that the result is
// one directory name strictly inside the pool.
func expand(pattern, claimNamespace, claimName, pvName string) (string, error) {
	vars := map[string]string{VarClaimNamespace: claimNamespace, VarClaimName: claimName, VarVolumeName: pvName}
	var b strings.Builder
	for rest := pattern; rest != ""; {
		i := strings.Index(rest, "${")
		if i < 0 {
			b.WriteString(rest)
			break
		}
		b.WriteString(rest[:i])
		rest = rest[i+2:]
		j := strings.IndexByte(rest, '}')
		if j < 0 {
			return "", fmt.Errorf("pattern %q has an unterminated \"${\"", pattern)
		}
		name := rest[:j]
		v, ok := vars[name]
		if !ok {
			return "", fmt.Errorf("pattern %q uses unknown variable ${%s}; the variables are ${%s}, ${%s} and ${%s}", pattern, name, VarClaimNamespace, VarClaimName, VarVolumeName)
		}
		b.WriteString(v)
		rest = rest[j+1:]
	}
	dir := b.String()
	switch {
	case dir == "":
		return "", fmt.Errorf("pattern %q gives an empty directory name", pattern)
	case strings.Contains(dir, ".."):
		return "", fmt.Errorf("pattern %q gives %q, which contains \"..\": the directory must stay inside the pool", pattern, dir)
	case validName(dir) != nil:
		return "", fmt.Errorf("pattern %q gives %q, which is not one directory name: use letters, digits, '.', '_' and '-', starting with a letter or digit (no '/', no absolute path)", pattern, dir)
	}
	if len(dir) > MaxDirectoryLength {
		dir = shorten(dir)
	}
	if err := managerapi.ValidateVolumeName(dir); err != nil {
		return "", fmt.Errorf("pattern %q: %w", pattern, err)
	}
	return dir, nil
}

// validName checks name with the manager's rules but for its length, which
// shorten fixes: the part beyond the limit is checked in pieces, each behind
// a letter (a piece may start with any allowed character).
func validName(name string) error {
	if len(name) <= MaxDirectoryLength {
		return managerapi.ValidateVolumeName(name)
	}
	if err := managerapi.ValidateVolumeName(name[:MaxDirectoryLength]); err != nil {
		return err
	}
	for rest := name[MaxDirectoryLength:]; rest != ""; {
		n := min(len(rest), MaxDirectoryLength-1)
		if err := managerapi.ValidateVolumeName("x" + rest[:n]); err != nil {
			return err
		}
		rest = rest[n:]
	}
	return nil
}

// shorten returns the first bytes of a name too long for a directory, "-"
// and hashSuffixLength hex digits of the SHA-256 of the whole name:
// MaxDirectoryLength bytes, and distinct long names stay distinct.
func shorten(name string) string {
	sum := sha256.Sum256([]byte(name))
	suffix := "-" + hex.EncodeToString(sum[:])[:hashSuffixLength]
	return name[:MaxDirectoryLength-len(suffix)] + suffix
}
