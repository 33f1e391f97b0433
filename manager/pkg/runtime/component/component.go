// Package component is what every hostpath program shares, so that it has one
// definition: the API client configuration, klog's flags on a pflag set, the
// health and metrics endpoints, the rule that counts a pod as serving, and
// the shape of main (Main). It is part of the shared program runtime (see
// hostpath.dev/manager/pkg/runtime for who uses which part) and has no
// hostpath dependency.
package component

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/spf13/pflag"
	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"
)

// Program is what Main runs: options that bind their flags, check them and
// run the program until the context ends.
type Program interface {
	// AddFlags binds the options to fs.
	AddFlags(fs *pflag.FlagSet)
	// Validate reports every option that cannot work.
	Validate() error
	// Run runs the program until ctx is done; the options are valid.
	Run(ctx context.Context) error
}

// Main is the body of every hostpath main: it parses the command line into
// p (with klog's flags), sizes the Go heap to the container (SizeHeap),
// validates p, runs it until SIGINT or SIGTERM, and reports an error once,
// exiting 1.
func Main(name string, p Program) {
	fs := pflag.NewFlagSet(name, pflag.ExitOnError)
	p.AddFlags(fs)
	AddKlogFlags(fs)
	_ = fs.Parse(os.Args[1:])

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	logger := klog.Background().WithName(name)
	ctx = klog.NewContext(ctx, logger)
	_, err := SizeHeap(logger)
	if err == nil {
		err = p.Validate()
	}
	if err == nil {
		err = p.Run(ctx)
	}
	stop()
	if err != nil {
		logger.Error(err, "Stopped with an error")
		klog.FlushAndExit(klog.ExitFlushTimeout, 1)
	}
	klog.Flush()
}

// AddKlogFlags adds klog's flags (-v, --vmodule, ...) to fs.
func AddKlogFlags(fs *pflag.FlagSet) {
	gofs := flag.NewFlagSet("klog", flag.ContinueOnError)
	klog.InitFlags(gofs)
	fs.AddGoFlagSet(gofs)
}

// RESTConfig returns the configuration of an API client: from the kubeconfig
// file when one is named, else the pod's in-cluster service account, with
// the given rate limits and user agent, and without response compression.
// The provisioner and the host definer make a clientset of it; the manager,
// its own small client (manager/internal/kube), so this package does not
// import the clientset.
//
// Compression is off for the reason kube-scheduler and
// kube-controller-manager turn it off (kubernetes/kubernetes#80919): these
// programs run next to the API server, where gzip costs CPU on both ends
// and saves nothing. With it on, the API server gzips each watch that
// began with a streaming list (WatchListCompression), event by event, for
// every instance: on a 2-CPU cluster making 1,000 volumes, about 11% of
// each provisioner's CPU went to gunzipping its claim and PV watches
// (2026-11-27, docs/bench/2026-11-27.md).
func RESTConfig(kubeconfig string, qps float32, burst int, userAgent string) (*rest.Config, error) {
	var (
		cfg *rest.Config
		err error
	)
	if kubeconfig != "" {
		cfg, err = clientcmd.BuildConfigFromFlags("", kubeconfig)
	} else {
		cfg, err = rest.InClusterConfig()
	}
	if err != nil {
		return nil, fmt.Errorf("load the API client configuration: %w", err)
	}
	cfg.QPS, cfg.Burst, cfg.UserAgent = qps, burst, userAgent
	cfg.DisableCompression = true
	return cfg, nil
}

// NewRegistry returns a Prometheus registry with the Go and process
// collectors and the given ones.
func NewRegistry(cs ...prometheus.Collector) *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	reg.MustRegister(cs...)
	return reg
}

// HealthHandlers adds GET /healthz (always ok) and GET /readyz (ok once
// ready is set; nil means always) to mux, both open to anyone, and GET
// /metrics (reg), guarded by guard when it is not nil.
func HealthHandlers(mux *http.ServeMux, reg *prometheus.Registry, ready *atomic.Bool, guard func(http.Handler) http.Handler) {
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte("ok\n"))
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		if ready != nil && !ready.Load() {
			http.Error(w, "not ready: informer caches not synced yet", http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte("ok\n"))
	})
	mux.Handle("GET /metrics", Guarded(guard, promhttp.HandlerFor(reg, promhttp.HandlerOpts{})))
}

// Guarded is h behind guard; h itself when guard is nil.
func Guarded(guard func(http.Handler) http.Handler, h http.Handler) http.Handler {
	if guard == nil {
		return h
	}
	return guard(h)
}

// Health is what ServeHealth serves.
type Health struct {
	// Address is where (host:port), in plain HTTP.
	Address string
	// Registry is what /metrics serves.
	Registry *prometheus.Registry
	// Ready is /readyz's answer: ok once set; nil means always.
	Ready *atomic.Bool
	// Guard guards everything but /healthz and /readyz: /metrics and what
	// Extra adds. It is review.Reviewer.Guard, so that only callers allowed
	// get on the path (nonResourceURLs) are served; nil serves them to
	// anyone (tests).
	Guard func(http.Handler) http.Handler
	// Extra add handlers, such as profiling.Handlers, behind Guard.
	Extra []func(*http.ServeMux)
}

// ServeHealth serves h until ctx is done, then shuts the server down. It
// returns once the listener is open, or with the error that kept it from
// opening; a later failure is logged.
func ServeHealth(ctx context.Context, h Health) error {
	ln, err := net.Listen("tcp", h.Address)
	if err != nil {
		return fmt.Errorf("listen on %s for health and metrics: %w", h.Address, err)
	}
	mux := http.NewServeMux()
	HealthHandlers(mux, h.Registry, h.Ready, h.Guard)
	if len(h.Extra) > 0 {
		extra := http.NewServeMux()
		for _, add := range h.Extra {
			add(extra)
		}
		mux.Handle("/", Guarded(h.Guard, extra))
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	logger := klog.FromContext(ctx)
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			logger.Error(err, "Health and metrics server stopped")
		}
	}()
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	logger.Info("Serving health and metrics", "address", ln.Addr().String(), "metricsGuarded", h.Guard != nil)
	return nil
}

// PodServing reports whether a pod counts as serving: scheduled, not
// terminating, and Ready.
func PodServing(p *v1.Pod) bool {
	return p.Spec.NodeName != "" && p.DeletionTimestamp == nil && PodReady(p)
}

// PodReady reports whether a pod's Ready condition is true.
func PodReady(p *v1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == v1.PodReady {
			return c.Status == v1.ConditionTrue
		}
	}
	return false
}
