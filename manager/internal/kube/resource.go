package kube

import (
	"context"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
)

// resource is where the objects of one resource are: the REST client of
// its group version, its plural name and, for a namespaced resource, the
// namespace.
type resource struct {
	client    rest.Interface
	name      string
	namespace string
}

// request starts a request of verb on r, preferring protobuf as a
// clientset's typed clients do for the built-in types.
func (r resource) request(verb string) *rest.Request {
	return r.client.Verb(verb).UseProtobufAsDefault().
		NamespaceIfScoped(r.namespace, r.namespace != "").
		Resource(r.name)
}

// object is a pointer to an API type T.
type object[T any] interface {
	*T
	runtime.Object
}

// create posts obj to r and returns what the API server answered.
func create[T any, P object[T]](ctx context.Context, r resource, obj P, opts metav1.CreateOptions) (P, error) {
	result := P(new(T))
	if err := r.request("POST").VersionedParams(&opts, parameterCodec).Body(obj).Do(ctx).Into(result); err != nil {
		return nil, err
	}
	return result, nil
}

// get returns the object name of r.
func get[T any, P object[T]](ctx context.Context, r resource, name string, opts metav1.GetOptions) (P, error) {
	result := P(new(T))
	if err := r.request("GET").Name(name).VersionedParams(&opts, parameterCodec).Do(ctx).Into(result); err != nil {
		return nil, err
	}
	return result, nil
}

// list returns the objects of r that opts selects, as a list of type T.
func list[T any, P object[T]](ctx context.Context, r resource, opts metav1.ListOptions) (P, error) {
	result := P(new(T))
	if err := r.request("GET").VersionedParams(&opts, parameterCodec).Timeout(timeout(opts)).Do(ctx).Into(result); err != nil {
		return nil, err
	}
	return result, nil
}

// watch watches the objects of r that opts selects.
func (r resource) watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	opts.Watch = true
	return r.request("GET").VersionedParams(&opts, parameterCodec).Timeout(timeout(opts)).Watch(ctx)
}

// timeout is the request timeout opts asks for; 0 for none.
func timeout(opts metav1.ListOptions) time.Duration {
	if opts.TimeoutSeconds == nil {
		return 0
	}
	return time.Duration(*opts.TimeoutSeconds) * time.Second
}
