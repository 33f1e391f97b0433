package fakenodes

import (
	"bytes"
	"context"
	"io"
	"testing"
	"time"

	"github.com/spf13/pflag"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/klog/v2/ktesting"
)

// parse returns a Command with args parsed as the command line.
func parse(t *testing.T, args ...string) *Command {
	t.Helper()
	c := NewCommand(io.Discard)
	fs := pflag.NewFlagSet("fakenodes", pflag.ContinueOnError)
	c.AddFlags(fs)
	if err := fs.Parse(args); err != nil {
		t.Fatalf("parse %q: %v", args, err)
	}
	return c
}

func TestCommandFlags(t *testing.T) {
	t.Setenv("KUBECONFIG", "/env/kubeconfig")
	c := parse(t)
	want := Options{Prefix: "hostpath-fake-", Count: 10, RenewInterval: 10 * time.Second, Workers: 16}
	if c.Options != want || c.kubeconfig != "/env/kubeconfig" || c.delete {
		t.Errorf("defaults: %+v kubeconfig %q delete %v; want %+v, $KUBECONFIG, false", c.Options, c.kubeconfig, c.delete, want)
	}
	c = parse(t, "--kubeconfig=k", "--prefix", "p-", "--count", "3", "--renew-interval", "5s", "--no-taint", "--workers", "2", "--delete")
	want = Options{Prefix: "p-", Count: 3, RenewInterval: 5 * time.Second, NoTaint: true, Workers: 2}
	if c.Options != want || c.kubeconfig != "k" || !c.delete {
		t.Errorf("set: %+v kubeconfig %q delete %v; want %+v, k, true", c.Options, c.kubeconfig, c.delete, want)
	}
}

func TestCommandValidate(t *testing.T) {
	for _, tc := range []struct {
		args    []string
		wantErr bool
	}{
		{nil, false},
		{[]string{"--count", "0"}, true},
		{[]string{"--prefix", ""}, true},
		{[]string{"--renew-interval", "40s"}, true},
		{[]string{"--workers", "0"}, true},
		// --delete uses only the workers.
		{[]string{"--delete", "--count", "0", "--prefix", "", "--renew-interval", "0s"}, false},
		{[]string{"--delete", "--workers", "0"}, true},
	} {
		if err := parse(t, tc.args...).Validate(); (err != nil) != tc.wantErr {
			t.Errorf("Validate with %q = %v, want error %v", tc.args, err, tc.wantErr)
		}
	}
}

// cancelWriter records what is written and cancels a context on the first
// write: the command prints "ready" once, then renews until the context ends.
type cancelWriter struct {
	bytes.Buffer
	cancel context.CancelFunc
}

func (w *cancelWriter) Write(p []byte) (int, error) {
	defer w.cancel()
	return w.Buffer.Write(p)
}

func TestCommandRun(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	client := fake.NewClientset()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	out := &cancelWriter{cancel: cancel}
	c := parse(t, "--prefix", "f-", "--count", "2", "--workers", "1")
	c.stdout = out
	if err := c.run(ctx, client); err != nil {
		t.Fatalf("create: %v", err)
	}
	if got := out.String(); got != "ready\n" {
		t.Errorf("create printed %q, want %q", got, "ready\n")
	}

	var deleted bytes.Buffer
	c = parse(t, "--delete")
	c.stdout = &deleted
	if err := c.run(context.Background(), client); err != nil {
		t.Fatalf("delete: %v", err)
	}
	if got, want := deleted.String(), "deleted 2 fake nodes\n"; got != want {
		t.Errorf("delete printed %q, want %q", got, want)
	}
	nodes, err := client.CoreV1().Nodes().List(context.Background(), metav1.ListOptions{})
	if err != nil || len(nodes.Items) != 0 {
		t.Errorf("after delete: %d nodes, %v", len(nodes.Items), err)
	}
}
