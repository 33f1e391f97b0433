// Package trust holds what the callers of the managers trust: the CA
// bundle that the host definer publishes in the ConfigMap
// managerapi.CABundleConfigMap (key managerapi.CABundleKey, PEM) of the product's
// namespace, which may hold several CA certificates while a CA is rotated.
//
// A Bundle is the bundle of the moment; Watch (with a clientset) or
// WatchConfigMaps (with anything that lists and watches ConfigMaps) keeps
// one up to date from the ConfigMap, LoadFile reads one from a file (for
// tools, or a mounted copy of the ConfigMap). Its Pool method is what
// managerapi.WithServerTLS takes as roots:
//
//	b := trust.NewBundle()
//	synced, err := trust.Watch(ctx, kube, "hostpath-system", b)
//	// ... cache.WaitForCacheSync(ctx.Done(), synced)
//	c, err := managerapi.New(url, managerapi.WithServerTLS(b.Pool, managerapi.ServerName(node)))
package trust

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"sync/atomic"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"hostpath.dev/api/managerapi"
)

// Bundle is a set of trusted CA certificates that can be replaced at
// runtime. It is safe for concurrent use; the zero Bundle is empty.
type Bundle struct {
	state atomic.Pointer[state]
}

// state is one content of a Bundle, never changed once stored.
type state struct {
	pool *x509.CertPool
	pem  []byte
}

// NewBundle returns an empty Bundle: Pool returns nil until Set.
func NewBundle() *Bundle { return &Bundle{} }

// Set replaces the certificates with those of data, one or more PEM
// "CERTIFICATE" blocks (blocks of other types are skipped). Data without a
// certificate, or with a certificate that does not parse, is an error and
// leaves the Bundle as it was.
func (b *Bundle) Set(data []byte) error {
	pool := x509.NewCertPool()
	n := 0
	for rest := data; ; {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			break
		}
		if block.Type != "CERTIFICATE" {
			continue
		}
		cert, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			return fmt.Errorf("CA bundle: certificate %d: %w", n+1, err)
		}
		pool.AddCert(cert)
		n++
	}
	if n == 0 {
		return errors.New("CA bundle: no PEM certificate")
	}
	b.state.Store(&state{pool: pool, pem: bytes.Clone(data)})
	return nil
}

// Pool returns the certificates of the last successful Set, nil before
// the first. The pool must not be changed; a later Set makes a new one.
func (b *Bundle) Pool() *x509.CertPool {
	if s := b.state.Load(); s != nil {
		return s.pool
	}
	return nil
}

// PEM returns a copy of the data of the last successful Set, nil before
// the first.
func (b *Bundle) PEM() []byte {
	if s := b.state.Load(); s != nil {
		return bytes.Clone(s.pem)
	}
	return nil
}

// LoadFile returns a Bundle set from the PEM file at path.
func LoadFile(path string) (*Bundle, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read the CA bundle: %w", err)
	}
	b := NewBundle()
	if err := b.Set(data); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return b, nil
}

// ConfigMaps lists and watches the ConfigMaps of one namespace: a
// clientset's CoreV1().ConfigMaps(namespace), or the manager's lighter
// client's. The informer asks its watch to stream the initial list
// (client-go's WatchListClient) unless it also has a method
// IsWatchListSemanticsUnSupported() bool that returns true, as a test's
// fake must (client-go's fake clientset has it; its typed clients do not).
type ConfigMaps interface {
	List(ctx context.Context, opts metav1.ListOptions) (*v1.ConfigMapList, error)
	Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error)
}

// Clientset is what Watch takes: kubernetes.Interface, or any type whose
// CoreV1 method has ConfigMaps.
type Clientset[C CoreV1[L], L ConfigMaps] interface {
	CoreV1() C
}

// CoreV1 has the ConfigMaps of a namespace, as client-go's
// CoreV1Interface does.
type CoreV1[L ConfigMaps] interface {
	ConfigMaps(namespace string) L
}

// Watch is WatchConfigMaps of kube.CoreV1().ConfigMaps(namespace), for
// programs that have a clientset (a kubernetes.Interface; the type
// arguments are inferred): trust.Watch(ctx, kube, namespace, b). It is
// generic so that this package does not import k8s.io/client-go/kubernetes,
// which the manager does not link.
func Watch[K Clientset[C, L], C CoreV1[L], L ConfigMaps](ctx context.Context, kube K, namespace string, b *Bundle) (cache.InformerSynced, error) {
	return watchBundle(ctx, kube.CoreV1().ConfigMaps(namespace), kube, namespace, b, nil)
}

// WatchConfigMaps keeps b set from the ConfigMap managerapi.CABundleConfigMap
// of namespace, whose ConfigMaps cms lists and watches, until ctx is done:
// an informer of that one object (a metadata.name field selector, so that
// RBAC can grant it by resourceNames) sets b at every add and update.
// Content that Set refuses, and a deleted ConfigMap, are logged and leave b
// as it was: the last bundle stays trusted. The returned function reports
// whether the informer has listed the ConfigMap and given it to b (for
// cache.WaitForCacheSync); b is still empty then if the ConfigMap does not
// exist yet.
func WatchConfigMaps(ctx context.Context, cms ConfigMaps, namespace string, b *Bundle) (cache.InformerSynced, error) {
	return watchBundle(ctx, cms, cms, namespace, b, nil)
}

// watchBundle is WatchConfigMaps; api is what says whether the watch can
// stream the initial list (cms, or the clientset it comes from, as in
// client-go's informers); handled, when not nil, is called after each event
// is handled (for tests).
func watchBundle(ctx context.Context, cms ConfigMaps, api any, namespace string, b *Bundle, handled func()) (cache.InformerSynced, error) {
	logger := klog.FromContext(ctx).WithValues("configMap", klog.KRef(namespace, managerapi.CABundleConfigMap))
	selector := fields.OneTermEqualSelector("metadata.name", managerapi.CABundleConfigMap).String()
	informer := cache.NewSharedInformer(cache.ToListWatcherWithWatchListSemantics(&cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			opts.FieldSelector = selector
			return cms.List(ctx, opts)
		},
		WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			opts.FieldSelector = selector
			return cms.Watch(ctx, opts)
		},
	}, api), &v1.ConfigMap{}, 0)
	set := func(obj any) {
		defer notify(handled)
		cm, ok := obj.(*v1.ConfigMap)
		if !ok || cm.Name != managerapi.CABundleConfigMap {
			return
		}
		if err := b.Set([]byte(cm.Data[managerapi.CABundleKey])); err != nil {
			logger.Error(err, "Ignored the CA bundle, keeping the last one", "key", managerapi.CABundleKey, "resourceVersion", cm.ResourceVersion)
			return
		}
		logger.V(2).Info("Loaded the CA bundle", "resourceVersion", cm.ResourceVersion)
	}
	reg, err := informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    set,
		UpdateFunc: func(_, obj any) { set(obj) },
		DeleteFunc: func(obj any) {
			defer notify(handled)
			if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = tomb.Obj
			}
			if cm, ok := obj.(*v1.ConfigMap); ok && cm.Name == managerapi.CABundleConfigMap {
				logger.Error(nil, "The CA bundle ConfigMap was deleted; keeping the last bundle")
			}
		},
	})
	if err != nil {
		return nil, fmt.Errorf("watch the CA bundle: %w", err)
	}
	go informer.RunWithContext(ctx)
	return reg.HasSynced, nil
}

func notify(f func()) {
	if f != nil {
		f()
	}
}
