package nettool

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"hostpath.dev/e2e/internal/cli"
)

// Usage is the command line of nettool, for cli.Main.
const Usage = "serve ADDR TEXT | get [flags] URL"

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
func Commands(stdout, stderr io.Writer) map[string]cli.Command {
	c := command{stdout: stdout, stderr: stderr}
	return map[string]cli.Command{"serve": c.serve, "get": c.get}
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
