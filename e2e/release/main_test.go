// Package release tests a release as its users get it: the dist/ that make
// release wrote (scripts/release.sh), a multi-platform push of make push,
// and dist/hostpath.yaml installed on a fresh local cluster. make
// test-release (scripts/test.sh release) rehearses a release in a
// throwaway clone and runs these tests on its dist/:
//
//	HOSTPATH_RELEASE_DIST       the dist/ directory (the tests skip without it)
//	HOSTPATH_RELEASE_VERSION    its version, vX.Y.Z
//	HOSTPATH_RELEASE_REGISTRY   the RELEASE_REGISTRY it was made with (default hostpath.dev)
//	HOSTPATH_RELEASE_PLATFORMS  its RELEASE_PLATFORMS (default linux/amd64,linux/arm64)
//
// Binaries of other architectures run under qemu-user (Debian's
// qemu-user-static, called by name: no binfmt registration needed).
package release

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"hostpath.dev/e2e/framework"
)

// The environment the tests read.
const (
	distEnv      = "HOSTPATH_RELEASE_DIST"
	versionEnv   = "HOSTPATH_RELEASE_VERSION"
	registryEnv  = "HOSTPATH_RELEASE_REGISTRY"
	platformsEnv = "HOSTPATH_RELEASE_PLATFORMS"
)

// programs are the product's images.
var programs = []string{"manager", "provisioner", "hostdefiner"}

// pluginPlatforms are the platforms of the kubectl plugin's binaries.
var pluginPlatforms = []string{"linux/amd64", "linux/arm64", "darwin/amd64", "darwin/arm64"}

// dist is the release under test.
type dist struct {
	dir, version, registry string
	platforms              []string
	root                   string // the repository of the tests
}

// release returns the release the environment names, or skips the test
// when it names none (and fails it when HOSTPATH_E2E_REQUIRED is true).
func release(t *testing.T) dist {
	t.Helper()
	d := dist{dir: os.Getenv(distEnv), version: os.Getenv(versionEnv), registry: os.Getenv(registryEnv)}
	if d.dir == "" || d.version == "" {
		if os.Getenv(framework.RequiredEnv) == "true" {
			t.Fatalf("%s and %s must name a release (make test-release sets them)", distEnv, versionEnv)
		}
		t.Skipf("no release to test: %s and %s are not set (make test-release sets them)", distEnv, versionEnv)
	}
	if d.registry == "" {
		d.registry = "hostpath.dev"
	}
	d.platforms = strings.Split(os.Getenv(platformsEnv), ",")
	if os.Getenv(platformsEnv) == "" {
		d.platforms = []string{"linux/amd64", "linux/arm64"}
	}
	root, err := framework.FindRepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	d.root = root
	return d
}

// archive is the path of program's OCI archive.
func (d dist) archive(program string) string {
	return filepath.Join(d.dir, program+"-"+d.version+".oci.tar")
}

// chart is the path of the packaged chart.
func (d dist) chart() string {
	return filepath.Join(d.dir, "hostpath-"+strings.TrimPrefix(d.version, "v")+".tgz")
}

// run runs a command in dir and returns its standard output; the test
// fails with its standard error when it fails.
func run(ctx context.Context, t *testing.T, dir string, name string, args ...string) string {
	t.Helper()
	out, err := runErr(ctx, dir, nil, name, args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// runErr runs a command in dir with env added to the environment and
// returns its standard output, or an error with its standard error.
func runErr(ctx context.Context, dir string, env []string, name string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("%s %s: %w\n%s", name, strings.Join(args, " "), err, stderr.String())
	}
	return stdout.String(), nil
}

// tool is the path of a tool scripts/tool.sh builds (helm, registry).
func (d dist) tool(ctx context.Context, t *testing.T, name string) string {
	t.Helper()
	return strings.TrimSpace(run(ctx, t, d.root, filepath.Join(d.root, "scripts", "tool.sh"), name))
}
