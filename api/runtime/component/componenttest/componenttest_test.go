package componenttest

import (
	"errors"
	"testing"

	"github.com/spf13/pflag"
)

// options are a program's options of one flag, --name, that must not be
// "bad" nor "worse".
type options struct{ name string }

func (o *options) AddFlags(fs *pflag.FlagSet) { fs.StringVar(&o.name, "name", "default", "a name") }

func (o *options) Validate() error {
	switch o.name {
	case "bad":
		return errors.New("--name is bad")
	case "worse":
		return errors.New("--name is bad; --name is worse")
	}
	return nil
}

func TestValidate(t *testing.T) {
	for _, tc := range []struct {
		name     string
		args     []string
		wantName string
		wantErr  []string
	}{
		{name: "defaults", wantName: "default"},
		{name: "a flag", args: []string{"--name=x"}, wantName: "x"},
		{name: "an error", args: []string{"--name=bad"}, wantName: "bad", wantErr: []string{"--name is bad"}},
		{name: "every error", args: []string{"--name", "worse"}, wantName: "worse", wantErr: []string{"is bad", "is worse"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := &options{}
			err := Validate(t, o, tc.args...)
			if o.name != tc.wantName {
				t.Errorf("name = %q, want %q", o.name, tc.wantName)
			}
			if (err != nil) != (len(tc.wantErr) > 0) {
				t.Errorf("Validate() = %v, want an error: %t", err, len(tc.wantErr) > 0)
			}
			CheckErrs(t, err, tc.wantErr)
		})
	}
}
