package managerapi

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestFileToken: the token read is kept for TokenMaxAge, then the file is
// read again (a rotated token is picked up); a file that cannot be read is
// an error at every call, and an empty token is never kept.
func TestFileToken(t *testing.T) {
	path := filepath.Join(t.TempDir(), "token")
	clock := time.Unix(1_000_000, 0)
	source := fileToken(path, func() time.Time { return clock })
	for _, step := range []struct {
		name    string
		after   time.Duration
		write   string // written to the file before the call, "" writes nothing
		remove  bool   // the file removed before the call
		want    string
		wantErr bool
	}{
		{name: "no file yet", wantErr: true},
		{name: "no file, again", after: time.Second, wantErr: true},
		{name: "first token", write: " tok1\n", want: "tok1"},
		{name: "rotated, kept", after: TokenMaxAge - time.Nanosecond, write: "tok2", want: "tok1"},
		{name: "rotated, read again", after: time.Nanosecond, want: "tok2"},
		{name: "file gone, kept", after: time.Second, remove: true, want: "tok2"},
		{name: "file gone, read again", after: TokenMaxAge, wantErr: true},
		{name: "empty token", write: "\n", want: ""},
		{name: "empty token not kept", write: "tok3", want: "tok3"},
	} {
		clock = clock.Add(step.after)
		if step.write != "" {
			if err := os.WriteFile(path, []byte(step.write), 0o600); err != nil {
				t.Fatal(err)
			}
		}
		if step.remove {
			if err := os.Remove(path); err != nil {
				t.Fatal(err)
			}
		}
		got, err := source()
		if (err != nil) != step.wantErr || got != step.want {
			t.Errorf("%s: token = %q, %v; want %q, error %v", step.name, got, err, step.want, step.wantErr)
		}
	}
}
