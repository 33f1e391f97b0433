package releasetool

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const chartValues = `# -- Where the images come from.
image:
  # -- The registry.
  registry: hostpath.dev
  tag: "" # -- defaults to the app version
manager:
  image:
    # -- A digest wins over the tag.
    digest: ""
  args: [--a]
`

func TestSetValues(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		want    []string // lines the result has
		wantErr string
	}{
		{name: "registry, tag and a digest", args: []string{"image.registry=registry.example.com/hostpath", "image.tag=v1.2.3", "manager.image.digest=sha256:0123"},
			want: []string{"# -- Where the images come from.", "  # -- The registry.", `  registry: "registry.example.com/hostpath"`,
				`  tag: "v1.2.3" # -- defaults to the app version`, "    # -- A digest wins over the tag.", `    digest: "sha256:0123"`, "  args: [--a]"}},
		{name: "a missing key", args: []string{"provisioner.image.digest=sha256:0"}, wantErr: `provisioner.image.digest: no key "provisioner"`},
		{name: "a missing leaf", args: []string{"image.digest=sha256:0"}, wantErr: `no key "image.digest"`},
		{name: "a mapping", args: []string{"manager.image=x"}, wantErr: "manager.image: not a scalar value"},
		{name: "below a scalar", args: []string{"image.tag.x=y"}, wantErr: "image.tag is not a mapping"},
		{name: "not a setting", args: []string{"image.tag"}, wantErr: `"image.tag" is not KEY.PATH=VALUE`},
		{name: "an empty path part", args: []string{"image..tag=v"}, wantErr: "is not KEY.PATH=VALUE"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			file := filepath.Join(t.TempDir(), "values.yaml")
			if err := os.WriteFile(file, []byte(chartValues), 0o644); err != nil {
				t.Fatal(err)
			}
			settings, err := ParseSettings(tc.args)
			if err == nil {
				err = SetValues(file, settings)
			}
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("SetValues: %v, want an error with %q", err, tc.wantErr)
				}
				if data, _ := os.ReadFile(file); string(data) != chartValues {
					t.Errorf("the file changed on error:\n%s", data)
				}
				return
			}
			if err != nil {
				t.Fatalf("SetValues: %v", err)
			}
			data, _ := os.ReadFile(file)
			lines := strings.Split(string(data), "\n")
			for _, w := range tc.want {
				found := false
				for _, l := range lines {
					found = found || l == w
				}
				if !found {
					t.Errorf("no line %q in:\n%s", w, data)
				}
			}
		})
	}
}
