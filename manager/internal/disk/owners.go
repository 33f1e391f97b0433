package disk

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"time"

	"hostpath.dev/api/managerapi"
)

// Owner records live in the pool itself, one file per volume:
//
//	<pool>/.hostpath/owners/<volume name>
//
// holding {"owner": "<PersistentVolume>", "ownedSince": "<RFC 3339 time>",
// "retained": <bool>, "reclaimPolicy": "Delete"|"Retain",
// "claimNamespace": "<namespace>", "sizeBytes": N,
// "enforcement": "btrfs"|"xfs"|"ext4", "quotaID": N, "multihost": true,
// "cloneOf": "<pool>/<volume>", "cloneMethod": "snapshot"|"reflink"|"copy",
// "cloneSeconds": N}
// (reclaimPolicy and claimNamespace are left out when none was given, and
// in records written before they existed; the size fields when the volume
// has no size or no quota; multihost for a node-mode volume, and in
// records written before it existed, which count as node mode until the
// provisioner of their node marks them). A volume name never starts with
// '.', so MetadataDir is never a volume, and a record's file name is
// exactly its volume's name (so
// every valid volume name, up to 255 bytes, has a record name). Records are
// written through a temporary file (".tmp-<random>" in the same directory,
// never a volume name either), synced and renamed into place; the metadata
// directories are mode 0700.
const (
	// MetadataDir is the directory in each pool that holds the manager's
	// own files; it is never listed as a volume.
	MetadataDir = ".hostpath"
	// OwnersDir is the directory, relative to the pool, that holds one
	// owner record per volume.
	OwnersDir = MetadataDir + "/owners"
)

// maxRecordBytes bounds what is read from a record file.
const maxRecordBytes = 64 << 10

// record is the JSON content of an owner record.
type record struct {
	Owner      string    `json:"owner"`
	OwnedSince time.Time `json:"ownedSince"`
	Retained   bool      `json:"retained"`
	// ReclaimPolicy is the owner's reclaim policy given at creation
	// (managerapi.ReclaimDelete, managerapi.ReclaimRetain or "").
	ReclaimPolicy string `json:"reclaimPolicy,omitempty"`
	// ClaimNamespace is the only namespace from which a claim may reuse
	// the directory ("" when none was given).
	ClaimNamespace string `json:"claimNamespace,omitempty"`
	// SizeBytes is the volume's size, promised by the pool (0: none).
	SizeBytes int64 `json:"sizeBytes,omitempty"`
	// Enforcement is the quota kind that limits the volume to SizeBytes
	// (a quota.Kind; "" when nothing does).
	Enforcement string `json:"enforcement,omitempty"`
	// QuotaID is the ID of the volume's quota (the btrfs subvolume ID or
	// the project ID); 0 while not known.
	QuotaID uint64 `json:"quotaID,omitempty"`
	// Multihost says the volume is one copy of a multihost volume: the
	// only kind a caller bound to another node may change (see
	// volumeTx.checkRemote).
	Multihost bool `json:"multihost,omitempty"`
	// CloneOf is the volume this one is a clone of, "<pool>/<name>", and
	// CloneMethod how its content was made (a managerapi.CloneMethod*; empty
	// while the copy runs); both empty for a volume that is no clone.
	CloneOf     string `json:"cloneOf,omitempty"`
	CloneMethod string `json:"cloneMethod,omitempty"`
	// CloneSeconds is how long the copy took.
	CloneSeconds float64 `json:"cloneSeconds,omitempty"`
}

func recordPath(name string) string { return path.Join(OwnersDir, name) }

// ownerOf returns the owner named by rec, "" for no record.
func ownerOf(rec *record) string {
	if rec == nil {
		return ""
	}
	return rec.Owner
}

// checkMetaDirs reports whether the metadata directories exist, and fails
// when either is something other than a real directory (a symlink planted
// there would otherwise redirect the records).
func checkMetaDirs(root *os.Root) (bool, error) {
	for _, d := range []string{MetadataDir, OwnersDir} {
		fi, err := root.Lstat(d)
		if errors.Is(err, fs.ErrNotExist) {
			return false, nil
		}
		if err != nil {
			return false, fmt.Errorf("stat %s: %w", d, err)
		}
		if !fi.IsDir() {
			return false, fmt.Errorf("%s in the pool is %s, not a directory; the manager keeps owner records there", d, kindOf(fi))
		}
	}
	return true, nil
}

