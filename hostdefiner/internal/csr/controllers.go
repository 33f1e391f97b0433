package csr

import (
	"context"
	"errors"
	"fmt"
	"time"

	certv1 "k8s.io/api/certificates/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"

	"hostpath.dev/api/managerapi"
	"hostpath.dev/api/runtime/worker"
)

// DefaultLifetime is a certificate's lifetime when its CSR sets no
// spec.expirationSeconds (Config.MaxLifetime caps it).
const DefaultLifetime = 24 * time.Hour

// Config is the controllers' behaviour.
type Config struct {
	// Namespace holds the manager pods, their service account, the CA
	// Secret and the bundle ConfigMap.
	Namespace string
	// ServiceAccount is the managers' service account, in Namespace (a
	// pod's service account is in the pod's namespace).
	ServiceAccount string
	// ManagerSelector selects the manager pods.
	ManagerSelector labels.Selector
	// MaxLifetime caps the certificates' lifetime.
	MaxLifetime time.Duration
	// CAOverlap is how long an old CA stays trusted after a rotation; it
	// must exceed MaxLifetime.
	CAOverlap time.Duration
}

// username is the user name of the managers' service account.
func (c Config) username() string {
	return "system:serviceaccount:" + c.Namespace + ":" + c.ServiceAccount
}

// Informers are the informers the controllers read.
type Informers struct {
	// CSRs are the CertificateSigningRequests, best listed with
	// SignerListOptions (others are ignored).
	CSRs cache.SharedIndexInformer
	// Pods are the pods of Config.Namespace.
	Pods cache.SharedIndexInformer
	// Secrets are the Secrets of Config.Namespace, best listed with
	// NameListOptions(managerapi.CASecret).
	Secrets cache.SharedIndexInformer
	// ConfigMaps are the ConfigMaps of Config.Namespace, best listed with
	// NameListOptions(managerapi.CABundleConfigMap).
	ConfigMaps cache.SharedIndexInformer
}

// SignerListOptions lists and watches only the CSRs of managerapi.SignerName.
func SignerListOptions(o *metav1.ListOptions) {
	o.FieldSelector = fields.OneTermEqualSelector("spec.signerName", managerapi.SignerName).String()
}

// NameListOptions lists and watches only the object named name, which RBAC
// rules with resourceNames allow.
func NameListOptions(name string) func(*metav1.ListOptions) {
	return func(o *metav1.ListOptions) {
		o.FieldSelector = fields.OneTermEqualSelector(metav1.ObjectNameField, name).String()
	}
}

// Controllers are the Approver, the Signer and the Authority.
type Controllers struct {
	Approver  *Approver
	Signer    *Signer
	Authority *Authority
}

// New returns the three controllers, their event handlers registered on
// inf.
func New(cfg Config, kube kubernetes.Interface, inf Informers, clk clock.Clock) (*Controllers, error) {
	a, err := NewApprover(cfg, kube, inf, clk)
	if err != nil {
		return nil, err
	}
	s, err := NewSigner(cfg, kube, inf, clk)
	if err != nil {
		return nil, err
	}
	ca, err := NewAuthority(cfg, kube, inf, clk)
	if err != nil {
		return nil, err
	}
	return &Controllers{Approver: a, Signer: s, Authority: ca}, nil
}

// base is what the Approver, the Signer and the Authority share: their
// settings, API client and clock, the queue of object names they sync, and
// the informers they wait for.
type base struct {
	cfg    Config
	kube   kubernetes.Interface
	clock  clock.Clock
	synced []cache.InformerSynced
	queue  *worker.Queue[string]
}

// Run syncs queued names with workers goroutines until ctx is done.
func (b *base) Run(ctx context.Context, workers int) error {
	return b.queue.Run(ctx, workers, b.synced...)
}

// Run runs the three with workers workers each (the Authority with one)
// until ctx is done.
func (c *Controllers) Run(ctx context.Context, workers int) error {
	errc := make(chan error, 3)
	go func() { errc <- c.Authority.Run(ctx) }()
	go func() { errc <- c.Approver.Run(ctx, workers) }()
	go func() { errc <- c.Signer.Run(ctx, workers) }()
	var errs []error
	for range 3 {
		errs = append(errs, <-errc)
	}
	return errors.Join(errs...)
}

// ours returns the CSR of obj (or of its tombstone) when it is of our
// signer.
func ours(obj any) (*certv1.CertificateSigningRequest, bool) {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	csr, ok := obj.(*certv1.CertificateSigningRequest)
	return csr, ok && csr.Spec.SignerName == managerapi.SignerName
}

// onCSRs registers add and update handlers on inf that call add with the
// name of every CSR of our signer.
func onCSRs(inf cache.SharedIndexInformer, add func(string)) (cache.InformerSynced, error) {
	fn := func(obj any) {
		if csr, ok := ours(obj); ok {
			add(csr.Name)
		}
	}
	reg, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    fn,
		UpdateFunc: func(_, obj any) { fn(obj) },
	})
	if err != nil {
		return nil, fmt.Errorf("add a CSR event handler: %w", err)
	}
	return reg.HasSynced, nil
}

// hasCondition tells whether csr has a condition of type typ.
func hasCondition(csr *certv1.CertificateSigningRequest, typ certv1.RequestConditionType) bool {
	for _, c := range csr.Status.Conditions {
		if c.Type == typ && c.Status != v1.ConditionFalse {
			return true
		}
	}
	return false
}

// withCondition returns a copy of csr with a true condition of type typ
// added.
func withCondition(csr *certv1.CertificateSigningRequest, typ certv1.RequestConditionType, reason, message string, now time.Time) *certv1.CertificateSigningRequest {
	c := csr.DeepCopy()
	c.Status.Conditions = append(c.Status.Conditions, certv1.CertificateSigningRequestCondition{
		Type: typ, Status: v1.ConditionTrue, Reason: reason, Message: message,
		LastUpdateTime: metav1.NewTime(now), LastTransitionTime: metav1.NewTime(now),
	})
	return c
}

// lifetime is the certificate lifetime a CSR gets: spec.expirationSeconds
// (default DefaultLifetime) capped by maxLifetime.
func lifetime(csr *certv1.CertificateSigningRequest, maxLifetime time.Duration) time.Duration {
	d := DefaultLifetime
	if s := csr.Spec.ExpirationSeconds; s != nil {
		d = time.Duration(*s) * time.Second
	}
	return min(d, maxLifetime)
}
