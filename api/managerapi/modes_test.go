package managerapi

import (
	"io/fs"
	"strings"
	"testing"
)

func TestParseMode(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want fs.FileMode
		out  string
		ok   bool
	}{
		{"", 0o777, "0777", true},
		{"0777", 0o777, "0777", true},
		{"750", 0o750, "0750", true},
		{"0", 0, "0000", true},
		{"2775", 0o775 | fs.ModeSetgid, "02775", true},
		{"01777", 0o777 | fs.ModeSticky, "01777", true},
		{"4700", 0o700 | fs.ModeSetuid, "04700", true},
		{"10000", 0, "", false},
		{"0888", 0, "", false},
		{"rwx", 0, "", false},
		{"-1", 0, "", false},
		{"000000777", 0, "", false},
	} {
		got, err := ParseMode(tc.in)
		if (err == nil) != tc.ok {
			t.Errorf("ParseMode(%q) error %v, want ok=%v", tc.in, err, tc.ok)
			continue
		}
		if !tc.ok {
			if !strings.Contains(err.Error(), "mode") {
				t.Errorf("ParseMode(%q) error %q does not say it is about the mode", tc.in, err)
			}
			continue
		}
		if got != tc.want {
			t.Errorf("ParseMode(%q) = %v, want %v", tc.in, got, tc.want)
		}
		if s := FormatMode(got); s != tc.out {
			t.Errorf("FormatMode(%v) = %q, want %q", got, s, tc.out)
		}
	}
}
