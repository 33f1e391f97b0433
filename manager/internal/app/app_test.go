package app

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
	authnv1 "k8s.io/api/authentication/v1"
	authzv1 "k8s.io/api/authorization/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/klog/v2/ktesting"

	"hostpath.dev/manager/pkg/client"
)

func TestAddFlags(t *testing.T) {
	t.Setenv(EnvNodeName, "from-env")
	o := NewOptions()
	fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
	o.AddFlags(fs)
	if err := fs.Parse([]string{"--pool=fast=/mnt/fast", "--pool", "slow=/mnt/slow", "--max-body-bytes=10", "--authz-denied-cache-ttl=3s", "--insecure-skip-auth",
		"--token-audience=other", "--max-in-flight-per-address=3", "--token-reviews-per-address-qps=0.5", "--token-reviews-per-address-burst=4",
		"--pool-root=/var/hppools"}); err != nil {
		t.Fatal(err)
	}
	if o.NodeName != "from-env" {
		t.Errorf("NodeName = %q, want the $%s value", o.NodeName, EnvNodeName)
	}
	if strings.Join(o.Pools, ",") != "fast=/mnt/fast,slow=/mnt/slow" {
		t.Errorf("Pools = %v: the flag must replace the default", o.Pools)
	}
	if o.MaxBodyBytes != 10 || o.Auth.DeniedTTL != 3*time.Second || !o.InsecureSkipAuth || o.Auth.Audience != "other" ||
		o.Limits.MaxInFlight != 3 || o.Limits.ReviewQPS != 0.5 || o.Limits.ReviewBurst != 4 || o.PoolRoot != "/var/hppools" {
		t.Errorf("options = %+v", o)
	}
	fs.VisitAll(func(f *pflag.Flag) {
		if !strings.HasSuffix(f.Usage, ".") || strings.ToUpper(f.Usage[:1]) != f.Usage[:1] {
			t.Errorf("--%s help is not a sentence: %q", f.Name, f.Usage)
		}
	})
}

func TestValidate(t *testing.T) {
	for _, tc := range []struct {
		desc   string
		modify func(o *Options)
		want   string // "" means valid
	}{
		{desc: "defaults with a node name", modify: func(o *Options) {}},
		{desc: "no node name", modify: func(o *Options) { o.NodeName = "" }, want: "--node-name"},
		{desc: "no pool", modify: func(o *Options) { o.Pools = nil }, want: "at least one pool"},
		{desc: "pool without path", modify: func(o *Options) { o.Pools = []string{"default"} }, want: "NAME=PATH"},
		{desc: "bad pool name", modify: func(o *Options) { o.Pools = []string{"My_Pool=/x"} }, want: "DNS label"},
		{desc: "duplicate pool", modify: func(o *Options) { o.Pools = []string{"a=/x", "a=/y"} }, want: "twice"},
		{desc: "bad address", modify: func(o *Options) { o.ListenAddress = "8080" }, want: "--listen-address"},
		{desc: "zero body limit", modify: func(o *Options) { o.MaxBodyBytes = 0 }, want: "--max-body-bytes"},
		{desc: "zero timeout", modify: func(o *Options) { o.WriteTimeout = 0 }, want: "--write-timeout"},
		{desc: "negative TTL", modify: func(o *Options) { o.Auth.DeniedTTL = -1 }, want: "--authz-denied-cache-ttl"},
		{desc: "zero cache", modify: func(o *Options) { o.Auth.CacheSize = 0 }, want: "--auth-cache-size"},
		{desc: "zero QPS", modify: func(o *Options) { o.KubeAPIQPS = 0 }, want: "--kube-api-qps"},
		{desc: "no audience", modify: func(o *Options) { o.Auth.Audience = "" }, want: "--token-audience"},
		{desc: "zero in flight", modify: func(o *Options) { o.Limits.MaxInFlight = 0 }, want: "--max-in-flight-per-address"},
		{desc: "zero review QPS", modify: func(o *Options) { o.Limits.ReviewQPS = 0 }, want: "--token-reviews-per-address-qps"},
		{desc: "zero review burst", modify: func(o *Options) { o.Limits.ReviewBurst = 0 }, want: "--token-reviews-per-address-burst"},
		{desc: "no state dir", modify: func(o *Options) { o.StateDir = "" }, want: "--state-dir"},
		{desc: "pool root beside the pools", modify: func(o *Options) { o.PoolRoot = "/var/hppools" }},
		{desc: "pool root is a pool", modify: func(o *Options) { o.PoolRoot = "/var/hpvolumes" }, want: "overlap"},
		{desc: "pool inside the pool root", modify: func(o *Options) { o.Pools, o.PoolRoot = []string{"fast=/var/hppools/fast"}, "/var/hppools" },
			want: "--pool, --pool-root: pool \"fast\" (/var/hppools/fast) and the pool root /var/hppools overlap"},
		{desc: "pool root inside a pool", modify: func(o *Options) { o.PoolRoot = "/var/hpvolumes/pools" }, want: "overlap"},
		{desc: "relative pool root", modify: func(o *Options) { o.PoolRoot = "hppools" }, want: "--pool-root"},
		{desc: "unclean pool root", modify: func(o *Options) { o.PoolRoot = "/var/hppools/" }, want: "absolute, clean"},
		{desc: "relative pool path", modify: func(o *Options) { o.Pools = []string{"a=hp"} }, want: "absolute, clean"},
		{desc: "overlapping pools", modify: func(o *Options) { o.Pools = []string{"a=/x", "b=/x/b"} }, want: "overlap"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			o := NewOptions()
			o.NodeName = "n"
			tc.modify(o)
			err := o.Validate()
			if tc.want == "" {
				if err != nil {
					t.Fatalf("Validate: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Validate error = %v, want one mentioning %q", err, tc.want)
			}
		})
	}
}

