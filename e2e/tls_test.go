package e2e

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"hostpath.dev/api/managerapi"
	"hostpath.dev/e2e/framework"
	"hostpath.dev/e2e/framework/localcluster"
)

// extraNodeName is the CSR extra the API server fills from a pod-bound token.
const extraNodeName = "authentication.kubernetes.io/node-name"

// servedCert connects to the manager at ip the way a careful caller of
// node's manager does (trusting only the bundle, wanting the node's name)
// and returns the certificate it serves.
func servedCert(ctx context.Context, t *testing.T, f *framework.Framework, ip, node string) (*x509.Certificate, error) {
	t.Helper()
	cfg, err := f.ManagerTLS(ctx, node)
	if err != nil {
		return nil, err
	}
	d := tls.Dialer{NetDialer: &net.Dialer{Timeout: 10 * time.Second}, Config: cfg}
	conn, err := d.DialContext(ctx, "tcp", net.JoinHostPort(ip, strconv.Itoa(managerapi.ServingPort)))
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	return conn.(*tls.Conn).ConnectionState().PeerCertificates[0], nil
}

// managerPodOn waits for the Ready manager pod of node.
func managerPodOn(ctx context.Context, t *testing.T, f *framework.Framework, node string) *corev1.Pod {
	t.Helper()
	return f.ReadyPodsByNode(ctx, t, framework.SystemNamespace, managerSelector, []string{node}, managerTimeout)[node]
}

// csrCleanerAge is how long kube-controller-manager surely keeps an
// issued CSR (its CSR cleaner deletes approved and issued ones after an
// hour), with a minute to spare for a certificate's backdated NotBefore.
const csrCleanerAge = 59 * time.Minute

// issuingCSR returns the approved CSR of signer managerapi.SignerName, made by
// node's manager, whose certificate is cert.
func issuingCSR(ctx context.Context, t *testing.T, f *framework.Framework, node string, cert *x509.Certificate) *certificatesv1.CertificateSigningRequest {
	t.Helper()
	c, n := findIssuingCSR(ctx, t, f, node, cert)
	if c == nil {
		t.Fatal(noIssuingCSR(node, cert, n))
	}
	return c
}

// noIssuingCSR says that no CSR among n of the signer issued node's cert.
func noIssuingCSR(node string, cert *x509.Certificate, n int) string {
	return fmt.Sprintf("No CSR of signer %s from the manager of %s issued the certificate with serial %s (%d CSRs of the signer)",
		managerapi.SignerName, node, cert.SerialNumber, n)
}

// findIssuingCSR returns the CSR that issuingCSR wants, or nil, and the
// number of CSRs of the signer.
func findIssuingCSR(ctx context.Context, t *testing.T, f *framework.Framework, node string, cert *x509.Certificate) (*certificatesv1.CertificateSigningRequest, int) {
	t.Helper()
	list, err := f.Client.CertificatesV1().CertificateSigningRequests().List(ctx, metav1.ListOptions{
		FieldSelector: "spec.signerName=" + managerapi.SignerName,
	})
	if err != nil {
		t.Fatal(err)
	}
	for i := range list.Items {
		c := &list.Items[i]
		if nodes := c.Spec.Extra[extraNodeName]; len(nodes) != 1 || nodes[0] != node {
			continue
		}
		block, _ := pem.Decode(c.Status.Certificate)
		if block == nil {
			continue
		}
		issued, err := x509.ParseCertificate(block.Bytes)
		if err != nil || issued.SerialNumber.Cmp(cert.SerialNumber) != 0 {
			continue
		}
		return c, len(list.Items)
	}
	return nil, len(list.Items)
}

// approvedBy checks that the host definer approved csr.
func approvedBy(t *testing.T, csr *certificatesv1.CertificateSigningRequest) {
	t.Helper()
	for _, c := range csr.Status.Conditions {
		if c.Type == certificatesv1.CertificateApproved && c.Status == corev1.ConditionTrue {
			if c.Reason != "HostpathManagerServing" {
				t.Errorf("CSR %s approved with reason %q, want HostpathManagerServing (the host definer)", csr.Name, c.Reason)
			}
			return
		}
	}
	t.Errorf("CSR %s is not approved: %+v", csr.Name, csr.Status.Conditions)
}

