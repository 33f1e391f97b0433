package app

import (
	"strings"
	"testing"

	"github.com/spf13/pflag"
)

func TestOptions(t *testing.T) {
	tests := []struct {
		name    string
		env     map[string]string
		args    []string
		wantErr []string // substrings; none for valid
	}{
		{name: "environment fallbacks", env: map[string]string{EnvNodeName: "n1", EnvPodNamespace: "hostpath-system"}},
		{name: "flags only", args: []string{"--node-name=n1", "--namespace=ns", "--manager-namespace=ns"}},
		{name: "static manager needs no manager namespace", args: []string{"--node-name=n1", "--namespace=ns", "--manager-url=http://127.0.0.1:8080"}},
		{name: "node and namespace required", wantErr: []string{"--node-name (or NODE_NAME) is required", "--namespace (or POD_NAMESPACE) is required", "--manager-namespace"}},
		{
			name:    "bad values",
			env:     map[string]string{EnvNodeName: "n1", EnvPodNamespace: "ns"},
			args:    []string{"--kube-api-qps=0", "--kube-api-burst=0", "--workers=0", "--metrics-address=8081", "--manager-selector=a==b==c", "--manager-port=70000", "--instance-selector="},
			wantErr: []string{"--kube-api-qps", "--kube-api-burst", "--workers", "--metrics-address", "--manager-selector", "--manager-port", "--instance-selector"},
		},
		{name: "bad manager URL", env: map[string]string{EnvNodeName: "n1", EnvPodNamespace: "ns"}, args: []string{"--manager-url=ftp://x"}, wantErr: []string{"--manager-url"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv(EnvNodeName, tc.env[EnvNodeName])
			t.Setenv(EnvPodNamespace, tc.env[EnvPodNamespace])
			o := NewOptions()
			fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
			o.AddFlags(fs)
			if err := fs.Parse(tc.args); err != nil {
				t.Fatal(err)
			}
			err := o.Validate()
			if len(tc.wantErr) == 0 {
				if err != nil {
					t.Errorf("Validate = %v, want nil", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("Validate = nil, want errors %q", tc.wantErr)
			}
			for _, w := range tc.wantErr {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("Validate = %v, want it to mention %q", err, w)
				}
			}
		})
	}
}