// ensureMetaDirs creates the metadata directories when missing, syncing the
// parent of each one it creates.
func ensureMetaDirs(root *os.Root) error {
	for _, d := range []string{MetadataDir, OwnersDir} {
		fi, err := root.Lstat(d)
		if errors.Is(err, fs.ErrNotExist) {
			if err := root.Mkdir(d, 0o700); err != nil {
				return fmt.Errorf("create %s: %w", d, err)
			}
			if err := syncDir(root, path.Dir(d)); err != nil {
				return err
			}
			continue
		}
		if err != nil {
			return fmt.Errorf("stat %s: %w", d, err)
		}
		if !fi.IsDir() {
			return fmt.Errorf("%s in the pool is %s, not a directory; the manager keeps owner records there", d, kindOf(fi))
		}
	}
	return nil
}

// readRecord returns the owner record of volume name, or nil when it has
// none. A record that cannot be read or does not hold a valid owner is an
// error: the Store refuses to guess who owns a directory.
func readRecord(root *os.Root, name string) (*record, error) {
	ok, err := checkMetaDirs(root)
	if err != nil || !ok {
		return nil, err
	}
	p := recordPath(name)
	fi, err := root.Lstat(p)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("stat owner record %s: %w", p, err)
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("owner record %s is not a regular file", p)
	}
	f, err := root.Open(p)
	if err != nil {
		return nil, fmt.Errorf("open owner record %s: %w", p, err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxRecordBytes+1))
	if err != nil {
		return nil, fmt.Errorf("read owner record %s: %w", p, err)
	}
	if len(data) > maxRecordBytes {
		return nil, fmt.Errorf("owner record %s is larger than %d bytes", p, maxRecordBytes)
	}
	var rec record
	if err := json.Unmarshal(data, &rec); err != nil {
		return nil, fmt.Errorf("owner record %s is corrupt (fix or remove it by hand): %w", p, err)
	}
	if err := managerapi.ValidateOwner(rec.Owner); err != nil {
		return nil, fmt.Errorf("owner record %s is corrupt (fix or remove it by hand): %w", p, err)
	}
	if err := managerapi.ValidateReclaimPolicy(rec.ReclaimPolicy); err != nil {
		return nil, fmt.Errorf("owner record %s is corrupt (fix or remove it by hand): %w", p, err)
	}
	if err := managerapi.ValidateClaimNamespace(rec.ClaimNamespace); err != nil {
		return nil, fmt.Errorf("owner record %s is corrupt (fix or remove it by hand): %w", p, err)
	}
	return &rec, nil
}

// writeRecord replaces the owner record of volume name atomically: a crash
// leaves the old record or the new one, and the new one is on disk when
// writeRecord returns.
func writeRecord(root *os.Root, name string, rec record) (err error) {
	data, err := json.Marshal(rec)
	if err != nil {
		return fmt.Errorf("encode owner record: %w", err)
	}
	if err := ensureMetaDirs(root); err != nil {
		return err
	}
	tmp := path.Join(OwnersDir, ".tmp-"+randomHex())
	f, err := root.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return fmt.Errorf("create temporary owner record: %w", err)
	}
	defer func() {
		if err != nil {
			_ = root.Remove(tmp)
		}
	}()
	if _, err := f.Write(append(data, '\n')); err != nil {
		f.Close()
		return fmt.Errorf("write owner record: %w", err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("sync owner record: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("close owner record: %w", err)
	}
	if err := root.Rename(tmp, recordPath(name)); err != nil {
		return fmt.Errorf("rename owner record into place: %w", err)
	}
	return syncDir(root, OwnersDir)
}

// removeRecord removes the owner record of volume name, if any.
func removeRecord(root *os.Root, name string) error {
	ok, err := checkMetaDirs(root)
	if err != nil || !ok {
		return err
	}
	if err := root.Remove(recordPath(name)); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		return fmt.Errorf("remove owner record: %w", err)
	}
	return syncDir(root, OwnersDir)
}

// syncDir flushes a directory of the root to disk, so that entries created,
// renamed or removed in it survive a crash.
func syncDir(root *os.Root, dir string) error {
	d, err := root.Open(dir)
	if err != nil {
		return fmt.Errorf("open %s to sync it: %w", dir, err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("sync %s: %w", dir, err)
	}
	return nil
}

func randomHex() string {
	var b [8]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand panics instead)
	return hex.EncodeToString(b[:])
}
