package app

import (
	"context"
	"crypto/tls"
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
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/klog/v2/ktesting"
	"k8s.io/utils/clock"

	"hostpath.dev/api/managerapi"
	"hostpath.dev/manager/internal/auth"
	"hostpath.dev/manager/internal/certs"
	"hostpath.dev/manager/internal/certs/certstest"
	"hostpath.dev/manager/internal/kube"
	"hostpath.dev/manager/internal/selinux"
)

func TestAddFlags(t *testing.T) {
	t.Setenv(EnvNodeName, "from-env")
	t.Setenv(EnvPodNamespace, "ns-from-env")
	o := NewOptions()
	if o.Namespace != "ns-from-env" {
		t.Errorf("Namespace = %q, want the $%s value", o.Namespace, EnvPodNamespace)
	}
	fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
	o.AddFlags(fs)
	if err := fs.Parse([]string{"--pool=fast=/mnt/fast", "--pool", "slow=/mnt/slow", "--max-body-bytes=10", "--authz-denied-cache-ttl=3s", "--insecure-skip-auth",
		"--token-audience=other", "--max-in-flight-per-address=3", "--reviews-per-address-qps=0.5", "--token-reviews-per-address-burst=4", "--reviews-per-user-qps=2", "--reviews-per-user-burst=3", "--reviews-strangers-qps=1.5", "--reviews-strangers-burst=6",
		"--pool-root=/var/hppools", "--health-address=:9091", "--tls-dir=/run/tls", "--certificate-lifetime=1h",
		"--selinux=on", "--selinux-context=system_u:object_r:svirt_sandbox_file_t:s0", "--namespace=hostpath"}); err != nil {
		t.Fatal(err)
	}
	if o.NodeName != "from-env" {
		t.Errorf("NodeName = %q, want the $%s value", o.NodeName, EnvNodeName)
	}
	if strings.Join(o.Pools, ",") != "fast=/mnt/fast,slow=/mnt/slow" {
		t.Errorf("Pools = %v: the flag must replace the default", o.Pools)
	}
	if o.MaxBodyBytes != 10 || o.Auth.DeniedTTL != 3*time.Second || !o.InsecureSkipAuth || o.Auth.Audience != "other" ||
		o.Limits.MaxInFlight != 3 || o.Limits.PerAddressQPS != 0.5 || o.Limits.PerAddressBurst != 4 || o.Limits.PerUserQPS != 2 || o.Limits.PerUserBurst != 3 || o.Limits.StrangersQPS != 1.5 || o.Limits.StrangersBurst != 6 || o.PoolRoot != "/var/hppools" ||
		o.HealthAddress != ":9091" || o.tlsDir() != "/run/tls" || o.CertificateLifetime != time.Hour || o.ListenAddress != ":8443" ||
		o.SELinux != "on" || o.SELinuxContext != "system_u:object_r:svirt_sandbox_file_t:s0" || o.Namespace != "hostpath" {
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
		{desc: "namespace", modify: func(o *Options) { o.Namespace = "hostpath-system" }},
		{desc: "bad namespace", modify: func(o *Options) { o.Namespace = "Hostpath" }, want: "--namespace \"Hostpath\": not a namespace name"},
		{desc: "no pool", modify: func(o *Options) { o.Pools = nil }, want: "at least one pool"},
		{desc: "pool without path", modify: func(o *Options) { o.Pools = []string{"default"} }, want: "NAME=PATH"},
		{desc: "bad pool name", modify: func(o *Options) { o.Pools = []string{"My_Pool=/x"} }, want: "DNS label"},
		{desc: "duplicate pool", modify: func(o *Options) { o.Pools = []string{"a=/x", "a=/y"} }, want: "twice"},
		{desc: "bad address", modify: func(o *Options) { o.ListenAddress = "8443" }, want: "--listen-address"},
		{desc: "bad health address", modify: func(o *Options) { o.HealthAddress = "8081" }, want: "--health-address"},
		{desc: "one address for both", modify: func(o *Options) { o.HealthAddress = ":8443" }, want: "--listen-address and --health-address must differ"},
		{desc: "short lifetime", modify: func(o *Options) { o.CertificateLifetime = 9 * time.Minute }, want: "--certificate-lifetime must be at least 10m0s"},
		{desc: "zero body limit", modify: func(o *Options) { o.MaxBodyBytes = 0 }, want: "--max-body-bytes"},
		{desc: "zero timeout", modify: func(o *Options) { o.WriteTimeout = 0 }, want: "--write-timeout"},
		{desc: "negative TTL", modify: func(o *Options) { o.Auth.DeniedTTL = -1 }, want: "--authz-denied-cache-ttl"},
		{desc: "zero cache", modify: func(o *Options) { o.Auth.CacheSize = 0 }, want: "--auth-cache-size"},
		{desc: "zero QPS", modify: func(o *Options) { o.KubeAPIQPS = 0 }, want: "--kube-api-qps"},
		{desc: "no audience", modify: func(o *Options) { o.Auth.Audience = "" }, want: "--token-audience"},
		{desc: "zero in flight", modify: func(o *Options) { o.Limits.MaxInFlight = 0 }, want: "--max-in-flight-per-address"},
		{desc: "zero review QPS", modify: func(o *Options) { o.Limits.PerAddressQPS = 0 }, want: "--reviews-per-address-qps"},
		{desc: "zero review burst", modify: func(o *Options) { o.Limits.PerAddressBurst = 0 }, want: "--reviews-per-address-burst"},
		{desc: "zero user QPS", modify: func(o *Options) { o.Limits.PerUserQPS = 0 }, want: "--reviews-per-user-qps"},
		{desc: "zero strangers burst", modify: func(o *Options) { o.Limits.StrangersBurst = 0 }, want: "--reviews-strangers-burst"},
		{desc: "strangers take all the API client's QPS", modify: func(o *Options) { o.Limits.StrangersQPS = float64(o.KubeAPIQPS) }, want: "must be below --kube-api-qps"},
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
		{desc: "SELinux off", modify: func(o *Options) { o.SELinux = "off" }},
		{desc: "bad SELinux mode", modify: func(o *Options) { o.SELinux = "enforcing" }, want: "--selinux: SELinux mode \"enforcing\": want auto, on or off"},
		{desc: "bad SELinux context", modify: func(o *Options) { o.SELinuxContext = "container_file_t" }, want: "--selinux-context: SELinux context"},
		{desc: "SELinux context with a space", modify: func(o *Options) { o.SELinuxContext = "system_u:object_r:container_file_t:s0 " }, want: "--selinux-context"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			o := NewOptions()
			o.NodeName, o.Namespace = "n", ""
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

// clientsetAPI is the manager's API client made of the typed clients of
// signer's fake clientset, with the ConfigMaps of namespace.
func clientsetAPI(signer *certstest.Signer, namespace string) *kubeAPI {
	cs := signer.Clientset
	return &kubeAPI{
		tokens:     cs.AuthenticationV1().TokenReviews(),
		sars:       cs.AuthorizationV1().SubjectAccessReviews(),
		pods:       func(ns string) auth.PodGetter { return cs.CoreV1().Pods(ns) },
		csrs:       signer.CSRs(),
		configMaps: fakeConfigMaps{cs.CoreV1().ConfigMaps(namespace)},
		pvs:        cs.CoreV1().PersistentVolumes(),
		claims:     func(ns string) kube.ClaimGetter { return cs.CoreV1().PersistentVolumeClaims(ns) },
		classes:    cs.StorageV1().StorageClasses(),
	}
}

// fakeConfigMaps is a fake clientset's ConfigMaps client that, like the
// fake clientset, declines client-go's WatchListClient streaming, which the
// fake's watch does not do.
type fakeConfigMaps struct{ typedcorev1.ConfigMapInterface }

// IsWatchListSemanticsUnSupported is true: list, then watch.
func (fakeConfigMaps) IsWatchListSemanticsUnSupported() bool { return true }

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
		issuedFor := map[string]string{"good": managerapi.TokenAudience, "plain": "https://kubernetes.default.svc"}[tr.Spec.Token]
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
		sar.Status.Allowed = sar.Spec.User == "alice" && ra.Group == managerapi.APIGroup && ra.Resource == "hosts" && ra.Verb == "get"
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

// testCA is the CA of the stored serving certificates testOptions writes.
var testCA = func() *certstest.CA {
	ca, err := certstest.NewCA("hostpath test CA")
	if err != nil {
		panic(err)
	}
	return ca
}()

// testOptions are valid Options for a temporary directory; unless
// insecure, with a fake API server for the reviews and a stored serving
// certificate of testCA (so no CSR is needed).
func testOptions(t *testing.T, insecure bool) *Options {
	dir := t.TempDir()
	bootID := filepath.Join(dir, "boot_id")
	if err := os.WriteFile(bootID, []byte("b\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	o := NewOptions()
	o.NodeName, o.Namespace = "node-a", ""
	o.Pools = []string{"default=" + filepath.Join(dir, "pool")}
	o.StateDir = filepath.Join(dir, "state")
	o.BootIDFile = bootID
	o.MachineIDFile = ""
	o.InsecureSkipAuth = insecure
	if !insecure {
		o.Kubeconfig = fakeAPIServer(t)
		data, err := testCA.ServingPEM(o.NodeName, time.Now().Add(-time.Minute), time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(o.tlsDir(), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(o.tlsDir(), certs.FileName), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return o
}

// served is a manager a test runs.
type served struct {
	cfg *Config
	// api and health are the base URLs of /v1 (https unless insecure)
	// and of the probes.
	api, health string
}

// startServe completes the options on local ports and runs the Config
// until the test ends.
func startServe(t *testing.T, o *Options) *served {
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	if err := o.Validate(); err != nil {
		t.Fatal(err)
	}
	var lns [2]net.Listener
	for i := range lns {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ln.Close() })
		lns[i] = ln
	}
	cfg, err := o.completeOn(ctx, lns[0], lns[1])
	if err != nil {
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
	scheme := "https"
	if o.InsecureSkipAuth {
		scheme = "http"
	}
	return &served{cfg: cfg, api: scheme + "://" + lns[0].Addr().String(), health: "http://" + lns[1].Addr().String()}
}

// tlsClient is an HTTP client that trusts testCA for the manager of
// node-a.
func tlsClient() *http.Client {
	return &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: testCA.Pool(), ServerName: managerapi.ServerName("node-a")}}}
}

// client returns a manager client of s with token ("" for none).
func (s *served) client(t *testing.T, token string) *managerapi.Client {
	t.Helper()
	opts := []managerapi.Option{managerapi.WithHTTPClient(tlsClient())}
	if token != "" {
		opts = append(opts, managerapi.WithToken(managerapi.StaticToken(token)))
	}
	c, err := managerapi.New(s.api, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// get answers GET url with hc: status code and body.
func get(t *testing.T, hc *http.Client, url string) (int, string, error) {
	t.Helper()
	resp, err := hc.Get(url)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body), err
}

func TestServe(t *testing.T) {
	for _, tc := range []struct {
		desc      string
		insecure  bool
		token     string
		wantHost  managerapi.Reason // "": GET /v1/host succeeds
		wantInMsg string
		wantPut   managerapi.Reason
	}{
		{desc: "authorised for get only", token: "good", wantPut: managerapi.ReasonForbidden},
		{desc: "no token", token: "", wantHost: managerapi.ReasonUnauthorized, wantPut: managerapi.ReasonUnauthorized},
		{desc: "rejected token", token: "forged", wantHost: managerapi.ReasonUnauthorized, wantPut: managerapi.ReasonUnauthorized},
		{desc: "API server token", token: "plain", wantHost: managerapi.ReasonUnauthorized, wantPut: managerapi.ReasonUnauthorized,
			wantInMsg: "kubectl create token SA --audience hostpath.dev/manager"},
		{desc: "insecure skips auth", insecure: true, token: ""},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			_, ctx := ktesting.NewTestContext(t)
			s := startServe(t, testOptions(t, tc.insecure))
			if !tc.insecure {
				<-s.cfg.certs.Obtained() // the stored certificate, at Start
			}
			c := s.client(t, tc.token)
			h, err := c.Host(ctx)
			if managerapi.ReasonOf(err) != tc.wantHost {
				t.Fatalf("Host: %v, want reason %q", err, tc.wantHost)
			}
			if err == nil && (h.NodeName != "node-a" || h.HostID == "") {
				t.Errorf("Host = %+v", h)
			}
			if err == nil && (h.Certificate == nil) != tc.insecure {
				t.Errorf("Host certificate = %+v", h.Certificate)
			}
			if err != nil && !strings.Contains(err.Error(), tc.wantInMsg) {
				t.Errorf("Host error %q does not contain %q", err, tc.wantInMsg)
			}
			if _, err := c.PreparePool(ctx, "default"); managerapi.ReasonOf(err) != tc.wantPut {
				t.Errorf("PreparePool error = %v, want reason %q", err, tc.wantPut)
			}
		})
	}
}

// TestServeTLS: /v1 is served over TLS (1.3 when the client has it, 1.2 at
// least) with the certificate for the node's server name; plain HTTP on
// that port gets no /v1, nor does the health port, which serves the
// probes and metrics.
func TestServeTLS(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	s := startServe(t, testOptions(t, false))
	<-s.cfg.certs.Obtained()
	h, err := s.client(t, "good").Host(ctx)
	if err != nil || h.Certificate == nil || h.Certificate.Issuer != "hostpath test CA" || h.Certificate.RenewAfter == nil {
		t.Fatalf("Host = %+v, %v", h, err)
	}
	resp, err := tlsClient().Get(s.api + "/v1/host")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized || resp.TLS.Version != tls.VersionTLS13 {
		t.Errorf("GET /v1/host without token = %d over TLS %x, want 401 over TLS 1.3", resp.StatusCode, resp.TLS.Version)
	}
	plainAPI := "http://" + strings.TrimPrefix(s.api, "https://")
	if code, body, err := get(t, http.DefaultClient, plainAPI+"/v1/host"); err == nil && (code != http.StatusBadRequest || !strings.Contains(body, "HTTPS")) {
		t.Errorf("plain HTTP to the API port = %d %q", code, body)
	}
	for _, tc := range []struct {
		desc string
		cfg  *tls.Config
	}{
		{"another node's name", &tls.Config{RootCAs: testCA.Pool(), ServerName: managerapi.ServerName("node-b")}},
		{"another CA", &tls.Config{ServerName: managerapi.ServerName("node-a")}},
		{"TLS 1.1", &tls.Config{RootCAs: testCA.Pool(), ServerName: managerapi.ServerName("node-a"), MaxVersion: tls.VersionTLS11}},
	} {
		if _, _, err := get(t, &http.Client{Transport: &http.Transport{TLSClientConfig: tc.cfg}}, s.api+"/v1/host"); err == nil {
			t.Errorf("%s: the handshake succeeded", tc.desc)
		}
	}
	// /metrics is served only to callers allowed get on it (see the review
	// package); the probes stay open.
	for path, want := range map[string]int{"/v1/host": 404, "/healthz": 200, "/readyz": 200, "/metrics": 401} {
		if code, body, err := get(t, http.DefaultClient, s.health+path); err != nil || code != want {
			t.Errorf("health port GET %s = %d %.80q, %v; want %d", path, code, body, err, want)
		}
	}
}

// TestServeWaitsForCertificate: a new manager asks for its certificate
// with the API client it reviews tokens with; until the CSR is signed,
// /readyz is 503 and TLS handshakes fail; then both work.
func TestServeWaitsForCertificate(t *testing.T) {
	signer := certstest.NewSigner(testCA, clock.RealClock{})
	signer.SetMode(certstest.Hold)
	o := testOptions(t, true)
	o.InsecureSkipAuth, o.kube = false, clientsetAPI(signer, o.Namespace)
	s := startServe(t, o)
	var name string
	select {
	case name = <-signer.Watching():
	case <-time.After(30 * time.Second):
		t.Fatal("no CSR is awaited")
	}
	if code, body, _ := get(t, http.DefaultClient, s.health+"/readyz"); code != http.StatusServiceUnavailable || !strings.Contains(body, "no valid serving certificate") {
		t.Errorf("/readyz before the certificate = %d %q", code, body)
	}
	if _, _, err := get(t, tlsClient(), s.api+"/v1/host"); err == nil {
		t.Error("/v1 served before the certificate")
	}
	if err := signer.Approve(name); err != nil {
		t.Fatal(err)
	}
	select {
	case <-s.cfg.certs.Obtained():
	case <-time.After(30 * time.Second):
		t.Fatal("no certificate after approval")
	}
	if code, _, err := get(t, http.DefaultClient, s.health+"/readyz"); code != http.StatusOK {
		t.Errorf("/readyz with the certificate = %d, %v", code, err)
	}
	if code, _, err := get(t, tlsClient(), s.api+"/v1/host"); code != http.StatusUnauthorized {
		t.Errorf("GET /v1/host without token = %d, %v; want 401", code, err)
	}
	if _, err := os.Stat(filepath.Join(o.StateDir, "tls", certs.FileName)); err != nil {
		t.Errorf("certificate not stored in the state directory: %v", err)
	}
}

// TestServeRenewsUntrustedCertificate: with --namespace, the manager
// watches the CA bundle ConfigMap there; its stored certificate, of a CA
// the bundle does not hold (a reinstall), is served at start and replaced
// at once by one of the CA that signs now, which the callers trust.
func TestServeRenewsUntrustedCertificate(t *testing.T) {
	ca2, err := certstest.NewCA("second test CA")
	if err != nil {
		t.Fatal(err)
	}
	signer := certstest.NewSigner(ca2, clock.RealClock{})
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "hostpath-system", Name: managerapi.CABundleConfigMap}, Data: map[string]string{managerapi.CABundleKey: string(ca2.PEM)}}
	if err := signer.Clientset.Tracker().Add(cm); err != nil {
		t.Fatal(err)
	}
	o := testOptions(t, false)
	o.Namespace = "hostpath-system"
	o.kube = clientsetAPI(signer, o.Namespace)
	s := startServe(t, o)
	<-s.cfg.certs.Obtained() // the stored certificate, of testCA
	_, ctx := ktesting.NewTestContext(t)
	signedByCA2 := func(context.Context) (bool, error) {
		return s.cfg.certs.Current().Leaf.CheckSignatureFrom(ca2.Cert) == nil, nil
	}
	if err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 30*time.Second, true, signedByCA2); err != nil {
		t.Fatalf("still serving the certificate of %q, %d CSRs: %v", s.cfg.certs.Current().Leaf.Issuer.CommonName, signer.Created(), err)
	}
	trusting := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: ca2.Pool(), ServerName: managerapi.ServerName("node-a")}}}
	if code, _, err := get(t, trusting, s.api+"/v1/host"); code != http.StatusUnauthorized {
		t.Errorf("GET /v1/host with the bundle's CA = %d, %v; want 401 (no token)", code, err)
	}
	if n := signer.Created(); n != 1 {
		t.Errorf("%d CSRs, want 1", n)
	}
}

