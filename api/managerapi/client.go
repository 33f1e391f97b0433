package managerapi

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
)

// DefaultTokenFile is where Kubernetes mounts a pod's service account token.
const DefaultTokenFile = "/var/run/secrets/kubernetes.io/serviceaccount/token"

// maxResponseBytes bounds what the client reads of any response body.
const maxResponseBytes = 4 << 20

// TokenSource returns the bearer token to send with a call.
type TokenSource func() (string, error)

// StaticToken returns a TokenSource that always returns token.
func StaticToken(token string) TokenSource {
	return func() (string, error) { return token, nil }
}

// TokenMaxAge is how long a FileToken keeps the token it read before it
// reads the file again. The kubelet rewrites a projected service account
// token when 80% of its lifetime (10 minutes at least) is gone, so a token
// kept this long is still valid; client-go's file token source keeps one as
// long. Reading the file at every call was 1.6% of a provisioner's CPU in a
// burst of 1,000 claims (docs/bench/2026-11-27.md).
const TokenMaxAge = time.Minute

// FileToken returns a TokenSource that reads the token from path and keeps
// it for TokenMaxAge, so a rotated projected service account token is
// picked up within a minute. A file it cannot read is an error each time,
// and is read again at the next call.
//
// Not client-go's transport.NewCachedFileTokenSource: when the file cannot
// be read it keeps sending the last token, however old, and only logs
// (here a missing file is the caller's error, as before); it takes no
// clock, so its expiry cannot be tested without waiting; and this package
// depends on the standard library only, not on client-go and oauth2.
func FileToken(path string) TokenSource { return fileToken(path, time.Now) }

// fileToken is FileToken with the clock now.
func fileToken(path string, now func() time.Time) TokenSource {
	var (
		mu     sync.Mutex
		token  string
		readAt time.Time
	)
	return func() (string, error) {
		mu.Lock()
		defer mu.Unlock()
		if token != "" && now().Sub(readAt) < TokenMaxAge {
			return token, nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return "", fmt.Errorf("read token file: %w", err)
		}
		token, readAt = strings.TrimSpace(string(b)), now()
		return token, nil
	}
}

// Default per-call time limits of a Client.
const (
	// DefaultCallTimeout bounds every call but DeleteVolume.
	DefaultCallTimeout = 30 * time.Second
	// DefaultDeleteTimeout bounds DeleteVolume: removing a large tree takes
	// long, so it matches the manager's default --write-timeout.
	DefaultDeleteTimeout = 10 * time.Minute
)

// Client calls one manager. It is safe for concurrent use.
type Client struct {
	base          *url.URL
	token         TokenSource
	http          *http.Client
	callTimeout   time.Duration
	deleteTimeout time.Duration
	// serverTLS is WithServerTLS's, nil without.
	serverTLS *serverTLS
}

// Option configures a Client.
type Option func(*Client)

// WithHTTPClient sets the HTTP client (default: http.DefaultTransport, the
// time limits come from WithTimeouts). With WithServerTLS too, in any
// order, New uses a copy of c whose Transport verifies the managers (see
// WithServerTLS); c itself is not changed.
func WithHTTPClient(c *http.Client) Option { return func(cl *Client) { cl.http = c } }

// WithTimeouts sets the time limit of each call (DefaultCallTimeout) and of
// DeleteVolume (DefaultDeleteTimeout); zero keeps the default. When a call
// gives up, its connection is closed and the manager stops the work it was
// doing for it.
func WithTimeouts(call, del time.Duration) Option {
	return func(cl *Client) {
		if call > 0 {
			cl.callTimeout = call
		}
		if del > 0 {
			cl.deleteTimeout = del
		}
	}
}

// WithToken sets where bearer tokens come from (default: none is sent).
func WithToken(ts TokenSource) Option { return func(cl *Client) { cl.token = ts } }

// WithServerTLS makes the client verify the manager of an https URL: the
// manager must present a certificate for serverName (ServerName of its
// node: the pod IP in the URL is not checked, the node is), valid for
// server authentication and chaining up to one of the certificates of
// roots(), which is called at every TLS handshake so that a CA bundle that
// changes at runtime (a CA rotation, see the trust package) applies to the
// next connection without a new Client. While roots() returns nil or an
// empty pool every handshake fails with "no CA bundle yet". TLS 1.2 is the
// least version accepted. Connections already open are not verified again:
// a certificate no longer trusted stops being used when its connection
// closes (an idle one after the Transport's IdleConnTimeout, 90 seconds by
// default).
//
// The client gets its own http.Transport: a clone of the WithHTTPClient
// client's Transport (an *http.Transport, without DialTLS or
// DialTLSContext, which would bypass the TLS configuration) or of
// http.DefaultTransport, whatever the order of the options; its
// TLSClientConfig is replaced, and the WithHTTPClient client itself is not
// changed. The time limits and the token options apply as without it. A
// plain http URL does no TLS: the option changes nothing for it.
//
// Why InsecureSkipVerify: tls.Config's RootCAs are fixed for the life of a
// Transport, so the built-in verification is turned off and replaced by
// VerifyConnection, which crypto/tls calls in every handshake (resumed
// sessions included, unlike VerifyPeerCertificate) after the server proved
// that it holds the key of its certificate, and whose error aborts the
// handshake before any request is sent. It does what the built-in
// verification does (x509 Verify of the chain the server sent, for the DNS
// name, server authentication) with the roots of the moment, and nothing
// returns success without it, so no connection is made unverified.
func WithServerTLS(roots func() *x509.CertPool, serverName string) Option {
	return func(cl *Client) { cl.serverTLS = &serverTLS{roots: roots, name: serverName} }
}

