package kube

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	authnv1 "k8s.io/api/authentication/v1"
	authzv1 "k8s.io/api/authorization/v1"
	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2/ktesting"

	"hostpath.dev/api/managerapi/trust/trusttest"
)

const (
	protobuf   = "application/vnd.kubernetes.protobuf"
	userAgent  = "hostpath-test"
	csrName    = "csr-abcde"
	bundleName = "hostpath-manager-ca"
)

// apiServer answers one request at a time as the API server would, in
// JSON, and keeps what it was asked.
type apiServer struct {
	t *testing.T
	// answer is what the next request gets: an object, or for a watch
	// the events to stream.
	answer any
	status int

	mu   sync.Mutex
	last *http.Request
	body runtime.Object
}

// newClient starts an apiServer and returns a Client of it.
func newClient(t *testing.T) (*Client, *apiServer) {
	t.Helper()
	api := &apiServer{t: t}
	srv := httptest.NewServer(api)
	t.Cleanup(srv.Close)
	c, err := New(&rest.Config{Host: srv.URL, QPS: 50, Burst: 100, UserAgent: userAgent})
	if err != nil {
		t.Fatal(err)
	}
	return c, api
}

func (a *apiServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.last, a.body = r, nil
	if r.Method == http.MethodPost {
		data, err := io.ReadAll(r.Body)
		if err != nil {
			a.t.Errorf("read the body: %v", err)
		}
		if a.body, _, err = codecs.UniversalDeserializer().Decode(data, nil, nil); err != nil {
			a.t.Errorf("decode the body (%s): %v", r.Header.Get("Content-Type"), err)
		}
	}
	w.Header().Set("Content-Type", "application/json")
	if a.status != 0 {
		w.WriteHeader(a.status)
	}
	events, ok := a.answer.([]watch.Event)
	if !ok {
		_ = json.NewEncoder(w).Encode(a.answer)
		return
	}
	for _, e := range events {
		_ = json.NewEncoder(w).Encode(metav1.WatchEvent{Type: string(e.Type), Object: runtime.RawExtension{Object: e.Object}})
		w.(http.Flusher).Flush()
	}
}

// request returns the last request and its decoded body.
func (a *apiServer) request() (*http.Request, runtime.Object) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.last, a.body
}

// check checks the last request: its method, path and query, protobuf
// preferred as a clientset's typed clients do, and the user agent.
func (a *apiServer) check(t *testing.T, method, path string, query url.Values) runtime.Object {
	t.Helper()
	r, body := a.request()
	if r == nil {
		t.Fatal("no request")
	}
	if r.Method != method || r.URL.Path != path {
		t.Errorf("request %s %s; want %s %s", r.Method, r.URL.Path, method, path)
	}
	if got := r.URL.Query(); got.Encode() != query.Encode() {
		t.Errorf("query %q; want %q", got.Encode(), query.Encode())
	}
	if got := r.Header.Get("Accept"); got != protobuf+",application/json" {
		t.Errorf("Accept %q; want protobuf, then JSON", got)
	}
	if got := r.Header.Get("Content-Type"); method == http.MethodPost && got != protobuf {
		t.Errorf("Content-Type %q; want %s", got, protobuf)
	}
	if got := r.Header.Get("User-Agent"); got != userAgent {
		t.Errorf("User-Agent %q; want %q", got, userAgent)
	}
	return body
}

