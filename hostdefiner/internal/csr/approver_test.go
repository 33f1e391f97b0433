package csr

import (
	"crypto/rand"
	"crypto/rsa"
	"encoding/pem"
	"errors"
	"net"
	"slices"
	"strings"
	"testing"

	certv1 "k8s.io/api/certificates/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"hostpath.dev/api/hostpath/v1/hostpathtest"
	"hostpath.dev/api/managerapi"
)

func TestApprover(t *testing.T) {
	ok := func(t *testing.T) []byte { return managerRequest(t, node1).pem(t) }
	tests := []struct {
		name    string
		request func(t *testing.T) []byte
		csr     func(c *certv1.CertificateSigningRequest)
		pod     func(p *v1.Pod)
		// reason is the Approved or Denied condition's reason; "" expects
		// no decision; message is part of its message.
		reason, message string
		approved        bool
	}{
		{name: "the manager of the node", request: ok, approved: true, reason: ReasonApproved, message: `pod hostpath-system/hostpath-manager-abcde (UID ` + uid1 + `) on node "node-1"`},
		{name: "server auth and digital signature only", request: ok, csr: func(c *certv1.CertificateSigningRequest) {
			c.Spec.Usages = []certv1.KeyUsage{certv1.UsageDigitalSignature, certv1.UsageServerAuth}
		}, approved: true, reason: ReasonApproved},
		{name: "no organization", request: func(t *testing.T) []byte { r := managerRequest(t, node1); r.orgs = nil; return r.pem(t) }, approved: true, reason: ReasonApproved},
		{name: "another service account", request: ok, csr: func(c *certv1.CertificateSigningRequest) {
			c.Spec.Username = "system:serviceaccount:hostpath-system:hostpath-provisioner"
		}, reason: ReasonNotManager, message: `not by the managers' service account "` + testUsername + `"`},
		{name: "a user", request: ok, csr: func(c *certv1.CertificateSigningRequest) { c.Spec.Username = "kubernetes-admin"; c.Spec.Extra = nil }, reason: ReasonNotManager},
		{name: "no pod in extra", request: ok, csr: func(c *certv1.CertificateSigningRequest) { c.Spec.Extra = nil },
			reason: ReasonUnknownPod, message: "every manager shares the service account"},
		{name: "no node in extra", request: ok, csr: func(c *certv1.CertificateSigningRequest) { delete(c.Spec.Extra, managerapi.ExtraNodeName) }, reason: ReasonUnknownPod},
		{name: "a SAN for another node", request: func(t *testing.T) []byte {
			r := managerRequest(t, node1)
			r.dns = []string{managerapi.ServerName(node2)}
			return r.pem(t)
		}, reason: ReasonWrongNode, message: `the DNS name "node-2.manager.hostpath.dev" is another node's`},
		{name: "the request of another node", request: func(t *testing.T) []byte { return managerRequest(t, node2).pem(t) },
			reason: ReasonWrongNode, message: "names another node"},
		{name: "extra naming an unknown pod", request: ok, csr: func(c *certv1.CertificateSigningRequest) {
			c.Spec.Extra[managerapi.ExtraPodName] = []string{"hostpath-manager-zzzzz"}
		},
			reason: ReasonUnknownPod, message: "no pod hostpath-system/hostpath-manager-zzzzz"},
		{name: "pod UID mismatch", request: ok, csr: func(c *certv1.CertificateSigningRequest) {
			c.Spec.Extra[managerapi.ExtraPodUID] = []string{"other-uid"}
		},
			reason: ReasonUnknownPod, message: "not the token's other-uid"},
		{name: "pod on another node", request: ok, pod: func(p *v1.Pod) { p.Spec.NodeName = node2 },
			reason: ReasonWrongNode, message: `runs on node "node-2", not on the token's node "node-1"`},
		{name: "extra naming another node", request: ok, csr: func(c *certv1.CertificateSigningRequest) { c.Spec.Extra[managerapi.ExtraNodeName] = []string{node2} },
			reason: ReasonWrongNode},
		{name: "terminating pod", request: ok, pod: func(p *v1.Pod) { now := metav1.NewTime(t0); p.DeletionTimestamp = &now },
			reason: ReasonPodTerminating, message: "terminating or finished"},
		{name: "failed pod", request: ok, pod: func(p *v1.Pod) { p.Status.Phase = v1.PodFailed }, reason: ReasonPodTerminating},
		{name: "not a manager pod", request: ok, pod: func(p *v1.Pod) { p.Labels = map[string]string{"app": "other"} },
			reason: ReasonUnknownPod, message: "is not a manager pod"},
		{name: "a pod of another service account", request: ok, pod: func(p *v1.Pod) { p.Spec.ServiceAccountName = "default" }, reason: ReasonUnknownPod},
		{name: "IP SAN", request: func(t *testing.T) []byte {
			r := managerRequest(t, node1)
			r.ips = []net.IP{net.ParseIP("10.0.0.1")}
			return r.pem(t)
		}, reason: ReasonBadRequest, message: "IP addresses [10.0.0.1]"},
		{name: "email SAN", request: func(t *testing.T) []byte { r := managerRequest(t, node1); r.mail = []string{"a@b.c"}; return r.pem(t) }, reason: ReasonBadRequest},
		{name: "two DNS names", request: func(t *testing.T) []byte {
			r := managerRequest(t, node1)
			r.dns = append(r.dns, "kubernetes.default.svc")
			return r.pem(t)
		}, reason: ReasonBadRequest, message: "want exactly"},
		{name: "no DNS name", request: func(t *testing.T) []byte { r := managerRequest(t, node1); r.dns = nil; return r.pem(t) }, reason: ReasonBadRequest},
		{name: "another common name", request: func(t *testing.T) []byte { r := managerRequest(t, node1); r.cn = "system:node:node-1"; return r.pem(t) },
			reason: ReasonBadRequest, message: "common name"},
		{name: "another organization", request: func(t *testing.T) []byte {
			r := managerRequest(t, node1)
			r.orgs = []string{"system:masters"}
			return r.pem(t)
		}, reason: ReasonBadRequest, message: "organizations"},
		{name: "client auth usage", request: ok, csr: func(c *certv1.CertificateSigningRequest) {
			c.Spec.Usages = []certv1.KeyUsage{certv1.UsageDigitalSignature, certv1.UsageServerAuth, certv1.UsageClientAuth}
		}, reason: ReasonBadRequest, message: "usages"},
		{name: "no server auth", request: ok, csr: func(c *certv1.CertificateSigningRequest) {
			c.Spec.Usages = []certv1.KeyUsage{certv1.UsageDigitalSignature}
		}, reason: ReasonBadRequest, message: "lack server auth"},
		{name: "unparsable request", request: func(*testing.T) []byte { return []byte("not a request") }, reason: ReasonBadRequest, message: "not one PEM block"},
		{name: "garbage in PEM", request: func(*testing.T) []byte { return encodePEM(pemRequest, []byte("garbage")) }, reason: ReasonBadRequest, message: "does not parse"},
		{name: "bad signature", request: func(t *testing.T) []byte {
			b := managerRequest(t, node1).pem(t)
			block, err := decodePEM(b)
			if err != nil {
				t.Fatal(err)
			}
			block[len(block)-1] ^= 0xff
			return encodePEM(pemRequest, block)
		}, reason: ReasonBadRequest, message: "signature"},
		{name: "weak RSA key", request: func(t *testing.T) []byte {
			k, err := rsa.GenerateKey(rand.Reader, 1024)
			if err != nil {
				t.Fatal(err)
			}
			r := managerRequest(t, node1)
			r.key = k
			return r.pem(t)
		}, reason: ReasonBadRequest, message: "too weak"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			csr := newCSR("csr-1", tc.request(t))
			if tc.csr != nil {
				tc.csr(csr)
			}
			pod := managerPod(pod1, uid1, node1)
			if tc.pod != nil {
				tc.pod(pod)
			}
			f := newFixture(t, csr, pod)
			f.clock.Step(PodCacheGrace)
			if err := f.c.Approver.Sync(f.ctx, csr.Name); err != nil {
				t.Fatalf("Sync() = %v", err)
			}
			if w := hostpathtest.DescribeWrites(f.kube.Actions()); !slices.Equal(w, []string{"update certificatesigningrequests/approval csr-1"}) {
				t.Fatalf("writes = %q, want one approval update", w)
			}
			got := f.getCSR(csr.Name)
			typ, other := certv1.CertificateDenied, certv1.CertificateApproved
			if tc.approved {
				typ, other = other, typ
			}
			c := condition(got, typ)
			if c == nil || condition(got, other) != nil || len(got.Status.Conditions) != 1 {
				t.Fatalf("conditions = %+v, want one %s", got.Status.Conditions, typ)
			}
			if c.Reason != tc.reason || c.Status != v1.ConditionTrue || !strings.Contains(c.Message, tc.message) || !c.LastUpdateTime.Time.Equal(f.clock.Now()) {
				t.Errorf("%s condition = %+v, want reason %q and a message with %q", typ, c, tc.reason, tc.message)
			}
		})
	}
}