// serverTLS is how WithServerTLS verifies the managers.
type serverTLS struct {
	roots func() *x509.CertPool
	name  string
}

// client returns a copy of base whose Transport verifies the managers.
func (s *serverTLS) client(base *http.Client) (*http.Client, error) {
	if s.roots == nil || s.name == "" {
		return nil, errors.New("server TLS needs roots and a server name")
	}
	rt := base.Transport
	if rt == nil {
		rt = http.DefaultTransport
	}
	t, ok := rt.(*http.Transport)
	//lint:ignore SA1019 DialTLS, deprecated but still used when set, would bypass TLSClientConfig.
	if !ok || t.DialTLS != nil || t.DialTLSContext != nil {
		return nil, fmt.Errorf("server TLS needs an *http.Transport that does its own TLS, not a %T", rt)
	}
	t = t.Clone()
	t.TLSClientConfig = &tls.Config{
		MinVersion: tls.VersionTLS12,
		ServerName: s.name,
		// Verified by VerifyConnection, against the roots of the moment
		// (see WithServerTLS).
		InsecureSkipVerify: true,
		VerifyConnection: func(cs tls.ConnectionState) error {
			return verifyServer(cs.PeerCertificates, s.roots(), s.name)
		},
	}
	hc := *base
	hc.Transport = t
	return &hc, nil
}

// verifyServer checks the chain a manager sent (leaf first) as the TLS
// stack would: signed by roots, through the other certificates sent if
// needed, valid now, for DNS name, for server authentication.
func verifyServer(chain []*x509.Certificate, roots *x509.CertPool, name string) error {
	if roots == nil || roots.Equal(x509.NewCertPool()) {
		return fmt.Errorf("verify the manager certificate for %s: no CA bundle yet (ConfigMap %s, key %s)", name, CABundleConfigMap, CABundleKey)
	}
	if len(chain) == 0 {
		return fmt.Errorf("verify the manager certificate for %s: the server sent no certificate", name)
	}
	intermediates := x509.NewCertPool()
	for _, c := range chain[1:] {
		intermediates.AddCert(c)
	}
	_, err := chain[0].Verify(x509.VerifyOptions{
		Roots:         roots,
		Intermediates: intermediates,
		DNSName:       name,
		KeyUsages:     []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	})
	if err != nil {
		return fmt.Errorf("verify the manager certificate for %s: %w", name, err)
	}
	return nil
}

// CallerOptions are the options of a program that calls the managers: a
// bearer token read from tokenFile (FileToken; none when it is empty),
// and the time limits of a call and of a delete (WithTimeouts; zero keeps
// the default).
func CallerOptions(tokenFile string, callTimeout, deleteTimeout time.Duration) []Option {
	opts := []Option{WithTimeouts(callTimeout, deleteTimeout)}
	if tokenFile != "" {
		opts = append(opts, WithToken(FileToken(tokenFile)))
	}
	return opts
}

// New returns a client for the manager at baseURL, e.g.
// "https://198.18.1.5:8443" (with WithServerTLS) or "http://127.0.0.1:8080".
func New(baseURL string, opts ...Option) (*Client, error) {
	u, err := url.Parse(baseURL)
	if err != nil {
		return nil, fmt.Errorf("parse manager URL %q: %w", baseURL, err)
	}
	if u.Scheme != "http" && u.Scheme != "https" || u.Host == "" {
		return nil, fmt.Errorf("manager URL %q: want http(s)://host[:port]", baseURL)
	}
	c := &Client{base: u, http: &http.Client{}, callTimeout: DefaultCallTimeout, deleteTimeout: DefaultDeleteTimeout}
	for _, o := range opts {
		o(c)
	}
	if c.serverTLS != nil {
		hc, err := c.serverTLS.client(c.http)
		if err != nil {
			return nil, fmt.Errorf("manager URL %q: %w", baseURL, err)
		}
		c.http = hc
	}
	return c, nil
}

