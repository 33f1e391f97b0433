package client_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/klog/v2/ktesting"

	"hostpath.dev/manager/internal/auth"
	"hostpath.dev/manager/internal/disk"
	"hostpath.dev/manager/internal/identity"
	"hostpath.dev/manager/internal/server"
	"hostpath.dev/manager/pkg/client"
	"hostpath.dev/manager/pkg/client/trust/trusttest"
	"hostpath.dev/manager/pkg/runtime/review"
)

// tokenAuthorizer allows every call that carries token "t".
type tokenAuthorizer struct{}

func (tokenAuthorizer) Authorize(_ context.Context, caller review.Caller, _ auth.Attributes) (*auth.Decision, error) {
	if caller.Token != "t" {
		return nil, &review.Error{Reason: client.ReasonUnauthorized, Message: "bad token"}
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
	c, err := client.New(srv.URL, client.WithToken(client.StaticToken("t")))
	if err != nil {
		t.Fatal(err)
	}

	h, err := c.Host(ctx)
	if err != nil || h.NodeName != "node-a" || len(h.Pools) != 1 || h.Pools[0].Error == "" {
		t.Fatalf("Host = %+v, %v (want the unprepared pool to report an error)", h, err)
	}
	if _, err := c.CreateVolume(ctx, "default", "v1", client.CreateVolumeRequest{Owner: "pv-1"}); client.ReasonOf(err) != client.ReasonPoolNotFound {
		t.Errorf("CreateVolume before PreparePool: %v, want PoolNotFound", err)
	}
	if err := c.DeleteVolume(ctx, "default", "v1", client.DeleteOptions{Owner: "pv-1"}); client.ReasonOf(err) != client.ReasonPoolNotFound {
		t.Errorf("DeleteVolume before PreparePool: %v, want PoolNotFound", err)
	}
	if p, err := c.PreparePool(ctx, "default"); err != nil || p.Path != pool || p.FreeBytes <= 0 {
		t.Fatalf("PreparePool = %+v, %v", p, err)
	}
	for i := 0; i < 2; i++ { // idempotent
		v, err := c.CreateVolume(ctx, "default", "v1", client.CreateVolumeRequest{Owner: "pv-1", Mode: "0750", RequiredBytes: 1})
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
	_, err = c.CreateVolume(ctx, "default", "v1", client.CreateVolumeRequest{Owner: "pv-2"})
	var ce *client.Error
	if !errors.As(err, &ce) || ce.StatusCode != 409 || ce.Reason != client.ReasonOwnerConflict || ce.Owner != "pv-1" {
		t.Errorf("CreateVolume by another owner: %v, want 409 OwnerConflict naming pv-1", err)
	}
	if err := c.DeleteVolume(ctx, "default", "v1", client.DeleteOptions{Owner: "pv-2"}); client.ReasonOf(err) != client.ReasonOwnerConflict {
		t.Errorf("DeleteVolume by another owner: %v, want OwnerConflict", err)
	}
	if v, err := c.SetOwner(ctx, "default", "v1", client.SetOwnerRequest{Owner: "pv-1", Previous: "pv-1", Retained: true, ReclaimPolicy: client.ReclaimRetain}); err != nil || !v.Retained || v.ReclaimPolicy != client.ReclaimRetain {
		t.Errorf("SetOwner retained = %+v, %v", v, err)
	}
	if v, err := c.SetOwner(ctx, "default", "v1", client.SetOwnerRequest{Owner: "pv-1", Previous: "pv-1", Retained: true, ClaimNamespace: "team-b"}); err != nil || v.ClaimNamespace != "team-b" || !v.Retained {
		t.Errorf("SetOwner handing over to team-b = %+v, %v", v, err)
	}
	if v, err := c.GetVolume(ctx, "default", "v1"); err != nil || v.ClaimNamespace != "team-b" {
		t.Errorf("GetVolume after the hand-over = %+v, %v; want claim namespace team-b", v, err)
	}
	for i := 0; i < 2; i++ { // idempotent
		if err := c.DeleteVolume(ctx, "default", "v1", client.DeleteOptions{Owner: "pv-1"}); err != nil {
			t.Fatalf("DeleteVolume #%d: %v", i, err)
		}
	}
	if _, err := os.Lstat(filepath.Join(pool, "v1")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("volume still on disk: %v", err)
	}

	for _, tc := range []struct {
		desc string
		call func() error
		want client.Reason
	}{
		{"get deleted", func() error { _, err := c.GetVolume(ctx, "default", "v1"); return err }, client.ReasonNotFound},
		{"slash in name is escaped, then refused", func() error {
			_, err := c.CreateVolume(ctx, "default", "../escape", client.CreateVolumeRequest{Owner: "pv-1"})
			return err
		}, client.ReasonBadRequest},
		{"dot-dot name", func() error { return c.DeleteVolume(ctx, "default", "..", client.DeleteOptions{Owner: "pv-1"}) }, client.ReasonBadRequest},
		{"no owner", func() error {
			_, err := c.CreateVolume(ctx, "default", "v3", client.CreateVolumeRequest{})
			return err
		}, client.ReasonBadRequest},
		{"no space", func() error {
			_, err := c.CreateVolume(ctx, "default", "big", client.CreateVolumeRequest{Owner: "pv-1", RequiredBytes: 1 << 62})
			return err
		}, client.ReasonInsufficientStorage},
		{"bad mode", func() error {
			_, err := c.CreateVolume(ctx, "default", "v2", client.CreateVolumeRequest{Owner: "pv-1", Mode: "rwx"})
			return err
		}, client.ReasonBadRequest},
		{"unknown pool", func() error { _, err := c.ListVolumes(ctx, "other"); return err }, client.ReasonPoolNotFound},
		{"delete in an unknown pool", func() error { return c.DeleteVolume(ctx, "other", "v1", client.DeleteOptions{Owner: "pv-1"}) }, client.ReasonPoolNotFound},
		{"delete of a missing volume", func() error { return c.DeleteVolume(ctx, "default", "v9", client.DeleteOptions{Owner: "pv-1"}) }, ""},
		{"invalid reclaim policy", func() error {
			_, err := c.SetOwner(ctx, "default", "v1", client.SetOwnerRequest{Owner: "pv-1", Previous: "pv-1", ReclaimPolicy: "Recycle"})
			return err
		}, client.ReasonBadRequest},
	} {
		if err := tc.call(); client.ReasonOf(err) != tc.want {
			t.Errorf("%s: error %v, want reason %s", tc.desc, err, tc.want)
		}
	}
	if _, err := os.Lstat(filepath.Join(dir, "escape")); err == nil {
		t.Error("a directory was created outside the pool")
	}

	anon, _ := client.New(srv.URL)
	if _, err := anon.Host(ctx); client.ReasonOf(err) != client.ReasonUnauthorized {
		t.Errorf("Host without a token: %v", err)
	}
}

// TestRequests checks what goes on the wire.
func TestRequests(t *testing.T) {
	type seen struct{ method, path, auth, contentType, body string }
	for _, tc := range []struct {
		desc string
		base string
		call func(ctx context.Context, c *client.Client) error
		want seen
	}{
		{"host", "", func(ctx context.Context, c *client.Client) error { _, err := c.Host(ctx); return err },
			seen{"GET", "/v1/host", "Bearer tok", "", ""}},
		{"prepare pool", "", func(ctx context.Context, c *client.Client) error { _, err := c.PreparePool(ctx, "p"); return err },
			seen{"PUT", "/v1/pools/p", "Bearer tok", "", ""}},
		{"list", "", func(ctx context.Context, c *client.Client) error { _, err := c.ListVolumes(ctx, "p"); return err },
			seen{"GET", "/v1/pools/p/volumes", "Bearer tok", "", ""}},
		{"get escapes the name", "", func(ctx context.Context, c *client.Client) error {
			_, err := c.GetVolume(ctx, "p", "a/b c")
			return err
		},
			seen{"GET", "/v1/pools/p/volumes/a%2Fb%20c", "Bearer tok", "", ""}},
		{"create sends JSON", "", func(ctx context.Context, c *client.Client) error {
			_, err := c.CreateVolume(ctx, "p", "v", client.CreateVolumeRequest{Owner: "pv-1", Mode: "0700", RequiredBytes: 5})
			return err
		}, seen{"PUT", "/v1/pools/p/volumes/v", "Bearer tok", "application/json", `{"owner":"pv-1","mode":"0700","requiredBytes":5}`}},
		{"delete", "", func(ctx context.Context, c *client.Client) error {
			return c.DeleteVolume(ctx, "p", "v", client.DeleteOptions{Owner: "pv-1", IfEmpty: true})
		}, seen{"DELETE", "/v1/pools/p/volumes/v?ifEmpty=true&owner=pv-1", "Bearer tok", "", ""}},
		{"set owner", "", func(ctx context.Context, c *client.Client) error {
			_, err := c.SetOwner(ctx, "p", "v", client.SetOwnerRequest{Owner: "pv-2", Previous: "pv-1"})
			return err
		}, seen{"PUT", "/v1/pools/p/volumes/v/owner", "Bearer tok", "application/json", `{"owner":"pv-2","previous":"pv-1"}`}},
		{"set owner with a reclaim policy", "", func(ctx context.Context, c *client.Client) error {
			_, err := c.SetOwner(ctx, "p", "v", client.SetOwnerRequest{Owner: "pv-1", Previous: "pv-1", ReclaimPolicy: client.ReclaimDelete})
			return err
		}, seen{"PUT", "/v1/pools/p/volumes/v/owner", "Bearer tok", "application/json", `{"owner":"pv-1","previous":"pv-1","reclaimPolicy":"Delete"}`}},
		{"base path is kept", "/prefix/", func(ctx context.Context, c *client.Client) error { _, err := c.Host(ctx); return err },
			seen{"GET", "/prefix/v1/host", "Bearer tok", "", ""}},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			_, ctx := ktesting.NewTestContext(t)
			var got seen
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				b, _ := io.ReadAll(r.Body)
				path := r.URL.EscapedPath()
				if r.URL.RawQuery != "" {
					path += "?" + r.URL.RawQuery
				}
				got = seen{r.Method, path, r.Header.Get("Authorization"), r.Header.Get("Content-Type"), string(b)}
				w.Header().Set("Content-Type", "application/json")
				_, _ = io.WriteString(w, "{}")
			}))
			defer srv.Close()
			c, err := client.New(srv.URL+tc.base, client.WithToken(client.StaticToken("tok")))
			if err != nil {
				t.Fatal(err)
			}
			if err := tc.call(ctx, c); err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Errorf("request = %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestErrors(t *testing.T) {
	for _, tc := range []struct {
		desc        string
		code        int
		body        string
		wantReason  client.Reason
		wantMessage string
	}{
		{"JSON status", 409, `{"reason":"Conflict","message":"a file"}`, client.ReasonConflict, "a file"},
		{"JSON pool not found", 404, `{"reason":"PoolNotFound","message":"no pool"}`, client.ReasonPoolNotFound, "no pool"},
		{"plain 404 from a proxy", 404, "404 page not found", client.ReasonNotFound, "404 page not found"},
		{"plain 422", 422, "unprocessable", client.ReasonInternal, "unprocessable"},
		{"plain 413", 413, "too big", client.ReasonRequestTooLarge, "too big"},
		{"plain 507", 507, "", client.ReasonInsufficientStorage, ""},
		{"plain 502", 502, "bad gateway", client.ReasonInternal, "bad gateway"},
		{"JSON without a reason", 403, `{"message":"x"}`, client.ReasonForbidden, `{"message":"x"}`},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			_, ctx := ktesting.NewTestContext(t)
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.WriteHeader(tc.code)
				_, _ = io.WriteString(w, tc.body)
			}))
			defer srv.Close()
			c, _ := client.New(srv.URL)
			err := c.DeleteVolume(ctx, "p", "v", client.DeleteOptions{Owner: "pv-1"})
			var e *client.Error
			if !errors.As(err, &e) {
				t.Fatalf("error %v is not a *client.Error", err)
			}
			if e.StatusCode != tc.code || e.Reason != tc.wantReason || e.Message != tc.wantMessage {
				t.Errorf("error = %+v, want %d %s %q", e, tc.code, tc.wantReason, tc.wantMessage)
			}
			if client.ReasonOf(err) != tc.wantReason {
				t.Errorf("ReasonOf = %s", client.ReasonOf(err))
			}
		})
	}
	if client.ReasonOf(errors.New("dial tcp: refused")) != "" {
		t.Error("ReasonOf of a transport error is not empty")
	}
}