// decodePEM returns the bytes of the first PEM block of data.
func decodePEM(data []byte) ([]byte, error) {
	block, _ := pem.Decode(data)
	if block == nil {
		return nil, errors.New("no PEM block")
	}
	return block.Bytes, nil
}

func TestApproverLeavesAlone(t *testing.T) {
	req := func(t *testing.T) []byte { return managerRequest(t, node1).pem(t) }
	tests := []struct {
		name string
		csr  func(c *certv1.CertificateSigningRequest)
	}{
		{name: "another signer", csr: func(c *certv1.CertificateSigningRequest) { c.Spec.SignerName = "kubernetes.io/kubelet-serving" }},
		{name: "already approved", csr: func(c *certv1.CertificateSigningRequest) {
			c.Status.Conditions = []certv1.CertificateSigningRequestCondition{{Type: certv1.CertificateApproved, Status: v1.ConditionTrue, Reason: "ByHand"}}
			c.Spec.Username = "someone"
		}},
		{name: "already denied", csr: func(c *certv1.CertificateSigningRequest) {
			c.Status.Conditions = []certv1.CertificateSigningRequestCondition{{Type: certv1.CertificateDenied, Status: v1.ConditionTrue, Reason: "ByHand"}}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			csr := newCSR("csr-1", req(t))
			tc.csr(csr)
			f := newFixture(t, csr, managerPod(pod1, uid1, node1))
			if err := f.c.Approver.Sync(f.ctx, csr.Name); err != nil {
				t.Fatalf("Sync() = %v", err)
			}
			if w := hostpathtest.DescribeWrites(f.kube.Actions()); len(w) != 0 {
				t.Errorf("writes = %q, want none", w)
			}
		})
	}
	t.Run("gone", func(t *testing.T) {
		f := newFixture(t)
		if err := f.c.Approver.Sync(f.ctx, "csr-gone"); err != nil {
			t.Errorf("Sync() = %v", err)
		}
	})
}

