package selinux

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestValidateContext(t *testing.T) {
	for _, tc := range []struct {
		context string
		want    string // "" means valid
	}{
		{context: DefaultContext},
		{context: "system_u:object_r:container_file_t:s0:c1,c2"},
		{context: "system_u:object_r:container_file_t:s0-s0:c0.c1023"},
		{context: "unconfined_u:object_r:svirt_sandbox_file_t:s0"},
		{context: "", want: "empty"},
		{context: "container_file_t", want: "1 parts"},
		{context: "system_u:object_r:container_file_t", want: "3 parts"},
		{context: ":object_r:container_file_t:s0", want: "empty user"},
		{context: "system_u::container_file_t:s0", want: "empty role"},
		{context: "system_u:object_r::s0", want: "empty type"},
		{context: "system_u:object_r:container_file_t:", want: "empty level"},
		{context: "system_u:object_r:container_file_t:s0:", want: "empty level"},
		{context: "system_u:object_r:container_file_t:s0::c1", want: "empty level"},
		{context: "system_u:object_r:container file_t:s0", want: "printable ASCII without spaces"},
		{context: " system_u:object_r:container_file_t:s0", want: "printable ASCII"},
		{context: "system_u:object_r:container_file_t:s0\n", want: "printable ASCII"},
		{context: "system_u:object_r:container_file_t:s0\t", want: "printable ASCII"},
		{context: "system_u:object_r:container_file_t:s0\x00", want: "printable ASCII"},
		{context: "system_u:object_r:contäiner_file_t:s0", want: "printable ASCII"},
	} {
		err := ValidateContext(tc.context)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("ValidateContext(%q) = %v, want nil", tc.context, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("ValidateContext(%q) = %v, want an error mentioning %q", tc.context, err, tc.want)
		}
	}
}

// TestEnabled: a directory tree stands for /sys/fs/selinux.
func TestEnabled(t *testing.T) {
	base := t.TempDir()
	write := func(p string) {
		t.Helper()
		if err := os.WriteFile(p, []byte("1\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	mkdir := func(p string) string {
		t.Helper()
		if err := os.MkdirAll(p, 0o755); err != nil {
			t.Fatal(err)
		}
		return p
	}
	enforcing := mkdir(filepath.Join(base, "enforcing"))
	write(filepath.Join(enforcing, "enforce"))
	enforceDir := mkdir(filepath.Join(base, "enforce-dir"))
	mkdir(filepath.Join(enforceDir, "enforce"))
	aFile := filepath.Join(base, "file")
	write(aFile)
	for _, tc := range []struct {
		desc, fsRoot string
		want         bool
	}{
		{"enforce file present", enforcing, true},
		{"empty directory (a container's /sys without selinuxfs)", mkdir(filepath.Join(base, "empty")), false},
		{"missing", filepath.Join(base, "missing"), false},
		{"a file", aFile, false},
		{"enforce is a directory", enforceDir, false},
		{"empty path", "", false},
	} {
		if got := Enabled(tc.fsRoot); got != tc.want {
			t.Errorf("%s: Enabled(%q) = %t, want %t", tc.desc, tc.fsRoot, got, tc.want)
		}
	}
}

func TestModes(t *testing.T) {
	on := t.TempDir()
	if err := os.WriteFile(filepath.Join(on, "enforce"), []byte("0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	off := t.TempDir()
	for _, tc := range []struct {
		mode    string
		onHost  bool // Enabled on a host with SELinux
		offHost bool // Enabled on a host without
	}{
		{"auto", true, false},
		{"on", true, true},
		{"off", false, false},
	} {
		m, err := ParseMode(tc.mode)
		if err != nil {
			t.Fatalf("ParseMode(%q): %v", tc.mode, err)
		}
		if got := m.Enabled(on); got != tc.onHost {
			t.Errorf("%s on an SELinux host: %t, want %t", tc.mode, got, tc.onHost)
		}
		if got := m.Enabled(off); got != tc.offHost {
			t.Errorf("%s on a host without SELinux: %t, want %t", tc.mode, got, tc.offHost)
		}
	}
	for _, bad := range []string{"", "On", "true", "enforcing"} {
		if _, err := ParseMode(bad); err == nil || !strings.Contains(err.Error(), "auto, on or off") {
			t.Errorf("ParseMode(%q) = %v, want an error", bad, err)
		}
	}
}

// TestNew: disabled is the no-op labeler, which never looks at its file;
// enabled with an invalid context fails every Label.
func TestNew(t *testing.T) {
	l := New(DefaultContext, false)
	if _, ok := l.(Nop); !ok {
		t.Fatalf("New(disabled) = %T, want Nop", l)
	}
	if err := l.Label(nil); err != nil {
		t.Errorf("Nop.Label: %v", err)
	}
	if err := New("bad context", true).Label(nil); err == nil || !strings.Contains(err.Error(), "printable ASCII") {
		t.Errorf("Label with an invalid context = %v, want its validation error", err)
	}
	if err := New("bad context", false).Label(nil); err != nil {
		t.Errorf("disabled Label with an invalid context = %v, want nil", err)
	}
	if err := New(DefaultContext, true).Label(nil); err == nil {
		t.Error("Label(nil) succeeded")
	}
}

func TestSameTypeAndLevel(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		want bool
	}{
		{"unconfined_u:object_r:container_file_t:s0", DefaultContext, true},
		{"system_u:object_r:var_t:s0", DefaultContext, false},
		{"system_u:object_r:container_file_t:s0:c1,c2", DefaultContext, false},
		{"garbage", DefaultContext, false},
	} {
		if got := sameTypeAndLevel(tc.a, tc.b); got != tc.want {
			t.Errorf("sameTypeAndLevel(%q, %q) = %t, want %t", tc.a, tc.b, got, tc.want)
		}
	}
}

// TestLabelRealDirectory sets the real xattr on a temporary directory. Most
// test machines refuse security.selinux without SELinux (or without
// privileges), which only must not panic; where it is accepted, the label
// must read back.
func TestLabelRealDirectory(t *testing.T) {
	dir := t.TempDir()
	f, err := os.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := New(DefaultContext, true).Label(f); err != nil {
		t.Skipf("this machine does not take security.selinux on %s (Label returned an error without panicking): %v", dir, err)
	}
	got, err := getContext(f)
	if err != nil {
		t.Skipf("label set but not readable back: %v", err)
	}
	if got != DefaultContext {
		t.Errorf("context read back = %q, want %q", got, DefaultContext)
	}
	if err := New(DefaultContext, true).Label(f); err != nil {
		t.Errorf("Label of a directory that has the context already: %v", err)
	}
}
