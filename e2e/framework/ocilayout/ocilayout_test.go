package ocilayout

import (
	"reflect"
	"testing"

	v1 "github.com/opencontainers/image-spec/specs-go/v1"
)

func TestParsePlatform(t *testing.T) {
	tests := []struct {
		in      string
		want    v1.Platform
		wantErr bool
	}{
		{in: "linux/amd64", want: v1.Platform{OS: "linux", Architecture: "amd64"}},
		{in: "linux/arm/v7", want: v1.Platform{OS: "linux", Architecture: "arm", Variant: "v7"}},
		{in: "linux", wantErr: true},
		{in: "linux/", wantErr: true},
		{in: "linux/arm/v7/x", wantErr: true},
		{in: "", wantErr: true},
	}
	for _, tc := range tests {
		t.Run(tc.in, func(t *testing.T) {
			got, err := ParsePlatform(tc.in)
			if tc.wantErr {
				if err == nil {
					t.Fatalf("ParsePlatform(%q) = %+v, want an error", tc.in, got)
				}
				return
			}
			if err != nil || !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("ParsePlatform(%q) = %+v, %v; want %+v", tc.in, got, err, tc.want)
			}
			if s := FormatPlatform(got); s != tc.in {
				t.Errorf("FormatPlatform = %q, want %q", s, tc.in)
			}
		})
	}
}
