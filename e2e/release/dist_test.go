package release

import (
	"archive/tar"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	v1 "github.com/opencontainers/image-spec/specs-go/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"

	"hostpath.dev/e2e/framework"
	"hostpath.dev/e2e/framework/ocilayout"
)

// TestDistFiles checks that dist/ holds what docs/releasing.md lists, and
// that `sha256sum -c SHA256SUMS` accepts every other file.
func TestDistFiles(t *testing.T) {
	d := release(t)
	want := []string{"SHA256SUMS", "hostpath.yaml", filepath.Base(d.chart())}
	for _, p := range programs {
		want = append(want, filepath.Base(d.archive(p)))
	}
	for _, p := range pluginPlatforms {
		want = append(want, "kubectl-hostpath-"+strings.ReplaceAll(p, "/", "-"))
	}
	slices.Sort(want)
	entries, err := os.ReadDir(d.dir)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range entries {
		got = append(got, e.Name())
	}
	if !slices.Equal(got, want) {
		t.Errorf("dist/ holds %q, want %q", got, want)
	}

	out := run(t.Context(), t, d.dir, "sha256sum", "-c", "SHA256SUMS")
	var checked []string
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		name, ok := strings.CutSuffix(line, ": OK")
		if !ok {
			t.Errorf("sha256sum -c: %q", line)
		}
		checked = append(checked, name)
	}
	slices.Sort(checked)
	if wantSums := slices.DeleteFunc(slices.Clone(want), func(s string) bool { return s == "SHA256SUMS" }); !slices.Equal(checked, wantSums) {
		t.Errorf("SHA256SUMS covers %q, want %q", checked, wantSums)
	}
}

// TestImages checks each program's OCI archive as skopeo shows it: one
// image index with an image per platform of the release, each image's
// config naming its OS, architecture, entrypoint and user; and that the
// program in each image is a static binary of that architecture (file)
// that prints its --help (natively or under qemu-user).
func TestImages(t *testing.T) {
	d := release(t)
	for _, p := range programs {
		t.Run(p, func(t *testing.T) {
			ctx := t.Context()
			raw := run(ctx, t, "", "skopeo", "inspect", "--raw", "oci-archive:"+d.archive(p))
			index := platformsOf(t, raw)
			if got := platformNames(index); !slices.Equal(got, d.platforms) {
				t.Fatalf("The index of %s lists %q, want %q", d.archive(p), got, d.platforms)
			}
			layout := extract(t, d.archive(p))
			for _, m := range index.Manifests {
				platform := ocilayout.FormatPlatform(*m.Platform)
				config := imageConfig(ctx, t, "oci-archive:"+d.archive(p), *m.Platform)
				user := "65532:65532"
				if p == "manager" {
					user = "0:0"
				}
				if config.Architecture != m.Platform.Architecture || config.OS != m.Platform.OS ||
					!slices.Equal(config.Config.Entrypoint, []string{"/usr/local/bin/" + p}) || config.Config.User != user {
					t.Errorf("%s for %s: config %s/%s, entrypoint %q, user %q; want %s, [/usr/local/bin/%s], %s",
						p, platform, config.OS, config.Architecture, config.Config.Entrypoint, config.Config.User, platform, p, user)
				}
				bin := fileOf(t, layout, m, "usr/local/bin/"+p)
				checkBinary(ctx, t, bin, platform, "Usage of "+p+":")
			}
		})
	}
}

// TestPlugin checks each kubectl-hostpath-<os>-<arch>: a binary of that
// OS and architecture (file), and the Linux ones print their help.
func TestPlugin(t *testing.T) {
	d := release(t)
	for _, p := range pluginPlatforms {
		t.Run(p, func(t *testing.T) {
			checkBinary(t.Context(), t, filepath.Join(d.dir, "kubectl-hostpath-"+strings.ReplaceAll(p, "/", "-")), p, "kubectl hostpath COMMAND")
		})
	}
}

