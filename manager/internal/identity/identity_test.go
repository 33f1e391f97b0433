package identity

import (
	"os"
	"path/filepath"
	"testing"

	"k8s.io/klog/v2/ktesting"

	"hostpath.dev/api/runtime/filetest"
)

func TestLoad(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	dir := filepath.Join(t.TempDir(), "state", "nested")
	cfg := Config{StateDir: dir, MachineIDFile: filepath.Join(dir, "absent")}
	a, err := Load(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if !isHostID(a.HostID()) {
		t.Errorf("host ID %q is not a UUID", a.HostID())
	}
	b, err := Load(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if a.HostID() != b.HostID() {
		t.Errorf("host ID changed across loads: %s then %s", a.HostID(), b.HostID())
	}
	if m := a.MachineID(ctx); m != "" {
		t.Errorf("MachineID of a missing file = %q", m)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 || entries[0].Name() != HostIDFile {
		t.Errorf("state directory holds %v, want only %s", entries, HostIDFile)
	}
	other := Config{StateDir: t.TempDir()}
	c, err := Load(ctx, other)
	if err != nil {
		t.Fatal(err)
	}
	if c.HostID() == a.HostID() {
		t.Error("two state directories got the same host ID")
	}

	filetest.Write(t, filepath.Join(dir, HostIDFile), "garbage\n")
	if _, err := Load(ctx, cfg); err == nil {
		t.Error("Load accepted a corrupt host ID file")
	}
	if got, _ := os.ReadFile(filepath.Join(dir, HostIDFile)); string(got) != "garbage\n" {
		t.Error("corrupt host ID file was replaced")
	}
	if _, err := Load(ctx, Config{}); err == nil {
		t.Error("Load without a state directory succeeded")
	}
}

// TestLoadKeepsTheOnDiskFormat: a host-id file written by earlier managers
// (canonical lower-case version 4 UUID and a newline) still loads, and
// nothing else that parses as a UUID passes for a host ID.
func TestLoadKeepsTheOnDiskFormat(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	for _, tc := range []struct {
		content string
		want    string // "": refused
	}{
		{"3f1c2a9e-8b4d-4e7f-9a6b-0c5d7e8f9a1b\n", "3f1c2a9e-8b4d-4e7f-9a6b-0c5d7e8f9a1b"},
		{"3f1c2a9e-8b4d-4e7f-9a6b-0c5d7e8f9zzz\n", ""},          // not hex
		{"3F1C2A9E-8B4D-4E7F-9A6B-0C5D7E8F9A1B\n", ""},          // upper case
		{"3f1c2a9e8b4d4e7f9a6b0c5d7e8f9a1b\n", ""},              // no hyphens
		{"{3f1c2a9e-8b4d-4e7f-9a6b-0c5d7e8f9a1b}\n", ""},        // braces
		{"urn:uuid:3f1c2a9e-8b4d-4e7f-9a6b-0c5d7e8f9a1b\n", ""}, // URN
		{"3f1c2a9e-8b4d-1e7f-9a6b-0c5d7e8f9a1b\n", ""},          // version 1
		{"3f1c2a9e-8b4d-4e7f-ca6b-0c5d7e8f9a1b\n", ""},          // variant
	} {
		dir := t.TempDir()
		filetest.Write(t, filepath.Join(dir, HostIDFile), tc.content)
		id, err := Load(ctx, Config{StateDir: dir})
		switch {
		case tc.want == "" && err == nil:
			t.Errorf("Load accepted %q as host ID %q", tc.content, id.HostID())
		case tc.want != "" && (err != nil || id.HostID() != tc.want):
			t.Errorf("Load of %q: %v, %v", tc.content, id, err)
		}
	}
}

func TestBootID(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	dir := t.TempDir()
	bootID := filepath.Join(dir, "boot_id")
	filetest.Write(t, bootID, "boot-1\n")
	filetest.Write(t, filepath.Join(dir, "machine-id"), "machine-1\n")
	id, err := Load(ctx, Config{StateDir: filepath.Join(dir, "state"), BootIDFile: bootID, MachineIDFile: filepath.Join(dir, "machine-id")})
	if err != nil {
		t.Fatal(err)
	}
	if b, err := id.BootID(); err != nil || b != "boot-1" {
		t.Errorf("BootID = %q, %v", b, err)
	}
	if m := id.MachineID(ctx); m != "machine-1" {
		t.Errorf("MachineID = %q", m)
	}
	if err := os.Remove(bootID); err != nil {
		t.Fatal(err)
	}
	if _, err := id.BootID(); err == nil {
		t.Error("BootID without a boot ID file succeeded")
	}
}
