package orphans

import (
	"errors"
	"maps"
	"testing"

	"hostpath.dev/api/runtime/component/componenttest"
)

// errRefusedByAPI is an API server's refusal.
var errRefusedByAPI = errors.New("refused")

func TestValidate(t *testing.T) {
	tests := []struct {
		name          string
		args          []string
		wantErr       []string
		wantAddresses map[string]string
	}{
		{name: "defaults", wantAddresses: map[string]string{}},
		{name: "addresses", args: []string{"--manager-address=n1=127.0.0.1:18443", "--manager-address", "n2=[::1]:18444"},
			wantAddresses: map[string]string{"n1": "127.0.0.1:18443", "n2": "[::1]:18444"}},
		{name: "address without a node", args: []string{"--manager-address==127.0.0.1:1"}, wantErr: []string{`--manager-address "=127.0.0.1:1": want NODE=HOST:PORT`}},
		{name: "address without a port", args: []string{"--manager-address=n1=127.0.0.1"}, wantErr: []string{"want NODE=HOST:PORT"}},
		{name: "node given twice", args: []string{"--manager-address=n1=a:1", "--manager-address=n1=b:2"}, wantErr: []string{`node "n1" given twice`}},
		{name: "bad namespace", args: []string{"-n", "Hostpath"}, wantErr: []string{`--namespace "Hostpath"`}},
		{name: "empty provisioner", args: []string{"--provisioner-name="}, wantErr: []string{"--provisioner-name must not be empty"}},
		{name: "bad selector", args: []string{"--manager-selector=a in (b"}, wantErr: []string{"--manager-selector"}},
		{name: "bad port", args: []string{"--manager-port=0"}, wantErr: []string{"--manager-port 0"}},
		{name: "zero timeout", args: []string{"--manager-timeout=0"}, wantErr: []string{"--manager-timeout must be positive"}},
		{name: "bad service account", args: []string{"--service-account=a/b/c"}, wantErr: []string{`--service-account "a/b/c"`}},
		{name: "service account unused with a token file", args: []string{"--service-account=a/b/c", "--token-file=/t"}, wantAddresses: map[string]string{}},
		{name: "bad output", args: []string{"-o", "yaml"}, wantErr: []string{`--output "yaml": want table or json`}},
		{name: "every error at once", args: []string{"-o", "yaml", "--manager-port=70000"}, wantErr: []string{"--output", "--manager-port 70000"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			o := NewOptions()
			componenttest.CheckErrs(t, componenttest.Validate(t, o, tc.args...), tc.wantErr)
			if len(tc.wantErr) == 0 && !maps.Equal(o.addresses, tc.wantAddresses) {
				t.Errorf("Addresses = %v, want %v", o.addresses, tc.wantAddresses)
			}
		})
	}
}