// TestHostpathYAML checks that dist/hostpath.yaml says which release it is
// and that its workloads run the three images by the digests of the
// archives' indexes.
func TestHostpathYAML(t *testing.T) {
	d := release(t)
	data, err := os.ReadFile(filepath.Join(d.dir, "hostpath.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if first, _, _ := strings.Cut(string(data), "\n"); !strings.HasPrefix(first, "# hostpath "+d.version+" ") {
		t.Errorf("hostpath.yaml begins with %q, want a comment naming %s", first, d.version)
	}
	checkImages(t, "hostpath.yaml", workloadImages(t, string(data)), d.pinned(t))
}

// TestChart checks the packaged chart: its version and appVersion, and
// that `helm template` of it with no values runs the three images by the
// archives' digests.
func TestChart(t *testing.T) {
	d := release(t)
	ctx := t.Context()
	helm := d.tool(ctx, t, "helm")
	chart := run(ctx, t, "", helm, "show", "chart", d.chart())
	for _, want := range []string{"name: hostpath\n", "version: " + strings.TrimPrefix(d.version, "v") + "\n", "appVersion: " + d.version + "\n"} {
		if !strings.Contains(chart, want) {
			t.Errorf("helm show chart lacks %q:\n%s", want, chart)
		}
	}
	k8s, err := framework.KubernetesVersion(d.root)
	if err != nil {
		t.Fatal(err)
	}
	rendered := run(ctx, t, "", helm, "template", "hostpath", d.chart(), "--namespace", "hostpath-system", "--kube-version", k8s)
	checkImages(t, "the chart", workloadImages(t, rendered), d.pinned(t))
}

// pinned is what the release's workloads must run: REGISTRY/<program>@<the
// digest of its archive's index>.
func (d dist) pinned(t *testing.T) []string {
	t.Helper()
	var want []string
	for _, p := range programs {
		raw := run(t.Context(), t, "", "skopeo", "inspect", "--raw", "oci-archive:"+d.archive(p))
		sum := sha256.Sum256([]byte(raw))
		want = append(want, d.registry+"/"+p+"@sha256:"+hex.EncodeToString(sum[:]))
	}
	slices.Sort(want)
	return want
}

// checkImages checks that images (image -> workloads) are want, each used.
func checkImages(t *testing.T, what string, images map[string][]string, want []string) {
	t.Helper()
	var got []string
	for image := range images {
		got = append(got, image)
	}
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Errorf("The workloads of %s run %q (%v), want %q", what, got, images, want)
	}
}

// workloadImages maps the images of the containers and init containers of
// the Deployments and DaemonSets of a multi-document YAML to the workloads
// that run them.
func workloadImages(t *testing.T, manifest string) map[string][]string {
	t.Helper()
	images := map[string][]string{}
	dec := utilyaml.NewYAMLOrJSONDecoder(strings.NewReader(manifest), 4096)
	for {
		var obj unstructured.Unstructured
		err := dec.Decode(&obj.Object)
		if errors.Is(err, io.EOF) {
			return images
		}
		if err != nil {
			t.Fatalf("parse the manifests: %v", err)
		}
		if k := obj.GetKind(); k != "Deployment" && k != "DaemonSet" {
			continue
		}
		for _, field := range []string{"containers", "initContainers"} {
			containers, _, _ := unstructured.NestedSlice(obj.Object, "spec", "template", "spec", field)
			for _, c := range containers {
				image, _, _ := unstructured.NestedString(c.(map[string]any), "image")
				images[image] = append(images[image], obj.GetKind()+" "+obj.GetName())
			}
		}
	}
}

// platformsOf parses an image index whose every entry has a platform.
func platformsOf(t *testing.T, raw string) v1.Index {
	t.Helper()
	var index v1.Index
	if err := json.Unmarshal([]byte(raw), &index); err != nil {
		t.Fatalf("parse the index: %v\n%s", err, raw)
	}
	if index.MediaType != v1.MediaTypeImageIndex {
		t.Fatalf("a %s, want an image index:\n%s", index.MediaType, raw)
	}
	for _, m := range index.Manifests {
		if m.Platform == nil || m.MediaType != v1.MediaTypeImageManifest {
			t.Fatalf("index entry %s: a %s of platform %v, want an image manifest with its platform", m.Digest, m.MediaType, m.Platform)
		}
	}
	return index
}

// platformNames lists the platforms of index, in order.
func platformNames(index v1.Index) []string {
	var names []string
	for _, m := range index.Manifests {
		names = append(names, ocilayout.FormatPlatform(*m.Platform))
	}
	return names
}

// imageConfig is the config of the image of platform in the multi-platform
// image ref (a skopeo image name), as skopeo inspect --config shows it.
func imageConfig(ctx context.Context, t *testing.T, ref string, p v1.Platform, opts ...string) v1.Image {
	t.Helper()
	args := append([]string{"inspect", "--config", "--override-os", p.OS, "--override-arch", p.Architecture}, opts...)
	out := run(ctx, t, "", "skopeo", append(args, ref)...)
	var config v1.Image
	if err := json.Unmarshal([]byte(out), &config); err != nil {
		t.Fatalf("parse the config of %s for %s: %v\n%s", ref, ocilayout.FormatPlatform(p), err, out)
	}
	return config
}

