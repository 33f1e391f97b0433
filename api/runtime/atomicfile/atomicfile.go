// Package atomicfile writes a file so that a reader, or the file system
// after a crash, sees either the old content or the new, never a part:
// the manager's identity and serving certificate and the OCI layouts the
// release tools write go through it.
//
// It is a dozen lines over the standard library; a dependency for it
// (github.com/google/renameio) would bring more than it saves.
package atomicfile

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// Write writes data to dir/name with mode perm: a temporary file in dir,
// written and synced, renamed over dir/name, then dir synced so that the
// rename itself survives a crash. On error dir/name is unchanged and the
// temporary file is gone.
func Write(dir, name string, data []byte, perm fs.FileMode) error {
	tmp, err := os.CreateTemp(dir, "."+name+".tmp-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) // fails harmlessly after the rename
	err = tmp.Chmod(perm)
	if err == nil {
		_, err = tmp.Write(data)
	}
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), filepath.Join(dir, name))
	}
	if err != nil {
		return fmt.Errorf("write %s: %w", filepath.Join(dir, name), err)
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