// TestServeLimitsTokenReviews: the per-address limits are wired: past the
// burst, a new token gets 429 instead of a TokenReview.
func TestServeLimitsTokenReviews(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	o := testOptions(t, false)
	o.Limits.PerAddressQPS, o.Limits.PerAddressBurst = 0.001, 1
	s := startServe(t, o)
	<-s.cfg.certs.Obtained()
	for i, want := range []managerapi.Reason{managerapi.ReasonUnauthorized, managerapi.ReasonTooManyRequests} {
		c := s.client(t, fmt.Sprintf("junk-%d", i))
		if _, err := c.Host(ctx); managerapi.ReasonOf(err) != want {
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
	// Loopback ports of its own: a process that holds the default health
	// port (a manager of the local cluster's fleet) must not decide.
	o.ListenAddress, o.HealthAddress = "127.0.0.1:0", "127.0.0.1:0"
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
	c := startServe(t, o).client(t, "")
	if _, err := c.ListVolumes(ctx, "fast"); managerapi.ReasonOf(err) != managerapi.ReasonPoolNotFound {
		t.Errorf("ListVolumes before PreparePool: %v, want PoolNotFound", err)
	}
	p, err := c.PreparePool(ctx, "fast")
	if err != nil || p.Path != filepath.Join(o.PoolRoot, "fast") {
		t.Fatalf("PreparePool = %+v, %v", p, err)
	}
	if _, err := c.CreateVolume(ctx, "fast", "v1", managerapi.CreateVolumeRequest{Owner: "pv-a"}); err != nil {
		t.Errorf("CreateVolume: %v", err)
	}
}

// TestSELinuxLabeler: --selinux picks the Store's Labeler, auto by the
// selinuxfs it finds, and says so in the log.
func TestSELinuxLabeler(t *testing.T) {
	withSELinux, without := t.TempDir(), t.TempDir()
	if err := os.WriteFile(filepath.Join(withSELinux, "enforce"), []byte("1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		mode, fs string
		want     bool
		log      string
	}{
		{"auto", withSELinux, true, "SELinux labelling on"},
		{"auto", without, false, "SELinux is not enabled (no selinuxfs at " + without + ")"},
		{"on", without, true, "SELinux labelling on"},
		{"off", withSELinux, false, "--selinux=off"},
	} {
		t.Run(tc.mode+" "+fmt.Sprint(tc.want), func(t *testing.T) {
			logger := ktesting.NewLogger(t, ktesting.NewConfig(ktesting.BufferLogs(true)))
			o := NewOptions()
			o.SELinux, o.selinuxFS = tc.mode, tc.fs
			l := o.selinuxLabeler(logger)
			if _, nop := l.(selinux.Nop); nop == tc.want {
				t.Errorf("labeler = %T, want labelling %t", l, tc.want)
			}
			if log := logger.GetSink().(ktesting.Underlier).GetBuffer().String(); !strings.Contains(log, tc.log) {
				t.Errorf("log %q does not mention %q", log, tc.log)
			}
		})
	}
	if o := NewOptions(); o.SELinux != "auto" || o.SELinuxContext != selinux.DefaultContext || o.selinuxFS != "/sys/fs/selinux" {
		t.Errorf("SELinux defaults: %q, %q, %q", o.SELinux, o.SELinuxContext, o.selinuxFS)
	}
}

// TestDefaults: the ports are the shared ones, and the TLS directory is in
// the state directory unless --tls-dir names one.
func TestDefaults(t *testing.T) {
	o := NewOptions()
	if o.ListenAddress != ":8443" || o.HealthAddress != ":8081" || o.CertificateLifetime != 24*time.Hour {
		t.Errorf("defaults: listen %q, health %q, lifetime %s", o.ListenAddress, o.HealthAddress, o.CertificateLifetime)
	}
	o.StateDir = "/var/lib/hostpath"
	if o.tlsDir() != "/var/lib/hostpath/tls" {
		t.Errorf("tlsDir = %q", o.tlsDir())
	}
}
