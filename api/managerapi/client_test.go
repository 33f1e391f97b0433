package managerapi_test

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

	"hostpath.dev/api/managerapi"
	"hostpath.dev/api/managerapi/trust/trusttest"
)

// TestRequests checks what goes on the wire.
func TestRequests(t *testing.T) {
	type seen struct{ method, path, auth, contentType, body string }
	for _, tc := range []struct {
		desc string
		base string
		call func(ctx context.Context, c *managerapi.Client) error
		want seen
	}{
		{"host", "", func(ctx context.Context, c *managerapi.Client) error { _, err := c.Host(ctx); return err },
			seen{"GET", "/v1/host", "Bearer tok", "", ""}},
		{"prepare pool", "", func(ctx context.Context, c *managerapi.Client) error { _, err := c.PreparePool(ctx, "p"); return err },
			seen{"PUT", "/v1/pools/p", "Bearer tok", "", ""}},
		{"list", "", func(ctx context.Context, c *managerapi.Client) error { _, err := c.ListVolumes(ctx, "p"); return err },
			seen{"GET", "/v1/pools/p/volumes", "Bearer tok", "", ""}},
		{"get escapes the name", "", func(ctx context.Context, c *managerapi.Client) error {
			_, err := c.GetVolume(ctx, "p", "a/b c")
			return err
		},
			seen{"GET", "/v1/pools/p/volumes/a%2Fb%20c", "Bearer tok", "", ""}},
		{"create sends JSON", "", func(ctx context.Context, c *managerapi.Client) error {
			_, err := c.CreateVolume(ctx, "p", "v", managerapi.CreateVolumeRequest{Owner: "pv-1", Mode: "0700", RequiredBytes: 5})
			return err
		}, seen{"PUT", "/v1/pools/p/volumes/v", "Bearer tok", "application/json", `{"owner":"pv-1","mode":"0700","requiredBytes":5}`}},
		{"delete", "", func(ctx context.Context, c *managerapi.Client) error {
			return c.DeleteVolume(ctx, "p", "v", managerapi.DeleteOptions{Owner: "pv-1", IfEmpty: true})
		}, seen{"DELETE", "/v1/pools/p/volumes/v?ifEmpty=true&owner=pv-1", "Bearer tok", "", ""}},
		{"set owner", "", func(ctx context.Context, c *managerapi.Client) error {
			_, err := c.SetOwner(ctx, "p", "v", managerapi.SetOwnerRequest{Owner: "pv-2", Previous: "pv-1"})
			return err
		}, seen{"PUT", "/v1/pools/p/volumes/v/owner", "Bearer tok", "application/json", `{"owner":"pv-2","previous":"pv-1"}`}},
		{"set owner with a reclaim policy", "", func(ctx context.Context, c *managerapi.Client) error {
			_, err := c.SetOwner(ctx, "p", "v", managerapi.SetOwnerRequest{Owner: "pv-1", Previous: "pv-1", ReclaimPolicy: managerapi.ReclaimDelete})
			return err
		}, seen{"PUT", "/v1/pools/p/volumes/v/owner", "Bearer tok", "application/json", `{"owner":"pv-1","previous":"pv-1","reclaimPolicy":"Delete"}`}},
		{"base path is kept", "/prefix/", func(ctx context.Context, c *managerapi.Client) error { _, err := c.Host(ctx); return err },
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
			c, err := managerapi.New(srv.URL+tc.base, managerapi.WithToken(managerapi.StaticToken("tok")))
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
		wantReason  managerapi.Reason
		wantMessage string
	}{
		{"JSON status", 409, `{"reason":"Conflict","message":"a file"}`, managerapi.ReasonConflict, "a file"},
		{"JSON pool not found", 404, `{"reason":"PoolNotFound","message":"no pool"}`, managerapi.ReasonPoolNotFound, "no pool"},
		{"plain 404 from a proxy", 404, "404 page not found", managerapi.ReasonNotFound, "404 page not found"},
		{"plain 422", 422, "unprocessable", managerapi.ReasonInternal, "unprocessable"},
		{"plain 413", 413, "too big", managerapi.ReasonRequestTooLarge, "too big"},
		{"plain 507", 507, "", managerapi.ReasonInsufficientStorage, ""},
		{"plain 502", 502, "bad gateway", managerapi.ReasonInternal, "bad gateway"},
		{"JSON without a reason", 403, `{"message":"x"}`, managerapi.ReasonForbidden, `{"message":"x"}`},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			err := managerapi.DeleteAnswered(t, tc.code, tc.body)
			var e *managerapi.Error
			if !errors.As(err, &e) {
				t.Fatalf("error %v is not a *client.Error", err)
			}
			if e.StatusCode != tc.code || e.Reason != tc.wantReason || e.Message != tc.wantMessage {
				t.Errorf("error = %+v, want %d %s %q", e, tc.code, tc.wantReason, tc.wantMessage)
			}
			if managerapi.ReasonOf(err) != tc.wantReason {
				t.Errorf("ReasonOf = %s", managerapi.ReasonOf(err))
			}
		})
	}
	if managerapi.ReasonOf(errors.New("dial tcp: refused")) != "" {
		t.Error("ReasonOf of a transport error is not empty")
	}
}

