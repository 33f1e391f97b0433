package annotations

import (
	"slices"
	"testing"
)

func TestNodeLists(t *testing.T) {
	for _, tc := range []struct {
		value string
		nodes []string
	}{
		{"", nil},
		{"a", []string{"a"}},
		{"a,b.example,c", []string{"a", "b.example", "c"}},
	} {
		if got := SplitNodes(tc.value); !slices.Equal(got, tc.nodes) {
			t.Errorf("SplitNodes(%q) = %q, want %q", tc.value, got, tc.nodes)
		}
		if got := JoinNodes(tc.nodes); got != tc.value {
			t.Errorf("JoinNodes(%q) = %q, want %q", tc.nodes, got, tc.value)
		}
	}
	if got := SplitNodes(" a, ,b "); !slices.Equal(got, []string{"a", "b"}) {
		t.Errorf("SplitNodes drops blanks: got %q", got)
	}
}
