// Package authtest is for tests only: the auth.Reviewer of
// reviewtest.ThisNode over a fake clientset's reviews and pods (a
// reviewtest.API's), for the tests of auth and of the server. Only _test.go
// files import it (make verify keeps it, like every package whose name ends
// in "test", out of the binaries).
package authtest

import (
	"k8s.io/client-go/kubernetes/fake"

	"hostpath.dev/api/runtime/review/reviewtest"
	"hostpath.dev/manager/internal/auth"
)

// NewReviewer is the auth.Reviewer of reviewtest.ThisNode that asks cs's
// TokenReviews, SubjectAccessReviews and pods, with opts (their NodeName
// set to reviewtest.ThisNode).
func NewReviewer(cs *fake.Clientset, opts auth.Options) *auth.Reviewer {
	opts.NodeName = reviewtest.ThisNode
	pods := func(ns string) auth.PodGetter { return cs.CoreV1().Pods(ns) }
	return auth.NewReviewer(cs.AuthenticationV1().TokenReviews(), cs.AuthorizationV1().SubjectAccessReviews(), pods, opts)
}
