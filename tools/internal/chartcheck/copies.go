package chartcheck

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
)

// Copy is one file of the chart's files/ and its source in manifests/,
// both relative to the repository's root.
type Copy struct {
	Path, Source string
}

// Copies lists the files under root's FilesDir, each with its source: the
// file of the same path under ManifestsDir. They are sorted; without
// FilesDir there are none.
func Copies(root string) ([]Copy, error) {
	var copies []Copy
	dir := filepath.Join(root, filepath.FromSlash(FilesDir))
	if _, err := os.Stat(dir); errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		copies = append(copies, Copy{Path: path.Join(FilesDir, rel), Source: path.Join(ManifestsDir, rel)})
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list the chart's copies: %w", err)
	}
	return copies, nil
}

// CheckCopies returns a problem for each copy under root that differs
// from its source or whose source is gone, and for a chart without copies.
func CheckCopies(root string) ([]string, error) {
	copies, err := Copies(root)
	if err != nil {
		return nil, err
	}
	if len(copies) == 0 {
		return []string{fmt.Sprintf("%s: no copies of manifests/ (the templates include them)", FilesDir)}, nil
	}
	var problems []string
	for _, c := range copies {
		got, err := os.ReadFile(filepath.Join(root, c.Path))
		if err != nil {
			return nil, err
		}
		want, err := os.ReadFile(filepath.Join(root, c.Source))
		switch {
		case errors.Is(err, fs.ErrNotExist):
			problems = append(problems, fmt.Sprintf("%s: its source %s is gone: remove the copy (and what includes it)", c.Path, c.Source))
		case err != nil:
			return nil, err
		case !bytes.Equal(got, want):
			problems = append(problems, fmt.Sprintf("%s differs from %s: run make chart-sync", c.Path, c.Source))
		}
	}
	return problems, nil
}

// SyncCopies rewrites each copy under root from its source and returns
// the paths it changed. A copy whose source is gone is an error naming it
// (after the others are rewritten).
func SyncCopies(root string) ([]string, error) {
	copies, err := Copies(root)
	if err != nil {
		return nil, err
	}
	var changed []string
	var errs []error
	for _, c := range copies {
		want, err := os.ReadFile(filepath.Join(root, c.Source))
		if errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, fmt.Errorf("%s: its source %s is gone: remove the copy (and what includes it)", c.Path, c.Source))
			continue
		}
		if err != nil {
			return changed, err
		}
		dst := filepath.Join(root, c.Path)
		got, err := os.ReadFile(dst)
		if err != nil {
			return changed, err
		}
		if bytes.Equal(got, want) {
			continue
		}
		if err := os.WriteFile(dst, want, 0o644); err != nil {
			return changed, fmt.Errorf("rewrite %s: %w", c.Path, err)
		}
		changed = append(changed, c.Path)
	}
	return changed, errors.Join(errs...)
}
