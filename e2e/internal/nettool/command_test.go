package nettool

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"hostpath.dev/e2e/framework/cli"
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

func TestParseFlood(t *testing.T) {
	defaults := FloodOptions{URL: "https://a/", Requests: 200, Concurrency: 8, Timeout: 30 * time.Second}
	for _, tc := range []struct {
		name    string
		args    []string
		want    FloodOptions
		wantErr string
	}{
		{name: "defaults", args: []string{"https://a/"}, want: defaults},
		{name: "all flags", args: []string{"--requests", "50", "--concurrency=2", "--qps", "12.5", "--junk-tokens",
			"--cycle", "3", "--insecure", "--timeout", "2s", "https://a/p{i}"},
			want: FloodOptions{URL: "https://a/p{i}", Requests: 50, Concurrency: 2, QPS: 12.5, JunkTokens: true,
				Cycle: 3, Insecure: true, Timeout: 2 * time.Second}},
		{name: "token and CA files", args: []string{"--token-file", "t", "--ca-file", "c", "https://a/"},
			want: FloodOptions{URL: "https://a/", Requests: 200, Concurrency: 8, TokenFile: "t", CAFile: "c", Timeout: 30 * time.Second}},
		{name: "no URL", args: nil, wantErr: "usage: nettool flood [flags] URL"},
		{name: "two URLs", args: []string{"http://a/", "http://b/"}, wantErr: "usage: nettool flood [flags] URL"},
		{name: "unknown flag", args: []string{"--nope", "http://a/"}, wantErr: "usage: nettool flood [flags] URL"},
		{name: "bad number", args: []string{"--requests", "many", "http://a/"}, wantErr: "usage: nettool flood [flags] URL"},
		{name: "no requests", args: []string{"--requests", "0", "http://a/"}, wantErr: "--requests must be at least 1"},
		{name: "no concurrency", args: []string{"--concurrency", "0", "http://a/"}, wantErr: "--concurrency must be at least 1"},
		{name: "negative qps", args: []string{"--qps", "-1", "http://a/"}, wantErr: "--qps must not be negative"},
		{name: "negative cycle", args: []string{"--cycle", "-2", "http://a/"}, wantErr: "--cycle must not be negative"},
		{name: "zero timeout", args: []string{"--timeout", "0s", "http://a/"}, wantErr: "--timeout must be positive"},
		{name: "both tokens", args: []string{"--token-file", "t", "--junk-tokens", "http://a/"}, wantErr: "--token-file and --junk-tokens exclude each other"},
		{name: "CA and insecure", args: []string{"--ca-file", "c", "--insecure", "https://a/"}, wantErr: "--ca-file and --insecure exclude each other"},
		{name: "unparsable URL", args: []string{"http://a b/"}, wantErr: "bad URL"},
		{name: "empty URL", args: []string{""}, wantErr: "bad URL"},
		{name: "relative URL", args: []string{"/v1/pools"}, wantErr: "bad URL"},
		{name: "not HTTP", args: []string{"ftp://a/"}, wantErr: "bad URL"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseFlood(tc.args, io.Discard)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Errorf("parseFlood(%q) = %+v, %v; want error %q", tc.args, got, err, tc.wantErr)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Errorf("parseFlood(%q) = %+v, %v; want %+v", tc.args, got, err, tc.want)
			}
		})
	}
}

func TestFloodCommand(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "slow down", http.StatusTooManyRequests)
	}))
	defer srv.Close()
	for _, tc := range []struct {
		name    string
		args    []string
		wantOut string // the JSON without its timings; "" for no output
		wantErr bool
	}{
		{"refusals are not errors", []string{"--requests", "5", "--concurrency", "2", srv.URL}, `{"requests":5,"statuses":{"429":5}}`, false},
		{"unreadable token file", []string{"--token-file", filepath.Join(t.TempDir(), "missing"), srv.URL}, "", true},
		{"bad flag", []string{"--concurrency", "0", srv.URL}, "", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			err := Commands(&out, io.Discard)["flood"](context.Background(), tc.args)
			if (err != nil) != tc.wantErr {
				t.Errorf("error %v, want error: %v", err, tc.wantErr)
			}
			if tc.wantOut == "" {
				if out.Len() != 0 {
					t.Errorf("printed %q, want nothing", out.String())
				}
				return
			}
			line := out.String()
			var got map[string]any
			if !strings.HasSuffix(line, "\n") || strings.Count(line, "\n") != 1 || json.Unmarshal([]byte(line), &got) != nil {
				t.Fatalf("printed %q, want one line of JSON", line)
			}
			for _, k := range []string{"p50Ms", "p99Ms", "maxMs", "seconds"} {
				if _, ok := got[k]; !ok {
					t.Errorf("no %q in %s", k, line)
				}
				delete(got, k)
			}
			if trimmed, _ := json.Marshal(got); string(trimmed) != tc.wantOut {
				t.Errorf("printed %s, want %s plus timings", trimmed, tc.wantOut)
			}
		})
	}
}