// decodeReview decodes a request body in whatever encoding client-go chose
// (protobuf or JSON).
func decodeReview(t *testing.T, r *http.Request, into runtime.Object) {
	t.Helper()
	body, err := io.ReadAll(r.Body)
	if err != nil {
		t.Errorf("read request: %v", err)
		return
	}
	if _, _, err := scheme.Codecs.UniversalDeserializer().Decode(body, nil, into); err != nil {
		t.Errorf("decode %s: %v", r.URL.Path, err)
	}
}

// fakeAPIServer answers TokenReviews like the API server, audiences
// included: token "good" is alice's for the manager's audience, "plain"
// alice's for the API server's own. SubjectAccessReviews: alice may get
// hosts, nothing else.
func fakeAPIServer(t *testing.T) string {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /apis/authentication.k8s.io/v1/tokenreviews", func(w http.ResponseWriter, r *http.Request) {
		var tr authnv1.TokenReview
		decodeReview(t, r, &tr)
		tr.APIVersion, tr.Kind = "authentication.k8s.io/v1", "TokenReview"
		issuedFor := map[string]string{"good": client.TokenAudience, "plain": "https://kubernetes.default.svc"}[tr.Spec.Token]
		switch {
		case issuedFor == "":
			tr.Status.Error = "invalid bearer token"
		case !slices.Contains(tr.Spec.Audiences, issuedFor):
			tr.Status.Error = fmt.Sprintf("token audiences [%q] is invalid for the target audiences %q", issuedFor, tr.Spec.Audiences)
		default:
			tr.Status = authnv1.TokenReviewStatus{Authenticated: true, Audiences: []string{issuedFor}, User: authnv1.UserInfo{Username: "alice"}}
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(&tr)
	})
	mux.HandleFunc("POST /apis/authorization.k8s.io/v1/subjectaccessreviews", func(w http.ResponseWriter, r *http.Request) {
		var sar authzv1.SubjectAccessReview
		decodeReview(t, r, &sar)
		sar.APIVersion, sar.Kind = "authorization.k8s.io/v1", "SubjectAccessReview"
		ra := sar.Spec.ResourceAttributes
		sar.Status.Allowed = sar.Spec.User == "alice" && ra.Group == client.APIGroup && ra.Resource == "hosts" && ra.Verb == "get"
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(&sar)
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	data := `apiVersion: v1
kind: Config
clusters:
- name: fake
  cluster:
    server: ` + srv.URL + `
contexts:
- name: fake
  context:
    cluster: fake
    user: fake
users:
- name: fake
  user: {}
current-context: fake
`
	if err := os.WriteFile(kubeconfig, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
	return kubeconfig
}

// testOptions are valid Options for a temporary directory; with a fake API
// server unless insecure.
func testOptions(t *testing.T, insecure bool) *Options {
	dir := t.TempDir()
	bootID := filepath.Join(dir, "boot_id")
	if err := os.WriteFile(bootID, []byte("b\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	o := NewOptions()
	o.NodeName = "node-a"
	o.Pools = []string{"default=" + filepath.Join(dir, "pool")}
	o.StateDir = filepath.Join(dir, "state")
	o.BootIDFile = bootID
	o.MachineIDFile = ""
	o.InsecureSkipAuth = insecure
	if !insecure {
		o.Kubeconfig = fakeAPIServer(t)
	}
	return o
}

// startServe completes the options on a local port and runs the Config
// until the test ends; it returns the manager's URL.
func startServe(t *testing.T, o *Options) string {
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	if err := o.Validate(); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := o.completeOn(ctx, ln)
	if err != nil {
		ln.Close()
		cancel()
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cfg.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run returned %v after shutdown", err)
		}
	})
	return "http://" + ln.Addr().String()
}

func TestServe(t *testing.T) {
	for _, tc := range []struct {
		desc      string
		insecure  bool
		token     string
		wantHost  client.Reason // "": GET /v1/host succeeds
		wantInMsg string
		wantPut   client.Reason
	}{
		{desc: "authorised for get only", token: "good", wantPut: client.ReasonForbidden},
		{desc: "no token", token: "", wantHost: client.ReasonUnauthorized, wantPut: client.ReasonUnauthorized},
		{desc: "rejected token", token: "forged", wantHost: client.ReasonUnauthorized, wantPut: client.ReasonUnauthorized},
		{desc: "API server token", token: "plain", wantHost: client.ReasonUnauthorized, wantPut: client.ReasonUnauthorized,
			wantInMsg: "kubectl create token SA --audience hostpath.dev/manager"},
		{desc: "insecure skips auth", insecure: true, token: ""},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			_, ctx := ktesting.NewTestContext(t)
			base := startServe(t, testOptions(t, tc.insecure))
			opts := []client.Option{}
			if tc.token != "" {
				opts = append(opts, client.WithToken(client.StaticToken(tc.token)))
			}
			c, err := client.New(base, opts...)
			if err != nil {
				t.Fatal(err)
			}
			h, err := c.Host(ctx)
			if client.ReasonOf(err) != tc.wantHost {
				t.Fatalf("Host: %v, want reason %q", err, tc.wantHost)
			}
			if err == nil && (h.NodeName != "node-a" || h.HostID == "") {
				t.Errorf("Host = %+v", h)
			}
			if err != nil && !strings.Contains(err.Error(), tc.wantInMsg) {
				t.Errorf("Host error %q does not contain %q", err, tc.wantInMsg)
			}
			if _, err := c.PreparePool(ctx, "default"); client.ReasonOf(err) != tc.wantPut {
				t.Errorf("PreparePool error = %v, want reason %q", err, tc.wantPut)
			}
		})
	}
}

