package managerapi_test

import (
	"strings"
	"testing"

	"hostpath.dev/api/managerapi"
)

func TestValidateClaimNamespace(t *testing.T) {
	for _, tc := range []struct {
		ns      string
		wantErr bool
	}{
		{"", false},
		{"team-a", false},
		{"a", false},
		{strings.Repeat("n", 63), false},
		{strings.Repeat("n", 64), true},
		{"Team-A", true},
		{"team_a", true},
		{"-team", true},
		{"team.a", true},
		{"../team-a", true},
		{"team a", true},
	} {
		t.Run(tc.ns, func(t *testing.T) {
			err := managerapi.ValidateClaimNamespace(tc.ns)
			if (err != nil) != tc.wantErr {
				t.Fatalf("ValidateClaimNamespace(%q) = %v, want error %v", tc.ns, err, tc.wantErr)
			}
			if err != nil && !strings.Contains(err.Error(), "claimNamespace") {
				t.Errorf("error %q does not name the field claimNamespace", err)
			}
		})
	}
}
