package disk

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"k8s.io/klog/v2/ktesting"

	"hostpath.dev/api/managerapi"
	"hostpath.dev/api/runtime/filetest"
)

// TestListVolumesPages: ListVolumes with a limit answers pages of the
// volumes sorted by name, each starting after the previous page's
// Continue, the last without Continue; followed to the end they list
// every volume once, whether the limit divides their number or not. A
// volume made after the current page is listed, one removed before its
// page is not.
func TestListVolumesPages(t *testing.T) {
	const volumes = 2500
	for _, tc := range []struct {
		desc  string
		limit int
		// pages is how many pages the listing takes.
		pages int
		// change, if set, runs after the first page.
		change   func(t *testing.T, e *testEnv)
		add, del string
	}{
		{desc: "limit 300", limit: 300, pages: 9},
		{desc: "limit divides the volumes", limit: 500, pages: 5},
		{desc: "limit above the volumes", limit: volumes + 1, pages: 1},
		{desc: "no limit", limit: 0, pages: 1},
		{desc: "changes between pages", limit: 700, pages: 4, add: "v9999", del: "v2000"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			_, ctx := ktesting.NewTestContext(t)
			e := newTestEnv(t)
			var want []string
			for i := range volumes {
				name := fmt.Sprintf("v%04d", i)
				mustMkdir(t, filepath.Join(e.pool, name))
				if i%100 == 0 {
					e.writeRecord(t, name, "pv-"+name, false)
				}
				if name != tc.del {
					want = append(want, name)
				}
			}
			if tc.add != "" {
				want = append(want, tc.add)
			}
			filetest.Write(t, filepath.Join(e.pool, "file"), "not a volume")
			mustMkdir(t, filepath.Join(e.pool, ".hidden"))
			e.writeRecord(t, "v0000a", "pv-orphan", false) // a record without a directory

			var got []string
			opts := managerapi.ListOptions{Limit: tc.limit}
			pages := 0
			for {
				l, err := e.store.ListVolumes(ctx, "default", opts)
				if err != nil {
					t.Fatalf("page %d: %v", pages, err)
				}
				pages++
				if tc.limit > 0 && len(l.Items) > tc.limit {
					t.Fatalf("page %d holds %d volumes, more than the limit %d", pages, len(l.Items), tc.limit)
				}
				for _, v := range l.Items {
					got = append(got, v.Name)
					if owner := "pv-" + v.Name; strings.HasSuffix(v.Name, "00") && v.Owner != owner {
						t.Errorf("volume %s has owner %q, want %q", v.Name, v.Owner, owner)
					}
				}
				if l.Continue != "" && l.Continue != l.Items[len(l.Items)-1].Name {
					t.Errorf("page %d: continue %q, want its last volume's name", pages, l.Continue)
				}
				if pages == 1 && tc.add != "" {
					mustMkdir(t, filepath.Join(e.pool, tc.add))
					if err := os.Remove(filepath.Join(e.pool, tc.del)); err != nil {
						t.Fatal(err)
					}
				}
				if l.Continue == "" {
					break
				}
				if pages > volumes {
					t.Fatal("the pages never end")
				}
				opts.Continue = l.Continue
			}
			if pages != tc.pages {
				t.Errorf("%d pages, want %d", pages, tc.pages)
			}
			if !slices.Equal(got, want) {
				t.Errorf("listed %d volumes (%v ... %v), want %d", len(got), got[:min(3, len(got))], got[max(0, len(got)-3):], len(want))
			}
		})
	}
}

// TestListVolumesOptions: a negative limit is BadRequest; more than one
// ListOptions is refused; a continue after every name answers an empty
// last page.
func TestListVolumesOptions(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	e := newTestEnv(t)
	mustMkdir(t, filepath.Join(e.pool, "a"))
	_, err := e.store.ListVolumes(ctx, "default", managerapi.ListOptions{Limit: -1})
	checkErr(t, "negative limit", err, managerapi.ReasonBadRequest, "")
	if _, err := e.store.ListVolumes(ctx, "default", managerapi.ListOptions{}, managerapi.ListOptions{}); err == nil {
		t.Error("two ListOptions: no error")
	}
	if l, err := e.store.ListVolumes(ctx, "default", managerapi.ListOptions{Limit: 1, Continue: "a"}); err != nil || len(l.Items) != 0 || l.Continue != "" {
		t.Errorf("after the last = %+v, %v; want an empty last page", l, err)
	}
}