func TestTokenReviews(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	c, api := newClient(t)
	api.answer = &authnv1.TokenReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "authentication.k8s.io/v1", Kind: "TokenReview"},
		Status:   authnv1.TokenReviewStatus{Authenticated: true, Audiences: []string{"hostpath.dev/manager"}, User: authnv1.UserInfo{Username: "alice"}},
	}
	got, err := c.TokenReviews().Create(ctx, &authnv1.TokenReview{Spec: authnv1.TokenReviewSpec{Token: "t", Audiences: []string{"hostpath.dev/manager"}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	sent, ok := api.check(t, "POST", "/apis/authentication.k8s.io/v1/tokenreviews", nil).(*authnv1.TokenReview)
	if !ok || sent.Spec.Token != "t" || len(sent.Spec.Audiences) != 1 {
		t.Errorf("sent %+v; want the review of token t", sent)
	}
	if !got.Status.Authenticated || got.Status.User.Username != "alice" || len(got.Status.Audiences) != 1 {
		t.Errorf("got %+v; want alice's", got.Status)
	}
}

func TestSubjectAccessReviews(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	c, api := newClient(t)
	api.answer = &authzv1.SubjectAccessReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "authorization.k8s.io/v1", Kind: "SubjectAccessReview"},
		Status:   authzv1.SubjectAccessReviewStatus{Allowed: true, Reason: "RBAC"},
	}
	ra := &authzv1.ResourceAttributes{Group: "hostpath.dev", Resource: "pools", Subresource: "volumes", Verb: "create", Name: "fast"}
	got, err := c.SubjectAccessReviews().Create(ctx, &authzv1.SubjectAccessReview{Spec: authzv1.SubjectAccessReviewSpec{User: "alice", ResourceAttributes: ra}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	sent, ok := api.check(t, "POST", "/apis/authorization.k8s.io/v1/subjectaccessreviews", nil).(*authzv1.SubjectAccessReview)
	if !ok || sent.Spec.User != "alice" || sent.Spec.ResourceAttributes == nil || *sent.Spec.ResourceAttributes != *ra {
		t.Errorf("sent %+v; want alice's review", sent)
	}
	if !got.Status.Allowed || got.Status.Reason != "RBAC" {
		t.Errorf("got %+v; want allowed", got.Status)
	}
}

// csr is the CSR the API server has, signed with certificate cert when
// not empty.
func csr(cert string) *certificatesv1.CertificateSigningRequest {
	return &certificatesv1.CertificateSigningRequest{
		TypeMeta:   metav1.TypeMeta{APIVersion: "certificates.k8s.io/v1", Kind: "CertificateSigningRequest"},
		ObjectMeta: metav1.ObjectMeta{Name: csrName, UID: types.UID("uid-1"), ResourceVersion: "7"},
		Spec:       certificatesv1.CertificateSigningRequestSpec{SignerName: "hostpath.dev/manager-serving", Request: []byte("CSR")},
		Status:     certificatesv1.CertificateSigningRequestStatus{Certificate: []byte(cert)},
	}
}

func TestCertificateSigningRequests(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	c, api := newClient(t)
	csrs := c.CertificateSigningRequests()
	const path = "/apis/certificates.k8s.io/v1/certificatesigningrequests"
	selected := metav1.ListOptions{FieldSelector: "metadata.name=" + csrName}

	api.answer = csr("")
	created, err := csrs.Create(ctx, &certificatesv1.CertificateSigningRequest{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "csr-"},
		Spec:       certificatesv1.CertificateSigningRequestSpec{SignerName: "hostpath.dev/manager-serving", Request: []byte("CSR")},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if sent, ok := api.check(t, "POST", path, nil).(*certificatesv1.CertificateSigningRequest); !ok || sent.GenerateName != "csr-" || string(sent.Spec.Request) != "CSR" {
		t.Errorf("sent %+v; want the new CSR", sent)
	}
	if created.Name != csrName || created.UID != "uid-1" {
		t.Errorf("created %s (%s); want %s", created.Name, created.UID, csrName)
	}

	got, err := csrs.Get(ctx, csrName, metav1.GetOptions{})
	api.check(t, "GET", path+"/"+csrName, nil)
	if err != nil || got.Name != csrName || got.Spec.SignerName != "hostpath.dev/manager-serving" {
		t.Errorf("Get = %+v, %v", got, err)
	}

	api.answer = &certificatesv1.CertificateSigningRequestList{
		TypeMeta: metav1.TypeMeta{APIVersion: "certificates.k8s.io/v1", Kind: "CertificateSigningRequestList"},
		ListMeta: metav1.ListMeta{ResourceVersion: "7"},
		Items:    []certificatesv1.CertificateSigningRequest{*csr("")},
	}
	l, err := csrs.List(ctx, selected)
	api.check(t, "GET", path, url.Values{"fieldSelector": {"metadata.name=" + csrName}})
	if err != nil || len(l.Items) != 1 || l.Items[0].Name != csrName || l.ResourceVersion != "7" {
		t.Errorf("List = %+v, %v", l, err)
	}

	api.answer = []watch.Event{{Type: watch.Modified, Object: csr("CERT")}}
	selected.ResourceVersion = "7"
	events := watchAll(t, ctx, func() (watch.Interface, error) { return csrs.Watch(ctx, selected) })
	api.check(t, "GET", path, url.Values{"fieldSelector": {"metadata.name=" + csrName}, "resourceVersion": {"7"}, "watch": {"true"}})
	if len(events) != 1 || events[0].Type != watch.Modified {
		t.Fatalf("watch events %+v; want one Modified", events)
	}
	if got, ok := events[0].Object.(*certificatesv1.CertificateSigningRequest); !ok || string(got.Status.Certificate) != "CERT" {
		t.Errorf("watched %#v; want the signed CSR", events[0].Object)
	}
}

// TestConfigMaps lists and watches the CA bundle ConfigMap as
// trust.WatchConfigMaps does: the field selector is in the URL, so that a
// Role may grant the one ConfigMap by resourceNames.
func TestConfigMaps(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	c, api := newClient(t)
	cms := c.ConfigMaps("hostpath-system")
	const path = "/api/v1/namespaces/hostpath-system/configmaps"
	selected := metav1.ListOptions{FieldSelector: "metadata.name=" + bundleName}

	api.answer = &corev1.ConfigMapList{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMapList"},
		ListMeta: metav1.ListMeta{ResourceVersion: "3"},
		Items:    []corev1.ConfigMap{*trusttest.ConfigMap("hostpath-system", bundleName, []byte("one"))},
	}
	l, err := cms.List(ctx, selected)
	api.check(t, "GET", path, url.Values{"fieldSelector": {"metadata.name=" + bundleName}})
	if err != nil || len(l.Items) != 1 || l.Items[0].Data["ca.crt"] != "one" {
		t.Errorf("List = %+v, %v", l, err)
	}

	two := trusttest.ConfigMap("hostpath-system", bundleName, []byte("two"))
	api.answer = []watch.Event{{Type: watch.Modified, Object: two}, {Type: watch.Deleted, Object: two}}
	timeout := int64(30)
	selected.ResourceVersion, selected.TimeoutSeconds, selected.AllowWatchBookmarks = "3", &timeout, true
	events := watchAll(t, ctx, func() (watch.Interface, error) { return cms.Watch(ctx, selected) })
	api.check(t, "GET", path, url.Values{"fieldSelector": {"metadata.name=" + bundleName}, "resourceVersion": {"3"},
		"timeoutSeconds": {"30"}, "timeout": {"30s"}, "allowWatchBookmarks": {"true"}, "watch": {"true"}})
	var got []string
	for _, e := range events {
		cm, ok := e.Object.(*corev1.ConfigMap)
		if !ok {
			t.Fatalf("watched a %T", e.Object)
		}
		got = append(got, string(e.Type)+" "+cm.Data["ca.crt"])
	}
	if strings.Join(got, ", ") != "MODIFIED two, DELETED two" {
		t.Errorf("watch events %q", got)
	}
}

// TestPods gets a pod as the auth package does, to check that the pod a
// token is bound to is still there.
func TestPods(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	c, api := newClient(t)
	api.answer = &corev1.Pod{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{Namespace: "hostpath-system", Name: "p", UID: types.UID("uid-p")},
		Spec:       corev1.PodSpec{NodeName: "node-1", ServiceAccountName: "sa"},
	}
	got, err := c.Pods("hostpath-system").Get(ctx, "p", metav1.GetOptions{})
	api.check(t, "GET", "/api/v1/namespaces/hostpath-system/pods/p", nil)
	if err != nil || got.UID != "uid-p" || got.Spec.NodeName != "node-1" {
		t.Errorf("Get = %+v, %v", got, err)
	}
}

// TestPersistentVolumes gets a PV, a claim and a class as the disk package does
// (through Owners), before a caller bound to another node changes a
// multihost copy.
func TestPersistentVolumes(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	c, api := newClient(t)
	api.answer = &corev1.PersistentVolume{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "PersistentVolume"},
		ObjectMeta: metav1.ObjectMeta{Name: "pvc-1"},
		Status:     corev1.PersistentVolumeStatus{Phase: corev1.VolumeBound},
	}
	pv, err := c.PersistentVolumes().Get(ctx, "pvc-1", metav1.GetOptions{})
	api.check(t, "GET", "/api/v1/persistentvolumes/pvc-1", nil)
	if err != nil || pv.Name != "pvc-1" || pv.Status.Phase != corev1.VolumeBound {
		t.Errorf("Get = %+v, %v", pv, err)
	}
	api.answer = &corev1.PersistentVolumeClaim{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "PersistentVolumeClaim"},
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "data", UID: types.UID("1")},
	}
	claim, err := c.PersistentVolumeClaims("ns").Get(ctx, "data", metav1.GetOptions{})
	api.check(t, "GET", "/api/v1/namespaces/ns/persistentvolumeclaims/data", nil)
	if err != nil || claim.UID != "1" {
		t.Errorf("Get = %+v, %v", claim, err)
	}
	api.answer = &storagev1.StorageClass{
		TypeMeta:   metav1.TypeMeta{APIVersion: "storage.k8s.io/v1", Kind: "StorageClass"},
		ObjectMeta: metav1.ObjectMeta{Name: "shared"}, Parameters: map[string]string{"mode": "multihost"},
	}
	class, err := c.StorageClasses().Get(ctx, "shared", metav1.GetOptions{})
	api.check(t, "GET", "/apis/storage.k8s.io/v1/storageclasses/shared", nil)
	if err != nil || class.Parameters["mode"] != "multihost" {
		t.Errorf("Get = %+v, %v", class, err)
	}
}

