package fleet

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// stat is a /proc/PID/stat line of a command name with a space and a
// parenthesis, utime 250 and stime 50 ticks.
const stat = "4242 (provisioner (x)) S 1 4242 4242 0 -1 4194560 1234 0 0 0 250 50 0 0 20 0 12 0 5000 900000000 7000 18446744073709551615\n"

// TestParseProc checks the readings of a process's /proc files:
// /proc/PID/status (StatusMiB) and /proc/PID/stat (parseCPU).
func TestParseProc(t *testing.T) {
	field := func(name string) func(string) (float64, error) {
		return func(status string) (float64, error) { return StatusMiB(status, name) }
	}
	for _, tc := range []struct {
		name  string
		parse func(string) (float64, error)
		text  string
		want  float64
		err   string
	}{
		{"RSS in kB", field("VmRSS"), "Name:\tprovisioner\nVmHWM:\t  80000 kB\nVmRSS:\t   51200 kB\nRssAnon:\t 10240 kB\nThreads: 9\n", 50, ""},
		{"anonymous", field("RssAnon"), "Name:\tprovisioner\nVmRSS:\t   51200 kB\nRssAnon:\t 10240 kB\nRssFile:\t 40960 kB\n", 10, ""},
		{"peak", field("VmHWM"), "Name:\tprovisioner\nVmHWM:\t  80000 kB\nVmRSS:\t   51200 kB\n", 78.125, ""},
		{"no RSS", field("VmRSS"), "Name:\tkthreadd\nThreads: 1\n", 0, "no VmRSS"},
		{"RssAnon is not RssAnonX", field("RssAnon"), "RssAnonX:\t 1 kB\n", 0, "no RssAnon"},
		{"RSS unit", field("VmRSS"), "VmRSS:\t 12 MB\n", 0, "VmRSS line"},
		{"RSS number", field("VmRSS"), "VmRSS:\t x kB\n", 0, "VmRSS"},
		{"CPU, parentheses in the name", parseCPU, stat, 3, ""},
		{"CPU, no name", parseCPU, "4242 S 1", 0, "no ')'"},
		{"CPU, short", parseCPU, "1 (a) S 1 2 3", 0, "fields"},
		{"CPU, not a number", parseCPU, "1 (a) S 1 1 1 0 -1 0 0 0 0 0 x 50 0", 0, "CPU time"},
	} {
		got, err := tc.parse(tc.text)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%s: error %v, want %q", tc.name, err, tc.err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("%s: %v, %v; want %v", tc.name, got, err, tc.want)
		}
	}
}

func TestCgroupNode(t *testing.T) {
	nodes := []string{"hostpath-node-1", "hostpath-node-2"}
	for _, tc := range []struct {
		cgroup, want string
	}{
		{"12:cpuset:/hostpath-node-2/kubepods/pod1/abc\n11:memory:/hostpath-node-2/kubepods/pod1/abc\n", "hostpath-node-2"},
		{"0::/hostpath-node-1/kubepods/besteffort/pod2/def\n", "hostpath-node-1"},
		{"12:cpuset:/\n0::/user.slice/user-0.slice/session-1.scope\n", ""},
		{"0::/hostpath-node-10/x\n", ""},
		{"", ""},
	} {
		if got := cgroupNode(tc.cgroup, nodes); got != tc.want {
			t.Errorf("cgroupNode(%q) = %q, want %q", tc.cgroup, got, tc.want)
		}
	}
}

// TestProcFiles reads a /proc of files: processes of two nodes and the
// fleet's, of the program and of others.
func TestProcFiles(t *testing.T) {
	proc := t.TempDir()
	write := func(pid, comm, cgroup string) {
		dir := filepath.Join(proc, pid)
		for name, text := range map[string]string{
			"comm": comm + "\n", "cgroup": cgroup, "stat": stat,
			"status": "Name:\t" + comm + "\nVmRSS:\t 20480 kB\nRssAnon:\t 5120 kB\n",
		} {
			if err := os.MkdirAll(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	write("300", "provisioner", "0::/n1/kubepods/pod/c\n")
	write("20", "provisioner", "0::/n2/kubepods/pod/c\n")
	write("10", "provisioner", "0::/n2/kubepods/pod/old\n")
	write("40", "manager", "0::/n1/kubepods/pod/m\n")
	write("50", "provisioner", "0::/user.slice/session-1.scope\n")
	if err := os.WriteFile(filepath.Join(proc, "uptime"), []byte("1 1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := nodeProcesses(proc, "provisioner", []string{"n1", "n2", "n3"})
	want := map[string][]int{"n1": {300}, "n2": {10, 20}}
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("nodeProcesses = %v, %v; want %v", got, err, want)
	}
	u, err := readUsage(proc, 300)
	if err != nil || u != (Usage{PID: 300, RSSMiB: 20, AnonMiB: 5, CPUSeconds: 3}) {
		t.Errorf("readUsage = %+v, %v", u, err)
	}
	if _, err := readUsage(proc, 999); err == nil || !strings.Contains(err.Error(), "PID 999") {
		t.Errorf("readUsage of a gone process: %v", err)
	}
}
