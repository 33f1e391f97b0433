package provisioner

import (
	"errors"
	"strings"
	"testing"

	hostpathv1 "hostpath.dev/api/hostpath/v1"
	"hostpath.dev/api/managerapi"
)

func TestParseParameters(t *testing.T) {
	tests := []struct {
		name      string
		params    map[string]string
		want      Parameters
		wantParam string // the parameter the error names; "" for success
		wantText  string
	}{
		{name: "defaults", params: nil, want: Parameters{Mode: hostpathv1.ModeNode, Pool: "default", PathPattern: DefaultPathPattern, DirMode: "0777", VolumeType: "hostPath"}},
		{
			name:   "all set",
			params: map[string]string{hostpathv1.ParamMode: "node", hostpathv1.ParamPool: "fast-ssd", ParamPathPattern: "${pvc.metadata.name}", hostpathv1.ParamDirMode: "2770"},
			want:   Parameters{Mode: hostpathv1.ModeNode, Pool: "fast-ssd", PathPattern: "${pvc.metadata.name}", DirMode: "02770", VolumeType: "hostPath"},
		},
		{name: "multihost parses", params: map[string]string{hostpathv1.ParamMode: "multihost"}, want: Parameters{Mode: hostpathv1.ModeMultihost, Pool: "default", PathPattern: DefaultPathPattern, DirMode: "0777", VolumeType: "hostPath"}},
		{name: "short dirMode", params: map[string]string{hostpathv1.ParamDirMode: "755"}, want: Parameters{Mode: hostpathv1.ModeNode, Pool: "default", PathPattern: DefaultPathPattern, DirMode: "0755", VolumeType: "hostPath"}},
		{name: "unknown parameter", params: map[string]string{"size": "1Gi"}, wantParam: "size", wantText: "known parameters are mode, pool, pathPattern, dirMode, enforceSize, volumeType"},
		{name: "enforceSize", params: map[string]string{hostpathv1.ParamEnforceSize: "true"}, want: Parameters{Mode: hostpathv1.ModeNode, Pool: "default", PathPattern: DefaultPathPattern, DirMode: "0777", EnforceSize: true, VolumeType: "hostPath"}},
		{name: "enforceSize false", params: map[string]string{hostpathv1.ParamEnforceSize: "false"}, want: Parameters{Mode: hostpathv1.ModeNode, Pool: "default", PathPattern: DefaultPathPattern, DirMode: "0777", VolumeType: "hostPath"}},
		{name: "enforceSize yes", params: map[string]string{hostpathv1.ParamEnforceSize: "yes"}, wantParam: hostpathv1.ParamEnforceSize, wantText: `"yes" is not "true" or "false"`},
		{name: "parameter keys are case-sensitive", params: map[string]string{"Mode": "node"}, wantParam: "Mode", wantText: "unknown parameter"},
		{name: "bad mode", params: map[string]string{hostpathv1.ParamMode: "cluster"}, wantParam: hostpathv1.ParamMode, wantText: `"cluster" is not a mode`},
		{name: "empty pool", params: map[string]string{hostpathv1.ParamPool: ""}, wantParam: hostpathv1.ParamPool},
		{name: "pool with a slash", params: map[string]string{hostpathv1.ParamPool: "a/b"}, wantParam: hostpathv1.ParamPool},
		{name: "upper-case pool", params: map[string]string{hostpathv1.ParamPool: "Default"}, wantParam: hostpathv1.ParamPool},
		{name: "dirMode not octal", params: map[string]string{hostpathv1.ParamDirMode: "0789"}, wantParam: hostpathv1.ParamDirMode},
		{name: "dirMode too large", params: map[string]string{hostpathv1.ParamDirMode: "17777"}, wantParam: hostpathv1.ParamDirMode},
		{name: "dirMode symbolic", params: map[string]string{hostpathv1.ParamDirMode: "rwx"}, wantParam: hostpathv1.ParamDirMode},
		{name: "bad pathPattern", params: map[string]string{ParamPathPattern: "/abs/${pvc.metadata.name}"}, wantParam: ParamPathPattern},
		{name: "volumeType hostPath", params: map[string]string{ParamVolumeType: "hostPath"}, want: Parameters{Mode: hostpathv1.ModeNode, Pool: "default", PathPattern: DefaultPathPattern, DirMode: "0777", VolumeType: VolumeTypeHostPath}},
		{name: "volumeType local", params: map[string]string{ParamVolumeType: "local"}, want: Parameters{Mode: hostpathv1.ModeNode, Pool: "default", PathPattern: DefaultPathPattern, DirMode: "0777", VolumeType: VolumeTypeLocal}},
		{name: "volumeType local in node mode", params: map[string]string{hostpathv1.ParamMode: "node", ParamVolumeType: "local"}, want: Parameters{Mode: hostpathv1.ModeNode, Pool: "default", PathPattern: DefaultPathPattern, DirMode: "0777", VolumeType: VolumeTypeLocal}},
		{name: "volumeType hostPath in mode multihost", params: map[string]string{hostpathv1.ParamMode: "multihost", ParamVolumeType: "hostPath"}, want: Parameters{Mode: hostpathv1.ModeMultihost, Pool: "default", PathPattern: DefaultPathPattern, DirMode: "0777", VolumeType: VolumeTypeHostPath}},
		{name: "volumeType local in mode multihost", params: map[string]string{hostpathv1.ParamMode: "multihost", ParamVolumeType: "local"}, want: Parameters{Mode: hostpathv1.ModeMultihost, Pool: "default", PathPattern: DefaultPathPattern, DirMode: "0777", VolumeType: VolumeTypeLocal}},
		{name: "volumeType is case-sensitive", params: map[string]string{ParamVolumeType: "hostpath"}, wantParam: ParamVolumeType, wantText: `"hostpath" is not a volume type; use "hostPath" or "local"`},
		{name: "volumeType block", params: map[string]string{ParamVolumeType: "block"}, wantParam: ParamVolumeType, wantText: `"block" is not a volume type`},
		{name: "empty volumeType", params: map[string]string{ParamVolumeType: ""}, wantParam: ParamVolumeType, wantText: `"" is not a volume type`},
		{name: "a bad mode is named before volumeType", params: map[string]string{hostpathv1.ParamMode: "cluster", ParamVolumeType: "local"}, wantParam: hostpathv1.ParamMode},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseParameters(tc.params)
			if tc.wantParam == "" {
				if err != nil {
					t.Fatalf("err = %v", err)
				}
				if got != tc.want {
					t.Errorf("got %+v, want %+v", got, tc.want)
				}
				return
			}
			var pe *ParameterError
			if !errors.As(err, &pe) || pe.Parameter != tc.wantParam {
				t.Fatalf("err = %v, want a ParameterError naming %q", err, tc.wantParam)
			}
			if !strings.Contains(err.Error(), tc.wantText) {
				t.Errorf("err = %v, want it to contain %q", err, tc.wantText)
			}
		})
	}
}

