package e2e

import (
	"os"
	"testing"

	"hostpath.dev/e2e/framework"
)

// TestMain skips the suite when no local cluster is up, else installs the
// product (kubectl apply -k e2e/install/: manifests/ and its btrfs variant)
// before the tests run.
//
// No test may depend on the order the tests run in (file names and
// declaration order are not a contract): each test makes what it needs in
// a namespace of its own (framework.Namespace), and a test that changes the
// product all tests share puts it back in a cleanup, pass or fail. The two
// that uninstall it or replace it with a release (TestUninstall,
// TestUpgrade) end with it installed as TestMain installs it
// (framework.InstallProduct, which waits for the rollout), so they may run
// anywhere in the suite.
//
// Serial and parallel: a test that touches only what it made (its
// namespaces, objects with names of its own, its own volumes) and asserts
// nothing that other tests' objects change calls t.Parallel() first; go
// test runs those after every other test has finished, -parallel of them
// at a time (E2E_PARALLEL in the Makefile). The others run one at a time:
// those that restart, roll out or reconfigure a component, add, remove or
// relabel nodes, mount pools, count what the API server or a manager did
// in all (reviews, sweeps in a log), or compare whole pools before and
// after (hostileCheckDisk). A test that does any of that must not call
// t.Parallel (docs/development.md, "Tests").
func TestMain(m *testing.M) {
	os.Exit(framework.Main(m))
}