func TestReasonStatus(t *testing.T) {
	for reason, code := range map[client.Reason]int{
		client.ReasonBadRequest: 400, client.ReasonUnauthorized: 401, client.ReasonForbidden: 403,
		client.ReasonNotFound: 404, client.ReasonPoolNotFound: 404, client.ReasonMethodNotAllowed: 405,
		client.ReasonConflict: 409, client.ReasonOwnerConflict: 409, client.ReasonNotEmpty: 409,
		client.ReasonRequestTooLarge: 413, client.ReasonNotEnforced: 422, client.ReasonTooManyRequests: 429,
		client.ReasonInsufficientStorage: 507, client.ReasonInternal: 500,
		client.Reason("Unknown"): 500,
	} {
		if got := reason.HTTPStatus(); got != code {
			t.Errorf("%s.HTTPStatus() = %d, want %d", reason, got, code)
		}
	}
}

func TestNew(t *testing.T) {
	for _, tc := range []struct {
		url string
		ok  bool
	}{
		{"http://198.18.1.5:8080", true},
		{"https://manager.example:8443/base", true},
		{"198.18.1.5:8080", false},
		{"ftp://h", false},
		{"http://", false},
		{"http://h/%zz", false},
	} {
		c, err := client.New(tc.url)
		if (err == nil) != tc.ok {
			t.Errorf("New(%q) error = %v, want ok=%v", tc.url, err, tc.ok)
		}
		if err == nil && c.BaseURL() != tc.url {
			t.Errorf("BaseURL() = %q, want %q", c.BaseURL(), tc.url)
		}
	}
}

