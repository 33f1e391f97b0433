package managerstest

import (
	"slices"
	"testing"
)

func TestTargets(t *testing.T) {
	for _, tc := range []struct {
		name, pool     string
		targets        Targets
		ready, pending []string
	}{
		{name: "its pool", pool: "p", targets: Targets{Pool: "p", Ready: []string{"a"}, Pending: []string{"b"}}, ready: []string{"a"}, pending: []string{"b"}},
		{name: "another pool", pool: "q", targets: Targets{Pool: "p", Ready: []string{"a"}, Pending: []string{"b"}}},
		{name: "every pool", pool: "q", targets: Targets{Ready: []string{"a"}}, ready: []string{"a"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ready, pending, err := tc.targets.Targets(tc.pool)
			if err != nil || !slices.Equal(ready, tc.ready) || !slices.Equal(pending, tc.pending) {
				t.Errorf("Targets(%q) = %q, %q, %v; want %q, %q, nil", tc.pool, ready, pending, err, tc.ready, tc.pending)
			}
		})
	}
}
