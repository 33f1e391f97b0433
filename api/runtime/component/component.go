// Package component is what every hostpath program shares, so that it has one
// definition: the API client configuration, klog's flags on a pflag set, the
// health and metrics endpoints, the rule that counts a pod as serving, and
// the shape of main (Main). It is part of the shared program runtime (see
// hostpath.dev/api/runtime for who uses which part) and has no
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
	// Extra add handlers, such as profiling.Handlers, behind Guard. Their
	// responses may stream (a CPU profile or a trace takes the seconds it
	// is asked for), so they get no write timeout.
	Extra []func(*http.ServeMux)
	// Timeouts of the server; zero fields take DefaultTimeouts'.
	Timeouts Timeouts
}

// Timeouts bound how long an HTTP server of the programs waits for a
// client (http.Server's fields of the same names): a client that sends its
// headers or body slowly, or reads its answer slowly, or keeps an idle
// connection open, holds a connection and a goroutine no longer than they
// say. A zero field takes DefaultTimeouts'; a negative Write means none,
// for a server whose answers stream.
type Timeouts struct {
	// ReadHeader is the time allowed to read a request's headers.
	ReadHeader time.Duration
	// Read is the time allowed to read a whole request, body included.
	Read time.Duration
	// Write is the time allowed from the end of the request's headers to
	// the end of the answer.
	Write time.Duration
	// Idle is how long an idle keep-alive connection is kept open.
	Idle time.Duration
}

// DefaultTimeouts are the timeouts of the health and metrics servers:
// their requests are small GETs, their answers small but for a /metrics
// whose caller's token is reviewed first (an API server call, within the
// client's rate limit).
func DefaultTimeouts() Timeouts {
	return Timeouts{ReadHeader: 10 * time.Second, Read: 30 * time.Second, Write: time.Minute, Idle: 2 * time.Minute}
}

// withDefaults returns t with DefaultTimeouts' in its zero fields, and
// none (0, as http.Server takes it) for a negative Write.
func (t Timeouts) withDefaults() Timeouts {
	def := DefaultTimeouts()
	for _, f := range []struct{ v, def *time.Duration }{
		{&t.ReadHeader, &def.ReadHeader}, {&t.Read, &def.Read}, {&t.Write, &def.Write}, {&t.Idle, &def.Idle},
	} {
		if *f.v == 0 {
			*f.v = *f.def
		}
	}
	if t.Write < 0 {
		t.Write = 0
	}
	return t
}

// MaxHeaderBytes bounds the request headers every server of the programs
// reads (a service account token is about 1 KB).
const MaxHeaderBytes = 64 << 10

// NewServer returns the http.Server of handler with the timeouts t
// (Timeouts: zero fields take the defaults) and MaxHeaderBytes: every
// HTTP server of the three programs is made here, so none is left without
// read, write and idle timeouts.
func NewServer(handler http.Handler, t Timeouts) *http.Server {
	t = t.withDefaults()
	return &http.Server{
		Handler:           handler,
		ReadHeaderTimeout: t.ReadHeader,
		ReadTimeout:       t.Read,
		WriteTimeout:      t.Write,
		IdleTimeout:       t.Idle,
		MaxHeaderBytes:    MaxHeaderBytes,
	}
}

// withWriteDeadline is h with a write deadline d from when it starts, for
// a server without a write timeout (that of Health with Extra handlers).
func withWriteDeadline(d time.Duration, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// An error means the writer cannot take a deadline (a test's
		// recorder): then there is none to set.
		_ = http.NewResponseController(w).SetWriteDeadline(time.Now().Add(d))
		h.ServeHTTP(w, r)
	})
}

// ServeHealth serves h until ctx is done, then shuts the server down. It
// returns once the listener is open, or with the error that kept it from
// opening; a later failure is logged.
func ServeHealth(ctx context.Context, h Health) error {
	ln, err := net.Listen("tcp", h.Address)
	if err != nil {
		return fmt.Errorf("listen on %s for health and metrics: %w", h.Address, err)
	}
	srv := healthServer(h)
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

// healthServer is the server of h (NewServer). With Extra handlers, whose
// answers may stream for as long as they are asked (net/http/pprof
// refuses a profile longer than the server's write timeout), the server
// has no write timeout, and the health and metrics handlers set their own
// write deadline instead.
func healthServer(h Health) *http.Server {
	t := h.Timeouts.withDefaults()
	mux := http.NewServeMux()
	HealthHandlers(mux, h.Registry, h.Ready, h.Guard)
	if len(h.Extra) == 0 {
		return NewServer(mux, t)
	}
	extra := http.NewServeMux()
	for _, add := range h.Extra {
		add(extra)
	}
	top := http.NewServeMux()
	top.Handle("/", Guarded(h.Guard, extra))
	for _, p := range []string{"/healthz", "/readyz", "/metrics"} {
		if t.Write > 0 {
			top.Handle(p, withWriteDeadline(t.Write, mux))
		} else {
			top.Handle(p, mux)
		}
	}
	t.Write = -1
	return NewServer(top, t)
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
