package app

import (
	"net"
	"strings"
	"testing"

	"k8s.io/klog/v2/ktesting"
)

func TestValidate(t *testing.T) {
	tests := []struct {
		name    string
		addr    string
		wantErr bool
	}{
		{name: "default", addr: NewOptions().HealthAddress},
		{name: "loopback", addr: "127.0.0.1:9000"},
		{name: "no port", addr: "localhost", wantErr: true},
		{name: "empty", addr: "", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := NewOptions()
			o.HealthAddress = tt.addr
			if err := o.Validate(); (err != nil) != tt.wantErr {
				t.Fatalf("Validate(%q) error = %v, want error %v", tt.addr, err, tt.wantErr)
			}
		})
	}
}

func TestRunAddressInUse(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	_, ctx := ktesting.NewTestContext(t)
	o := NewOptions()
	o.HealthAddress = ln.Addr().String()
	if err := o.Run(ctx); err == nil || !strings.Contains(err.Error(), o.HealthAddress) {
		t.Fatalf("Run on a busy address = %v, want an error naming %s", err, o.HealthAddress)
	}
}
