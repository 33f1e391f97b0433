// Package identity says who the host is: a host ID generated once and kept
// in the manager's state directory, the kernel's boot ID and the machine ID.
// The disk Store reports them in GET /v1/host (managerapi.Host).
//
// The host ID is a random (version 4) UUID from github.com/google/uuid,
// written as its canonical text and a newline to StateDir/host-id. It
// survives reboots and manager upgrades, and is copied along when a disk
// image is cloned, which is how clones are caught.
package identity

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"hostpath.dev/api/runtime/atomicfile"

	"github.com/google/uuid"
	"k8s.io/klog/v2"
)

// HostIDFile is the name of the file in the state directory that holds the
// host ID.
const HostIDFile = "host-id"

// Default locations of the kernel's and systemd's identifiers.
const (
	DefaultBootIDFile    = "/proc/sys/kernel/random/boot_id"
	DefaultMachineIDFile = "/etc/machine-id"
)

// Config locates the files a host's identity is read from.
type Config struct {
	// StateDir holds the host ID file; it is created if missing.
	StateDir string
	// BootIDFile is read at every call of BootID (DefaultBootIDFile when
	// empty).
	BootIDFile string
	// MachineIDFile is read at every call of MachineID; it may be missing,
	// and empty means the machine ID is not reported.
	MachineIDFile string
}

// Identity is who the host is. It is safe for concurrent use.
type Identity struct {
	hostID string
	cfg    Config
}

// Load reads the host ID from the state directory, creating the directory
// and a new random ID (written atomically) on first use. A host ID file that
// exists but does not hold a host ID is an error, not replaced: the host's
// identity must not change behind the operator's back.
func Load(ctx context.Context, cfg Config) (*Identity, error) {
	if cfg.StateDir == "" {
		return nil, errors.New("no state directory configured")
	}
	if cfg.BootIDFile == "" {
		cfg.BootIDFile = DefaultBootIDFile
	}
	path := filepath.Join(cfg.StateDir, HostIDFile)
	b, err := os.ReadFile(path)
	switch {
	case err == nil:
		id := strings.TrimSpace(string(b))
		if !isHostID(id) {
			return nil, fmt.Errorf("host ID file %s does not hold a host ID (a random UUID); remove it to have a new one generated", path)
		}
		return &Identity{hostID: id, cfg: cfg}, nil
	case !errors.Is(err, fs.ErrNotExist):
		return nil, fmt.Errorf("read host ID: %w", err)
	}
	if err := os.MkdirAll(cfg.StateDir, 0o755); err != nil {
		return nil, fmt.Errorf("create state directory: %w", err)
	}
	id, err := uuid.NewRandom()
	if err != nil {
		return nil, fmt.Errorf("generate a host ID: %w", err)
	}
	if err := atomicfile.Write(cfg.StateDir, HostIDFile, []byte(id.String()+"\n"), 0o644); err != nil {
		return nil, fmt.Errorf("write host ID: %w", err)
	}
	klog.FromContext(ctx).Info("Generated a new host ID", "hostID", id.String(), "file", path)
	return &Identity{hostID: id.String(), cfg: cfg}, nil
}

// isHostID reports whether s is a host ID as Load writes it: a random
// (version 4, RFC 4122 variant) UUID in canonical lower-case form.
func isHostID(s string) bool {
	id, err := uuid.Parse(s)
	return err == nil && id.Version() == 4 && id.Variant() == uuid.RFC4122 && id.String() == s
}

// HostID returns the persistent host ID.
func (i *Identity) HostID() string { return i.hostID }

// BootID returns the kernel's boot ID, which changes at every boot.
func (i *Identity) BootID() (string, error) {
	b, err := os.ReadFile(i.cfg.BootIDFile)
	if err != nil {
		return "", fmt.Errorf("read boot ID: %w", err)
	}
	return strings.TrimSpace(string(b)), nil
}

// MachineID returns the machine ID, or "" when it cannot be read.
func (i *Identity) MachineID(ctx context.Context) string {
	if i.cfg.MachineIDFile == "" {
		return ""
	}
	b, err := os.ReadFile(i.cfg.MachineIDFile)
	if err != nil {
		klog.FromContext(ctx).V(2).Info("Cannot read the machine ID", "file", i.cfg.MachineIDFile, "err", err)
		return ""
	}
	return strings.TrimSpace(string(b))
}
