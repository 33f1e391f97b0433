package nettool

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"hostpath.dev/e2e/framework/cli"
)

// Usage is the command line of nettool, for cli.Main.
const Usage = "serve ADDR TEXT | get [flags] URL | flood [flags] URL"

// command holds where the subcommands write.
type command struct {
	stdout, stderr io.Writer
}

// Commands returns the subcommands of nettool for cli.Main: they print their
// results to stdout and flag errors to stderr.
//
//	serve ADDR TEXT: serve TEXT on every path of http://ADDR until ctx ends.
//	get [flags] URL: print "STATUS <code>" and the body; a non-2xx answer is
//	    an ExitError with code 2, no answer an ordinary error.
//	flood [flags] URL: send many GETs (see Flood) and print a FloodResult as
//	    one line of JSON; refused requests are counted, not errors.
func Commands(stdout, stderr io.Writer) map[string]cli.Command {
	c := command{stdout: stdout, stderr: stderr}
	return map[string]cli.Command{"serve": c.serve, "get": c.get, "flood": c.flood}
}

func (c command) serve(ctx context.Context, args []string) error {
	if len(args) != 2 {
		return errors.New("usage: nettool serve ADDR TEXT")
	}
	srv := &http.Server{Addr: args[0], Handler: Handler(args[1]), ReadHeaderTimeout: 10 * time.Second}
	go func() {
		<-ctx.Done()
		_ = srv.Close()
	}()
	_, _ = fmt.Fprintf(c.stdout, "Serving on %s\n", args[0])
	if err := srv.ListenAndServe(); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// AddFlags binds the flags of "nettool get" to fs; the URL is the argument.
func (o *GetOptions) AddFlags(fs *flag.FlagSet) {
	fs.StringVar(&o.TokenFile, "token-file", "", "File with a bearer token to send.")
	fs.StringVar(&o.CAFile, "ca-file", "", "PEM file with the CA to trust for https URLs.")
	fs.DurationVar(&o.RetryFor, "retry-for", 0, "Keep retrying until a 2xx answer for this long.")
	fs.DurationVar(&o.Timeout, "timeout", 5*time.Second, "Timeout of each attempt.")
}

// parseGet parses the arguments of "nettool get": flags, then one URL.
func parseGet(args []string, stderr io.Writer) (GetOptions, error) {
	var o GetOptions
	fs := flag.NewFlagSet("get", flag.ContinueOnError)
	fs.SetOutput(stderr)
	o.AddFlags(fs)
	if err := fs.Parse(args); err != nil || fs.NArg() != 1 {
		return o, errors.New("usage: nettool get [flags] URL")
	}
	o.URL = fs.Arg(0)
	return o, nil
}

func (c command) get(ctx context.Context, args []string) error {
	o, err := parseGet(args, c.stderr)
	if err != nil {
		return err
	}
	res, err := Get(ctx, o)
	if res.Status != 0 {
		body := res.Body
		if !strings.HasSuffix(body, "\n") {
			body += "\n"
		}
		_, _ = fmt.Fprintf(c.stdout, "STATUS %d\n%s", res.Status, body)
	}
	if errors.Is(err, ErrStatus) {
		return &cli.ExitError{Code: 2, Err: err}
	}
	return err
}

// AddFlags binds the flags of "nettool flood" to fs; the URL is the argument.
func (o *FloodOptions) AddFlags(fs *flag.FlagSet) {
	fs.IntVar(&o.Requests, "requests", 200, "Total number of requests to send.")
	fs.IntVar(&o.Concurrency, "concurrency", 8, "Number of requests in flight at once.")
	fs.Float64Var(&o.QPS, "qps", 0, "Total requests per second; 0 means no limit.")
	fs.StringVar(&o.TokenFile, "token-file", "", "File with a bearer token to send with every request.")
	fs.BoolVar(&o.JunkTokens, "junk-tokens", false, "Send a different random bearer token with each request.")
	fs.IntVar(&o.Cycle, "cycle", 0, "When > 0, {i} in the URL is the request index modulo this; else the index.")
	fs.BoolVar(&o.Insecure, "insecure", false, "Do not verify the server's certificate.")
	fs.StringVar(&o.CAFile, "ca-file", "", "PEM file with the CA to trust for https URLs.")
	fs.DurationVar(&o.Timeout, "timeout", 30*time.Second, "Timeout of each request.")
}

// parseFlood parses the arguments of "nettool flood": flags, then one URL.
func parseFlood(args []string, stderr io.Writer) (FloodOptions, error) {
	var o FloodOptions
	fs := flag.NewFlagSet("flood", flag.ContinueOnError)
	fs.SetOutput(stderr)
	o.AddFlags(fs)
	if err := fs.Parse(args); err != nil || fs.NArg() != 1 {
		return o, errors.New("usage: nettool flood [flags] URL")
	}
	o.URL = fs.Arg(0)
	return o, o.Validate()
}

func (c command) flood(ctx context.Context, args []string) error {
	o, err := parseFlood(args, c.stderr)
	if err != nil {
		return err
	}
	res, err := Flood(ctx, o)
	if res.Requests > 0 {
		line, jerr := json.Marshal(res)
		if jerr != nil {
			return errors.Join(err, fmt.Errorf("encode result: %w", jerr))
		}
		_, _ = fmt.Fprintf(c.stdout, "%s\n", line)
	}
	return err
}
