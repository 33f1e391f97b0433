// Command nettool is the network helper of the testtools image:
//
//	nettool serve ADDR TEXT
//	    serve TEXT on every path of http://ADDR
//	nettool get [--token-file F] [--ca-file F] [--retry-for D] [--timeout D] URL
//	    print "STATUS <code>" and the body; exit 0 on a 2xx answer, 2 on
//	    another status, 1 if no answer came
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"hostpath.dev/e2e/internal/nettool"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	os.Exit(run(ctx, os.Args[1:]))
}

func run(ctx context.Context, args []string) int {
	if len(args) == 0 {
		fmt.Fprintln(os.Stderr, "usage: nettool serve ADDR TEXT | nettool get [flags] URL")
		return 1
	}
	switch args[0] {
	case "serve":
		if len(args) != 3 {
			fmt.Fprintln(os.Stderr, "usage: nettool serve ADDR TEXT")
			return 1
		}
		srv := &http.Server{Addr: args[1], Handler: nettool.Handler(args[2]), ReadHeaderTimeout: 10 * time.Second}
		go func() {
			<-ctx.Done()
			_ = srv.Close()
		}()
		fmt.Printf("Serving on %s\n", args[1])
		if err := srv.ListenAndServe(); err != nil && !errors.Is(err, http.ErrServerClosed) {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		return 0
	case "get":
		var o nettool.GetOptions
		fs := flag.NewFlagSet("get", flag.ContinueOnError)
		fs.StringVar(&o.TokenFile, "token-file", "", "File with a bearer token to send.")
		fs.StringVar(&o.CAFile, "ca-file", "", "PEM file with the CA to trust for https URLs.")
		fs.DurationVar(&o.RetryFor, "retry-for", 0, "Keep retrying until a 2xx answer for this long.")
		fs.DurationVar(&o.Timeout, "timeout", 5*time.Second, "Timeout of each attempt.")
		if err := fs.Parse(args[1:]); err != nil || fs.NArg() != 1 {
			fmt.Fprintln(os.Stderr, "usage: nettool get [flags] URL")
			return 1
		}
		o.URL = fs.Arg(0)
		res, err := nettool.Get(ctx, o)
		if res.Status != 0 {
			body := res.Body
			if !strings.HasSuffix(body, "\n") {
				body += "\n"
			}
			fmt.Printf("STATUS %d\n%s", res.Status, body)
		}
		switch {
		case err == nil:
			return 0
		case errors.Is(err, nettool.ErrStatus):
			fmt.Fprintln(os.Stderr, err)
			return 2
		default:
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
	default:
		fmt.Fprintf(os.Stderr, "unknown command %q\n", args[0])
		return 1
	}
}
