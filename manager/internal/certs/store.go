package certs

import (
	"crypto/tls"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// FileName is the file, in Config.Dir, that holds the serving certificate
// (its chain as the signer gave it) followed by its ECDSA key, in PEM. One
// file, so that a rename replaces both at once.
const FileName = "serving.pem"

// errNotStored says that there is no stored certificate.
var errNotStored = errors.New("no stored certificate")

// path is the stored certificate's file.
func (m *Manager) path() string { return filepath.Join(m.cfg.Dir, FileName) }

// prepareDir makes dir with mode 0700, or gives an existing one that mode:
// it holds a private key.
func prepareDir(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("make the certificate directory: %w", err)
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		return fmt.Errorf("restrict the certificate directory: %w", err)
	}
	return nil
}

// load reads the stored certificate and key; errNotStored when there is
// none.
func load(path string) (*tls.Certificate, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, errNotStored
	}
	if err != nil {
		return nil, err
	}
	cert, err := parse(data, data)
	if err != nil {
		return nil, fmt.Errorf("parse %s: %w", path, err)
	}
	return cert, nil
}

// store writes data to FileName in dir atomically: a temporary file of mode
// 0600 in dir, synced, renamed over the old one, and the directory synced.
func store(dir string, data []byte) error {
	f, err := os.CreateTemp(dir, "."+FileName+".*")
	if err != nil {
		return fmt.Errorf("store the certificate: %w", err)
	}
	tmp := f.Name()
	defer os.Remove(tmp) // after the rename, there is nothing to remove
	err = f.Chmod(0o600)
	if err == nil {
		_, err = f.Write(data)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, filepath.Join(dir, FileName))
	}
	if err != nil {
		return fmt.Errorf("store the certificate: %w", err)
	}
	if d, err := os.Open(dir); err == nil {
		_ = d.Sync()
		_ = d.Close()
	}
	return nil
}
