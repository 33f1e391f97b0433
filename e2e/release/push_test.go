package release

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"hostpath.dev/e2e/framework"
)

// pushTag is the tag TestPushIndex pushes (and images.sh caches the
// layouts under: one name, reused by every run).
const pushTag = "test-push"

// TestPushIndex pushes multi-platform images with make push (PLATFORMS
// of the release) to a registry of its own on 127.0.0.1, as
// docs/install.md does, and checks what skopeo shows there: each image is
// an index of one image per platform, and each platform's config names
// its architecture.
func TestPushIndex(t *testing.T) {
	d := release(t)
	ctx := t.Context()
	registry := startRegistry(ctx, t, d.tool(ctx, t, "registry"))
	env := []string{"PLATFORMS=" + strings.Join(d.platforms, ","), "IMAGE_TAG=" + pushTag, "REGISTRY_TLS_VERIFY=false"}
	out, err := runErr(ctx, d.root, env, "make", "--no-print-directory", "push", "REGISTRY="+registry+"/hostpath")
	if err != nil {
		t.Fatalf("make push: %v", err)
	}
	t.Logf("make push printed:\n%s", out)
	for _, p := range programs {
		ref := "docker://" + registry + "/hostpath/" + p + ":" + pushTag
		index := platformsOf(t, run(ctx, t, "", "skopeo", "inspect", "--raw", "--tls-verify=false", ref))
		got := platformNames(index)
		if !slices.Equal(got, d.platforms) {
			t.Errorf("%s is an index of %q, want %q", ref, got, d.platforms)
		}
		t.Logf("skopeo inspect --raw %s: an image index of %q", ref, got)
		for _, m := range index.Manifests {
			config := imageConfig(ctx, t, ref, *m.Platform, "--tls-verify=false")
			if config.Architecture != m.Platform.Architecture || config.OS != m.Platform.OS {
				t.Errorf("%s for %s/%s: config of %s/%s", ref, m.Platform.OS, m.Platform.Architecture, config.OS, config.Architecture)
			}
		}
	}
}

// startRegistry starts `registry serve` (distribution v3) on a free port
// of 127.0.0.1 with its storage in a temporary directory, waits until it
// answers, and stops it by its PID when the test ends. It returns its
// address.
func startRegistry(ctx context.Context, t *testing.T, bin string) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	dir := t.TempDir()
	config := fmt.Sprintf("version: 0.1\nlog: {level: warn}\nstorage: {filesystem: {rootdirectory: %s}}\nhttp: {addr: %s}\n", filepath.Join(dir, "storage"), addr)
	if err := os.WriteFile(filepath.Join(dir, "config.yml"), []byte(config), 0o644); err != nil {
		t.Fatal(err)
	}
	logFile, err := os.Create(filepath.Join(dir, "registry.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "serve", filepath.Join(dir, "config.yml"))
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		logFile.Close()
		if t.Failed() {
			data, _ := os.ReadFile(logFile.Name())
			t.Logf("The registry's log:\n%s", data)
		}
	})
	framework.WaitFor(ctx, t, time.Minute, "the registry on "+addr+" to answer", func(ctx context.Context) (bool, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/v2/", nil)
		if err != nil {
			return false, err
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return false, err
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, nil
	})
	t.Logf("Registry %s (PID %d) on %s", bin, cmd.Process.Pid, addr)
	return addr
}
