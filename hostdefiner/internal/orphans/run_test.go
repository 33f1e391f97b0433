package orphans

import (
	"bytes"
	"crypto/tls"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/klog/v2/ktesting"

	"hostpath.dev/api/managerapi"
	"hostpath.dev/api/managerapi/trust/trusttest"
	"hostpath.dev/api/runtime/component/componenttest"
)

// testManager serves, over TLS with a certificate for node signed by ca, a
// manager whose pool default holds dirs, to callers with one of tokens.
func testManager(t *testing.T, ca *trusttest.CA, node string, tokens []string, dirs ...managerapi.Volume) (host string, port int) {
	t.Helper()
	mux := http.NewServeMux()
	reply := func(w http.ResponseWriter, code int, v any) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(code)
		_ = json.NewEncoder(w).Encode(v)
	}
	mux.HandleFunc("GET /v1/host", func(w http.ResponseWriter, _ *http.Request) {
		reply(w, http.StatusOK, managerapi.Host{NodeName: node, Pools: []managerapi.Pool{{Name: "default", Path: "/var/hpvolumes"}}})
	})
	mux.HandleFunc("GET /v1/pools/default/volumes", func(w http.ResponseWriter, _ *http.Request) {
		reply(w, http.StatusOK, managerapi.VolumeList{Items: dirs})
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		reply(w, http.StatusNotFound, managerapi.Status{Reason: managerapi.ReasonNotFound, Message: r.URL.Path + " not found"})
	})
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		for _, tok := range tokens {
			if r.Header.Get("Authorization") == "Bearer "+tok {
				mux.ServeHTTP(w, r)
				return
			}
		}
		reply(w, http.StatusUnauthorized, managerapi.Status{Reason: managerapi.ReasonUnauthorized, Message: "token rejected"})
	}))
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{ca.ServerCert(t, managerapi.ServerName(node))}}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	h, p, err := net.SplitHostPort(srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	port, err = strconv.Atoi(p)
	if err != nil {
		t.Fatal(err)
	}
	return h, port
}

