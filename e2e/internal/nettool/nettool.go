// Package nettool is the logic of the nettool command of the testtools image:
// a tiny HTTP server and client for network checks from inside pods, where
// busybox's wget is not usable.
package nettool

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"
)

// Handler answers every request with text followed by a newline.
func Handler(text string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = fmt.Fprintln(w, text)
	})
}

// GetOptions configures Get.
type GetOptions struct {
	// URL is what to fetch.
	URL string
	// TokenFile, when set, is read and sent as a bearer token.
	TokenFile string
	// CAFile, when set, is the only CA trusted for https URLs.
	CAFile string
	// RetryFor keeps retrying failed requests (transport errors and non-2xx
	// answers) for this long; zero means one attempt.
	RetryFor time.Duration
	// Timeout bounds each attempt.
	Timeout time.Duration
}

// Result is the outcome of the last attempt of Get.
type Result struct {
	// Status is the HTTP status code, 0 if no answer came.
	Status int
	// Body is the answer's body (at most 1 MiB).
	Body string
}

// ErrStatus reports an answer whose status is not 2xx.
var ErrStatus = errors.New("non-2xx status")

// Get fetches o.URL, retrying until a 2xx answer or until o.RetryFor has
// passed. It returns the last result and, unless the status was 2xx, an error.
func Get(ctx context.Context, o GetOptions) (Result, error) {
	client, err := newClient(o)
	if err != nil {
		return Result{}, err
	}
	deadline := time.Now().Add(o.RetryFor)
	for {
		res, err := getOnce(ctx, client, o)
		if err == nil || time.Now().After(deadline) {
			return res, err
		}
		select {
		case <-ctx.Done():
			return res, errors.Join(err, ctx.Err())
		case <-time.After(500 * time.Millisecond):
		}
	}
}

func newClient(o GetOptions) (*http.Client, error) {
	timeout := o.Timeout
	if timeout == 0 {
		timeout = 5 * time.Second
	}
	tr, err := newTransport(o.CAFile, false)
	if err != nil {
		return nil, err
	}
	return &http.Client{Transport: tr, Timeout: timeout}, nil
}

// newTransport returns a transport without proxy that trusts only the CA in
// caFile when it is set, and does not verify certificates when insecure.
func newTransport(caFile string, insecure bool) (*http.Transport, error) {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.Proxy = nil
	if caFile != "" {
		pem, err := os.ReadFile(caFile)
		if err != nil {
			return nil, fmt.Errorf("read CA file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("no certificate in CA file %q", caFile)
		}
		tr.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	}
	if insecure {
		tr.TLSClientConfig = &tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS12}
	}
	return tr, nil
}

func getOnce(ctx context.Context, client *http.Client, o GetOptions) (Result, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, o.URL, nil)
	if err != nil {
		return Result{}, fmt.Errorf("build request: %w", err)
	}
	if o.TokenFile != "" {
		token, err := os.ReadFile(o.TokenFile)
		if err != nil {
			return Result{}, fmt.Errorf("read token file: %w", err)
		}
		req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(token)))
	}
	resp, err := client.Do(req)
	if err != nil {
		return Result{}, fmt.Errorf("get %s: %w", o.URL, err)
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	res := Result{Status: resp.StatusCode, Body: string(body)}
	if err != nil {
		return res, fmt.Errorf("read body of %s: %w", o.URL, err)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return res, fmt.Errorf("get %s: %w %d", o.URL, ErrStatus, resp.StatusCode)
	}
	return res, nil
}
