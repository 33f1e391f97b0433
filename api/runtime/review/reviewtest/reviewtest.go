// Package reviewtest is a fake API server for the reviews of package review
// and the manager's authorizer: a fake clientset that answers TokenReviews
// from known tokens (honouring audiences as the API server does),
// SubjectAccessReviews from RBAC-like grants, and GETs of the callers'
// pods, counting each. NewCallers fills
// it with the callers that manifests/ installs. Only tests import it.
package reviewtest

import (
	"encoding/base64"
	"fmt"
	"slices"
	"strings"

	authnv1 "k8s.io/api/authentication/v1"
	authzv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"hostpath.dev/api/managerapi"
)

// The manager's node in these tests, another node, and the namespace of
// the callers' service accounts and pods.
const (
	ThisNode  = "node-a"
	OtherNode = "node-b"
	Namespace = "hostpath-system"
)

// APIServerAudience is the audience of a plain service account token.
const APIServerAudience = "https://kubernetes.default.svc"

// ServiceAccount is the user name of the service account name of
// Namespace.
func ServiceAccount(name string) string { return "system:serviceaccount:" + Namespace + ":" + name }

// JWT is a token shaped like a service account's, whose unverified "sub"
// claim is sub (what the review package reads to pick a lane); suffix
// makes it unique. Only a Token entry makes it valid.
func JWT(sub, suffix string) string {
	enc := base64.RawURLEncoding.EncodeToString
	return enc([]byte(`{"alg":"RS256"}`)) + "." + enc([]byte(fmt.Sprintf(`{"sub":%q}`, sub))) + "." + enc([]byte("sig-"+suffix))
}

// Token is a token the fake API server knows.
type Token struct {
	User      string
	Audiences []string // what the token was issued for
	// Confirm is what status.audiences says when the token is accepted;
	// nil means the intersection with spec.audiences, as the API server
	// does.
	Confirm []string
	// Extra is status.user.extra: what the token is bound to.
	Extra map[string]authnv1.ExtraValue
}

// BoundTo is the extra of a token bound to pod (UID "uid-"+pod) on node;
// "" leaves a key out.
func BoundTo(pod, node string) map[string]authnv1.ExtraValue {
	e := map[string]authnv1.ExtraValue{}
	if pod != "" {
		e[managerapi.ExtraPodName], e[managerapi.ExtraPodUID] = authnv1.ExtraValue{pod}, authnv1.ExtraValue{"uid-" + pod}
	}
	if node != "" {
		e[managerapi.ExtraNodeName] = authnv1.ExtraValue{node}
	}
	return e
}

// Pod is a running pod of service account account in Namespace, UID
// "uid-"+name, on node.
func Pod(name, account, node string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: Namespace, Name: name, UID: types.UID("uid-" + name)},
		Spec:       corev1.PodSpec{ServiceAccountName: account, NodeName: node},
		Status:     corev1.PodStatus{Phase: corev1.PodRunning},
	}
}

// API answers TokenReviews from Tokens, SubjectAccessReviews from Grants
// ("user verb resource/subresource name") and pod GETs from Pods, and
// counts the calls. Set it up, then call Clientset.
type API struct {
	Tokens map[string]Token
	Grants map[string]bool
	Pods   []*corev1.Pod
	// FailReviews makes TokenReviews fail as if the API server were
	// unreachable.
	FailReviews bool

	// TokenCalls, SARCalls and PodCalls count the TokenReviews,
	// SubjectAccessReviews and pod GETs; LastTR and LastSAR are the last
	// reviews asked for.
	TokenCalls, SARCalls, PodCalls int
	LastTR                         *authnv1.TokenReview
	LastSAR                        *authzv1.SubjectAccessReview
}

// New returns an API that knows nothing.
func New() *API {
	return &API{Tokens: map[string]Token{}, Grants: map[string]bool{}}
}

// AddToken adds a token of the manager's audience for user, with extra.
func (a *API) AddToken(token, user string, extra map[string]authnv1.ExtraValue) {
	a.Tokens[token] = Token{User: user, Audiences: []string{managerapi.TokenAudience}, Extra: extra}
}

