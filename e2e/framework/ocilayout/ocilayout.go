// Package ocilayout reads an OCI image layout
// (https://github.com/opencontainers/image-spec/blob/main/image-layout.md):
// DIR/oci-layout, DIR/index.json (descriptors, each named by the annotation
// org.opencontainers.image.ref.name), DIR/blobs/sha256/<hex>. The release
// tests read the images of dist/ with it; the ociindex tool
// (tools/internal/ociindex) writes an image index into one. It needs only
// the standard library and the image-spec's Go types.
package ocilayout

import (
	_ "crypto/sha256" // the digests' algorithm, for go-digest
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	v1 "github.com/opencontainers/image-spec/specs-go/v1"
)

// ParsePlatform parses OS/ARCH[/VARIANT], e.g. linux/arm64 or linux/arm/v7.
func ParsePlatform(s string) (v1.Platform, error) {
	parts := strings.Split(s, "/")
	if len(parts) < 2 || len(parts) > 3 || slices.Contains(parts, "") {
		return v1.Platform{}, fmt.Errorf("platform %q is not OS/ARCH[/VARIANT]", s)
	}
	p := v1.Platform{OS: parts[0], Architecture: parts[1]}
	if len(parts) == 3 {
		p.Variant = parts[2]
	}
	return p, nil
}

// FormatPlatform is the inverse of ParsePlatform.
func FormatPlatform(p v1.Platform) string {
	s := p.OS + "/" + p.Architecture
	if p.Variant != "" {
		s += "/" + p.Variant
	}
	return s
}

// Layout is an OCI image layout on disk.
type Layout struct {
	// Dir holds oci-layout, index.json and blobs/.
	Dir string
}

// Index reads the layout's index.json.
func (l Layout) Index() (v1.Index, error) {
	var idx v1.Index
	data, err := os.ReadFile(filepath.Join(l.Dir, v1.ImageIndexFile))
	if err != nil {
		return idx, fmt.Errorf("read the layout's index: %w", err)
	}
	if err := json.Unmarshal(data, &idx); err != nil {
		return idx, fmt.Errorf("parse %s: %w", filepath.Join(l.Dir, v1.ImageIndexFile), err)
	}
	return idx, nil
}

// Find returns the descriptor that index.json names ref.
func (l Layout) Find(ref string) (v1.Descriptor, error) {
	idx, err := l.Index()
	if err != nil {
		return v1.Descriptor{}, err
	}
	var names []string
	for _, d := range idx.Manifests {
		name := d.Annotations[v1.AnnotationRefName]
		if name == ref {
			return d, nil
		}
		names = append(names, name)
	}
	return v1.Descriptor{}, fmt.Errorf("no %q in the layout %s (it names %q)", ref, l.Dir, names)
}

// Blob reads the blob of d and checks its size and digest.
func (l Layout) Blob(d v1.Descriptor) ([]byte, error) {
	if err := d.Digest.Validate(); err != nil {
		return nil, fmt.Errorf("descriptor of %s: %w", d.MediaType, err)
	}
	data, err := os.ReadFile(filepath.Join(l.Dir, v1.ImageBlobsDir, d.Digest.Algorithm().String(), d.Digest.Encoded()))
	if err != nil {
		return nil, fmt.Errorf("read blob: %w", err)
	}
	if int64(len(data)) != d.Size || d.Digest.Algorithm().FromBytes(data) != d.Digest {
		return nil, fmt.Errorf("blob %s: %d bytes of another digest, want %d bytes", d.Digest, len(data), d.Size)
	}
	return data, nil
}

// Platform reads the OS, architecture and variant of the image manifest d
// from its config.
func (l Layout) Platform(d v1.Descriptor) (v1.Platform, error) {
	if d.MediaType != v1.MediaTypeImageManifest {
		return v1.Platform{}, fmt.Errorf("%s is a %s, not an image manifest", d.Digest, d.MediaType)
	}
	data, err := l.Blob(d)
	if err != nil {
		return v1.Platform{}, err
	}
	var m v1.Manifest
	if err := json.Unmarshal(data, &m); err != nil {
		return v1.Platform{}, fmt.Errorf("parse manifest %s: %w", d.Digest, err)
	}
	data, err = l.Blob(m.Config)
	if err != nil {
		return v1.Platform{}, fmt.Errorf("config of %s: %w", d.Digest, err)
	}
	var c v1.Image
	if err := json.Unmarshal(data, &c); err != nil {
		return v1.Platform{}, fmt.Errorf("parse config of %s: %w", d.Digest, err)
	}
	return c.Platform, nil
}