// extract unpacks an OCI archive into a temporary directory.
func extract(t *testing.T, archive string) ocilayout.Layout {
	t.Helper()
	dir := t.TempDir()
	run(t.Context(), t, "", "tar", "-xf", archive, "-C", dir)
	return ocilayout.Layout{Dir: dir}
}

// fileOf copies the regular file name of the image m of layout (from its
// layers, the last one holding it wins) to a temporary file, executable,
// and returns its path.
func fileOf(t *testing.T, layout ocilayout.Layout, m v1.Descriptor, name string) string {
	t.Helper()
	data, err := layout.Blob(m)
	if err != nil {
		t.Fatal(err)
	}
	var manifest v1.Manifest
	if err := json.Unmarshal(data, &manifest); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), filepath.Base(name))
	found := false
	for _, l := range manifest.Layers {
		ok, err := copyFromLayer(filepath.Join(layout.Dir, "blobs", "sha256", l.Digest.Encoded()), name, out)
		if err != nil {
			t.Fatalf("layer %s: %v", l.Digest, err)
		}
		found = found || ok
	}
	if !found {
		t.Fatalf("no %s in the image %s", name, m.Digest)
	}
	return out
}

// copyFromLayer copies the regular file name of a gzip-compressed layer to
// out, executable; false when the layer lacks it.
func copyFromLayer(layer, name, out string) (bool, error) {
	f, err := os.Open(layer)
	if err != nil {
		return false, err
	}
	defer f.Close()
	gz, err := gzip.NewReader(f)
	if err != nil {
		return false, err
	}
	tr := tar.NewReader(gz)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return false, nil
		}
		if err != nil {
			return false, err
		}
		if strings.TrimPrefix(filepath.Clean(h.Name), "/") != name || h.Typeflag != tar.TypeReg {
			continue
		}
		w, err := os.OpenFile(out, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o755)
		if err != nil {
			return false, err
		}
		if _, err := io.Copy(w, tr); err != nil {
			w.Close()
			return false, err
		}
		return true, w.Close()
	}
}

// fileSays is what `file` says of a binary of each platform.
var fileSays = map[string][]string{
	"linux/amd64":   {"ELF 64-bit LSB executable, x86-64", "statically linked"},
	"linux/arm64":   {"ELF 64-bit LSB executable, ARM aarch64", "statically linked"},
	"linux/ppc64le": {"ELF 64-bit LSB executable, 64-bit PowerPC", "statically linked"},
	"linux/s390x":   {"ELF 64-bit MSB executable, IBM S/390", "statically linked"},
	"linux/riscv64": {"ELF 64-bit LSB executable, UCB RISC-V", "statically linked"},
	"darwin/amd64":  {"Mach-O 64-bit x86_64 executable"},
	"darwin/arm64":  {"Mach-O 64-bit arm64 executable"},
}

// qemu is the qemu-user program that runs Linux binaries of each
// architecture that is not this machine's (Debian's qemu-user-static).
var qemu = map[string]string{
	"arm64": "qemu-aarch64-static", "ppc64le": "qemu-ppc64le-static",
	"s390x": "qemu-s390x-static", "riscv64": "qemu-riscv64-static",
}

// checkBinary checks that bin is a binary of platform as `file` says, and
// that a Linux one prints help (containing want) with --help, under qemu
// when it is not for amd64.
func checkBinary(ctx context.Context, t *testing.T, bin, platform, want string) {
	t.Helper()
	says, ok := fileSays[platform]
	if !ok {
		t.Fatalf("no file description known for %s", platform)
	}
	out := run(ctx, t, "", "file", "-b", bin)
	for _, s := range says {
		if !strings.Contains(out, s) {
			t.Errorf("file %s: %q, want %q", filepath.Base(bin), strings.TrimSpace(out), s)
		}
	}
	says1, _, _ := strings.Cut(strings.TrimSpace(out), ", Go BuildID")
	goos, arch, _ := strings.Cut(platform, "/")
	if goos != "linux" {
		t.Logf("%s: file says %q; not run here", platform, says1)
		return
	}
	cmd := []string{bin, "--help"}
	if arch != "amd64" {
		cmd = append([]string{qemu[arch]}, cmd...)
	}
	// Help goes to stderr (pflag) or stdout (the plugin).
	help, err := exec.CommandContext(ctx, cmd[0], cmd[1:]...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s: %v\n%s(qemu-user: scripts/ensure-packages.sh qemu-user-static)", strings.Join(cmd, " "), err, help)
	}
	if !strings.Contains(string(help), want) {
		t.Errorf("%s: no %q in:\n%s", strings.Join(cmd, " "), want, help)
	}
	t.Logf("%s: file says %q; %s --help printed %d lines", platform, says1, strings.Join(cmd[:len(cmd)-1], " "), strings.Count(string(help), "\n"))
}
