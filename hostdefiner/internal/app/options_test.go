package app

import (
	"context"
	"errors"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"hostpath.dev/api/managerapi"
	"hostpath.dev/api/managerapi/trust"
	"hostpath.dev/api/runtime/component/componenttest"
)

func TestValidate(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		env     string
		wantErr []string
	}{
		{name: "defaults with a namespace", env: "hostpath-system"},
		{name: "no namespace", wantErr: []string{"--namespace (or POD_NAMESPACE) is required"}},
		{name: "namespace by flag", args: []string{"--namespace=ns"}},
		{name: "bad health address", env: "ns", args: []string{"--health-address=nowhere"}, wantErr: []string{"--health-address"}},
		{name: "empty selector", env: "ns", args: []string{"--manager-selector="}, wantErr: []string{"--manager-selector"}},
		{name: "bad selector", env: "ns", args: []string{"--manager-selector=a in (b"}, wantErr: []string{"--manager-selector"}},
		{name: "empty provisioner selector", env: "ns", args: []string{"--provisioner-selector="}, wantErr: []string{"--provisioner-selector"}},
		{name: "bad provisioner selector", env: "ns", args: []string{"--provisioner-selector=app=x,"}, wantErr: []string{"--provisioner-selector"}},
		{name: "zero tries", env: "ns", args: []string{"--max-tries=0"}, wantErr: []string{"--max-tries must be positive"}},
		{name: "backoff order", env: "ns", args: []string{"--initial-backoff=1m", "--max-backoff=10s"}, wantErr: []string{"--max-backoff must be at least --initial-backoff"}},
		{name: "negative minimum", env: "ns", args: []string{"--min-free-bytes=-1"}, wantErr: []string{"must not be negative"}},
		{name: "lease order", env: "ns", args: []string{"--leader-elect-renew-deadline=20s"}, wantErr: []string{"want --leader-elect-lease-duration > --leader-elect-renew-deadline"}},
		{name: "lease order ignored without election", env: "ns", args: []string{"--leader-elect=false", "--leader-elect-renew-deadline=20s"}},
		{name: "empty provisioner name", env: "ns", args: []string{"--provisioner-name="}, wantErr: []string{"--provisioner-name must not be empty"}},
		{name: "bad service account", env: "ns", args: []string{"--manager-service-account=hostpath-system/hostpath-manager"}, wantErr: []string{"--manager-service-account"}},
		{name: "empty service account", env: "ns", args: []string{"--manager-service-account="}, wantErr: []string{"--manager-service-account"}},
		{name: "zero lifetime", env: "ns", args: []string{"--max-certificate-lifetime=0"}, wantErr: []string{"--max-certificate-lifetime must be positive"}},
		{name: "overlap within the lifetime", env: "ns", args: []string{"--max-certificate-lifetime=48h"}, wantErr: []string{"--ca-overlap must exceed --max-certificate-lifetime"}},
		{name: "short certificates", env: "ns", args: []string{"--max-certificate-lifetime=10m", "--ca-overlap=30m"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv(EnvPodNamespace, tc.env)
			componenttest.CheckErrs(t, componenttest.Validate(t, NewOptions(), tc.args...), tc.wantErr)
		})
	}
}

func TestControllerConfig(t *testing.T) {
	t.Setenv(EnvPodNamespace, "ns")
	o := NewOptions()
	if err := componenttest.Validate(t, o, "--allow-delete=false", "--max-tries=3", "--initial-backoff=1s", "--max-backoff=4s", "--min-free-bytes=1024"); err != nil {
		t.Fatal(err)
	}
	c := o.controllerConfig()
	if c.AllowDelete || c.MaxTries != 3 || c.InitialBackoff != time.Second || c.MaxBackoff != 4*time.Second || c.MinFreeBytes != 1024 ||
		c.ManagerSelector.String() != "app.kubernetes.io/name=hostpath-manager" || c.ManagerDaemonSet != "hostpath-manager" {
		t.Errorf("controllerConfig() = %+v", c)
	}
}

func TestCSRConfig(t *testing.T) {
	t.Setenv(EnvPodNamespace, "hostpath-system")
	o := NewOptions()
	if err := componenttest.Validate(t, o, "--max-certificate-lifetime=1h", "--ca-overlap=3h"); err != nil {
		t.Fatal(err)
	}
	c := o.csrConfig()
	if c.Namespace != "hostpath-system" || c.ServiceAccount != "hostpath-manager" || c.MaxLifetime != time.Hour || c.CAOverlap != 3*time.Hour ||
		c.ManagerSelector.String() != "app.kubernetes.io/name=hostpath-manager" {
		t.Errorf("csrConfig() = %+v", c)
	}
	if got := o.provisionerSelector.String(); got != "app.kubernetes.io/name=hostpath-provisioner" {
		t.Errorf("--provisioner-selector parsed to %q, want app.kubernetes.io/name=hostpath-provisioner", got)
	}
	if o.ManagerPort != managerapi.ServingPort {
		t.Errorf("--manager-port defaults to %d, want %d", o.ManagerPort, managerapi.ServingPort)
	}
}

func TestManagerFor(t *testing.T) {
	t.Setenv(EnvPodNamespace, "hostpath-system")
	o := NewOptions()
	if err := o.Validate(); err != nil {
		t.Fatal(err)
	}
	pod := &v1.Pod{Spec: v1.PodSpec{NodeName: "node-1"}, Status: v1.PodStatus{PodIP: "10.1.2.3"}}
	m, err := o.managerFor(trust.NewBundle())(pod)
	if err != nil {
		t.Fatal(err)
	}
	if got := m.(*managerapi.Client).BaseURL(); got != "https://10.1.2.3:8443" {
		t.Errorf("BaseURL() = %q, want https://10.1.2.3:8443", got)
	}
	if _, err := o.managerFor(trust.NewBundle())(&v1.Pod{}); err == nil {
		t.Error("a pod without a node: no error")
	}
}

func TestRunAll(t *testing.T) {
	boom := errors.New("boom")
	err := runAll(context.Background(),
		func(ctx context.Context) error { <-ctx.Done(); return nil },
		func(context.Context) error { return boom })
	if !errors.Is(err, boom) {
		t.Errorf("runAll() = %v, want boom", err)
	}
}
