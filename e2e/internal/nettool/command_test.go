package nettool

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"hostpath.dev/e2e/internal/cli"
)

func TestParseGet(t *testing.T) {
	for _, tc := range []struct {
		name    string
		args    []string
		want    GetOptions
		wantErr bool
	}{
		{"defaults", []string{"http://a/"}, GetOptions{URL: "http://a/", Timeout: 5 * time.Second}, false},
		{"all flags", []string{"--token-file", "t", "--ca-file=c", "--retry-for", "60s", "--timeout", "1s", "https://a/"},
			GetOptions{URL: "https://a/", TokenFile: "t", CAFile: "c", RetryFor: time.Minute, Timeout: time.Second}, false},
		{"no URL", nil, GetOptions{}, true},
		{"two URLs", []string{"http://a/", "http://b/"}, GetOptions{}, true},
		{"flag after URL", []string{"http://a/", "--timeout", "1s"}, GetOptions{}, true},
		{"unknown flag", []string{"--nope", "http://a/"}, GetOptions{}, true},
		{"bad duration", []string{"--retry-for", "soon", "http://a/"}, GetOptions{}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseGet(tc.args, io.Discard)
			if tc.wantErr {
				if err == nil || err.Error() != "usage: nettool get [flags] URL" {
					t.Errorf("parseGet(%q) = %+v, %v; want the usage error", tc.args, got, err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Errorf("parseGet(%q) = %+v, %v; want %+v", tc.args, got, err, tc.want)
			}
		})
	}
}

func TestGetCommand(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/fail" {
			http.Error(w, "nope", http.StatusForbidden)
			return
		}
		_, _ = io.WriteString(w, "no newline")
	}))
	defer srv.Close()
	unreachable := httptest.NewServer(http.NotFoundHandler())
	unreachable.Close()

	for _, tc := range []struct {
		name     string
		url      string
		wantOut  string
		wantCode int // 0: no error; -1: an error that is not an ExitError
	}{
		{"2xx", srv.URL + "/", "STATUS 200\nno newline\n", 0},
		{"non-2xx exits 2", srv.URL + "/fail", "STATUS 403\nnope\n", 2},
		{"no answer exits 1", unreachable.URL + "/", "", -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			err := Commands(&out, io.Discard)["get"](context.Background(), []string{"--timeout", "2s", tc.url})
			if got := out.String(); got != tc.wantOut {
				t.Errorf("output %q, want %q", got, tc.wantOut)
			}
			var exit *cli.ExitError
			switch {
			case tc.wantCode == 0 && err != nil:
				t.Errorf("error %v, want none", err)
			case tc.wantCode > 0 && (!errors.As(err, &exit) || exit.Code != tc.wantCode):
				t.Errorf("error %v, want exit code %d", err, tc.wantCode)
			case tc.wantCode < 0 && (err == nil || errors.As(err, &exit)):
				t.Errorf("error %v, want a plain error", err)
			}
		})
	}
}

func TestServeCommand(t *testing.T) {
	serve := Commands(io.Discard, io.Discard)["serve"]
	for _, args := range [][]string{nil, {":0"}, {":0", "a", "b"}} {
		if err := serve(context.Background(), args); err == nil || err.Error() != "usage: nettool serve ADDR TEXT" {
			t.Errorf("serve(%q) = %v, want the usage error", args, err)
		}
	}
	// A cancelled context closes the server, before or after it listens.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var out bytes.Buffer
	if err := Commands(&out, io.Discard)["serve"](ctx, []string{"127.0.0.1:0", "hi"}); err != nil {
		t.Errorf("serve after cancel: %v", err)
	}
	if got := out.String(); !strings.HasPrefix(got, "Serving on 127.0.0.1:0\n") {
		t.Errorf("serve printed %q", got)
	}
}
