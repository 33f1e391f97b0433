package csr

import (
	"context"
	"crypto/x509"
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"hostpath.dev/api/managerapi"
	"hostpath.dev/api/runtime/worker"
)

// The names in the CA Secret (managerapi.CASecret), besides tls.crt and
// tls.key (the signing CA).
const (
	// RotateAnnotation set to a new value rotates the CA:
	//
	//	kubectl -n hostpath-system annotate secret hostpath-manager-ca hostpath.dev/rotate-ca="$(date +%s)" --overwrite
	RotateAnnotation = "hostpath.dev/rotate-ca"
	// RotatedAnnotation is the value of RotateAnnotation last acted upon.
	RotatedAnnotation = "hostpath.dev/rotated-ca"
	// PreviousCertKey holds the old CAs still trusted (PEM).
	PreviousCertKey = "previous.crt"
	// PreviousUntilAnnotation is when the old CAs stop being trusted
	// (RFC 3339, UTC).
	PreviousUntilAnnotation = "hostpath.dev/previous-ca-trusted-until"
)

// authorityKey is the one key of the Authority's queue.
const authorityKey = "ca"

// Authority keeps the CA Secret and the bundle ConfigMap (see the package
// doc).
type Authority struct {
	base
	secrets    corelisters.SecretNamespaceLister
	configMaps corelisters.ConfigMapNamespaceLister
}

// NewAuthority returns an Authority reading inf.Secrets and inf.ConfigMaps;
// it registers its event handlers on both.
func NewAuthority(cfg Config, kube kubernetes.Interface, inf Informers, clk clock.Clock) (*Authority, error) {
	a := &Authority{
		base:       base{cfg: cfg, kube: kube, clock: clk},
		secrets:    corelisters.NewSecretLister(inf.Secrets.GetIndexer()).Secrets(cfg.Namespace),
		configMaps: corelisters.NewConfigMapLister(inf.ConfigMaps.GetIndexer()).ConfigMaps(cfg.Namespace),
	}
	a.queue = worker.NewQueue("ca", a.Sync)
	for _, h := range []struct {
		inf  cache.SharedIndexInformer
		name string
	}{{inf.Secrets, managerapi.CASecret}, {inf.ConfigMaps, managerapi.CABundleConfigMap}} {
		name := h.name
		fn := func(obj any) {
			if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = t.Obj
			}
			if o, ok := obj.(metav1.Object); ok && o.GetName() == name {
				a.queue.Add(authorityKey)
			}
		}
		reg, err := h.inf.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: fn, UpdateFunc: func(_, obj any) { fn(obj) }, DeleteFunc: fn})
		if err != nil {
			return nil, fmt.Errorf("add an event handler: %w", err)
		}
		a.synced = append(a.synced, reg.HasSynced)
	}
	return a, nil
}

// Run keeps the CA and the bundle, with one worker, until ctx is done.
func (a *Authority) Run(ctx context.Context) error {
	a.queue.Add(authorityKey)
	return a.base.Run(ctx, 1)
}

// Sync keeps the CA and the bundle, and comes back when an overlap ends.
func (a *Authority) Sync(ctx context.Context, _ string) error {
	next, err := a.sync(ctx)
	if err == nil && next > 0 {
		a.queue.AddAfter(authorityKey, next)
	}
	return err
}

// sync creates the CA Secret if missing, rotates the CA when asked, drops
// the old CAs once the overlap ends, and publishes the bundle. It returns
// how long until the overlap ends (0 when there is none).
func (a *Authority) sync(ctx context.Context) (time.Duration, error) {
	now := a.clock.Now()
	var st *caState
	secret, err := a.secrets.Get(managerapi.CASecret)
	switch {
	case apierrors.IsNotFound(err):
		st, err = a.create(ctx, now)
	case err == nil:
		st, err = a.maintain(ctx, secret, now)
	}
	if err != nil {
		return 0, err
	}
	if err := a.publish(ctx, st.bundle(now)); err != nil {
		return 0, err
	}
	if st.overlapping(now) {
		return st.until.Sub(now), nil
	}
	return 0, nil
}

// create makes the CA Secret with a new CA.
func (a *Authority) create(ctx context.Context, now time.Time) (*caState, error) {
	ca, err := NewCA(now)
	if err != nil {
		return nil, err
	}
	st := &caState{current: ca}
	s := &v1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: managerapi.CASecret, Namespace: a.cfg.Namespace, Labels: caLabels()},
		Type:       v1.SecretTypeTLS,
	}
	st.write(s)
	if _, err := a.kube.CoreV1().Secrets(a.cfg.Namespace).Create(ctx, s, metav1.CreateOptions{}); err != nil {
		return nil, fmt.Errorf("create the CA Secret %s/%s: %w", a.cfg.Namespace, managerapi.CASecret, err)
	}
	klog.FromContext(ctx).Info("Created the CA", "secret", klog.KObj(s), "subject", ca.Cert.Subject.CommonName,
		"notAfter", ca.Cert.NotAfter, "sha256", fingerprint(ca.Cert))
	return st, nil
}