func TestTokenSources(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	path := filepath.Join(t.TempDir(), "token")
	var seen []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen = append(seen, r.Header.Get("Authorization"))
		_, _ = io.WriteString(w, "{}")
	}))
	defer srv.Close()
	c, _ := client.New(srv.URL, client.WithToken(client.FileToken(path)))
	if _, err := c.Host(ctx); err == nil {
		t.Error("Host succeeded without a token file")
	}
	for i := 1; i <= 2; i++ { // a rotated token is kept for TokenMaxAge (TestFileToken)
		if err := os.WriteFile(path, []byte(fmt.Sprintf(" tok%d\n", i)), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Host(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if strings.Join(seen, ",") != "Bearer tok1,Bearer tok1" {
		t.Errorf("Authorization headers = %v", seen)
	}
	if tok, err := client.StaticToken("s")(); tok != "s" || err != nil {
		t.Errorf("StaticToken = %q, %v", tok, err)
	}
}

// tlsManager is a test manager served over TLS with the certificate that
// cert holds at each handshake; it answers /v1/host with the bearer token
// it got as the node name.
func tlsManager(t *testing.T, cert *atomic.Pointer[tls.Certificate]) *httptest.Server {
	t.Helper()
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = json.NewEncoder(w).Encode(client.Host{NodeName: strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")})
	}))
	srv.TLS = &tls.Config{GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) { return cert.Load(), nil }}
	// Every call is a new connection, so a new handshake and verification.
	srv.Config.SetKeepAlivesEnabled(false)
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // the handshakes refused
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return srv
}