// Grant lets user do verbs on resource ("pools/volumes", "hosts/admin",
// "hosts", ...) with name.
func (a *API) Grant(user, resource, name string, verbs ...string) {
	if !strings.Contains(resource, "/") {
		resource += "/"
	}
	for _, v := range verbs {
		a.Grants[strings.Join([]string{user, v, resource, name}, " ")] = true
	}
}

// GrantURL lets user do verbs on the non-resource URL path, as an RBAC
// rule with nonResourceURLs [path] does.
func (a *API) GrantURL(user, path string, verbs ...string) {
	for _, v := range verbs {
		a.Grants[strings.Join([]string{user, v, "url:" + path}, " ")] = true
	}
}

// allowed reports whether a Grant or GrantURL covers sar.
func (a *API) allowed(sar *authzv1.SubjectAccessReview) bool {
	if nra := sar.Spec.NonResourceAttributes; nra != nil {
		return a.Grants[strings.Join([]string{sar.Spec.User, nra.Verb, "url:" + nra.Path}, " ")]
	}
	ra := sar.Spec.ResourceAttributes
	return ra != nil && ra.Group == managerapi.APIGroup && a.Grants[strings.Join([]string{sar.Spec.User, ra.Verb, ra.Resource + "/" + ra.Subresource, ra.Name}, " ")]
}

// review fills tr's status as the API server would.
func (a *API) review(tr *authnv1.TokenReview) {
	a.LastTR = tr.DeepCopy()
	tok, ok := a.Tokens[tr.Spec.Token]
	if !ok {
		tr.Status = authnv1.TokenReviewStatus{Error: "invalid bearer token"}
		return
	}
	want := tr.Spec.Audiences
	if len(want) == 0 {
		want = []string{APIServerAudience}
	}
	var both []string
	for _, aud := range tok.Audiences {
		if slices.Contains(want, aud) {
			both = append(both, aud)
		}
	}
	if len(both) == 0 {
		tr.Status = authnv1.TokenReviewStatus{Error: fmt.Sprintf("[invalid bearer token, token audiences %q is invalid for the target audiences %q]", tok.Audiences, want)}
		return
	}
	if tok.Confirm != nil {
		both = tok.Confirm
	}
	tr.Status = authnv1.TokenReviewStatus{Authenticated: true, Audiences: both, User: authnv1.UserInfo{
		Username: tok.User, UID: "uid-" + tok.User, Groups: []string{"system:serviceaccounts"}, Extra: tok.Extra,
	}}
}

// Clientset is a fake clientset that answers as a says; the pods are
// objects of its tracker.
func (a *API) Clientset() *fake.Clientset {
	var objects []runtime.Object
	for _, p := range a.Pods {
		objects = append(objects, p)
	}
	cs := fake.NewClientset(objects...)
	cs.PrependReactor("get", "pods", func(k8stesting.Action) (bool, runtime.Object, error) {
		a.PodCalls++
		return false, nil, nil
	})
	cs.PrependReactor("create", "tokenreviews", func(act k8stesting.Action) (bool, runtime.Object, error) {
		a.TokenCalls++
		if a.FailReviews {
			return true, nil, fmt.Errorf("connection refused")
		}
		tr := act.(k8stesting.CreateAction).GetObject().(*authnv1.TokenReview).DeepCopy()
		a.review(tr)
		return true, tr, nil
	})
	cs.PrependReactor("create", "subjectaccessreviews", func(act k8stesting.Action) (bool, runtime.Object, error) {
		a.SARCalls++
		sar := act.(k8stesting.CreateAction).GetObject().(*authzv1.SubjectAccessReview).DeepCopy()
		a.LastSAR = sar
		if a.allowed(sar) {
			sar.Status = authzv1.SubjectAccessReviewStatus{Allowed: true}
		} else {
			sar.Status = authzv1.SubjectAccessReviewStatus{Reason: "no RBAC policy matched"}
		}
		return true, sar, nil
	})
	return cs
}

