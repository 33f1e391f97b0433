package nettool

import (
	"context"
	"encoding/pem"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"
)

func TestGet(t *testing.T) {
	dir := t.TempDir()
	tokenFile := filepath.Join(dir, "token")
	if err := os.WriteFile(tokenFile, []byte("s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	// The TLS server answers 200 only to the bearer token in tokenFile.
	tlsSrv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer s3cret" {
			http.Error(w, "who are you", http.StatusUnauthorized)
			return
		}
		_, _ = w.Write([]byte(`{"gitVersion":"v1"}`))
	}))
	defer tlsSrv.Close()
	caFile := filepath.Join(dir, "ca.crt")
	caPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: tlsSrv.Certificate().Raw})
	if err := os.WriteFile(caFile, caPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	plain := httptest.NewServer(Handler("hello from node 2"))
	defer plain.Close()

	tests := []struct {
		name       string
		opts       GetOptions
		wantStatus int
		wantBody   string
		wantErr    error
	}{
		{name: "plain text", opts: GetOptions{URL: plain.URL + "/x"}, wantStatus: 200, wantBody: "hello from node 2\n"},
		{name: "TLS with token", opts: GetOptions{URL: tlsSrv.URL, CAFile: caFile, TokenFile: tokenFile}, wantStatus: 200, wantBody: `{"gitVersion":"v1"}`},
		{name: "TLS without token", opts: GetOptions{URL: tlsSrv.URL, CAFile: caFile}, wantStatus: 401, wantBody: "who are you\n", wantErr: ErrStatus},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			res, err := Get(context.Background(), tc.opts)
			if tc.wantErr != nil {
				if !errors.Is(err, tc.wantErr) {
					t.Fatalf("error = %v, want %v", err, tc.wantErr)
				}
			} else if err != nil {
				t.Fatalf("unexpected error: %v", err)
			}
			if res.Status != tc.wantStatus || res.Body != tc.wantBody {
				t.Errorf("got %d %q, want %d %q", res.Status, res.Body, tc.wantStatus, tc.wantBody)
			}
		})
	}
}

func TestGetUntrustedCA(t *testing.T) {
	srv := httptest.NewTLSServer(Handler("x"))
	defer srv.Close()
	// Without CAFile the system pool is used, which does not trust the test server.
	res, err := Get(context.Background(), GetOptions{URL: srv.URL, Timeout: time.Second})
	if err == nil || res.Status != 0 {
		t.Fatalf("got %d, %v; want a TLS error and no status", res.Status, err)
	}
}
