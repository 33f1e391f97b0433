package auth_test

import (
	"context"
	"strings"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"hostpath.dev/api/managerapi"
	"hostpath.dev/api/runtime/review"
	"hostpath.dev/manager/internal/auth"
)

// benchToken is as long as a projected service account token (a JWT of
// about 1 KB), so hashing it costs what it costs in a cluster.
var benchToken = "eyJhbGciOiJSUzI1NiIsImtpZCI6ImJlbmNoIn0." + strings.Repeat("x", 900) + "." + strings.Repeat("s", 342)

// BenchmarkAuthorize is one call of a provisioner that the manager knows:
// "hit" is served from the accepted-token and allowed-call caches, as
// nearly every call is; "miss" finds both entries expired (the fake clock
// steps past their lifetimes) and makes a TokenReview and a
// SubjectAccessReview with the fake clientset, for comparison (a real
// review adds a round trip to the API server).
func BenchmarkAuthorize(b *testing.B) {
	attrs := auth.Attributes{Verb: "create", Resource: managerapi.ResourcePools, Subresource: managerapi.SubresourceVolumes, Name: "fast"}
	caller := review.Caller{Token: benchToken}
	for _, tc := range []struct {
		name string
		step time.Duration
	}{
		{"hit", 0},
		{"miss", time.Hour},
	} {
		b.Run(tc.name, func(b *testing.B) {
			ctx := context.Background()
			api := newFakeAPI()
			api.Tokens[benchToken] = api.Tokens["good"]
			clock := clocktesting.NewFakeClock(time.Now())
			opts := auth.DefaultOptions()
			opts.Clock = clock
			r := reviewerOf(api, opts)
			if _, err := r.Authorize(ctx, caller, attrs); err != nil {
				b.Fatal(err)
			}
			calls := api.TokenCalls + api.SARCalls
			b.ReportAllocs()
			for b.Loop() {
				clock.Step(tc.step)
				if _, err := r.Authorize(ctx, caller, attrs); err != nil {
					b.Fatal(err)
				}
			}
			if reviews := api.TokenCalls + api.SARCalls - calls; (reviews == 0) != (tc.step == 0) {
				b.Fatalf("%d reviews in the loop; want %v", reviews, tc.step != 0)
			}
		})
	}
}
