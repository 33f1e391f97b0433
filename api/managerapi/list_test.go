package managerapi_test

import (
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/klog/v2/ktesting"

	"hostpath.dev/api/managerapi"
)

// refusing queries when old (a manager older than paging); with stuck,
// every page says continue "stuck". It records the raw query of each
// call in queries (the client calls one page at a time).
type fakeLister struct {
	items   []managerapi.Volume
	size    int
	old     bool
	stuck   bool
	queries []string
}

func (f *fakeLister) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.queries = append(f.queries, r.URL.RawQuery)
	if f.old && r.URL.RawQuery != "" {
		w.WriteHeader(http.StatusBadRequest)
		_ = json.NewEncoder(w).Encode(managerapi.Status{Reason: managerapi.ReasonBadRequest, Message: "takes no query parameters"})
		return
	}
	l := managerapi.VolumeList{Items: f.items}
	if !f.old {
		after := r.URL.Query().Get("continue")
		start, _ := slices.BinarySearchFunc(f.items, after, func(v managerapi.Volume, name string) int { return strings.Compare(v.Name, name) })
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
	var items []managerapi.Volume
	for i := range 2500 {
		items = append(items, managerapi.Volume{Name: fmt.Sprintf("v%04d", i), Pool: "p"})
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
			srv := httptest.NewServer(tc.lister)
			defer srv.Close()
			c, err := managerapi.New(srv.URL)
			if err != nil {
				t.Fatal(err)
			}
			l, err := c.ListVolumes(ctx, "p")
			if len(tc.lister.queries) != tc.wantCalls {
				t.Errorf("%d calls, want %d", len(tc.lister.queries), tc.wantCalls)
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
			for i, raw := range tc.lister.queries {
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
	name := strings.Repeat("n", managerapi.MaxVolumeNameLength)
	pool := strings.Repeat("p", 63)
	used := int64(math.MaxInt64)
	since := time.Date(2025, 12, 31, 23, 59, 59, 999999999, time.FixedZone("", -12*3600))
	v := managerapi.Volume{
		Name: name, Pool: pool, Path: "/" + strings.Repeat("d", 4095-2-len(name)) + "/" + name, Mode: "07777",
		Owner: strings.Repeat("o", 253), OwnedSince: &since, Retained: true, ReclaimPolicy: managerapi.ReclaimRetain,
		ClaimNamespace: strings.Repeat("c", 63), Multihost: true, SizeBytes: math.MaxInt64, Enforcement: managerapi.EnforcementBtrfs,
		UsedBytes: &used, UsedInodes: &used, CloneOf: pool + "/" + name, CloneMethod: managerapi.CloneMethodReflink,
	}
	l := managerapi.VolumeList{Continue: name}
	for range managerapi.MaxListLimit {
		l.Items = append(l.Items, v)
	}
	b, err := json.Marshal(l)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("a page of %d of the longest volumes is %d bytes (%d a volume)", managerapi.MaxListLimit, len(b), len(b)/managerapi.MaxListLimit)
	if len(b) >= maxResponseBytes {
		t.Errorf("a page of %d of the longest volumes is %d bytes, not under the %d a Client reads", managerapi.MaxListLimit, len(b), maxResponseBytes)
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
	c, err := managerapi.New(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.ListVolumes(ctx, "p"); err == nil || !strings.Contains(err.Error(), "larger than the 4 MiB") {
		t.Errorf("ListVolumes: %v, want an error saying the answer is too large", err)
	}
}
