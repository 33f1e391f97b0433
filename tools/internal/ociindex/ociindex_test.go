package ociindex

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	digest "github.com/opencontainers/go-digest"
	specs "github.com/opencontainers/image-spec/specs-go"
	v1 "github.com/opencontainers/image-spec/specs-go/v1"

	"hostpath.dev/e2e/framework/ocilayout"
)

func TestParseEntries(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		want    []Entry
		wantErr string
	}{
		{name: "two", args: []string{"linux/amd64=a", "linux/arm/v7=b"}, want: []Entry{
			{Ref: "a", Platform: v1.Platform{OS: "linux", Architecture: "amd64"}},
			{Ref: "b", Platform: v1.Platform{OS: "linux", Architecture: "arm", Variant: "v7"}},
		}},
		{name: "no ref", args: []string{"linux/amd64"}, wantErr: `"linux/amd64" is not PLATFORM=REF`},
		{name: "empty ref", args: []string{"linux/amd64="}, wantErr: "is not PLATFORM=REF"},
		{name: "bad platform", args: []string{"amd64=a"}, wantErr: `platform "amd64" is not OS/ARCH`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseEntries(tc.args)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("ParseEntries: %v, want an error with %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("ParseEntries = %+v, %v; want %+v", got, err, tc.want)
			}
		})
	}
}

