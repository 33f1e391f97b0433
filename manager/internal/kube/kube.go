// Package kube is the manager's client of the Kubernetes API: the few calls
// it makes, and nothing else.
//
//   - TokenReviews().Create and SubjectAccessReviews().Create, for the auth
//     package (authentication.k8s.io/v1, authorization.k8s.io/v1);
//   - CertificateSigningRequests() Create, Get, List and Watch, for the
//     serving certificate (certs; certificates.k8s.io/v1);
//   - ConfigMaps(namespace) List and Watch, for the CA bundle
//     (trust.WatchConfigMaps; v1);
//   - Pods(namespace) Get, for the auth package: is the pod a caller's
//     token is bound to still there, on its node (v1);
//   - PersistentVolumes() Get and PersistentVolumeClaims(namespace) Get,
//     for the disk package through Owners: before a caller bound to
//     another node removes or re-owns a multihost copy, is its PV gone,
//     and before it creates one, is its claim there (v1);
//   - StorageClasses() Get, for the same creates: is the claim's class
//     of mode multihost (storage.k8s.io/v1).
//
// Each call is what a clientset's typed client sends: the same paths and
// query parameters (a field selector stays in the URL, so that RBAC can
// grant one ConfigMap by resourceNames), protobuf preferred with JSON
// accepted, one HTTP client and one rate limiter (the rest.Config's QPS and
// burst) for all of them, and the rest.Config's user agent. The consumers
// declare what they call as small interfaces, which a clientset's typed
// clients satisfy too, so their tests may use client-go's fake clientset.
//
// Why not the clientset (k8s.io/client-go/kubernetes), nor client-go's
// informers and csr packages, which take one: the clientset links a typed
// client for every API group, and its scheme package registers every type
// of every group when the program starts, memory held for life, while the
// manager uses eight resources. Here the scheme holds only their types, and
// the manager's go list -deps has no k8s.io/client-go/kubernetes. What that
// saves in binary size and resident memory, and how it was measured, is in
// docs/benchmarks.md, "The manager's own API client".
package kube

import (
	"context"
	"fmt"

	authnv1 "k8s.io/api/authentication/v1"
	authzv1 "k8s.io/api/authorization/v1"
	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/flowcontrol"
)

// Scheme holds the types the Client sends and receives, and no others.
var Scheme = newScheme()

var (
	codecs         = serializer.NewCodecFactory(Scheme)
	parameterCodec = runtime.NewParameterCodec(Scheme)
)

// newScheme registers the authentication, authorization and certificates
// groups (a few types each), of the core group ConfigMap, Pod,
// PersistentVolume and PersistentVolumeClaim alone, and of the storage
// group StorageClass alone.
func newScheme() *runtime.Scheme {
	s := runtime.NewScheme()
	utilruntime.Must(authnv1.AddToScheme(s))
	utilruntime.Must(authzv1.AddToScheme(s))
	utilruntime.Must(certificatesv1.AddToScheme(s))
	s.AddKnownTypes(corev1.SchemeGroupVersion, &corev1.ConfigMap{}, &corev1.ConfigMapList{}, &corev1.Pod{},
		&corev1.PersistentVolume{}, &corev1.PersistentVolumeClaim{})
	metav1.AddToGroupVersion(s, corev1.SchemeGroupVersion)
	s.AddKnownTypes(storagev1.SchemeGroupVersion, &storagev1.StorageClass{})
	metav1.AddToGroupVersion(s, storagev1.SchemeGroupVersion)
	return s
}

// Client makes the manager's API calls. Its methods return values that
// are cheap to copy; all are safe for concurrent use.
type Client struct {
	authn, authz, certificates, core, storage rest.Interface
}

// New returns a Client configured by cfg (component.RESTConfig's): its
// calls share one HTTP client and, unless cfg has a RateLimiter, one token
// bucket of cfg.QPS and cfg.Burst, as a clientset's do.
func New(cfg *rest.Config) (*Client, error) {
	shared := *cfg
	if shared.UserAgent == "" {
		shared.UserAgent = rest.DefaultKubernetesUserAgent()
	}
	if shared.RateLimiter == nil && shared.QPS > 0 {
		if shared.Burst <= 0 {
			return nil, fmt.Errorf("create the API client: a burst is needed with a QPS of %v", shared.QPS)
		}
		shared.RateLimiter = flowcontrol.NewTokenBucketRateLimiter(shared.QPS, shared.Burst)
	}
	httpClient, err := rest.HTTPClientFor(&shared)
	if err != nil {
		return nil, fmt.Errorf("create the API client: %w", err)
	}
	var c Client
	for _, gv := range []struct {
		client  *rest.Interface
		version schema.GroupVersion
	}{
		{&c.authn, authnv1.SchemeGroupVersion},
		{&c.authz, authzv1.SchemeGroupVersion},
		{&c.certificates, certificatesv1.SchemeGroupVersion},
		{&c.core, corev1.SchemeGroupVersion},
		{&c.storage, storagev1.SchemeGroupVersion},
	} {
		gcfg := shared
		gcfg.GroupVersion, gcfg.APIPath = &gv.version, "/apis"
		if gv.version.Group == "" {
			gcfg.APIPath = "/api"
		}
		gcfg.NegotiatedSerializer = codecs.WithoutConversion()
		rc, err := rest.RESTClientForConfigAndClient(&gcfg, httpClient)
		if err != nil {
			return nil, fmt.Errorf("create the API client of %s: %w", gv.version, err)
		}
		*gv.client = rc
	}
	return &c, nil
}

