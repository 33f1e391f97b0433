package server

import (
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"hostpath.dev/api/managerapi"
)

// TestListPagesOnDisk: on a real disk.Store with 2,500 volumes, GET
// .../volumes answers pages: of managerapi.DefaultListLimit volumes without a
// limit, of the limit asked with one, each with the continue of the next
// but the last; followed to the end they list every volume once, sorted
// by name.
func TestListPagesOnDisk(t *testing.T) {
	const volumes = 2500
	d := newDiskDirs(t)
	var want []string
	for i := range volumes {
		name := fmt.Sprintf("vol-%04d", i)
		mustMkdirAll(t, filepath.Join(d.def, name))
		want = append(want, name)
	}
	if err := os.WriteFile(filepath.Join(d.def, "not-a-volume"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	e := d.server(t)
	for _, tc := range []struct {
		desc string
		// limit is the query's limit ("" for none); size the pages'.
		limit string
		size  int
		pages int
	}{
		{desc: "default page", size: managerapi.DefaultListLimit, pages: volumes / managerapi.DefaultListLimit},
		{desc: "small pages", limit: "300", size: 300, pages: 9},
		{desc: "largest pages", limit: fmt.Sprint(managerapi.MaxListLimit), size: managerapi.MaxListLimit, pages: 5},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			var got []string
			token := ""
			for pages := 1; ; pages++ {
				q := url.Values{}
				if tc.limit != "" {
					q.Set("limit", tc.limit)
				}
				if token != "" {
					q.Set("continue", token)
				}
				path := "/v1/pools/default/volumes"
				if len(q) > 0 {
					path += "?" + q.Encode()
				}
				w := e.do(t, httpCall{method: "GET", path: path, token: "admin"})
				checkAnswer(t, w, 200, "")
				var l managerapi.VolumeList
				mustUnmarshal(t, w.Body.Bytes(), &l)
				if len(l.Items) > tc.size || l.Continue != "" && len(l.Items) != tc.size {
					t.Fatalf("page %d holds %d volumes (continue %q), want %d", pages, len(l.Items), l.Continue, tc.size)
				}
				for _, v := range l.Items {
					got = append(got, v.Name)
				}
				if l.Continue == "" {
					if pages != tc.pages {
						t.Errorf("%d pages, want %d", pages, tc.pages)
					}
					break
				}
				if pages > volumes {
					t.Fatal("the pages never end")
				}
				token = l.Continue
			}
			if !slices.Equal(got, want) {
				t.Errorf("listed %d volumes, want the %d sorted by name, each once", len(got), len(want))
			}
		})
	}
}