// NewCallers is an API with the callers of manifests/, on pool "default"
// of ThisNode (the manager's) and OtherNode: the provisioner
// (ClusterRole hostpath-manager-client), the host definer
// (hostpath-manager-hostdefiner), a reader (hostpath-manager-reader), an
// admin (hostpath-manager-admin), and "client", which holds every verb of
// pools/volumes and update pools but not pools/multihostvolumes. Their
// tokens, by name:
//
//	prov-a, prov-b          the provisioner's pods on ThisNode and OtherNode
//	prov-b-without-node     prov-b's, without the node-name extra (old clusters)
//	prov-gone               a pod that no longer exists
//	prov-recreated          prov-a's name with the UID of an earlier pod
//	prov-done               a pod that has finished
//	prov-on-wrong-node      prov-b's pod, but naming ThisNode
//	prov-in-strangers-pod   a pod of another service account
//	node-b                  the provisioner's, bound to the Node OtherNode
//	definer-b               the host definer's pod on OtherNode
//	client-a, client-b      client's pods on ThisNode and OtherNode
//	client-unbound, reader-unbound, admin-unbound
//	                        tokens bound to no pod
func NewCallers() *API {
	a := New()
	all := []string{"get", "list", "create", "update", "resize", "delete"}
	prov, definer, reader, admin, cl := ServiceAccount("provisioner"), ServiceAccount("hostdefiner"), ServiceAccount("reader"), ServiceAccount("admin"), ServiceAccount("client")
	a.Grant(prov, "hosts", ThisNode, "get")
	a.Grant(prov, "pools/volumes", "default", all...)
	a.Grant(prov, "pools/multihostvolumes", "default", "create", "update", "resize", "delete")
	a.Grant(definer, "hosts", ThisNode, "get")
	a.Grant(definer, "pools", "default", "update")
	a.Grant(definer, "pools/volumes", "default", "list", "create", "update")
	a.Grant(definer, "pools/multihostvolumes", "default", "create", "update")
	a.Grant(reader, "hosts", ThisNode, "get")
	a.Grant(reader, "pools/volumes", "default", "get", "list")
	a.Grant(cl, "pools/volumes", "default", all...)
	a.Grant(cl, "pools", "default", "update")
	a.Grant(admin, "hosts", ThisNode, "get")
	a.Grant(admin, "pools", "default", "update")
	a.Grant(admin, "pools/volumes", "default", all...)
	a.Grant(admin, "hosts/admin", ThisNode, "create", "update", "resize", "delete")

	done := Pod("prov-done", "provisioner", ThisNode)
	done.Status.Phase = corev1.PodSucceeded
	a.Pods = []*corev1.Pod{
		Pod("prov-a", "provisioner", ThisNode),
		Pod("prov-b", "provisioner", OtherNode),
		Pod("definer-b", "hostdefiner", OtherNode),
		Pod("client-b", "client", OtherNode),
		Pod("client-a", "client", ThisNode),
		Pod("stranger-a", "other", ThisNode),
		done,
	}

	a.AddToken("prov-a", prov, BoundTo("prov-a", ThisNode))
	a.AddToken("prov-b", prov, BoundTo("prov-b", OtherNode))
	a.AddToken("prov-b-without-node", prov, BoundTo("prov-b", ""))
	a.AddToken("prov-gone", prov, BoundTo("prov-old", ThisNode))
	recreated := BoundTo("prov-a", ThisNode)
	recreated[managerapi.ExtraPodUID] = authnv1.ExtraValue{"uid-of-an-earlier-prov-a"}
	a.AddToken("prov-recreated", prov, recreated)
	a.AddToken("prov-done", prov, BoundTo("prov-done", ThisNode))
	a.AddToken("prov-on-wrong-node", prov, BoundTo("prov-b", ThisNode))
	a.AddToken("prov-in-strangers-pod", prov, BoundTo("stranger-a", ThisNode))
	a.AddToken("node-b", prov, BoundTo("", OtherNode))
	a.AddToken("definer-b", definer, BoundTo("definer-b", OtherNode))
	a.AddToken("client-a", cl, BoundTo("client-a", ThisNode))
	a.AddToken("client-b", cl, BoundTo("client-b", OtherNode))
	a.AddToken("client-unbound", cl, nil)
	a.AddToken("reader-unbound", reader, nil)
	a.AddToken("admin-unbound", admin, nil)
	return a
}