// BaseURL returns the manager's address.
func (c *Client) BaseURL() string { return c.base.String() }

// Error is a non-2xx answer from the manager.
type Error struct {
	// StatusCode is the HTTP status.
	StatusCode int
	// Reason and Message come from the JSON body.
	Status
}

// Errorf returns an *Error with reason and a message: the one error type
// of the contract, used by the manager's implementation to say which answer
// a failure gets and by callers to read it (ReasonOf).
func Errorf(reason Reason, format string, args ...any) *Error {
	return &Error{StatusCode: reason.HTTPStatus(), Status: Status{Reason: reason, Message: fmt.Sprintf(format, args...)}}
}

// Error says the status, reason and message.
func (e *Error) Error() string {
	return fmt.Sprintf("manager answered %d %s: %s", e.StatusCode, e.Reason, e.Message)
}

// ReasonOf returns the Reason of an *Error in err's chain, or "" when err is
// not an answer from the manager (a transport error, for example). To decide
// what to do with an answer, use Classify.
func ReasonOf(err error) Reason {
	var e *Error
	if errors.As(err, &e) {
		return e.Reason
	}
	return ""
}

// Host calls GET /v1/host.
func (c *Client) Host(ctx context.Context) (*Host, error) {
	var h Host
	if err := c.do(ctx, http.MethodGet, "/v1/host", nil, &h); err != nil {
		return nil, err
	}
	return &h, nil
}

// PreparePool calls PUT /v1/pools/{pool}: it creates the pool's base
// directory if missing and returns the pool's state. On a manager with
// --pool-root, a pool name it is not configured with is created there
// (a pool named on the fly); without, such a name is PoolNotFound.
func (c *Client) PreparePool(ctx context.Context, pool string) (*Pool, error) {
	var p Pool
	if err := c.do(ctx, http.MethodPut, "/v1/pools/"+url.PathEscape(pool), nil, &p); err != nil {
		return nil, err
	}
	return &p, nil
}

// ListVolumes returns every volume of the pool, sorted by name: it calls
// GET /v1/pools/{pool}/volumes page after page (ListVolumesPage),
// following VolumeList.Continue until the last page, so that no answer
// comes near the size a Client reads (see MaxListLimit). The first call
// has no query, so that a manager older than paging, which takes none,
// answers every volume at once. A volume created or removed while the
// pages are read may be listed or not; every other one is listed once.
// The answer's Continue is empty.
func (c *Client) ListVolumes(ctx context.Context, pool string) (*VolumeList, error) {
	all := &VolumeList{Items: []Volume{}}
	var opts ListOptions
	for {
		page, err := c.ListVolumesPage(ctx, pool, opts)
		if err != nil {
			return nil, err
		}
		all.Items = append(all.Items, page.Items...)
		if page.Continue == "" {
			return all, nil
		}
		if page.Continue == opts.Continue {
			return nil, fmt.Errorf("GET %s: the manager answered continue %q again", volumesPath(pool, ""), page.Continue)
		}
		opts.Continue = page.Continue
	}
}

// ListVolumesPage calls GET /v1/pools/{pool}/volumes once, with query
// limit (when opts.Limit is not 0) and continue (when opts.Continue is
// not empty): one page of the pool's volumes, sorted by name, whose
// Continue says where the next starts (empty on the last page). Without
// a limit the manager answers DefaultListLimit volumes.
func (c *Client) ListVolumesPage(ctx context.Context, pool string, opts ListOptions) (*VolumeList, error) {
	q := url.Values{}
	if opts.Limit != 0 {
		q.Set("limit", strconv.Itoa(opts.Limit))
	}
	if opts.Continue != "" {
		q.Set("continue", opts.Continue)
	}
	path := volumesPath(pool, "")
	if len(q) > 0 {
		path += "?" + q.Encode()
	}
	var l VolumeList
	if err := c.do(ctx, http.MethodGet, path, nil, &l); err != nil {
		return nil, err
	}
	if l.Items == nil {
		l.Items = []Volume{}
	}
	return &l, nil
}

// GetVolume calls GET /v1/pools/{pool}/volumes/{name}.
func (c *Client) GetVolume(ctx context.Context, pool, name string) (*Volume, error) {
	var v Volume
	if err := c.do(ctx, http.MethodGet, volumesPath(pool, name), nil, &v); err != nil {
		return nil, err
	}
	return &v, nil
}

// CreateVolume calls PUT /v1/pools/{pool}/volumes/{name}. It is idempotent
// for the same req.Owner.
func (c *Client) CreateVolume(ctx context.Context, pool, name string, req CreateVolumeRequest) (*Volume, error) {
	var v Volume
	if err := c.do(ctx, http.MethodPut, volumesPath(pool, name), &req, &v); err != nil {
		return nil, err
	}
	return &v, nil
}

