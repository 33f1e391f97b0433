package cachetrimtest

import "testing"

// TestHeapPerObject: objects of 64 KiB each are measured at about that.
func TestHeapPerObject(t *testing.T) {
	const size = 64 << 10
	got := HeapPerObject(20, func() any { return make([]byte, size) })
	if got < size || got > size*1.25 {
		t.Errorf("HeapPerObject = %.0f bytes, want about %d", got, size)
	}
}