// watchAll starts a watch and returns its events until the server ends it.
func watchAll(t *testing.T, ctx context.Context, start func() (watch.Interface, error)) []watch.Event {
	t.Helper()
	w, err := start()
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	var events []watch.Event
	timeout := time.After(30 * time.Second)
	for {
		select {
		case e, ok := <-w.ResultChan():
			if !ok {
				return events
			}
			events = append(events, e)
		case <-timeout:
			t.Fatalf("the watch did not end; events so far %+v", events)
		case <-ctx.Done():
			t.Fatal(ctx.Err())
		}
	}
}

// TestErrors: an API error answer is the apierrors error of its Status.
func TestErrors(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	c, api := newClient(t)
	api.status = http.StatusForbidden
	api.answer = &metav1.Status{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Status"},
		Status:   metav1.StatusFailure, Reason: metav1.StatusReasonForbidden, Code: http.StatusForbidden,
		Message: `configmaps "hostpath-manager-ca" is forbidden: User "x" cannot list resource "configmaps"`,
	}
	if _, err := c.ConfigMaps("hostpath-system").List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "cannot list") {
		t.Errorf("List = %v; want the Forbidden status", err)
	}
	if _, err := c.TokenReviews().Create(ctx, &authnv1.TokenReview{}, metav1.CreateOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("Create = %v; want the Forbidden status", err)
	}
}

