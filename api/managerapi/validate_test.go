package managerapi_test

import (
	"io/fs"
	"strings"
	"testing"

	"hostpath.dev/api/managerapi"
)

// TestValidateRequests: each request's Validate takes what the API
// documents and names the field it refuses.
func TestValidateRequests(t *testing.T) {
	create := func(mutate func(*managerapi.CreateVolumeRequest)) func() error {
		return func() error {
			req := managerapi.CreateVolumeRequest{Owner: "pv-1", ReclaimPolicy: managerapi.ReclaimDelete, ClaimNamespace: "ns", ClaimName: "data", RequiredBytes: 1}
			mutate(&req)
			_, err := req.Validate()
			return err
		}
	}
	clone := func(mutate func(*managerapi.CloneVolumeRequest)) func() error {
		return func() error {
			req := managerapi.CloneVolumeRequest{CreateVolumeRequest: managerapi.CreateVolumeRequest{Owner: "pv-2"}, SourcePool: "fast", SourceName: "src", SourceOwner: "pv-1"}
			mutate(&req)
			_, err := req.Validate("fast", "copy")
			return err
		}
	}
	setOwner := func(mutate func(*managerapi.SetOwnerRequest)) func() error {
		return func() error {
			req := managerapi.SetOwnerRequest{Owner: "pv-1", Previous: "pv-0", ReclaimPolicy: managerapi.ReclaimRetain, ClaimNamespace: "ns", ClaimName: "data"}
			mutate(&req)
			return req.Validate()
		}
	}
	setSize := func(owner string, size int64) func() error {
		return func() error { return managerapi.SetSizeRequest{Owner: owner, SizeBytes: size}.Validate() }
	}
	for _, tc := range []struct {
		desc      string
		validate  func() error
		wantInMsg string // "" when valid
	}{
		{"create", create(func(*managerapi.CreateVolumeRequest) {}), ""},
		{"create without owner", create(func(r *managerapi.CreateVolumeRequest) { r.Owner = "" }), "owner"},
		{"create with a bad reclaim policy", create(func(r *managerapi.CreateVolumeRequest) { r.ReclaimPolicy = "Recycle" }), "reclaimPolicy"},
		{"create with a bad claim namespace", create(func(r *managerapi.CreateVolumeRequest) { r.ClaimNamespace = "Team_A" }), "claimNamespace"},
		{"create with a bad claim name", create(func(r *managerapi.CreateVolumeRequest) { r.ClaimName = "Data_1" }), `claimName "Data_1" is not a PersistentVolumeClaim name`},
		{"create with a negative size", create(func(r *managerapi.CreateVolumeRequest) { r.RequiredBytes = -1 }), "requiredBytes must not be negative"},
		{"create with a bad mode", create(func(r *managerapi.CreateVolumeRequest) { r.Mode = "999" }), "mode"},
		{"clone", clone(func(*managerapi.CloneVolumeRequest) {}), ""},
		{"clone of another pool's volume of the same name", clone(func(r *managerapi.CloneVolumeRequest) { r.SourcePool, r.SourceName = "slow", "copy" }), ""},
		{"clone with a bad create", clone(func(r *managerapi.CloneVolumeRequest) { r.Owner = "PV 2" }), "owner"},
		{"clone of a bad source pool", clone(func(r *managerapi.CloneVolumeRequest) { r.SourcePool = "Fast" }), "sourcePool"},
		{"clone of a bad source name", clone(func(r *managerapi.CloneVolumeRequest) { r.SourceName = "../etc" }), "sourceName"},
		{"clone of a bad source owner", clone(func(r *managerapi.CloneVolumeRequest) { r.SourceOwner = "" }), "sourceOwner"},
		{"clone into itself", clone(func(r *managerapi.CloneVolumeRequest) { r.SourceName = "copy" }), "into itself"},
		{"set owner", setOwner(func(*managerapi.SetOwnerRequest) {}), ""},
		{"set owner to adopt", setOwner(func(r *managerapi.SetOwnerRequest) { r.Previous = "" }), ""},
		{"set owner without owner", setOwner(func(r *managerapi.SetOwnerRequest) { r.Owner = "" }), "owner"},
		{"set owner with a bad previous owner", setOwner(func(r *managerapi.SetOwnerRequest) { r.Previous = "../x" }), "previous"},
		{"set owner with a bad reclaim policy", setOwner(func(r *managerapi.SetOwnerRequest) { r.ReclaimPolicy = "delete" }), "reclaimPolicy"},
		{"set owner with a bad claim namespace", setOwner(func(r *managerapi.SetOwnerRequest) { r.ClaimNamespace = "team a" }), "claimNamespace"},
		{"set owner with a bad claim name", setOwner(func(r *managerapi.SetOwnerRequest) { r.ClaimName = strings.Repeat("c", 254) }), "claimName"},
		{"set size", setSize("pv-1", 1), ""},
		{"set size without owner", setSize("", 1), "owner"},
		{"set size to zero", setSize("pv-1", 0), "sizeBytes must be positive"},
		{"set size negative", setSize("pv-1", -1), "sizeBytes must be positive"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			err := tc.validate()
			switch {
			case tc.wantInMsg == "" && err != nil:
				t.Fatalf("error %v, want none", err)
			case tc.wantInMsg != "" && err == nil:
				t.Fatalf("no error, want one naming %q", tc.wantInMsg)
			case err != nil && !strings.Contains(err.Error(), tc.wantInMsg):
				t.Errorf("error %q does not say %q", err, tc.wantInMsg)
			}
		})
	}
}

// TestValidateCreateMode: Validate returns the mode the request asks
// for, DefaultMode when it names none.
func TestValidateCreateMode(t *testing.T) {
	for _, tc := range []struct {
		mode string
		want fs.FileMode
	}{
		{"", managerapi.DefaultMode},
		{"0750", 0o750},
		{"2775", 0o775 | fs.ModeSetgid},
	} {
		got, err := managerapi.CreateVolumeRequest{Owner: "pv-1", Mode: tc.mode}.Validate()
		if err != nil || got != tc.want {
			t.Errorf("mode %q: Validate() = %v, %v; want %v", tc.mode, got, err, tc.want)
		}
	}
}
