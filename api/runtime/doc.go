// Package runtime is the root of the program runtime the hostpath programs
// share: how a program starts, logs, serves its health and metrics, guards
// its endpoints, runs its workqueues and trims its informer caches. It holds
// no code itself; its packages below do.
//
// It is not the manager's API. That is hostpath.dev/api/managerapi (with
// managerapi/trust, the CA bundle a caller trusts the managers' serving
// certificates by): what a manager serves and how to call it, the only
// thing a program needs to know of another. Nothing under runtime knows of
// volumes, pools or managers; review takes its error reasons and the
// metrics reader's role name from managerapi, so that a refused call reads
// the same from every program. Both live in the api module, the floor all
// three programs stand on (docs/development.md, "Layout").
//
// Who uses which part:
//
//	component  every program (manager, provisioner, host definer) and the
//	           tools built like them (fakenodes, noopprovisioner, the
//	           benchmarks): the shape of main (Main), klog's flags on
//	           pflag, the API client configuration, /healthz, /readyz and
//	           /metrics, the rule that counts a pod as serving, and the Go
//	           heap sized to the container's memory limit (SizeHeap).
//	review     every program: TokenReview and SubjectAccessReview answers,
//	           cached and rationed per caller. Guard protects the /metrics
//	           of all three; the manager's /v1 API authenticates with it too
//	           (manager/internal/auth adds the node-scoped authority).
//	worker     the provisioner (claim sync, reclaim and resize controllers)
//	           and the host definer (its controller, the CSR approver and
//	           signer): typed workqueue workers in sample-controller's shape.
//	profiling  the provisioner and the host definer (--profiling); not the
//	           manager, which keeps net/http/pprof out of its binary.
//	cachetrim  the provisioner and the host definer: the mechanism that
//	           trims each object before an informer caches it (Transform,
//	           with a program's Rules). What each program drops is its own
//	           list, in its internal/app.
//	atomicfile the manager (host ID, serving certificate) and the release
//	           tools (OCI layouts): a file replaced whole or not at all.
//
// And for tests only, never linked into a program (make verify checks):
//
//	dashboardtest  every program's dashboard test: the metrics that
//	               manifests/monitoring/dashboard.json queries are ones the
//	               program exports.
//	review/reviewtest  review's and the manager's authorization tests: a
//	               fake API server answering TokenReviews and
//	               SubjectAccessReviews for the callers manifests/ installs.
package runtime