func TestNew(t *testing.T) {
	if _, err := New(&rest.Config{Host: "https://127.0.0.1:1", QPS: 5}); err == nil || !strings.Contains(err.Error(), "burst") {
		t.Errorf("New with a QPS and no burst = %v; want an error", err)
	}
	c, err := New(&rest.Config{Host: "https://127.0.0.1:1", QPS: 5, Burst: 10})
	if err != nil {
		t.Fatal(err)
	}
	// One rate limiter for all the groups, as in a clientset.
	limiter := c.authn.GetRateLimiter()
	for _, rc := range []rest.Interface{c.authz, c.certificates, c.core} {
		if rc.GetRateLimiter() != limiter || limiter == nil {
			t.Errorf("the REST clients do not share one rate limiter")
		}
	}
}

// recorded is what a request said, all but the connection.
type recorded struct {
	Method, URL, Accept, ContentType, UserAgent, Body string
}

// recorder keeps the requests it gets and answers each with answer (a
// list or an object, or an empty watch).
type recorder struct {
	mu       sync.Mutex
	requests []recorded
	answer   runtime.Object
}

func (r *recorder) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	body, _ := io.ReadAll(req.Body)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.requests = append(r.requests, recorded{req.Method, req.URL.String(), req.Header.Get("Accept"), req.Header.Get("Content-Type"), req.Header.Get("User-Agent"), string(body)})
	w.Header().Set("Content-Type", "application/json")
	if req.URL.Query().Get("watch") == "true" {
		return
	}
	_ = json.NewEncoder(w).Encode(r.answer)
}

