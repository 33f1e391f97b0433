package csr

import (
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"slices"
	"strings"

	certv1 "k8s.io/api/certificates/v1"

	"hostpath.dev/api/managerapi"
)

// The subject of a manager's certificate request.
const (
	// CommonNamePrefix followed by the node's name is the common name.
	CommonNamePrefix = "system:hostpath-manager:"
	// Organization is the only organization a request may name (or none).
	Organization = "hostpath.dev:managers"
)

// Condition reasons of the Approved, Denied and Failed conditions.
const (
	// ReasonApproved approves a manager's request.
	ReasonApproved = "HostpathManagerServing"
	// ReasonNotManager: the requester is not the managers' service account.
	ReasonNotManager = "NotManager"
	// ReasonUnknownPod: spec.extra names no pod, or not a manager pod there
	// is.
	ReasonUnknownPod = "UnknownPod"
	// ReasonPodTerminating: the pod is terminating or finished.
	ReasonPodTerminating = "PodTerminating"
	// ReasonWrongNode: the pod, or the request's names, are of another node.
	ReasonWrongNode = "WrongNode"
	// ReasonBadRequest: the request is not one of a manager's serving
	// certificate.
	ReasonBadRequest = "BadRequest"
	// ReasonSignFailed: signing failed (a Failed condition).
	ReasonSignFailed = "SignFailed"
)

// refusal is why a request is denied (or fails): a condition reason and a
// message.
type refusal struct {
	reason, message string
}

// Error is the message.
func (r *refusal) Error() string { return r.message }

// refuse returns a refusal with reason and a formatted message.
func refuse(reason, format string, args ...any) *refusal {
	return &refusal{reason: reason, message: fmt.Sprintf(format, args...)}
}

// allowedUsages are the usages a manager may ask for.
var allowedUsages = []certv1.KeyUsage{certv1.UsageDigitalSignature, certv1.UsageKeyEncipherment, certv1.UsageServerAuth}

// parseRequest decodes a PEM certificate request and checks its signature.
func parseRequest(data []byte) (*x509.CertificateRequest, *refusal) {
	block, rest := pem.Decode(data)
	if block == nil || block.Type != pemRequest || len(strings.TrimSpace(string(rest))) > 0 {
		return nil, refuse(ReasonBadRequest, "spec.request is not one PEM block %q", pemRequest)
	}
	req, err := x509.ParseCertificateRequest(block.Bytes)
	if err != nil {
		return nil, refuse(ReasonBadRequest, "spec.request does not parse: %v", err)
	}
	if err := req.CheckSignature(); err != nil {
		return nil, refuse(ReasonBadRequest, "the request's signature does not check: %v", err)
	}
	return req, nil
}

// nodeOfRequest is the node that the request's common name names.
func nodeOfRequest(req *x509.CertificateRequest) (string, *refusal) {
	node, ok := strings.CutPrefix(req.Subject.CommonName, CommonNamePrefix)
	if !ok || node == "" {
		return "", refuse(ReasonBadRequest, "the common name %q is not %q followed by a node name", req.Subject.CommonName, CommonNamePrefix)
	}
	return node, nil
}

// checkRequest checks that req, with usages, asks for the serving
// certificate of the manager on node and nothing else.
func checkRequest(req *x509.CertificateRequest, usages []certv1.KeyUsage, node string) *refusal {
	want := managerapi.ServerName(node)
	if cn := req.Subject.CommonName; cn != CommonNamePrefix+node {
		if strings.HasPrefix(cn, CommonNamePrefix) {
			return refuse(ReasonWrongNode, "the common name %q names another node than the pod's, %q", cn, node)
		}
		return refuse(ReasonBadRequest, "the common name is %q, want %q", cn, CommonNamePrefix+node)
	}
	if o := req.Subject.Organization; len(o) > 1 || len(o) == 1 && o[0] != Organization {
		return refuse(ReasonBadRequest, "the organizations are %q, want none or [%q]", o, Organization)
	}
	if len(req.IPAddresses) > 0 || len(req.EmailAddresses) > 0 || len(req.URIs) > 0 {
		return refuse(ReasonBadRequest, "the request asks for IP addresses %v, emails %q or URIs %v: a manager's certificate names only %q",
			req.IPAddresses, req.EmailAddresses, req.URIs, want)
	}
	if dns := req.DNSNames; len(dns) != 1 || dns[0] != want {
		if len(dns) == 1 && strings.HasSuffix(dns[0], managerapi.ServerName("")) {
			return refuse(ReasonWrongNode, "the DNS name %q is another node's; the manager on node %q is %q", dns[0], node, want)
		}
		return refuse(ReasonBadRequest, "the DNS names are %q, want exactly [%q]", dns, want)
	}
	for _, u := range usages {
		if !slices.Contains(allowedUsages, u) {
			return refuse(ReasonBadRequest, "the usages are %q, want server auth and at most digital signature and key encipherment besides", usages)
		}
	}
	if !slices.Contains(usages, certv1.UsageServerAuth) {
		return refuse(ReasonBadRequest, "the usages %q lack server auth", usages)
	}
	return checkKey(req)
}

// checkKey accepts ECDSA keys on P-256, P-384 or P-521, Ed25519 keys and
// RSA keys of at least 2048 bits.
func checkKey(req *x509.CertificateRequest) *refusal {
	switch k := req.PublicKey.(type) {
	case *ecdsa.PublicKey:
		if c := k.Curve; c == elliptic.P256() || c == elliptic.P384() || c == elliptic.P521() {
			return nil
		}
	case ed25519.PublicKey:
		return nil
	case *rsa.PublicKey:
		if k.N.BitLen() >= 2048 {
			return nil
		}
	}
	return refuse(ReasonBadRequest, "the %s key is too weak or of an unknown kind: want ECDSA P-256/384/521, Ed25519 or RSA of 2048 bits or more", req.PublicKeyAlgorithm)
}
