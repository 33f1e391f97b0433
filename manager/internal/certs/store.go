package certs

import (
	"crypto/tls"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"hostpath.dev/api/runtime/atomicfile"
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

// store writes data to FileName in dir atomically, mode 0600 (package
// atomicfile).
func store(dir string, data []byte) error {
	if err := atomicfile.Write(dir, FileName, data, 0o600); err != nil {
		return fmt.Errorf("store the certificate: %w", err)
	}
	return nil
}