// TestRunTLS runs the command's real client path: a TokenRequest (or a
// token file), the CA bundle from its ConfigMap, the manager pod's IP and
// port, and a manager served over TLS by httptest.
func TestRunTLS(t *testing.T) {
	ca := trusttest.NewCA(t, "hostpath-manager-ca")
	other := trusttest.NewCA(t, "another CA")
	const node = "node-1"
	host, port := testManager(t, ca, node, []string{"requested-token", "file-token"}, vol("dir-old", "pv-old"))
	tokenFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokenFile, []byte("file-token\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	pv := nodePV(testProvisioner, "pv-a", node, "default", "dir-a")
	found := []string{
		"node-1 default dir-a missing pv-a: PV pv-a (claim ns/claim-pv-a), node mode",
		"node-1 default dir-old orphan -: owner pv-old (no such PV), ownedSince 2026-11-23T05:41:03Z",
	}
	tests := []struct {
		name string
		// args are the flags; the manager port is added.
		args      []string
		bundle    []byte
		ready     bool
		token     string
		want      []string
		wantToken string
		wantFound bool
	}{{
		name: "TokenRequest", bundle: ca.PEM(), ready: true, token: "requested-token",
		want: found, wantFound: true,
		wantToken: "a TokenRequest for service account hostpath-system/hostpath-orphans (audience hostpath.dev/manager, 10m0s)",
	}, {
		name: "token file", args: []string{"--token-file=" + tokenFile}, bundle: ca.PEM(), ready: true,
		want: found, wantFound: true, wantToken: "the file " + tokenFile,
	}, {
		name: "exit zero", args: []string{"--exit-zero", "--service-account=other/reader"}, bundle: ca.PEM(), ready: true, token: "requested-token",
		want: found, wantFound: false,
		wantToken: "a TokenRequest for service account other/reader (audience hostpath.dev/manager, 10m0s)",
	}, {
		name: "manager address of a pod not Ready", args: []string{"--manager-address=node-1=" + net.JoinHostPort(host, "PORT")},
		bundle: ca.PEM(), token: "requested-token", want: found, wantFound: true,
	}, {
		name: "token refused", bundle: ca.PEM(), ready: true, token: "stale-token", wantFound: true,
		want: []string{"node-1 - - unreachable -: manager at " + host + ":PORT: GET /v1/host: manager answered 401 Unauthorized: token rejected"},
	}, {
		name: "certificate of another CA", bundle: other.PEM(), ready: true, token: "requested-token", wantFound: true,
		want: []string{"node-1 - - unreachable -: manager at " + host + ":PORT: GET /v1/host: Get \"https://" + host + ":PORT/v1/host\": " +
			"verify the manager certificate for node-1.manager.hostpath.dev: x509: certificate signed by unknown authority"},
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, ctx := ktesting.NewTestContext(t)
			p := strconv.Itoa(port)
			bundle := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: DefaultNamespace, Name: managerapi.CABundleConfigMap},
				Data: map[string]string{managerapi.CABundleKey: string(tc.bundle)}}
			kube := fake.NewClientset(bundle, managerPod("manager-1", node, host, tc.ready), &pv)
			kube.PrependReactor("create", "serviceaccounts", func(a k8stesting.Action) (bool, runtime.Object, error) {
				tr, _ := a.(k8stesting.CreateAction).GetObject().(*authenticationv1.TokenRequest)
				if a.GetSubresource() != "token" || tr == nil || strings.Join(tr.Spec.Audiences, ",") != managerapi.TokenAudience ||
					tr.Spec.ExpirationSeconds == nil || *tr.Spec.ExpirationSeconds != 600 {
					t.Errorf("Unexpected token request %s %v", a.GetSubresource(), tr)
				}
				return true, &authenticationv1.TokenRequest{Status: authenticationv1.TokenRequestStatus{Token: tc.token}}, nil
			})
			o := NewOptions()
			args := []string{"--manager-port=" + p, "-o", "json"}
			for _, a := range tc.args {
				args = append(args, strings.ReplaceAll(a, "PORT", p))
			}
			if err := componenttest.Validate(t, o, args...); err != nil {
				t.Fatal(err)
			}
			var out bytes.Buffer
			gotFound, err := o.run(ctx, kube, &out)
			if err != nil {
				t.Fatalf("run() = %v", err)
			}
			var r Report
			if err := json.Unmarshal(out.Bytes(), &r); err != nil {
				t.Fatalf("Output is not a JSON report: %v\n%s", err, out.String())
			}
			var want []string
			for _, w := range tc.want {
				want = append(want, strings.ReplaceAll(w, "PORT", p))
			}
			checkLines(t, r.Findings, want)
			if gotFound != tc.wantFound {
				t.Errorf("run() found = %v, want %v", gotFound, tc.wantFound)
			}
			if tc.wantToken != "" && r.Token != tc.wantToken {
				t.Errorf("Token = %q, want %q", r.Token, tc.wantToken)
			}
		})
	}
}

// TestRunAPIErrors: what the API server refuses is an error (exit 2), not
// a finding.
func TestRunAPIErrors(t *testing.T) {
	ca := trusttest.NewCA(t, "hostpath-manager-ca")
	bundle := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: DefaultNamespace, Name: managerapi.CABundleConfigMap},
		Data: map[string]string{managerapi.CABundleKey: string(ca.PEM())}}
	tests := []struct {
		name    string
		objects []runtime.Object
		args    []string
		want    string
	}{
		{name: "no CA bundle", args: []string{"--token-file=/dev/null"}, want: `get the managers' CA bundle: configmaps "hostpath-manager-ca" not found`},
		{name: "empty CA bundle", args: []string{"--token-file=/dev/null"}, objects: []runtime.Object{&corev1.ConfigMap{
			ObjectMeta: bundle.ObjectMeta}}, want: "ConfigMap hostpath-system/hostpath-manager-ca, key ca.crt: CA bundle: no PEM certificate"},
		{name: "no token", objects: []runtime.Object{bundle}, want: "request a token for service account hostpath-system/hostpath-orphans (or pass --token-file): refused"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, ctx := ktesting.NewTestContext(t)
			kube := fake.NewClientset(tc.objects...)
			kube.PrependReactor("create", "serviceaccounts", func(k8stesting.Action) (bool, runtime.Object, error) {
				return true, nil, errRefusedByAPI
			})
			o := NewOptions()
			if err := componenttest.Validate(t, o, tc.args...); err != nil {
				t.Fatal(err)
			}
			var out bytes.Buffer
			if _, err := o.run(ctx, kube, &out); err == nil || err.Error() != tc.want {
				t.Errorf("run() = %v, want %q", err, tc.want)
			}
			if out.Len() > 0 {
				t.Errorf("Printed %q on an error", out.String())
			}
		})
	}
}