// CloneVolume calls PUT /v1/pools/{pool}/volumes/{name}/clone: it starts
// the copy of req's source into a new volume, or says how far it is
// (Clone.State), or returns the volume once it exists (Clone.Volume). It
// is idempotent for the same req.Owner: call it again until Clone.Volume
// is set.
func (c *Client) CloneVolume(ctx context.Context, pool, name string, req CloneVolumeRequest) (*Clone, error) {
	var cl Clone
	if err := c.do(ctx, http.MethodPut, volumesPath(pool, name)+"/clone", &req, &cl); err != nil {
		return nil, err
	}
	return &cl, nil
}

// SetOwner calls PUT /v1/pools/{pool}/volumes/{name}/owner: it adopts a
// directory without an owner record (req.Previous ""), hands a retained
// directory to a new PersistentVolume, marks it retained, or records its
// owner's reclaim policy (req.ReclaimPolicy).
func (c *Client) SetOwner(ctx context.Context, pool, name string, req SetOwnerRequest) (*Volume, error) {
	var v Volume
	if err := c.do(ctx, http.MethodPut, volumesPath(pool, name)+"/owner", &req, &v); err != nil {
		return nil, err
	}
	return &v, nil
}

// SetSize calls PUT /v1/pools/{pool}/volumes/{name}/size: it grows the
// volume of req.Owner to req.SizeBytes (idempotent for the same size).
func (c *Client) SetSize(ctx context.Context, pool, name string, req SetSizeRequest) (*Volume, error) {
	var v Volume
	if err := c.do(ctx, http.MethodPut, volumesPath(pool, name)+"/size", &req, &v); err != nil {
		return nil, err
	}
	return &v, nil
}

// DeleteVolume calls DELETE /v1/pools/{pool}/volumes/{name}. Deleting a
// volume that does not exist in an existing pool succeeds; a pool that is
// not configured, or whose directory does not exist, is ReasonPoolNotFound
// (the directory was not seen gone: see Classify).
func (c *Client) DeleteVolume(ctx context.Context, pool, name string, opts DeleteOptions) error {
	q := url.Values{}
	q.Set("owner", opts.Owner)
	if opts.IfEmpty {
		q.Set("ifEmpty", "true")
	}
	return c.do(ctx, http.MethodDelete, volumesPath(pool, name)+"?"+q.Encode(), nil, nil)
}

func volumesPath(pool, name string) string {
	p := "/v1/pools/" + url.PathEscape(pool) + "/volumes"
	if name != "" {
		p += "/" + url.PathEscape(name)
	}
	return p
}

func (c *Client) do(ctx context.Context, method, path string, in, out any) error {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return fmt.Errorf("encode request: %w", err)
		}
		body = bytes.NewReader(b)
	}
	timeout := c.callTimeout
	if method == http.MethodDelete {
		timeout = c.deleteTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	u := *c.base
	path, u.RawQuery, _ = strings.Cut(path, "?")
	u.RawPath = strings.TrimSuffix(c.base.EscapedPath(), "/") + path
	u.Path, _ = url.PathUnescape(u.RawPath)
	req, err := http.NewRequestWithContext(ctx, method, u.String(), body)
	if err != nil {
		return fmt.Errorf("build request: %w", err)
	}
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json")
	if c.token != nil {
		tok, err := c.token()
		if err != nil {
			return err
		}
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxResponseBytes+1))
	if err != nil {
		return fmt.Errorf("%s %s: read response: %w", method, path, err)
	}
	if len(data) > maxResponseBytes {
		return fmt.Errorf("%s %s: the answer is larger than the %d MiB a client reads", method, path, maxResponseBytes>>20)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		e := &Error{StatusCode: resp.StatusCode}
		if json.Unmarshal(data, &e.Status) != nil || e.Reason == "" {
			e.Reason = reasonForStatus(resp.StatusCode)
			e.Message = strings.TrimSpace(string(data))
		}
		return fmt.Errorf("%s %s: %w", method, path, e)
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(data, out); err != nil {
		return fmt.Errorf("%s %s: decode response: %w", method, path, err)
	}
	return nil
}

// reasonForStatus maps a bare HTTP status (a proxy's answer, say) to a
// Reason: a bare 404 is ReasonNotFound (never ReasonPoolNotFound, which
// only a manager says), a status no reason has is ReasonInternal.
func reasonForStatus(code int) Reason {
	for _, r := range []Reason{ReasonBadRequest, ReasonUnauthorized, ReasonForbidden, ReasonNotFound,
		ReasonMethodNotAllowed, ReasonConflict, ReasonRequestTooLarge, ReasonTooManyRequests, ReasonInsufficientStorage} {
		if r.HTTPStatus() == code {
			return r
		}
	}
	return ReasonInternal
}
