package e2e

import (
	"os"
	"testing"

	"hostpath.dev/e2e/framework"
)

// TestMain skips the suite when no local cluster is up, else installs the
// product (kubectl apply -k e2e/install/: manifests/ and its btrfs variant)
// before the tests run.
func TestMain(m *testing.M) {
	os.Exit(framework.Main(m))
}
