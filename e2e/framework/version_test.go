package framework

import (
	"os"
	"path/filepath"
	"testing"
)

func TestKubernetesVersion(t *testing.T) {
	tests := []struct {
		name, lib, env, want string
		wantErr              bool
	}{
		{name: "pinned", lib: "# a comment K8S_VERSION=${K8S_VERSION:-v0.0.1}\nK8S_VERSION=${K8S_VERSION:-v1.37.2}\nK8S_OLDEST=v1.35.4\n", want: "v1.37.2"},
		{name: "environment wins", lib: "K8S_VERSION=${K8S_VERSION:-v1.37.2}\n", env: "v1.35.4", want: "v1.35.4"},
		{name: "not pinned", lib: "K8S_OLDEST=v1.35.4\n", wantErr: true},
		{name: "no lib.sh", wantErr: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			if tc.lib != "" {
				if err := os.MkdirAll(filepath.Join(root, "scripts"), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(filepath.Join(root, "scripts", "lib.sh"), []byte(tc.lib), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			t.Setenv(KubernetesVersionEnv, tc.env)
			got, err := KubernetesVersion(root)
			if (err != nil) != tc.wantErr || got != tc.want {
				t.Errorf("KubernetesVersion() = %q, %v; want %q, error %t", got, err, tc.want, tc.wantErr)
			}
		})
	}
}

// TestKubernetesVersionOfRepository: the repository's scripts/lib.sh pins a
// version the framework reads.
func TestKubernetesVersionOfRepository(t *testing.T) {
	t.Setenv(KubernetesVersionEnv, "")
	root, err := FindRepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	if v, err := KubernetesVersion(root); err != nil || v == "" {
		t.Errorf("KubernetesVersion(%s) = %q, %v", root, v, err)
	}
}
