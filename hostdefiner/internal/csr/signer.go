package csr

import (
	"context"
	"fmt"

	certv1 "k8s.io/api/certificates/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"
	certlisters "k8s.io/client-go/listers/certificates/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"hostpath.dev/api/managerapi"
	"hostpath.dev/api/runtime/worker"
)

// Signer signs the approved CSRs of managerapi.SignerName with the CA of the
// Secret managerapi.CASecret (see the package doc).
type Signer struct {
	base
	csrs    certlisters.CertificateSigningRequestLister
	secrets corelisters.SecretNamespaceLister
}

// NewSigner returns a Signer reading inf.CSRs and inf.Secrets; it registers
// its event handlers on both (a new CA queues the CSRs waiting for one).
func NewSigner(cfg Config, kube kubernetes.Interface, inf Informers, clk clock.Clock) (*Signer, error) {
	s := &Signer{
		base:    base{cfg: cfg, kube: kube, clock: clk},
		csrs:    certlisters.NewCertificateSigningRequestLister(inf.CSRs.GetIndexer()),
		secrets: corelisters.NewSecretLister(inf.Secrets.GetIndexer()).Secrets(cfg.Namespace),
	}
	s.queue = worker.NewQueue("csr-signer", s.Sync)
	synced, err := onCSRs(inf.CSRs, func(name string) { s.queue.Add(name) })
	if err != nil {
		return nil, err
	}
	onCA := func(obj any) {
		if sec, ok := obj.(*v1.Secret); ok && sec.Name == managerapi.CASecret {
			s.enqueueWaiting()
		}
	}
	reg, err := inf.Secrets.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    onCA,
		UpdateFunc: func(_, obj any) { onCA(obj) },
	})
	if err != nil {
		return nil, fmt.Errorf("add a Secret event handler: %w", err)
	}
	s.synced = []cache.InformerSynced{synced, reg.HasSynced}
	return s, nil
}

// enqueueWaiting queues the CSRs that wait for a certificate.
func (s *Signer) enqueueWaiting() {
	csrs, _ := s.csrs.List(labels.Everything())
	for _, csr := range csrs {
		if waiting(csr) {
			s.queue.Add(csr.Name)
		}
	}
}

// waiting tells whether csr is of our signer, approved, and neither signed
// nor failed.
func waiting(csr *certv1.CertificateSigningRequest) bool {
	_, ok := ours(csr)
	return ok && hasCondition(csr, certv1.CertificateApproved) && !hasCondition(csr, certv1.CertificateDenied) &&
		!hasCondition(csr, certv1.CertificateFailed) && len(csr.Status.Certificate) == 0
}

// Sync signs the CSR name when it waits for a certificate. A request that
// cannot be signed gets a Failed condition. Without the CA Secret it waits
// for the Secret's event; a broken CA is an error (retried).
func (s *Signer) Sync(ctx context.Context, name string) error {
	csr, err := s.csrs.Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if !waiting(csr) {
		return nil
	}
	logger := klog.FromContext(ctx).WithValues("csr", name)
	secret, err := s.secrets.Get(managerapi.CASecret)
	if apierrors.IsNotFound(err) {
		// The Authority creates it; its event queues the waiting CSRs.
		logger.V(2).Info("Waiting for the CA Secret", "secret", klog.KRef(s.cfg.Namespace, managerapi.CASecret))
		return nil
	}
	if err != nil {
		return fmt.Errorf("sign CSR %s: the CA Secret %s/%s: %w", name, s.cfg.Namespace, managerapi.CASecret, err)
	}
	ca, err := ParseCA(secret.Data[v1.TLSCertKey], secret.Data[v1.TLSPrivateKeyKey])
	if err != nil {
		return fmt.Errorf("sign CSR %s: the Secret %s/%s: %w", name, s.cfg.Namespace, managerapi.CASecret, err)
	}
	certPEM, no := s.issue(ca, csr)
	c := csr.DeepCopy()
	if no != nil {
		c = withCondition(csr, certv1.CertificateFailed, no.reason, no.message, s.clock.Now())
	} else {
		c.Status.Certificate = certPEM
	}
	_, err = s.kube.CertificatesV1().CertificateSigningRequests().UpdateStatus(ctx, c, metav1.UpdateOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("sign CSR %s: update its status: %w", name, err)
	}
	if no != nil {
		logger.Info("Could not sign a CSR", "reason", no.reason, "message", no.message)
	} else {
		logger.Info("Signed a CSR", "requester", csr.Spec.Username, "ca", ca.Cert.Subject.CommonName)
	}
	return nil
}

// issue checks the request of csr again and signs it with ca.
func (s *Signer) issue(ca *CA, csr *certv1.CertificateSigningRequest) ([]byte, *refusal) {
	req, no := parseRequest(csr.Spec.Request)
	if no != nil {
		return nil, no
	}
	node, no := nodeOfRequest(req)
	if no != nil {
		return nil, no
	}
	if no := checkRequest(req, csr.Spec.Usages, node); no != nil {
		return nil, no
	}
	certPEM, err := ca.Sign(req, s.clock.Now(), lifetime(csr, s.cfg.MaxLifetime))
	if err != nil {
		return nil, refuse(ReasonSignFailed, "%v", err)
	}
	return certPEM, nil
}