// testLayout is a layout with an image per platform of platforms, each
// named after its platform with "/" replaced by "-", and an index "old".
func testLayout(t *testing.T, platforms ...string) ocilayout.Layout {
	t.Helper()
	l := ocilayout.Layout{Dir: t.TempDir()}
	if err := os.MkdirAll(filepath.Join(l.Dir, v1.ImageBlobsDir, "sha256"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(l.Dir, v1.ImageLayoutFile), []byte(`{"imageLayoutVersion":"1.0.0"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	idx := v1.Index{Versioned: specs.Versioned{SchemaVersion: 2}}
	for _, s := range platforms {
		p, err := ocilayout.ParsePlatform(s)
		if err != nil {
			t.Fatal(err)
		}
		p.Variant = "" // as umoci writes them
		config := blob(t, l, v1.MediaTypeImageConfig, v1.Image{Platform: p})
		m := blob(t, l, v1.MediaTypeImageManifest, v1.Manifest{Versioned: specs.Versioned{SchemaVersion: 2}, MediaType: v1.MediaTypeImageManifest, Config: config})
		m.Annotations = map[string]string{v1.AnnotationRefName: strings.ReplaceAll(s, "/", "-")}
		idx.Manifests = append(idx.Manifests, m)
	}
	old := blob(t, l, v1.MediaTypeImageIndex, v1.Index{Versioned: specs.Versioned{SchemaVersion: 2}})
	old.Annotations = map[string]string{v1.AnnotationRefName: "old"}
	idx.Manifests = append(idx.Manifests, old)
	data, _ := json.Marshal(idx)
	if err := os.WriteFile(filepath.Join(l.Dir, v1.ImageIndexFile), data, 0o644); err != nil {
		t.Fatal(err)
	}
	return l
}

// blob stores v as JSON in l and returns its descriptor.
func blob(t *testing.T, l ocilayout.Layout, mediaType string, v any) v1.Descriptor {
	t.Helper()
	data, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	d, err := writeBlob(l, mediaType, data)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func TestCombine(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		corrupt func(t *testing.T, l ocilayout.Layout)
		wantErr string
	}{
		{name: "two platforms", args: []string{"linux/amd64=linux-amd64", "linux/arm64=linux-arm64"}},
		{name: "a variant", args: []string{"linux/arm/v7=linux-arm-v7", "linux/amd64=linux-amd64"}},
		{name: "the tag of an earlier index", args: []string{"linux/amd64=linux-amd64"}},
		{name: "none", wantErr: "no image to put in the index"},
		{name: "unknown ref", args: []string{"linux/amd64=linux-s390x"}, wantErr: `no "linux-s390x" in the layout`},
		{name: "other architecture", args: []string{"linux/arm64=linux-amd64"}, wantErr: `image "linux-amd64" is for linux/amd64 by its config, not linux/arm64`},
		{name: "one platform twice", args: []string{"linux/amd64=linux-amd64", "linux/amd64=linux-amd64"}, wantErr: "are both for linux/amd64"},
		{name: "an index", args: []string{"linux/amd64=old"}, wantErr: "is a application/vnd.oci.image.index.v1+json, not an image manifest"},
		{name: "a changed blob", args: []string{"linux/amd64=linux-amd64"}, wantErr: "of another digest", corrupt: func(t *testing.T, l ocilayout.Layout) {
			d, err := l.Find("linux-amd64")
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(l.Dir, "blobs", "sha256", d.Digest.Encoded()), []byte("{}"), 0o644); err != nil {
				t.Fatal(err)
			}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			l := testLayout(t, "linux/amd64", "linux/arm64", "linux/arm/v7")
			if tc.corrupt != nil {
				tc.corrupt(t, l)
			}
			entries, err := ParseEntries(tc.args)
			if err != nil {
				t.Fatal(err)
			}
			tag := "v1.0.0"
			if tc.name == "the tag of an earlier index" {
				tag = "old"
			}
			d, err := Combine(l, tag, entries)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("Combine: %v, want an error with %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("Combine: %v", err)
			}
			checkIndex(t, l, tag, d, entries)
		})
	}
}

// checkIndex checks that the layout names d tag once, that d is an index of
// entries with their platforms, and that the images are still named.
func checkIndex(t *testing.T, l ocilayout.Layout, tag string, d v1.Descriptor, entries []Entry) {
	t.Helper()
	found, err := l.Find(tag)
	if err != nil || found.Digest != d.Digest || found.MediaType != v1.MediaTypeImageIndex {
		t.Fatalf("Find(%q) = %+v, %v; want the index %s", tag, found, err, d.Digest)
	}
	idx, err := l.Index()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, m := range idx.Manifests {
		names = append(names, m.Annotations[v1.AnnotationRefName])
	}
	want := []string{"linux-amd64", "linux-arm64", "linux-arm-v7", "old"}
	if tag != "old" {
		want = append(want, tag)
	}
	if !reflect.DeepEqual(names, want) {
		t.Errorf("index.json names %q, want %q", names, want)
	}
	data, err := l.Blob(found)
	if err != nil {
		t.Fatal(err)
	}
	var index v1.Index
	if err := json.NewDecoder(bytes.NewReader(data)).Decode(&index); err != nil {
		t.Fatal(err)
	}
	if index.SchemaVersion != 2 || index.MediaType != v1.MediaTypeImageIndex || len(index.Manifests) != len(entries) {
		t.Fatalf("index %s", data)
	}
	for i, e := range entries {
		m := index.Manifests[i]
		want, _ := l.Find(e.Ref)
		if m.Digest != want.Digest || m.Size != want.Size || m.MediaType != v1.MediaTypeImageManifest ||
			m.Platform == nil || !reflect.DeepEqual(*m.Platform, e.Platform) {
			t.Errorf("index entry %d: %+v (platform %+v), want %s for %+v", i, m, m.Platform, want.Digest, e.Platform)
		}
	}
	if d.Digest != digest.FromBytes(data) {
		t.Errorf("digest %s, want %s", d.Digest, digest.FromBytes(data))
	}
}

func TestCommands(t *testing.T) {
	l := testLayout(t, "linux/amd64", "linux/arm64")
	var out bytes.Buffer
	cmds := Commands(&out)
	if err := cmds["combine"](t.Context(), []string{l.Dir, "v1", "linux/amd64=linux-amd64", "linux/arm64=linux-arm64"}); err != nil {
		t.Fatalf("combine: %v", err)
	}
	combined := out.String()
	out.Reset()
	if err := cmds["digest"](t.Context(), []string{l.Dir, "v1"}); err != nil {
		t.Fatalf("digest: %v", err)
	}
	if !strings.HasPrefix(combined, "sha256:") || out.String() != combined {
		t.Errorf("combine printed %q, digest %q; want the same sha256 digest", combined, out.String())
	}
	for _, args := range [][]string{{"combine", l.Dir, "v1"}, {"digest", l.Dir}, {"digest", l.Dir, "nothing"}} {
		if err := cmds[args[0]](t.Context(), args[1:]); err == nil {
			t.Errorf("%q: no error", args)
		}
	}
}