// TestServerTLS checks WithServerTLS against a manager whose certificate
// and the caller's roots change: the right name and CA are accepted, with
// or without an intermediate CA, and anything else fails the handshake.
func TestServerTLS(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	const node = "n1"
	name := client.ServerName(node)
	ca, other := trusttest.NewCA(t, "ca"), trusttest.NewCA(t, "other")
	var cert atomic.Pointer[tls.Certificate]
	var roots atomic.Pointer[x509.CertPool]
	srv := tlsManager(t, &cert)
	c, err := client.New(srv.URL, client.WithServerTLS(roots.Load, name), client.WithToken(client.StaticToken("tok")))
	if err != nil {
		t.Fatal(err)
	}
	both := ca.Pool()
	both.AddCert(other.Cert)
	clientAuthOnly := ca.Issue(t, &x509.Certificate{DNSNames: []string{name}, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}})
	for _, step := range []struct {
		name    string
		cert    tls.Certificate
		roots   *x509.CertPool
		wantErr string // empty: the call succeeds
	}{
		{name: "no bundle yet", cert: ca.ServerCert(t, name), wantErr: "no CA bundle yet"},
		{name: "empty bundle", cert: ca.ServerCert(t, name), roots: x509.NewCertPool(), wantErr: "no CA bundle yet"},
		{name: "right name and CA", cert: ca.ServerCert(t, name), roots: ca.Pool()},
		{name: "certificate of another node", cert: ca.ServerCert(t, client.ServerName("n2")), roots: ca.Pool(), wantErr: "certificate is valid for n2.manager.hostpath.dev, not n1.manager.hostpath.dev"},
		{name: "certificate for the IP", cert: ca.Issue(t, &x509.Certificate{IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
			NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}),
			roots: ca.Pool(), wantErr: "certificate is not valid for any names"},
		{name: "certificate from another CA", cert: other.ServerCert(t, name), roots: ca.Pool(), wantErr: "certificate signed by unknown authority"},
		{name: "not for server authentication", cert: clientAuthOnly, roots: ca.Pool(), wantErr: "incompatible key usage"},
		{name: "through an intermediate CA", cert: ca.NewIntermediate(t, "intermediate").ServerCert(t, name), roots: ca.Pool()},
		// A CA rotation: the old CA, then both, then the new one alone.
		{name: "old CA removed", cert: ca.ServerCert(t, name), roots: other.Pool(), wantErr: "certificate signed by unknown authority"},
		{name: "both CAs, old certificate", cert: ca.ServerCert(t, name), roots: both},
		{name: "both CAs, new certificate", cert: other.ServerCert(t, name), roots: both},
		{name: "new CA alone", cert: other.ServerCert(t, name), roots: other.Pool()},
	} {
		cert.Store(&step.cert)
		roots.Store(step.roots)
		h, err := c.Host(ctx)
		switch {
		case step.wantErr == "" && (err != nil || h.NodeName != "tok"):
			t.Errorf("%s: Host = %+v, %v; want the token echoed", step.name, h, err)
		case step.wantErr != "" && (err == nil || !strings.Contains(err.Error(), step.wantErr)):
			t.Errorf("%s: Host error = %v, want %q", step.name, err, step.wantErr)
		}
	}
}