func TestReasonStatus(t *testing.T) {
	for reason, code := range map[managerapi.Reason]int{
		managerapi.ReasonBadRequest: 400, managerapi.ReasonUnauthorized: 401, managerapi.ReasonForbidden: 403,
		managerapi.ReasonNotFound: 404, managerapi.ReasonPoolNotFound: 404, managerapi.ReasonMethodNotAllowed: 405,
		managerapi.ReasonConflict: 409, managerapi.ReasonOwnerConflict: 409, managerapi.ReasonNotEmpty: 409,
		managerapi.ReasonRequestTooLarge: 413, managerapi.ReasonNotEnforced: 422, managerapi.ReasonTooManyRequests: 429,
		managerapi.ReasonInsufficientStorage: 507, managerapi.ReasonInternal: 500,
		managerapi.Reason("Unknown"): 500,
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
		c, err := managerapi.New(tc.url)
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
	c, _ := managerapi.New(srv.URL, managerapi.WithToken(managerapi.FileToken(path)))
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
	if tok, err := managerapi.StaticToken("s")(); tok != "s" || err != nil {
		t.Errorf("StaticToken = %q, %v", tok, err)
	}
}

// tlsManager is a test manager served over TLS with the certificate that
// cert holds at each handshake; it answers /v1/host with the bearer token
// it got as the node name.
func tlsManager(t *testing.T, cert *atomic.Pointer[tls.Certificate]) *httptest.Server {
	t.Helper()
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = json.NewEncoder(w).Encode(managerapi.Host{NodeName: strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")})
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
	name := managerapi.ServerName(node)
	ca, other := trusttest.NewCA(t, "ca"), trusttest.NewCA(t, "other")
	var cert atomic.Pointer[tls.Certificate]
	var roots atomic.Pointer[x509.CertPool]
	srv := tlsManager(t, &cert)
	c, err := managerapi.New(srv.URL, managerapi.WithServerTLS(roots.Load, name), managerapi.WithToken(managerapi.StaticToken("tok")))
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
		{name: "certificate of another node", cert: ca.ServerCert(t, managerapi.ServerName("n2")), roots: ca.Pool(), wantErr: "certificate is valid for n2.manager.hostpath.dev, not n1.manager.hostpath.dev"},
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
	name := managerapi.ServerName("n1")
	var cert atomic.Pointer[tls.Certificate]
	good := ca.ServerCert(t, name)
	cert.Store(&good)
	srv := tlsManager(t, &cert)
	roots := ca.Pool
	// With WithHTTPClient, in either order, the given transport is cloned
	// and verifies; the given one is left as it was.
	given := &http.Transport{DisableKeepAlives: true, TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}
	for i, opts := range [][]managerapi.Option{
		{managerapi.WithHTTPClient(&http.Client{Transport: given}), managerapi.WithServerTLS(roots, name)},
		{managerapi.WithServerTLS(roots, name), managerapi.WithHTTPClient(&http.Client{Transport: given})},
		{managerapi.WithHTTPClient(&http.Client{Transport: given}), managerapi.WithServerTLS(roots, managerapi.ServerName("n2"))},
		{managerapi.WithServerTLS(roots, managerapi.ServerName("n2")), managerapi.WithHTTPClient(&http.Client{Transport: given})},
	} {
		c, err := managerapi.New(srv.URL, opts...)
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

	for name, opts := range map[string][]managerapi.Option{
		"custom RoundTripper": {managerapi.WithHTTPClient(&http.Client{Transport: roundTripper(nil)}), managerapi.WithServerTLS(roots, name)},
		"DialTLSContext": {managerapi.WithHTTPClient(&http.Client{Transport: &http.Transport{
			DialTLSContext: func(context.Context, string, string) (net.Conn, error) { return nil, errors.New("no") }}}), managerapi.WithServerTLS(roots, name)},
		"no server name": {managerapi.WithServerTLS(roots, "")},
		"no roots":       {managerapi.WithServerTLS(nil, name)},
	} {
		if _, err := managerapi.New(srv.URL, opts...); err == nil {
			t.Errorf("New with %s succeeded, want an error", name)
		}
	}

	// A plain http URL does no TLS: the option changes nothing.
	plain := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, `{"nodeName":"plain"}`) }))
	defer plain.Close()
	for _, opts := range [][]managerapi.Option{nil, {managerapi.WithServerTLS(roots, name)}} {
		c, err := managerapi.New(plain.URL, opts...)
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
