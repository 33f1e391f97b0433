package fleet

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"flag"
	"io"
	"math/big"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

// TestFlags checks the fleet's flags: their defaults, and what Complete
// makes of --provisioner-args.
func TestFlags(t *testing.T) {
	t.Setenv("KUBECONFIG", "/env/kubeconfig")
	parse := func(args ...string) (Flags, Options, error) {
		var f Flags
		var o Options
		fs := flag.NewFlagSet("run", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		f.AddFlags(fs, &o)
		if err := fs.Parse(args); err != nil {
			t.Fatal(err)
		}
		return f, o, f.Complete(&o)
	}
	f, o, err := parse()
	want := Options{
		Namespace: "hostpath-system", Prefix: "hostpath-fleet-", ProvisionerArgs: []string{},
		AddressPrefix: "198.18.250.", Device: "hpapi", ReadyTimeout: 2 * time.Minute, Workers: 8,
	}
	if err != nil || f.Kubeconfig != "/env/kubeconfig" || f.Out != "" || !reflect.DeepEqual(o, want) {
		t.Errorf("defaults: %+v, %+v, %v; want kubeconfig $KUBECONFIG, no out, %+v", f, o, err, want)
	}
	f, o, err = parse("--kubeconfig", "k", "--out", "r.json", "--dir", "/d", "--provisioner-args", `["--a=1","--b"]`, "--start-workers", "3")
	if err != nil || f.Kubeconfig != "k" || f.Out != "r.json" || o.Dir != "/d" || o.Workers != 3 || !reflect.DeepEqual(o.ProvisionerArgs, []string{"--a=1", "--b"}) {
		t.Errorf("set: %+v, %+v, %v", f, o, err)
	}
	if _, _, err := parse("--provisioner-args", "--a"); err == nil || !strings.HasPrefix(err.Error(), "--provisioner-args: ") {
		t.Errorf("provisioner arguments that are not JSON: %v", err)
	}
}

// TestClients checks that the fleet's API server and CA are the current
// context's cluster's, the CA read from its file when not inline.
func TestClients(t *testing.T) {
	dir := t.TempDir()
	kubeconfig, caData, caFile := filepath.Join(dir, "kubeconfig"), testCA(t, "a"), testCA(t, "b")
	f := Flags{Kubeconfig: kubeconfig}
	for _, tc := range []struct {
		current, server string
		ca              []byte
	}{
		{"a", "https://a:6443", caData},
		{"b", "https://b:6443", caFile},
	} {
		writeKubeconfig(t, kubeconfig, tc.current, caData, caFile)
		var o Options
		kube, hp, err := f.Clients(&o)
		if err != nil || kube == nil || hp == nil || o.Server != tc.server || string(o.CAData) != string(tc.ca) {
			t.Errorf("context %s: server %q, CA %q, %v; want %q and the CA of cluster %[1]s", tc.current, o.Server, o.CAData, err, tc.server)
		}
	}
	writeKubeconfig(t, kubeconfig, "c", caData, caFile)
	if _, _, err := f.Clients(&Options{}); err == nil {
		t.Errorf("Clients of a current context that is not there: %v", err)
	}
	if _, _, err := (&Flags{Kubeconfig: filepath.Join(dir, "none")}).Clients(&Options{}); err == nil {
		t.Error("Clients of a missing kubeconfig: no error")
	}
}

// writeKubeconfig writes to file a kubeconfig of two clusters, a (of CA
// caData, inline) and b (of CA caFile, in a file beside), and a context of
// each, named as its cluster; current is the current context.
func writeKubeconfig(t *testing.T, file, current string, caData, caFile []byte) {
	t.Helper()
	ca := file + ".ca.crt"
	if err := os.WriteFile(ca, caFile, 0o600); err != nil {
		t.Fatal(err)
	}
	text := `apiVersion: v1
kind: Config
clusters:
- name: a
  cluster: {server: "https://a:6443", certificate-authority-data: ` + base64.StdEncoding.EncodeToString(caData) + `}
- name: b
  cluster: {server: "https://b:6443", certificate-authority: ` + ca + `}
contexts:
- {name: a, context: {cluster: a, user: u}}
- {name: b, context: {cluster: b, user: u}}
users:
- {name: u, user: {token: t}}
current-context: ` + current + "\n"
	if err := os.WriteFile(file, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
}

// testCA returns a self-signed CA certificate, PEM-encoded, named name.
func testCA(t *testing.T, name string) []byte {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now(), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}
