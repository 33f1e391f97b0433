// Package ociindex writes the image index of a multi-platform image into an
// OCI image layout: scripts/images.sh builds one image per platform into the
// layout (umoci, skopeo), then names an index of them, which `skopeo copy
// --all` pushes as one multi-platform image (make push, make release). The
// layout is read with hostpath.dev/e2e/framework/ocilayout, as the release
// tests read it.
//
// Why a program of our own: skopeo 1.9 (Debian bookworm) has no `manifest`
// command and umoci 0.4.7 writes image manifests only, and no Docker engine
// or buildx runs here. The job is small (read index.json, each manifest and
// its config, write one JSON blob, rewrite index.json), so this package
// needs only the standard library and the image-spec's Go types
// (github.com/opencontainers/image-spec, with go-digest its only
// dependency), which name the media types, annotations and fields exactly
// as the specification does; go-containerregistry would do it too, at the
// cost of a much larger dependency tree for one function.
package ociindex

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"

	"hostpath.dev/api/runtime/atomicfile"

	digest "github.com/opencontainers/go-digest"
	specs "github.com/opencontainers/image-spec/specs-go"
	v1 "github.com/opencontainers/image-spec/specs-go/v1"

	"hostpath.dev/e2e/framework/ocilayout"
)

// Entry is one image of an index: the name of its manifest in the layout
// and the platform it is for.
type Entry struct {
	// Ref is the manifest's name in the layout's index.json.
	Ref string
	// Platform is the image's platform; the image's config must name the
	// same OS and architecture (the variant is not in umoci's configs).
	Platform v1.Platform
}

// writeBlob stores data as a sha256 blob and returns its descriptor.
func writeBlob(l ocilayout.Layout, mediaType string, data []byte) (v1.Descriptor, error) {
	d := v1.Descriptor{MediaType: mediaType, Digest: digest.FromBytes(data), Size: int64(len(data))}
	dir := filepath.Join(l.Dir, v1.ImageBlobsDir, d.Digest.Algorithm().String())
	if err := writeFile(filepath.Join(dir, d.Digest.Encoded()), data); err != nil {
		return v1.Descriptor{}, fmt.Errorf("write blob %s: %w", d.Digest, err)
	}
	return d, nil
}

// Combine writes an image index of entries' manifests, each with its
// platform, into the layout l and names it tag in index.json (an earlier
// descriptor of that name goes; the entries' own names stay). It fails when
// an entry is not an image manifest, when its config names another OS or
// architecture than its platform, or when two entries have one platform.
func Combine(l ocilayout.Layout, tag string, entries []Entry) (v1.Descriptor, error) {
	if len(entries) == 0 {
		return v1.Descriptor{}, errors.New("no image to put in the index")
	}
	index := v1.Index{Versioned: specs.Versioned{SchemaVersion: 2}, MediaType: v1.MediaTypeImageIndex}
	seen := map[string]string{}
	for _, e := range entries {
		d, err := l.Find(e.Ref)
		if err != nil {
			return v1.Descriptor{}, err
		}
		got, err := l.Platform(d)
		if err != nil {
			return v1.Descriptor{}, fmt.Errorf("image %q: %w", e.Ref, err)
		}
		want := ocilayout.FormatPlatform(e.Platform)
		if got.OS != e.Platform.OS || got.Architecture != e.Platform.Architecture {
			return v1.Descriptor{}, fmt.Errorf("image %q is for %s/%s by its config, not %s", e.Ref, got.OS, got.Architecture, want)
		}
		if other, ok := seen[want]; ok {
			return v1.Descriptor{}, fmt.Errorf("images %q and %q are both for %s", other, e.Ref, want)
		}
		seen[want] = e.Ref
		p := e.Platform
		index.Manifests = append(index.Manifests, v1.Descriptor{MediaType: d.MediaType, Digest: d.Digest, Size: d.Size, Platform: &p})
	}
	data, err := json.Marshal(index)
	if err != nil {
		return v1.Descriptor{}, err
	}
	d, err := writeBlob(l, v1.MediaTypeImageIndex, data)
	if err != nil {
		return v1.Descriptor{}, err
	}
	d.Annotations = map[string]string{v1.AnnotationRefName: tag}
	return d, name(l, d)
}

// name puts d into index.json, in place of a descriptor of the same name.
func name(l ocilayout.Layout, d v1.Descriptor) error {
	idx, err := l.Index()
	if err != nil {
		return err
	}
	kept := idx.Manifests[:0]
	for _, m := range idx.Manifests {
		if m.Annotations[v1.AnnotationRefName] != d.Annotations[v1.AnnotationRefName] {
			kept = append(kept, m)
		}
	}
	idx.Manifests = append(kept, d)
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	if err := enc.Encode(idx); err != nil {
		return err
	}
	if err := writeFile(filepath.Join(l.Dir, v1.ImageIndexFile), buf.Bytes()); err != nil {
		return fmt.Errorf("write the layout's index: %w", err)
	}
	return nil
}

// writeFile writes data to path so that a reader never sees half of it
// (package atomicfile).
func writeFile(path string, data []byte) error {
	return atomicfile.Write(filepath.Dir(path), filepath.Base(path), data, 0o644)
}
