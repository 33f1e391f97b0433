package app

import "testing"

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
