package client_test

import (
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/klog/v2/ktesting"

	"hostpath.dev/manager/pkg/client"
)

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
	c, err := client.New(srv.URL, client.WithToken(client.StaticToken("t")))
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
	for page := 1; page < volumes/client.DefaultListLimit; page++ {
		wantQueries = append(wantQueries, "continue="+want[page*client.DefaultListLimit-1])
	}
	if !slices.Equal(q.list, wantQueries) {
		t.Errorf("queries %q, want %q", q.list, wantQueries)
	}

	page, err := c.ListVolumesPage(ctx, "default", client.ListOptions{Limit: 100, Continue: want[999]})
	if err != nil || len(page.Items) != 100 || page.Items[0].Name != want[1000] || page.Continue != want[1099] {
		t.Errorf("ListVolumesPage = %d volumes from %v, continue %q, %v; want 100 from %s, continue %s", len(page.Items), page.Items[:min(1, len(page.Items))], page.Continue, err, want[1000], want[1099])
	}
	_, err = c.ListVolumesPage(ctx, "default", client.ListOptions{Limit: client.MaxListLimit + 1})
	if client.ReasonOf(err) != client.ReasonBadRequest {
		t.Errorf("ListVolumesPage over the maximum limit: %v, want BadRequest", err)
	}
}

// fakeLister answers GET .../volumes from items with pages of size,
// refusing queries when old (a manager older than paging); with stuck,
// every page says continue "stuck".
type fakeLister struct {
	items []client.Volume
	size  int
	old   bool
	stuck bool
}

func (f *fakeLister) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if f.old && r.URL.RawQuery != "" {
		w.WriteHeader(http.StatusBadRequest)
		_ = json.NewEncoder(w).Encode(client.Status{Reason: client.ReasonBadRequest, Message: "takes no query parameters"})
		return
	}
	l := client.VolumeList{Items: f.items}
	if !f.old {
		after := r.URL.Query().Get("continue")
		start, _ := slices.BinarySearchFunc(f.items, after, func(v client.Volume, name string) int { return strings.Compare(v.Name, name) })
		if start < len(f.items) && f.items[start].Name == after {
			start++
		}
		end := min(start+f.size, len(f.items))
		l.Items = f.items[start:end]
		if end < len(f.items) {
			l.Continue = f.items[end-1].Name
		}
	}
	if f.stuck {
		l.Continue = "stuck"
	}
	_ = json.NewEncoder(w).Encode(l)
}

// TestListVolumesPaging: ListVolumes gathers small pages, takes a
// manager older than paging (no query taken, every volume at once, no
// continue), and fails on a continue answered twice instead of asking
// for ever.
func TestListVolumesPaging(t *testing.T) {
	var items []client.Volume
	for i := range 2500 {
		items = append(items, client.Volume{Name: fmt.Sprintf("v%04d", i), Pool: "p"})
	}
	for _, tc := range []struct {
		desc      string
		lister    *fakeLister
		wantCalls int
		wantErr   string
	}{
		{desc: "pages of 7", lister: &fakeLister{items: items, size: 7}, wantCalls: 358},
		{desc: "pages of 2500", lister: &fakeLister{items: items, size: 2500}, wantCalls: 1},
		{desc: "old manager", lister: &fakeLister{items: items, old: true}, wantCalls: 1},
		{desc: "empty pool", lister: &fakeLister{size: 7}, wantCalls: 1},
		{desc: "continue answered twice", lister: &fakeLister{items: items, size: 7, stuck: true}, wantCalls: 2, wantErr: `continue "stuck" again`},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			_, ctx := ktesting.NewTestContext(t)
			var q queries
			srv := httptest.NewServer(q.wrap(tc.lister))
			defer srv.Close()
			c, err := client.New(srv.URL)
			if err != nil {
				t.Fatal(err)
			}
			l, err := c.ListVolumes(ctx, "p")
			if len(q.list) != tc.wantCalls {
				t.Errorf("%d calls, want %d", len(q.list), tc.wantCalls)
			}
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("ListVolumes: %v, want an error with %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(l.Items, tc.lister.items) || l.Items == nil {
				t.Errorf("listed %d volumes, want %d (and a non-nil list)", len(l.Items), len(tc.lister.items))
			}
			for i, raw := range q.list {
				vals, err := url.ParseQuery(raw)
				if err != nil || (i == 0) != (raw == "") || vals.Has("limit") {
					t.Errorf("call %d has query %q: want none first, then continue only", i, raw)
				}
			}
		})
	}
}

// TestListPageFitsResponse: a page of MaxListLimit volumes with every
// field at its longest (names of 255 bytes, a path of 4,095, owner and
// source of a clone at their longest) and its continue stays under the 4
// MiB a Client reads of an answer.
func TestListPageFitsResponse(t *testing.T) {
	const maxResponseBytes = 4 << 20 // client.go's
	name := strings.Repeat("n", client.MaxVolumeNameLength)
	pool := strings.Repeat("p", 63)
	used := int64(math.MaxInt64)
	since := time.Date(2025, 12, 31, 23, 59, 59, 999999999, time.FixedZone("", -12*3600))
	v := client.Volume{
		Name: name, Pool: pool, Path: "/" + strings.Repeat("d", 4095-2-len(name)) + "/" + name, Mode: "07777",
		Owner: strings.Repeat("o", 253), OwnedSince: &since, Retained: true, ReclaimPolicy: client.ReclaimRetain,
		ClaimNamespace: strings.Repeat("c", 63), Multihost: true, SizeBytes: math.MaxInt64, Enforcement: client.EnforcementBtrfs,
		UsedBytes: &used, UsedInodes: &used, CloneOf: pool + "/" + name, CloneMethod: client.CloneMethodReflink,
	}
	l := client.VolumeList{Continue: name}
	for range client.MaxListLimit {
		l.Items = append(l.Items, v)
	}
	b, err := json.Marshal(l)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("a page of %d of the longest volumes is %d bytes (%d a volume)", client.MaxListLimit, len(b), len(b)/client.MaxListLimit)
	if len(b) >= maxResponseBytes {
		t.Errorf("a page of %d of the longest volumes is %d bytes, not under the %d a Client reads", client.MaxListLimit, len(b), maxResponseBytes)
	}
}

// TestAnswerTooLarge: an answer over the 4 MiB a Client reads fails with
// an error that says so, not with a JSON error about a cut answer.
func TestAnswerTooLarge(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte(`{"items":[` + strings.Repeat(`{"name":"v"},`, (4<<20)/12) + `{"name":"v"}]}`))
	}))
	defer srv.Close()
	c, err := client.New(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.ListVolumes(ctx, "p"); err == nil || !strings.Contains(err.Error(), "larger than the 4 MiB") {
		t.Errorf("ListVolumes: %v, want an error saying the answer is too large", err)
	}
}