// calls are the calls the manager makes, of the Client or of a clientset.
type calls struct {
	tokens interface {
		Create(context.Context, *authnv1.TokenReview, metav1.CreateOptions) (*authnv1.TokenReview, error)
	}
	sars interface {
		Create(context.Context, *authzv1.SubjectAccessReview, metav1.CreateOptions) (*authzv1.SubjectAccessReview, error)
	}
	csrs interface {
		Create(context.Context, *certificatesv1.CertificateSigningRequest, metav1.CreateOptions) (*certificatesv1.CertificateSigningRequest, error)
		Get(context.Context, string, metav1.GetOptions) (*certificatesv1.CertificateSigningRequest, error)
		List(context.Context, metav1.ListOptions) (*certificatesv1.CertificateSigningRequestList, error)
		Watch(context.Context, metav1.ListOptions) (watch.Interface, error)
	}
	configMaps interface {
		List(context.Context, metav1.ListOptions) (*corev1.ConfigMapList, error)
		Watch(context.Context, metav1.ListOptions) (watch.Interface, error)
	}
	pods interface {
		Get(context.Context, string, metav1.GetOptions) (*corev1.Pod, error)
	}
	pvs     PVGetter
	claims  ClaimGetter
	classes ClassGetter
}

// TestSameRequestsAsClientset makes each call with the Client and with a
// clientset of the same rest.Config: the requests must be the same, byte
// for byte.
func TestSameRequestsAsClientset(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	rec := &recorder{}
	srv := httptest.NewServer(rec)
	t.Cleanup(srv.Close)
	cfg := &rest.Config{Host: srv.URL, QPS: 50, Burst: 100, UserAgent: userAgent}
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ours := calls{c.TokenReviews(), c.SubjectAccessReviews(), c.CertificateSigningRequests(), c.ConfigMaps("ns"), c.Pods("ns"), c.PersistentVolumes(), c.PersistentVolumeClaims("ns"), c.StorageClasses()}
	theirs := calls{cs.AuthenticationV1().TokenReviews(), cs.AuthorizationV1().SubjectAccessReviews(), cs.CertificatesV1().CertificateSigningRequests(), cs.CoreV1().ConfigMaps("ns"), cs.CoreV1().Pods("ns"),
		cs.CoreV1().PersistentVolumes(), cs.CoreV1().PersistentVolumeClaims("ns"), cs.StorageV1().StorageClasses()}

	tr := &authnv1.TokenReview{Spec: authnv1.TokenReviewSpec{Token: "t", Audiences: []string{"hostpath.dev/manager"}}}
	sar := &authzv1.SubjectAccessReview{Spec: authzv1.SubjectAccessReviewSpec{User: "alice", Groups: []string{"g"}, Extra: map[string]authzv1.ExtraValue{"k": {"v"}},
		ResourceAttributes: &authzv1.ResourceAttributes{Group: "hostpath.dev", Resource: "pools", Subresource: "volumes", Verb: "create", Name: "fast"}}}
	newCSR := &certificatesv1.CertificateSigningRequest{ObjectMeta: metav1.ObjectMeta{GenerateName: "csr-"},
		Spec: certificatesv1.CertificateSigningRequestSpec{SignerName: "hostpath.dev/manager-serving", Request: []byte("CSR"), Usages: []certificatesv1.KeyUsage{certificatesv1.UsageServerAuth}}}
	timeout := int64(300)
	sel := metav1.ListOptions{FieldSelector: "metadata.name=x", ResourceVersion: "5", TimeoutSeconds: &timeout, AllowWatchBookmarks: true}
	stop := func(w watch.Interface, err error) error {
		if w != nil {
			w.Stop()
		}
		return err
	}
	for _, tc := range []struct {
		desc   string
		answer runtime.Object
		call   func(calls) error
	}{
		{"TokenReview create", &authnv1.TokenReview{}, func(c calls) error {
			_, err := c.tokens.Create(ctx, tr, metav1.CreateOptions{})
			return err
		}},
		{"SubjectAccessReview create", &authzv1.SubjectAccessReview{}, func(c calls) error {
			_, err := c.sars.Create(ctx, sar, metav1.CreateOptions{})
			return err
		}},
		{"CSR create", csr(""), func(c calls) error {
			_, err := c.csrs.Create(ctx, newCSR, metav1.CreateOptions{})
			return err
		}},
		{"CSR get", csr(""), func(c calls) error {
			_, err := c.csrs.Get(ctx, csrName, metav1.GetOptions{})
			return err
		}},
		{"CSR list", &certificatesv1.CertificateSigningRequestList{}, func(c calls) error {
			_, err := c.csrs.List(ctx, sel)
			return err
		}},
		{"CSR watch", nil, func(c calls) error { return stop(c.csrs.Watch(ctx, sel)) }},
		{"ConfigMap list", &corev1.ConfigMapList{}, func(c calls) error {
			_, err := c.configMaps.List(ctx, sel)
			return err
		}},
		{"ConfigMap watch", nil, func(c calls) error { return stop(c.configMaps.Watch(ctx, sel)) }},
		{"Pod get", &corev1.Pod{}, func(c calls) error {
			_, err := c.pods.Get(ctx, "p", metav1.GetOptions{})
			return err
		}},
		{"PersistentVolume get", &corev1.PersistentVolume{}, func(c calls) error {
			_, err := c.pvs.Get(ctx, "pvc-1", metav1.GetOptions{})
			return err
		}},
		{"PersistentVolumeClaim get", &corev1.PersistentVolumeClaim{}, func(c calls) error {
			_, err := c.claims.Get(ctx, "data", metav1.GetOptions{})
			return err
		}},
		{"StorageClass get", &storagev1.StorageClass{}, func(c calls) error {
			_, err := c.classes.Get(ctx, "shared", metav1.GetOptions{})
			return err
		}},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			rec.mu.Lock()
			rec.requests, rec.answer = nil, tc.answer
			rec.mu.Unlock()
			if err := tc.call(ours); err != nil {
				t.Fatalf("the Client: %v", err)
			}
			if err := tc.call(theirs); err != nil {
				t.Fatalf("the clientset: %v", err)
			}
			rec.mu.Lock()
			defer rec.mu.Unlock()
			if len(rec.requests) != 2 || rec.requests[0] != rec.requests[1] {
				t.Errorf("requests (the Client's, then the clientset's):\n%+v", rec.requests)
			}
		})
	}
}