// TestServeLimitsTokenReviews: the per-address limits are wired: past the
// burst, a new token gets 429 instead of a TokenReview.
func TestServeLimitsTokenReviews(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	o := testOptions(t, false)
	o.Limits.ReviewQPS, o.Limits.ReviewBurst = 0.001, 1
	base := startServe(t, o)
	for i, want := range []client.Reason{client.ReasonUnauthorized, client.ReasonTooManyRequests} {
		c, err := client.New(base, client.WithToken(client.StaticToken(fmt.Sprintf("junk-%d", i))))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Host(ctx); client.ReasonOf(err) != want {
			t.Errorf("new token %d: %v, want reason %s", i, err, want)
		}
	}
}

func TestRunReportsListenErrors(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	o := NewOptions()
	o.ListenAddress = "198.18.255.254:bad"
	if err := o.Run(ctx); err == nil || !strings.Contains(err.Error(), "listen") {
		t.Errorf("Run error = %v", err)
	}
}

// TestCompleteNeedsValidatedOptions: Complete builds on the pools Validate
// parsed, so it refuses options that did not pass Validate.
func TestCompleteNeedsValidatedOptions(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	o := testOptions(t, true)
	o.ListenAddress = "127.0.0.1:0"
	if _, err := o.Complete(ctx); err == nil || !strings.Contains(err.Error(), "validated") {
		t.Errorf("Complete before Validate: %v", err)
	}
}

// TestServePoolRoot: --pool-root is wired to the Store: a pool that --pool
// does not name is prepared in it and served.
func TestServePoolRoot(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	o := testOptions(t, true)
	o.PoolRoot = filepath.Join(filepath.Dir(o.StateDir), "pools")
	c, err := client.New(startServe(t, o))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.ListVolumes(ctx, "fast"); client.ReasonOf(err) != client.ReasonNotFound {
		t.Errorf("ListVolumes before PreparePool: %v, want NotFound", err)
	}
	p, err := c.PreparePool(ctx, "fast")
	if err != nil || p.Path != filepath.Join(o.PoolRoot, "fast") {
		t.Fatalf("PreparePool = %+v, %v", p, err)
	}
	if _, err := c.CreateVolume(ctx, "fast", "v1", client.CreateVolumeRequest{Owner: "pv-a"}); err != nil {
		t.Errorf("CreateVolume: %v", err)
	}
}
