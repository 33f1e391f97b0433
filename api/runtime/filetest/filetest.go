// Package filetest is for tests only: it writes the files a test sets up,
// failing the test when it cannot. Only _test.go files import it (make
// verify keeps it, like every package whose name ends in "test", out of
// the binaries); it is in the api module because the tests of the manager
// and of the tools use it.
package filetest

import (
	"os"
	"path/filepath"
	"testing"
)

// Write writes content to path with mode 0644, making the missing parent
// directories; t fails at once if it cannot.
func Write(t testing.TB, path, content string) {
	t.Helper()
	WriteMode(t, path, content, 0o644)
}

// WriteMode writes content to path with mode (less the umask), making the
// missing parent directories (0755); t fails at once if it cannot.
func WriteMode(t testing.TB, path, content string, mode os.FileMode) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), mode); err != nil {
		t.Fatal(err)
	}
}