// TokenReviews creates TokenReviews.
func (c *Client) TokenReviews() TokenReviews {
	return TokenReviews{resource{client: c.authn, name: "tokenreviews"}}
}

// SubjectAccessReviews creates SubjectAccessReviews.
func (c *Client) SubjectAccessReviews() SubjectAccessReviews {
	return SubjectAccessReviews{resource{client: c.authz, name: "subjectaccessreviews"}}
}

// CertificateSigningRequests creates, gets, lists and watches
// CertificateSigningRequests.
func (c *Client) CertificateSigningRequests() CertificateSigningRequests {
	return CertificateSigningRequests{resource{client: c.certificates, name: "certificatesigningrequests"}}
}

// ConfigMaps lists and watches the ConfigMaps of namespace.
func (c *Client) ConfigMaps(namespace string) ConfigMaps {
	return ConfigMaps{resource{client: c.core, name: "configmaps", namespace: namespace}}
}

// Pods gets the pods of namespace.
func (c *Client) Pods(namespace string) Pods {
	return Pods{resource{client: c.core, name: "pods", namespace: namespace}}
}

// PersistentVolumes gets PersistentVolumes.
func (c *Client) PersistentVolumes() PersistentVolumes {
	return PersistentVolumes{resource{client: c.core, name: "persistentvolumes"}}
}

// PersistentVolumeClaims gets the PersistentVolumeClaims of namespace.
func (c *Client) PersistentVolumeClaims(namespace string) PersistentVolumeClaims {
	return PersistentVolumeClaims{resource{client: c.core, name: "persistentvolumeclaims", namespace: namespace}}
}

// StorageClasses gets StorageClasses.
func (c *Client) StorageClasses() StorageClasses {
	return StorageClasses{resource{client: c.storage, name: "storageclasses"}}
}

// TokenReviews is the tokenreviews resource.
type TokenReviews struct{ r resource }

// Create asks the API server to review tr's token.
func (t TokenReviews) Create(ctx context.Context, tr *authnv1.TokenReview, opts metav1.CreateOptions) (*authnv1.TokenReview, error) {
	return create(ctx, t.r, tr, opts)
}

// SubjectAccessReviews is the subjectaccessreviews resource.
type SubjectAccessReviews struct{ r resource }

// Create asks the API server whether sar's subject may do its action.
func (s SubjectAccessReviews) Create(ctx context.Context, sar *authzv1.SubjectAccessReview, opts metav1.CreateOptions) (*authzv1.SubjectAccessReview, error) {
	return create(ctx, s.r, sar, opts)
}

// CertificateSigningRequests is the certificatesigningrequests resource.
type CertificateSigningRequests struct{ r resource }

// Create creates csr.
func (c CertificateSigningRequests) Create(ctx context.Context, csr *certificatesv1.CertificateSigningRequest, opts metav1.CreateOptions) (*certificatesv1.CertificateSigningRequest, error) {
	return create(ctx, c.r, csr, opts)
}

// Get returns the CSR name.
func (c CertificateSigningRequests) Get(ctx context.Context, name string, opts metav1.GetOptions) (*certificatesv1.CertificateSigningRequest, error) {
	return get[certificatesv1.CertificateSigningRequest](ctx, c.r, name, opts)
}

// List lists the CSRs opts selects.
func (c CertificateSigningRequests) List(ctx context.Context, opts metav1.ListOptions) (*certificatesv1.CertificateSigningRequestList, error) {
	return list[certificatesv1.CertificateSigningRequestList](ctx, c.r, opts)
}

// Watch watches the CSRs opts selects.
func (c CertificateSigningRequests) Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	return c.r.watch(ctx, opts)
}

// ConfigMaps is the configmaps resource of one namespace.
type ConfigMaps struct{ r resource }

// List lists the ConfigMaps opts selects.
func (c ConfigMaps) List(ctx context.Context, opts metav1.ListOptions) (*corev1.ConfigMapList, error) {
	return list[corev1.ConfigMapList](ctx, c.r, opts)
}

// Watch watches the ConfigMaps opts selects.
func (c ConfigMaps) Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	return c.r.watch(ctx, opts)
}

// Pods is the pods resource of one namespace.
type Pods struct{ r resource }

// Get returns the pod name.
func (p Pods) Get(ctx context.Context, name string, opts metav1.GetOptions) (*corev1.Pod, error) {
	return get[corev1.Pod](ctx, p.r, name, opts)
}

// PersistentVolumes is the persistentvolumes resource.
type PersistentVolumes struct{ r resource }

// Get returns the PersistentVolume name.
func (p PersistentVolumes) Get(ctx context.Context, name string, opts metav1.GetOptions) (*corev1.PersistentVolume, error) {
	return get[corev1.PersistentVolume](ctx, p.r, name, opts)
}

// PersistentVolumeClaims is the persistentvolumeclaims resource of one
// namespace.
type PersistentVolumeClaims struct{ r resource }

// Get returns the PersistentVolumeClaim name.
func (p PersistentVolumeClaims) Get(ctx context.Context, name string, opts metav1.GetOptions) (*corev1.PersistentVolumeClaim, error) {
	return get[corev1.PersistentVolumeClaim](ctx, p.r, name, opts)
}

// StorageClasses is the storageclasses resource.
type StorageClasses struct{ r resource }

// Get returns the StorageClass name.
func (c StorageClasses) Get(ctx context.Context, name string, opts metav1.GetOptions) (*storagev1.StorageClass, error) {
	return get[storagev1.StorageClass](ctx, c.r, name, opts)
}
