package profiling

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/spf13/pflag"
)

func TestHandlers(t *testing.T) {
	mux := http.NewServeMux()
	Handlers(mux)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	for _, tc := range []struct {
		name, method, path string
		status             int
		body               string
	}{
		{"index", http.MethodGet, "/debug/pprof/", http.StatusOK, "goroutine"},
		{"named profile", http.MethodGet, "/debug/pprof/heap?debug=1", http.StatusOK, "heap profile:"},
		{"goroutines", http.MethodGet, "/debug/pprof/goroutine?debug=1", http.StatusOK, "goroutine profile:"},
		{"cmdline", http.MethodGet, "/debug/pprof/cmdline", http.StatusOK, ""},
		{"short CPU profile", http.MethodGet, "/debug/pprof/profile?seconds=1", http.StatusOK, ""},
		{"unknown profile", http.MethodGet, "/debug/pprof/nosuch", http.StatusNotFound, "Unknown profile"},
		{"not a GET", http.MethodPost, "/debug/pprof/cmdline", http.StatusMethodNotAllowed, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, err := http.NewRequest(tc.method, srv.URL+tc.path, nil)
			if err != nil {
				t.Fatal(err)
			}
			resp, err := srv.Client().Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err != nil {
				t.Fatal(err)
			}
			if resp.StatusCode != tc.status {
				t.Fatalf("%s %s: status %d, want %d: %s", tc.method, tc.path, resp.StatusCode, tc.status, body)
			}
			if !strings.Contains(string(body), tc.body) {
				t.Errorf("%s %s: body does not contain %q:\n%.300s", tc.method, tc.path, tc.body, body)
			}
		})
	}
}

func TestAddFlag(t *testing.T) {
	for _, tc := range []struct {
		args     []string
		want     bool
		handlers int
	}{
		{nil, false, 0},
		{[]string{"--profiling"}, true, 1},
		{[]string{"--profiling=false"}, false, 0},
	} {
		var on bool
		fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
		AddFlag(fs, &on)
		if err := fs.Parse(tc.args); err != nil {
			t.Fatalf("%v: %v", tc.args, err)
		}
		if on != tc.want || len(HandlersIf(on)) != tc.handlers {
			t.Errorf("%v: on %v with %d handlers, want %v with %d", tc.args, on, len(HandlersIf(on)), tc.want, tc.handlers)
		}
	}
}
