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
// anywhere in the suite. The tests never run in parallel (no t.Parallel),
// as several change that shared product.
func TestMain(m *testing.M) {
	os.Exit(framework.Main(m))
}
