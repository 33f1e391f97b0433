// Package releasestest makes git repositories for the tests of the
// release record (hostpath.dev/e2e/framework/releases) and of the
// releases tool: commits with the dates a test gives.
package releasestest

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// Commit makes an empty commit with message and date (author and
// committer) in the repository at root, and returns its hash.
func Commit(t *testing.T, root, message, date string) string {
	t.Helper()
	env := []string{"GIT_AUTHOR_DATE=" + date, "GIT_COMMITTER_DATE=" + date}
	Git(t, root, env, "-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-q", "--allow-empty", "-m", message)
	return Git(t, root, nil, "rev-parse", "HEAD")
}

// Git runs git in root with env added to the environment and returns
// its trimmed output; it fails the test where git is missing (the
// repository is a git clone: CI and every developer have it).
func Git(t *testing.T, root string, env []string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", append([]string{"-C", root}, args...)...)
	cmd.Env = append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1")
	cmd.Env = append(cmd.Env, env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}
