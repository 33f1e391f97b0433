package app

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestReadPoolsConfig(t *testing.T) {
	for _, tc := range []struct {
		name      string
		files     map[string]string
		wantPools []string
		wantRoot  string
		wantErr   string
	}{
		{
			name:      "the shipped ConfigMap",
			files:     map[string]string{"pool.default": "/var/hpvolumes", "poolRoot": "/var/hppools", "..data": "", "..2026_11_28": ""},
			wantPools: []string{"default=/var/hpvolumes"},
			wantRoot:  "/var/hppools",
		},
		{
			name:      "several pools, no root, whitespace trimmed",
			files:     map[string]string{"pool.fast": "/mnt/nvme/hostpath\n", "pool.default": " /var/hpvolumes "},
			wantPools: []string{"default=/var/hpvolumes", "fast=/mnt/nvme/hostpath"},
		},
		{
			name:    "a typo in a key",
			files:   map[string]string{"pool.default": "/var/hpvolumes", "pools.fast": "/mnt/fast"},
			wantErr: `key "pools.fast" is neither pool.NAME nor poolRoot`,
		},
		{
			name:    "no pool",
			files:   map[string]string{"poolRoot": "/var/hppools"},
			wantErr: "at least one pool is needed",
		},
		{
			name:    "a value too long",
			files:   map[string]string{"pool.default": "/" + strings.Repeat("a", maxPoolsConfigValue)},
			wantErr: "longer than 4096 bytes",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			for k, v := range tc.files {
				if err := os.WriteFile(filepath.Join(dir, k), []byte(v), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			pools, root, err := readPoolsConfig(dir)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("readPoolsConfig = %v, %q, %v; want an error containing %q", pools, root, err, tc.wantErr)
				}
				return
			}
			if err != nil || !slices.Equal(pools, tc.wantPools) || root != tc.wantRoot {
				t.Fatalf("readPoolsConfig = %v, %q, %v; want %v, %q", pools, root, err, tc.wantPools, tc.wantRoot)
			}
		})
	}
}

// TestValidatePoolsConfig checks that --pools-config replaces --pool and
// --pool-root, and that a missing directory is an error of Validate.
func TestValidatePoolsConfig(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "pool.fast"), []byte("/mnt/fast"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "poolRoot"), []byte("/var/hppools"), 0o644); err != nil {
		t.Fatal(err)
	}
	o := NewOptions()
	o.NodeName = "n1"
	o.PoolsConfig = dir
	_ = o.Validate()
	if got := o.pools; len(got) != 1 || got["fast"] != "/mnt/fast" || o.PoolRoot != "/var/hppools" {
		t.Errorf("pools after Validate with --pools-config = %v, root %q; want only fast=/mnt/fast, root /var/hppools", got, o.PoolRoot)
	}
	o = NewOptions()
	o.NodeName = "n1"
	o.PoolsConfig = filepath.Join(dir, "missing")
	if err := o.Validate(); err == nil || !strings.Contains(err.Error(), "--pools-config") {
		t.Errorf("Validate with a missing --pools-config directory = %v, want an error naming the flag", err)
	}
}