// TestServerTLSOptions checks how WithServerTLS goes with WithHTTPClient
// and plain http URLs.
func TestServerTLSOptions(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	ca := trusttest.NewCA(t, "ca")
	name := client.ServerName("n1")
	var cert atomic.Pointer[tls.Certificate]
	good := ca.ServerCert(t, name)
	cert.Store(&good)
	srv := tlsManager(t, &cert)
	roots := ca.Pool
	// With WithHTTPClient, in either order, the given transport is cloned
	// and verifies; the given one is left as it was.
	given := &http.Transport{DisableKeepAlives: true, TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}
	for i, opts := range [][]client.Option{
		{client.WithHTTPClient(&http.Client{Transport: given}), client.WithServerTLS(roots, name)},
		{client.WithServerTLS(roots, name), client.WithHTTPClient(&http.Client{Transport: given})},
		{client.WithHTTPClient(&http.Client{Transport: given}), client.WithServerTLS(roots, client.ServerName("n2"))},
		{client.WithServerTLS(roots, client.ServerName("n2")), client.WithHTTPClient(&http.Client{Transport: given})},
	} {
		c, err := client.New(srv.URL, opts...)
		if err != nil {
			t.Fatal(err)
		}
		_, err = c.Host(ctx)
		if wantOK := i < 2; (err == nil) != wantOK || err != nil && !strings.Contains(err.Error(), "x509: certificate is valid for n1.manager.hostpath.dev, not n2") {
			t.Errorf("options #%d: Host = %v, want ok=%v or a failed verification", i, err, wantOK)
		}
	}
	if given.TLSClientConfig.VerifyConnection != nil || !given.TLSClientConfig.InsecureSkipVerify {
		t.Errorf("WithServerTLS changed the WithHTTPClient transport")
	}

	for name, opts := range map[string][]client.Option{
		"custom RoundTripper": {client.WithHTTPClient(&http.Client{Transport: roundTripper(nil)}), client.WithServerTLS(roots, name)},
		"DialTLSContext": {client.WithHTTPClient(&http.Client{Transport: &http.Transport{
			DialTLSContext: func(context.Context, string, string) (net.Conn, error) { return nil, errors.New("no") }}}), client.WithServerTLS(roots, name)},
		"no server name": {client.WithServerTLS(roots, "")},
		"no roots":       {client.WithServerTLS(nil, name)},
	} {
		if _, err := client.New(srv.URL, opts...); err == nil {
			t.Errorf("New with %s succeeded, want an error", name)
		}
	}

	// A plain http URL does no TLS: the option changes nothing.
	plain := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, `{"nodeName":"plain"}`) }))
	defer plain.Close()
	for _, opts := range [][]client.Option{nil, {client.WithServerTLS(roots, name)}} {
		c, err := client.New(plain.URL, opts...)
		if err != nil {
			t.Fatal(err)
		}
		if h, err := c.Host(ctx); err != nil || h.NodeName != "plain" {
			t.Errorf("Host over http (%d options) = %+v, %v", len(opts), h, err)
		}
	}
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