func TestDirectory(t *testing.T) {
	long := strings.Repeat("n", MaxDirectoryLength-1) // with "x-": one too many
	tests := []struct {
		pattern string
		name    string // claim name
		want    string // "" for an error
	}{
		{pattern: DefaultPathPattern, name: "data", want: "ns-data-pvc-1"},
		{pattern: "${pvc.metadata.name}", name: "data", want: "data"},
		{pattern: "vol_${pv.metadata.name}.d", name: "data", want: "vol_pvc-1.d"},
		{pattern: "static", name: "data", want: "static"},
		{pattern: "${pvc.metadata.namespace}${pvc.metadata.namespace}", name: "data", want: "nsns"},
		{pattern: "", name: "data"},
		{pattern: "..", name: "data"},
		{pattern: "../${pvc.metadata.name}", name: "data"},
		{pattern: "${pvc.metadata.name}/..", name: "data"},
		{pattern: "a/../../etc", name: "data"},
		{pattern: "/etc/${pvc.metadata.name}", name: "data"},
		{pattern: "a/${pvc.metadata.name}", name: "data"},
		{pattern: ".hidden-${pvc.metadata.name}", name: "data"},
		{pattern: "-${pvc.metadata.name}", name: "data"},
		{pattern: "a..b", name: "data"},
		{pattern: "${pvc.metadata.name}", name: ".."},
		{pattern: "x${pvc.metadata.name}", name: "/../../etc"},
		{pattern: "a\\b", name: "data"},
		{pattern: "a%2fb", name: "data"},
		{pattern: "${pvc.metadata.labels}", name: "data"},
		{pattern: "${pvc.metadata.name", name: "data"},
		{pattern: "${}", name: "data"},
		{pattern: "$HOME", name: "data"},
		{pattern: "x-${pvc.metadata.name}", name: long, want: "x-" + long[:MaxDirectoryLength-2-17] + "-9bf11c46d1d1ab2d"},
		{pattern: "x-${pvc.metadata.name}", name: long[:MaxDirectoryLength-2], want: "x-" + long[:MaxDirectoryLength-2]},
		{pattern: "x-${pvc.metadata.name}/" + strings.Repeat("y", 300), name: "data"},
		{pattern: "x-${pvc.metadata.name}" + strings.Repeat("y", 300) + "..", name: "data"},
		{pattern: "x-${pvc.metadata.name}" + strings.Repeat("y", 300) + "%2f", name: "data"},
	}
	for _, tc := range tests {
		t.Run(tc.pattern+"|"+tc.name, func(t *testing.T) {
			p := Parameters{PathPattern: tc.pattern}
			got, err := p.Directory("ns", tc.name, "pvc-1")
			if tc.want == "" {
				var pe *ParameterError
				if !errors.As(err, &pe) || pe.Parameter != ParamPathPattern {
					t.Errorf("Directory = %q, %v; want a ParameterError naming %s", got, err, ParamPathPattern)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Errorf("Directory = %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}

// TestDirectoryLongNames checks that the default pattern works for every
// valid claim: a name over 255 bytes is cut with a hash suffix, stays a valid
// volume name, and distinct claims keep distinct directories.
func TestDirectoryLongNames(t *testing.T) {
	ns := strings.Repeat("n", 63)    // the longest namespace
	name := strings.Repeat("c", 253) // the longest claim name
	pv := "pvc-" + strings.Repeat("f", 36)
	p := Parameters{PathPattern: DefaultPathPattern}
	seen := map[string]string{}
	for _, claimName := range []string{name, name[:252] + "d", name[:200] + ".x", "short"} {
		dir, err := p.Directory(ns, claimName, pv)
		if err != nil {
			t.Fatalf("Directory(%q) = %v", claimName, err)
		}
		full := ns + "-" + claimName + "-" + pv
		switch {
		case len(full) <= MaxDirectoryLength && dir != full:
			t.Errorf("Directory(%q) = %q, want the unshortened %q", claimName, dir, full)
		case len(full) > MaxDirectoryLength && (len(dir) != MaxDirectoryLength || !strings.HasPrefix(dir, full[:MaxDirectoryLength-17]+"-")):
			t.Errorf("Directory(%q) = %q (%d bytes), want 255 bytes: a prefix of %q, '-' and a hash", claimName, dir, len(dir), full)
		case managerapi.ValidateVolumeName(dir) != nil || strings.Contains(dir, ".."):
			t.Errorf("Directory(%q) = %q, not a valid volume name", claimName, dir)
		}
		if other, dup := seen[dir]; dup {
			t.Errorf("claims %q and %q both get %q", other, claimName, dir)
		}
		seen[dir] = claimName
	}
}