// TestManagerTLS: every manager serves HTTPS with a certificate for its
// node's name, issued through a CSR that the host definer approved; plain
// HTTP gets no /v1 answer; a client that trusts the bundle but reaches
// another node's manager, or a pod that is no manager, fails verification.
func TestManagerTLS(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	f := framework.Cluster()
	nodes := f.TwoRealNodes(ctx, t)
	pods := f.ReadyPodsByNode(ctx, t, framework.SystemNamespace, managerSelector, nodes, managerTimeout)
	for _, node := range nodes {
		cert, err := servedCert(ctx, t, f, pods[node].Status.PodIP, node)
		if err != nil {
			t.Fatalf("TLS to the manager of %s: %v", node, err)
		}
		if len(cert.DNSNames) != 1 || cert.DNSNames[0] != managerapi.ServerName(node) || len(cert.IPAddresses) != 0 {
			t.Errorf("Certificate of %s names %v %v, want only %s", node, cert.DNSNames, cert.IPAddresses, managerapi.ServerName(node))
		}
		// kube-controller-manager deletes an issued CSR after an hour
		// (its CSR cleaner): a manager that kept its certificate longer,
		// on a cluster up for more than an hour, may have none left to
		// show. A younger certificate must have its CSR;
		// TestManagerCertificateRenewal checks a fresh one's always.
		csr, n := findIssuingCSR(ctx, t, f, node, cert)
		if csr == nil {
			if time.Since(cert.NotBefore) <= csrCleanerAge {
				t.Fatal(noIssuingCSR(node, cert, n))
			}
			t.Logf("%s serves serial %s, valid until %s, issued at %s: no CSR of it among %d, past kube-controller-manager's cleanup", node, cert.SerialNumber,
				cert.NotAfter.Format(time.RFC3339), cert.NotBefore.Format(time.RFC3339), n)
			continue
		}
		approvedBy(t, csr)
		t.Logf("%s serves serial %s, valid until %s, from CSR %s", node, cert.SerialNumber, cert.NotAfter.Format(time.RFC3339), csr.Name)
	}

	ip := pods[nodes[0]].Status.PodIP
	for _, url := range []string{
		"http://" + net.JoinHostPort(ip, strconv.Itoa(managerapi.ServingPort)) + "/v1/host",
		"http://" + net.JoinHostPort(ip, strconv.Itoa(managerapi.HealthPort)) + "/v1/host",
	} {
		resp, err := http.Get(url)
		if err != nil {
			t.Logf("Plain GET %s: %v", url, err)
			continue
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK || strings.Contains(string(body), "hostID") {
			t.Errorf("Plain GET %s = %d %q, want no /v1 answer", url, resp.StatusCode, body)
		}
		t.Logf("Plain GET %s = %d", url, resp.StatusCode)
	}

	// Node 0's name at node 1's manager: a real manager, the wrong one.
	if _, err := servedCert(ctx, t, f, pods[nodes[1]].Status.PodIP, nodes[0]); err == nil || !strings.Contains(err.Error(), "certificate is valid for") {
		t.Errorf("TLS to %s's manager wanting %s: %v, want a verification error", nodes[1], managerapi.ServerName(nodes[0]), err)
	}
	// A pod IP that is not a manager's (a provisioner instance, on the port
	// the managers use): nothing there proves to be the manager.
	prov := f.ReadyPodsByNode(ctx, t, framework.SystemNamespace, provisionerSelector, nodes[:1], managerTimeout)[nodes[0]]
	if _, err := servedCert(ctx, t, f, prov.Status.PodIP, nodes[0]); err == nil {
		t.Errorf("TLS to the provisioner pod %s as if it were the manager of %s succeeded", prov.Name, nodes[0])
	}
}

// TestManagerCertificateRenewal: a restarted manager reuses its valid
// certificate; without it, it gets a new one through a new CSR; with short
// certificates (the host definer's --max-certificate-lifetime) the manager
// renews at 70% of their life while claims keep being provisioned on its
// node without a failure.
func TestManagerCertificateRenewal(t *testing.T) {
	ctx := t.Context()
	e := setupHostDefiner(ctx, t)
	node := e.nodes[1]
	tlsDir := e.f.MustNodeDir(t, node, filepath.Join(localcluster.StatePath, "tls"))
	serving := func() *x509.Certificate {
		t.Helper()
		var cert *x509.Certificate
		framework.WaitFor(ctx, t, managerTimeout, "the manager of "+node+" to serve TLS", func(ctx context.Context) (bool, error) {
			p := managerPodOn(ctx, t, e.f, node)
			c, err := servedCert(ctx, t, e.f, p.Status.PodIP, node)
			if err != nil {
				return false, err
			}
			cert = c
			return true, nil
		})
		return cert
	}
	restart := func() {
		t.Helper()
		old := managerPodOn(ctx, t, e.f, node)
		e.restartManager(ctx, t, node)
		framework.WaitFor(ctx, t, managerTimeout, "a new manager pod on "+node, func(ctx context.Context) (bool, error) {
			if p := managerPodOn(ctx, t, e.f, node); p.UID == old.UID {
				return false, errors.New("still the old pod")
			}
			return true, nil
		})
	}

	first := serving()
	restart()
	if again := serving(); again.SerialNumber.Cmp(first.SerialNumber) != 0 {
		t.Errorf("After a restart %s serves serial %s, want its stored %s", node, again.SerialNumber, first.SerialNumber)
	}

	if err := os.RemoveAll(tlsDir); err != nil {
		t.Fatal(err)
	}
	restart()
	fresh := serving()
	if fresh.SerialNumber.Cmp(first.SerialNumber) == 0 {
		t.Errorf("Without its stored certificate %s still serves serial %s", node, first.SerialNumber)
	}
	approvedBy(t, issuingCSR(ctx, t, e.f, node, fresh))

	// 30 s, and a tenth of it back-dated: renewed about 20 s after issue.
	e.setHostDefinerArg(ctx, t, "--max-certificate-lifetime=30s")
	if err := os.RemoveAll(tlsDir); err != nil {
		t.Fatal(err)
	}
	restart()
	short := serving()
	if life := short.NotAfter.Sub(short.NotBefore); life > 34*time.Second {
		t.Fatalf("Certificate of %s lives %s, want at most 33s (--max-certificate-lifetime=30s)", node, life)
	}
	renewed, claims := e.provisionUntilRenewed(ctx, t, node, short, serving)
	t.Logf("Serial %s (until %s) renewed as %s; %d claims provisioned on %s meanwhile, none failed",
		short.SerialNumber, short.NotAfter.Format(time.TimeOnly), renewed.SerialNumber, claims, node)
	approvedBy(t, issuingCSR(ctx, t, e.f, node, renewed))
}

// provisionUntilRenewed provisions and deletes claims pinned to node, one
// after the other, until the manager serves another certificate than cert,
// and two more after that; every one must bind. It returns the new
// certificate and how many claims it made.
func (e *hdEnv) provisionUntilRenewed(ctx context.Context, t *testing.T, node string, cert *x509.Certificate, serving func() *x509.Certificate) (*x509.Certificate, int) {
	t.Helper()
	deadline := cert.NotAfter.Add(time.Minute)
	var renewed *x509.Certificate
	n, after := 0, 0
	for after < 2 {
		if time.Now().After(deadline) {
			t.Fatalf("The manager of %s did not renew serial %s (valid until %s)", node, cert.SerialNumber, cert.NotAfter.Format(time.RFC3339))
		}
		name := fmt.Sprintf("rotate-%d", n)
		pvc := e.claim(ctx, t, name, classImmediate, "1Mi", corev1.ReadWriteOnce, map[string]string{annProvisionOnNode: node})
		e.waitBound(ctx, t, pvc.Name)
		e.deleteAndWaitGone(ctx, t, "", pvc.Name)
		n++
		if renewed != nil {
			after++
			continue
		}
		if c := serving(); c.SerialNumber.Cmp(cert.SerialNumber) != 0 {
			renewed = c
		}
	}
	events, err := e.f.Client.CoreV1().Events(e.ns).List(ctx, metav1.ListOptions{FieldSelector: "type=Warning"})
	if err != nil {
		t.Fatal(err)
	}
	for _, ev := range events.Items {
		t.Errorf("Warning event during the rotation: %s %s: %s", ev.InvolvedObject.Name, ev.Reason, ev.Message)
	}
	return renewed, n
}
