package server_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"

	"k8s.io/klog/v2/ktesting"

	"hostpath.dev/api/managerapi"
	"hostpath.dev/api/runtime/review"
	"hostpath.dev/manager/internal/auth"
	"hostpath.dev/manager/internal/disk"
	"hostpath.dev/manager/internal/identity"
	"hostpath.dev/manager/internal/server"
)

// The Go client of hostpath.dev/api/managerapi against the manager's real
// server and disk store: every call a program makes, end to end in one
// process.
// tokenAuthorizer allows every call that carries token "t".
type tokenAuthorizer struct{}

func (tokenAuthorizer) Authorize(_ context.Context, caller review.Caller, _ auth.Attributes) (*auth.Decision, error) {
	if caller.Token != "t" {
		return nil, &review.Error{Reason: managerapi.ReasonUnauthorized, Message: "bad token"}
	}
	return &auth.Decision{User: &review.User{Name: "tester"}}, nil
}

// realHandler is the manager's real server on a disk.Store of node-a with
// the pool default at pool, which callers reach with the token "t".
func realHandler(ctx context.Context, t *testing.T, pool string) http.Handler {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "boot_id"), []byte("b\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	id, err := identity.Load(ctx, identity.Config{StateDir: filepath.Join(dir, "state"), BootIDFile: filepath.Join(dir, "boot_id")})
	if err != nil {
		t.Fatal(err)
	}
	store, err := disk.New(disk.Config{NodeName: "node-a", Pools: map[string]string{"default": pool}, Identity: id})
	if err != nil {
		t.Fatal(err)
	}
	handler, err := server.New(server.Config{NodeName: "node-a", Backend: store, Authorizer: tokenAuthorizer{}})
	if err != nil {
		t.Fatal(err)
	}
	return handler
}

