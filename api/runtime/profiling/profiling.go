// Package profiling serves the Go runtime's profiles (net/http/pprof) on a
// program's health address, for its --profiling flag: CPU (profile), heap,
// allocs, goroutine, block, mutex, trace. `go tool pprof
// http://ADDRESS/debug/pprof/profile?seconds=30` reads where the CPU goes.
//
// It is its own package, not part of component, so that a program without
// the flag does not link net/http/pprof: the manager has none, because its
// memory is what users count first and the package would add to it
// (measured in docs/benchmarks.md, "Why the manager has no profiling").
package profiling

import (
	"net/http"
	"net/http/pprof"

	"github.com/spf13/pflag"
)

// Flag is the name of the flag that turns the profiles on.
const Flag = "profiling"

// AddFlag binds --profiling (default off) to on.
func AddFlag(fs *pflag.FlagSet, on *bool) {
	fs.BoolVar(on, Flag, *on, "Serve Go's runtime profiles (CPU, heap, goroutines, trace) under /debug/pprof/ on the health and metrics address, in plain HTTP, to callers allowed to get /metrics (the same token check).")
}

// HandlersIf returns Handlers when on, nothing otherwise: the extra handlers
// of component.ServeHealth for a program's --profiling.
func HandlersIf(on bool) []func(*http.ServeMux) {
	if !on {
		return nil
	}
	return []func(*http.ServeMux){Handlers}
}

// Handlers adds Go's profiles under GET /debug/pprof/ to mux: the index
// (and every named profile, such as /debug/pprof/heap, through it),
// cmdline, profile (CPU), symbol and trace. component.ServeHealth serves
// them behind its Guard, as /metrics: the programs let only callers
// allowed get on the nonResourceURL /debug/pprof/* in (docs/provisioner.md,
// "Profiling").
func Handlers(mux *http.ServeMux) {
	mux.HandleFunc("GET /debug/pprof/", pprof.Index)
	mux.HandleFunc("GET /debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("GET /debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("GET /debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("GET /debug/pprof/trace", pprof.Trace)
}