// A pod the cache does not hold yet is looked for again until
// PodCacheGrace after the CSR's creation; then the CSR is denied, or
// approved once the pod shows up.
func TestApproverWaitsForThePodCache(t *testing.T) {
	for _, arrives := range []bool{false, true} {
		t.Run(map[bool]string{false: "never comes", true: "comes"}[arrives], func(t *testing.T) {
			csr := newCSR("csr-1", managerRequest(t, node1).pem(t))
			f := newFixture(t, csr)
			f.clock.Step(PodCacheGrace / 3)
			if err := f.c.Approver.Sync(f.ctx, csr.Name); err != nil {
				t.Fatalf("Sync() = %v", err)
			}
			if w := hostpathtest.DescribeWrites(f.kube.Actions()); len(w) != 0 {
				t.Fatalf("writes within the grace = %q, want none", w)
			}
			if arrives {
				if err := f.inf.Pods.GetIndexer().Add(managerPod(pod1, uid1, node1)); err != nil {
					t.Fatal(err)
				}
			}
			f.clock.Step(PodCacheGrace)
			if err := f.c.Approver.Sync(f.ctx, csr.Name); err != nil {
				t.Fatalf("Sync() = %v", err)
			}
			want := map[bool]certv1.RequestConditionType{false: certv1.CertificateDenied, true: certv1.CertificateApproved}[arrives]
			if c := condition(f.getCSR(csr.Name), want); c == nil {
				t.Errorf("conditions = %+v, want %s", f.getCSR(csr.Name).Status.Conditions, want)
			}
		})
	}
}