// TestAgainstServer drives the real server through the client.
func TestAgainstServer(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	dir := t.TempDir()
	pool := filepath.Join(dir, "pool")
	srv := httptest.NewServer(realHandler(ctx, t, pool))
	defer srv.Close()
	c, err := managerapi.New(srv.URL, managerapi.WithToken(managerapi.StaticToken("t")))
	if err != nil {
		t.Fatal(err)
	}

	h, err := c.Host(ctx)
	if err != nil || h.NodeName != "node-a" || len(h.Pools) != 1 || h.Pools[0].Error == "" {
		t.Fatalf("Host = %+v, %v (want the unprepared pool to report an error)", h, err)
	}
	if _, err := c.CreateVolume(ctx, "default", "v1", managerapi.CreateVolumeRequest{Owner: "pv-1"}); managerapi.ReasonOf(err) != managerapi.ReasonPoolNotFound {
		t.Errorf("CreateVolume before PreparePool: %v, want PoolNotFound", err)
	}
	if err := c.DeleteVolume(ctx, "default", "v1", managerapi.DeleteOptions{Owner: "pv-1"}); managerapi.ReasonOf(err) != managerapi.ReasonPoolNotFound {
		t.Errorf("DeleteVolume before PreparePool: %v, want PoolNotFound", err)
	}
	if p, err := c.PreparePool(ctx, "default"); err != nil || p.Path != pool || p.FreeBytes <= 0 {
		t.Fatalf("PreparePool = %+v, %v", p, err)
	}
	for i := 0; i < 2; i++ { // idempotent
		v, err := c.CreateVolume(ctx, "default", "v1", managerapi.CreateVolumeRequest{Owner: "pv-1", Mode: "0750", RequiredBytes: 1})
		if err != nil || v.Path != filepath.Join(pool, "v1") || v.Mode != "0750" || v.Owner != "pv-1" || v.OwnedSince == nil {
			t.Fatalf("CreateVolume #%d = %+v, %v", i, v, err)
		}
	}
	if v, err := c.GetVolume(ctx, "default", "v1"); err != nil || v.Name != "v1" {
		t.Errorf("GetVolume = %+v, %v", v, err)
	}
	if l, err := c.ListVolumes(ctx, "default"); err != nil || len(l.Items) != 1 || l.Items[0].Owner != "pv-1" {
		t.Errorf("ListVolumes = %+v, %v", l, err)
	}
	_, err = c.CreateVolume(ctx, "default", "v1", managerapi.CreateVolumeRequest{Owner: "pv-2"})
	var ce *managerapi.Error
	if !errors.As(err, &ce) || ce.StatusCode != 409 || ce.Reason != managerapi.ReasonOwnerConflict || ce.Owner != "pv-1" {
		t.Errorf("CreateVolume by another owner: %v, want 409 OwnerConflict naming pv-1", err)
	}
	if err := c.DeleteVolume(ctx, "default", "v1", managerapi.DeleteOptions{Owner: "pv-2"}); managerapi.ReasonOf(err) != managerapi.ReasonOwnerConflict {
		t.Errorf("DeleteVolume by another owner: %v, want OwnerConflict", err)
	}
	if v, err := c.SetOwner(ctx, "default", "v1", managerapi.SetOwnerRequest{Owner: "pv-1", Previous: "pv-1", Retained: true, ReclaimPolicy: managerapi.ReclaimRetain}); err != nil || !v.Retained || v.ReclaimPolicy != managerapi.ReclaimRetain {
		t.Errorf("SetOwner retained = %+v, %v", v, err)
	}
	if v, err := c.SetOwner(ctx, "default", "v1", managerapi.SetOwnerRequest{Owner: "pv-1", Previous: "pv-1", Retained: true, ClaimNamespace: "team-b"}); err != nil || v.ClaimNamespace != "team-b" || !v.Retained {
		t.Errorf("SetOwner handing over to team-b = %+v, %v", v, err)
	}
	if v, err := c.GetVolume(ctx, "default", "v1"); err != nil || v.ClaimNamespace != "team-b" {
		t.Errorf("GetVolume after the hand-over = %+v, %v; want claim namespace team-b", v, err)
	}
	for i := 0; i < 2; i++ { // idempotent
		if err := c.DeleteVolume(ctx, "default", "v1", managerapi.DeleteOptions{Owner: "pv-1"}); err != nil {
			t.Fatalf("DeleteVolume #%d: %v", i, err)
		}
	}
	if _, err := os.Lstat(filepath.Join(pool, "v1")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("volume still on disk: %v", err)
	}

	for _, tc := range []struct {
		desc string
		call func() error
		want managerapi.Reason
	}{
		{"get deleted", func() error { _, err := c.GetVolume(ctx, "default", "v1"); return err }, managerapi.ReasonNotFound},
		{"slash in name is escaped, then refused", func() error {
			_, err := c.CreateVolume(ctx, "default", "../escape", managerapi.CreateVolumeRequest{Owner: "pv-1"})
			return err
		}, managerapi.ReasonBadRequest},
		{"dot-dot name", func() error { return c.DeleteVolume(ctx, "default", "..", managerapi.DeleteOptions{Owner: "pv-1"}) }, managerapi.ReasonBadRequest},
		{"no owner", func() error {
			_, err := c.CreateVolume(ctx, "default", "v3", managerapi.CreateVolumeRequest{})
			return err
		}, managerapi.ReasonBadRequest},
		{"no space", func() error {
			_, err := c.CreateVolume(ctx, "default", "big", managerapi.CreateVolumeRequest{Owner: "pv-1", RequiredBytes: 1 << 62})
			return err
		}, managerapi.ReasonInsufficientStorage},
		{"bad mode", func() error {
			_, err := c.CreateVolume(ctx, "default", "v2", managerapi.CreateVolumeRequest{Owner: "pv-1", Mode: "rwx"})
			return err
		}, managerapi.ReasonBadRequest},
		{"unknown pool", func() error { _, err := c.ListVolumes(ctx, "other"); return err }, managerapi.ReasonPoolNotFound},
		{"delete in an unknown pool", func() error { return c.DeleteVolume(ctx, "other", "v1", managerapi.DeleteOptions{Owner: "pv-1"}) }, managerapi.ReasonPoolNotFound},
		{"delete of a missing volume", func() error { return c.DeleteVolume(ctx, "default", "v9", managerapi.DeleteOptions{Owner: "pv-1"}) }, ""},
		{"invalid reclaim policy", func() error {
			_, err := c.SetOwner(ctx, "default", "v1", managerapi.SetOwnerRequest{Owner: "pv-1", Previous: "pv-1", ReclaimPolicy: "Recycle"})
			return err
		}, managerapi.ReasonBadRequest},
	} {
		if err := tc.call(); managerapi.ReasonOf(err) != tc.want {
			t.Errorf("%s: error %v, want reason %s", tc.desc, err, tc.want)
		}
	}
	if _, err := os.Lstat(filepath.Join(dir, "escape")); err == nil {
		t.Error("a directory was created outside the pool")
	}

	anon, _ := managerapi.New(srv.URL)
	if _, err := anon.Host(ctx); managerapi.ReasonOf(err) != managerapi.ReasonUnauthorized {
		t.Errorf("Host without a token: %v", err)
	}
}

