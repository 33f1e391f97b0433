package disk

import (
	"os"
	"testing"

	"golang.org/x/sys/unix"
)

// TestStatsOf checks the figures read from a statfs answer, ReadOnly from
// ST_RDONLY among other flags.
func TestStatsOf(t *testing.T) {
	tests := []struct {
		name string
		st   unix.Statfs_t
		want fsStats
	}{
		{
			name: "read-write",
			st:   unix.Statfs_t{Bsize: 4096, Blocks: 100, Bavail: 25, Files: 50, Ffree: 10, Flags: unix.ST_NOSUID | unix.ST_NODEV},
			want: fsStats{CapacityBytes: 409600, FreeBytes: 102400, Inodes: 50, FreeInodes: 10},
		},
		{
			name: "read-only",
			st:   unix.Statfs_t{Bsize: 4096, Blocks: 100, Bavail: 0, Files: 50, Ffree: 10, Flags: unix.ST_RDONLY},
			want: fsStats{CapacityBytes: 409600, Inodes: 50, FreeInodes: 10, ReadOnly: true},
		},
		{
			name: "read-only among other flags",
			st:   unix.Statfs_t{Bsize: 512, Blocks: 2, Flags: unix.ST_RDONLY | unix.ST_NOSUID | unix.ST_NOEXEC | unix.ST_RELATIME},
			want: fsStats{CapacityBytes: 1024, ReadOnly: true},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := statsOf(&tc.st); got != tc.want {
				t.Errorf("statsOf = %+v, want %+v", got, tc.want)
			}
		})
	}
}

// TestStatfsWritable checks that a test's temporary directory, writable,
// reads as not read-only through the real statfs.
func TestStatfsWritable(t *testing.T) {
	f, err := os.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	st, err := statfs(f)
	if err != nil {
		t.Fatal(err)
	}
	if st.ReadOnly || st.CapacityBytes <= 0 {
		t.Errorf("statfs of a temporary directory = %+v, want a capacity and not read-only", st)
	}
}