// maintain rotates the CA of secret when RotateAnnotation asks for it, and
// drops the previous CAs once their overlap ended.
func (a *Authority) maintain(ctx context.Context, secret *v1.Secret, now time.Time) (*caState, error) {
	st, err := readSecret(secret)
	if err != nil {
		return nil, fmt.Errorf("the CA Secret %s/%s: %w (fix it, or delete it for a new CA)", secret.Namespace, secret.Name, err)
	}
	want := secret.Annotations[RotateAnnotation]
	rotate := want != "" && want != secret.Annotations[RotatedAnnotation]
	ended := len(st.previous) > 0 && !st.overlapping(now)
	if !rotate && !ended {
		return st, nil
	}
	logger := klog.FromContext(ctx).WithValues("secret", klog.KObj(secret))
	if ended {
		logger.Info("The CA overlap ended: the previous CAs are no longer trusted", "count", len(st.previous), "until", st.until)
		st.previous, st.until = nil, time.Time{}
	}
	s := secret.DeepCopy()
	if rotate {
		ca, err := NewCA(now)
		if err != nil {
			return nil, err
		}
		st.previous = append([]*x509.Certificate{st.current.Cert}, st.previous...)
		if until := now.Add(a.cfg.CAOverlap); until.After(st.until) {
			st.until = until
		}
		old := st.current.Cert
		st.current = ca
		logger.Info("Rotating the CA: the new one signs from now on, the old one stays trusted until the overlap ends",
			"rotation", want, "old", old.Subject.CommonName, "oldSHA256", fingerprint(old),
			"new", ca.Cert.Subject.CommonName, "newSHA256", fingerprint(ca.Cert), "until", st.until)
		if s.Annotations == nil {
			s.Annotations = map[string]string{}
		}
		s.Annotations[RotatedAnnotation] = want
	}
	st.write(s)
	if _, err := a.kube.CoreV1().Secrets(s.Namespace).Update(ctx, s, metav1.UpdateOptions{}); err != nil {
		return nil, fmt.Errorf("update the CA Secret %s/%s: %w", s.Namespace, s.Name, err)
	}
	return st, nil
}

// publish makes the bundle ConfigMap hold bundle.
func (a *Authority) publish(ctx context.Context, bundle []byte) error {
	cms := a.kube.CoreV1().ConfigMaps(a.cfg.Namespace)
	cm, err := a.configMaps.Get(managerapi.CABundleConfigMap)
	switch {
	case apierrors.IsNotFound(err):
		cm = &v1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: managerapi.CABundleConfigMap, Namespace: a.cfg.Namespace, Labels: caLabels()},
			Data:       map[string]string{managerapi.CABundleKey: string(bundle)},
		}
		_, err = cms.Create(ctx, cm, metav1.CreateOptions{})
	case err != nil:
	case cm.Data[managerapi.CABundleKey] == string(bundle):
		return nil
	default:
		cm = cm.DeepCopy()
		if cm.Data == nil {
			cm.Data = map[string]string{}
		}
		cm.Data[managerapi.CABundleKey] = string(bundle)
		_, err = cms.Update(ctx, cm, metav1.UpdateOptions{})
	}
	if err != nil {
		return fmt.Errorf("publish the CA bundle in ConfigMap %s/%s: %w", a.cfg.Namespace, managerapi.CABundleConfigMap, err)
	}
	klog.FromContext(ctx).Info("Published the CA bundle", "configMap", klog.KObj(cm))
	return nil
}

// caLabels are the labels of the Secret and ConfigMap the Authority creates.
func caLabels() map[string]string {
	return map[string]string{"app.kubernetes.io/part-of": "hostpath", "app.kubernetes.io/component": "manager-ca"}
}

// caState is what the CA Secret holds.
type caState struct {
	// current signs.
	current *CA
	// previous are the old CAs, trusted until until.
	previous []*x509.Certificate
	until    time.Time
}

// readSecret parses a CA Secret. Previous CAs without a valid
// PreviousUntilAnnotation are no longer trusted.
func readSecret(s *v1.Secret) (*caState, error) {
	ca, err := ParseCA(s.Data[v1.TLSCertKey], s.Data[v1.TLSPrivateKeyKey])
	if err != nil {
		return nil, err
	}
	st := &caState{current: ca}
	if len(s.Data[PreviousCertKey]) > 0 {
		if st.previous, err = parseCerts(s.Data[PreviousCertKey]); err != nil {
			return nil, fmt.Errorf("%s: %w", PreviousCertKey, err)
		}
		st.until, _ = time.Parse(time.RFC3339, s.Annotations[PreviousUntilAnnotation])
	}
	return st, nil
}

// overlapping tells whether previous CAs are still trusted at now.
func (st *caState) overlapping(now time.Time) bool {
	return len(st.previous) > 0 && now.Before(st.until)
}

// bundle is the PEM of the CAs trusted at now: the current one first.
func (st *caState) bundle(now time.Time) []byte {
	certs := []*x509.Certificate{st.current.Cert}
	if st.overlapping(now) {
		certs = append(certs, st.previous...)
	}
	return encodeCerts(certs)
}

// write puts st in the data and annotations of s.
func (st *caState) write(s *v1.Secret) {
	if s.Data == nil {
		s.Data = map[string][]byte{}
	}
	s.Data[v1.TLSCertKey] = st.current.CertPEM
	s.Data[v1.TLSPrivateKeyKey] = st.current.KeyPEM
	if len(st.previous) == 0 {
		delete(s.Data, PreviousCertKey)
		delete(s.Annotations, PreviousUntilAnnotation)
		return
	}
	s.Data[PreviousCertKey] = encodeCerts(st.previous)
	if s.Annotations == nil {
		s.Annotations = map[string]string{}
	}
	s.Annotations[PreviousUntilAnnotation] = st.until.UTC().Format(time.RFC3339Nano)
}
