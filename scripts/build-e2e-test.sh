#!/usr/bin/env bash
# build-e2e-test.sh: build the upstream Kubernetes "External Storage" e2e
# suite of $K8S_VERSION (k8s.io/kubernetes/test/e2e/storage/external, driven
# by --storage.testdriver files; scripts/storage-suite.sh runs it) and what it
# needs from the Go module proxy into .cache/k8s/<version>/bin, reusing
# binaries already there:
#
#   e2e-storage.test  the suite: the few lines of upstream's test/e2e/e2e_test.go
#                     it needs (flags, test files, Ginkgo), generated below as
#                     a test package and compiled with go test -c
#   ginkgo            the Ginkgo CLI of the version Kubernetes pins (parallel runs)
#   agnhost           the program of the e2e-test-images/agnhost image
#                     (scripts/images.sh --storage-suite)
#
# Same technique as build-k8s.sh (k8s_module in lib.sh), in a throwaway module
# of its own, .cache/k8s/<version>/e2e-src: the suite is compiled as that
# module's own test package because go mod tidy does not resolve the test
# dependencies of dependency packages. A change of this script rebuilds.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

# One build of a release at a time: .ci/run builds in the background what
# the targets it runs build in the foreground; the second waits, then finds
# the binaries.
mkdir -p "$K8S_BIN"
exec 9> "$K8S_BIN/../.build.lock"
flock 9

BINARIES=(e2e-storage.test ginkgo agnhost)
stamp=$(sha256sum < "$0" | cut -c1-64)
missing=()
for b in "${BINARIES[@]}"; do [ -x "$K8S_BIN/$b" ] || missing+=("$b"); done
if [ ${#missing[@]} -eq 0 ] && [ "$(cat "$K8S_BIN/.e2e-storage.stamp" 2>/dev/null)" = "$stamp" ]; then
  log "Storage e2e suite ($K8S_VERSION) cached in $K8S_BIN"
  exit 0
fi
log "Building ${BINARIES[*]} ($K8S_VERSION) into $K8S_BIN"

src=$CACHE_DIR/k8s/$K8S_VERSION/e2e-src
rm -rf "$src"
mkdir -p "$src/storage" "$K8S_BIN"
minor=${K8S_VERSION#v1.}; minor=${minor%%.*}

# The cache lives inside the repository: keep the workspace out of this build.
export GOWORK=off
cd "$src"
k8s_module . hostpath.dev/k8s-e2e-build
cat > tools.go <<'EOM'
//go:build tools

// Package tools pins the commands this module builds besides the suite.
package tools

import (
	_ "github.com/onsi/ginkgo/v2/ginkgo"
	_ "k8s.io/kubernetes/test/images/agnhost"
)
EOM
cat > storage/storage_test.go <<'EOM'
// Package storage runs the upstream External Storage suite: each
// --storage.testdriver file defines its tests while the flags are parsed.
package storage

import (
	"flag"
	"fmt"
	"os"
	"testing"

	"github.com/onsi/ginkgo/v2"
	"github.com/onsi/gomega"

	"k8s.io/component-base/logs"
	"k8s.io/klog/v2"
	"k8s.io/kubernetes/test/e2e/framework"
	"k8s.io/kubernetes/test/e2e/framework/config"
	"k8s.io/kubernetes/test/e2e/framework/testfiles"
	e2etestingmanifests "k8s.io/kubernetes/test/e2e/testing-manifests"

	_ "k8s.io/kubernetes/test/e2e/framework/debug/init"
	_ "k8s.io/kubernetes/test/e2e/framework/node/init"
	_ "k8s.io/kubernetes/test/e2e/storage/external"
)

func TestMain(m *testing.M) {
	config.CopyFlags(config.Flags, flag.CommandLine)
	framework.RegisterCommonFlags(flag.CommandLine)
	framework.RegisterClusterFlags(flag.CommandLine)
	flag.Parse()
	if flag.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "unknown arguments: %v\n", flag.Args())
		os.Exit(1)
	}
	testfiles.AddFileSource(e2etestingmanifests.GetE2ETestingManifestsFS())
	framework.AfterReadingAllFlags(&framework.TestContext)
	if framework.TestContext.RepoRoot != "" {
		testfiles.AddFileSource(testfiles.RootFileSource{Root: framework.TestContext.RepoRoot})
	}
	os.Exit(m.Run())
}

func TestExternalStorage(t *testing.T) {
	logs.InitLogs()
	defer logs.FlushLogs()
	klog.EnableContextualLogging(true)
	gomega.RegisterFailHandler(framework.Fail)
	suiteConfig, reporterConfig := framework.CreateGinkgoConfig()
	ginkgo.RunSpecs(t, "Kubernetes e2e suite", suiteConfig, reporterConfig)
}
EOM
# -e: a test of a dependency may import a package its published staging
# module no longer has (as in build-k8s.sh); the suite does not.
go mod tidy -e

ld="-s -w"
for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  ld="$ld -X $p.gitVersion=$K8S_VERSION -X $p.gitMajor=1 -X $p.gitMinor=$minor -X $p.gitTreeState=clean -X $p.buildDate=1970-01-01T00:00:00Z"
done
CGO_ENABLED=0 go test -c -trimpath -ldflags "$ld" -o "$K8S_BIN/e2e-storage.test" ./storage
CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$K8S_BIN/ginkgo" github.com/onsi/ginkgo/v2/ginkgo
CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$K8S_BIN/agnhost" k8s.io/kubernetes/test/images/agnhost
echo "$stamp" > "$K8S_BIN/.e2e-storage.stamp"
log "Built: ${BINARIES[*]} ($(du -ch "${BINARIES[@]/#/$K8S_BIN/}" | tail -1 | cut -f1))"
