package app

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// Keys of the ConfigMap hostpath-pools (manifests/base/manager/pools.yaml),
// which --pools-config names the mount of.
const (
	// PoolsConfigPoolPrefix starts the key of a pool: pool.NAME holds the
	// path of the pool NAME.
	PoolsConfigPoolPrefix = "pool."
	// PoolsConfigRootKey holds the directory of the pools named on the fly
	// (--pool-root).
	PoolsConfigRootKey = "poolRoot"
)

// maxPoolsConfigValue bounds what is read of one key: a path.
const maxPoolsConfigValue = 4096

// readPoolsConfig reads the mounted ConfigMap hostpath-pools in dir: each
// file pool.NAME holds the path of a pool, the file poolRoot the pool
// root; surrounding whitespace is trimmed. It returns the pools as
// --pool values (NAME=PATH, sorted; parsePools checks them) and the root.
// The kubelet's own entries (..data and the timestamped directory) and
// keys it does not know are refused or skipped: an unknown key is an
// error, so that a typo ("pools.fast") does not silently lose a pool.
func readPoolsConfig(dir string) ([]string, string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, "", fmt.Errorf("--%s: %w", FlagPoolsConfig, err)
	}
	var pools []string
	root := ""
	for _, e := range entries {
		key := e.Name()
		if strings.HasPrefix(key, "..") {
			continue // the kubelet's atomic-writer entries
		}
		name, isPool := strings.CutPrefix(key, PoolsConfigPoolPrefix)
		if !isPool && key != PoolsConfigRootKey {
			return nil, "", fmt.Errorf("--%s: key %q is neither %sNAME nor %s", FlagPoolsConfig, key, PoolsConfigPoolPrefix, PoolsConfigRootKey)
		}
		value, err := readValue(filepath.Join(dir, key))
		if err != nil {
			return nil, "", fmt.Errorf("--%s: key %q: %w", FlagPoolsConfig, key, err)
		}
		if isPool {
			pools = append(pools, name+"="+value)
		} else {
			root = value
		}
	}
	if len(pools) == 0 {
		return nil, "", fmt.Errorf("--%s %s: no key %sNAME: at least one pool is needed", FlagPoolsConfig, dir, PoolsConfigPoolPrefix)
	}
	slices.Sort(pools)
	return pools, root, nil
}

// readValue reads one key's file, at most maxPoolsConfigValue bytes,
// trimmed.
func readValue(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxPoolsConfigValue+1))
	if err != nil {
		return "", err
	}
	if len(data) > maxPoolsConfigValue {
		return "", fmt.Errorf("longer than %d bytes", maxPoolsConfigValue)
	}
	return strings.TrimSpace(string(data)), nil
}
