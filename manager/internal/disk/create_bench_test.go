package disk

import (
	"context"
	"fmt"
	"testing"

	"hostpath.dev/api/managerapi"
)

// BenchmarkCreateDeleteVolume is the disk work of one volume's life, as the
// manager does it for a claim and its deletion: the owner record written
// (with its fsyncs), the directory made and given its mode, then the
// directory and its record removed, in a pool on t.TempDir()'s filesystem.
// Its CPU profile (go test -bench CreateDeleteVolume -cpuprofile) shows
// where a create costs, without HTTP and authentication in the way.
func BenchmarkCreateDeleteVolume(b *testing.B) {
	e := newTestEnv(b)
	// klog's global logger (-v=0): the store's V(4) lines of each volume
	// are not formatted.
	ctx := context.Background()
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		name := fmt.Sprintf("pvc-%08d", i)
		req := managerapi.CreateVolumeRequest{Owner: name, ReclaimPolicy: managerapi.ReclaimDelete, ClaimNamespace: "ns", RequiredBytes: 1 << 30}
		if _, _, err := e.store.CreateVolume(ctx, "default", name, req, 0o777, ""); err != nil {
			b.Fatal(err)
		}
		if _, err := e.store.DeleteVolume(ctx, "default", name, name, false, ""); err != nil {
			b.Fatal(err)
		}
	}
}