// queries records the raw query of each call to a handler.
type queries struct {
	mu   sync.Mutex
	list []string
}

// wrap returns h, recording the queries of its calls.
func (q *queries) wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		q.mu.Lock()
		q.list = append(q.list, r.URL.RawQuery)
		q.mu.Unlock()
		h.ServeHTTP(w, r)
	})
}

// TestListVolumesFollowsPages: against the real server and a disk.Store
// of 2,500 volumes, ListVolumes returns them all, sorted, each once, from
// pages of DefaultListLimit: a first call without query, then calls with
// only the continue of the page before. ListVolumesPage answers one page
// of the limit asked.
func TestListVolumesFollowsPages(t *testing.T) {
	const volumes = 2500
	_, ctx := ktesting.NewTestContext(t)
	dir := t.TempDir()
	pool := filepath.Join(dir, "pool")
	var want []string
	for i := range volumes {
		name := fmt.Sprintf("vol-%04d", i)
		if err := os.MkdirAll(filepath.Join(pool, name), 0o755); err != nil {
			t.Fatal(err)
		}
		want = append(want, name)
	}
	handler := realHandler(ctx, t, pool)
	var q queries
	srv := httptest.NewServer(q.wrap(handler))
	defer srv.Close()
	c, err := managerapi.New(srv.URL, managerapi.WithToken(managerapi.StaticToken("t")))
	if err != nil {
		t.Fatal(err)
	}

	l, err := c.ListVolumes(ctx, "default")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, v := range l.Items {
		got = append(got, v.Name)
	}
	if !slices.Equal(got, want) || l.Continue != "" {
		t.Errorf("ListVolumes listed %d volumes (continue %q), want the %d sorted by name, each once", len(got), l.Continue, len(want))
	}
	wantQueries := []string{""}
	for page := 1; page < volumes/managerapi.DefaultListLimit; page++ {
		wantQueries = append(wantQueries, "continue="+want[page*managerapi.DefaultListLimit-1])
	}
	if !slices.Equal(q.list, wantQueries) {
		t.Errorf("queries %q, want %q", q.list, wantQueries)
	}

	page, err := c.ListVolumesPage(ctx, "default", managerapi.ListOptions{Limit: 100, Continue: want[999]})
	if err != nil || len(page.Items) != 100 || page.Items[0].Name != want[1000] || page.Continue != want[1099] {
		t.Errorf("ListVolumesPage = %d volumes from %v, continue %q, %v; want 100 from %s, continue %s", len(page.Items), page.Items[:min(1, len(page.Items))], page.Continue, err, want[1000], want[1099])
	}
	_, err = c.ListVolumesPage(ctx, "default", managerapi.ListOptions{Limit: managerapi.MaxListLimit + 1})
	if managerapi.ReasonOf(err) != managerapi.ReasonBadRequest {
		t.Errorf("ListVolumesPage over the maximum limit: %v, want BadRequest", err)
	}
}

// fakeLister answers GET .../volumes from items with pages of size,
