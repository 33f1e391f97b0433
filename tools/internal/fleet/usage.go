package fleet

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// userHZ is the unit of the CPU times in /proc/PID/stat (USER_HZ, what
// getconf CLK_TCK prints): 100 on every architecture Linux and Go share.
const userHZ = 100

// Usage is what a process holds and has used: its resident set now (VmRSS),
// the anonymous part of it (RssAnon: the heap, stacks and other private
// memory, without the pages of its binary and other files, which the kernel
// may drop and read again), and its CPU time since it started (user and
// system).
type Usage struct {
	PID        int     `json:"pid"`
	RSSMiB     float64 `json:"rssMiB"`
	AnonMiB    float64 `json:"anonMiB"`
	CPUSeconds float64 `json:"cpuSeconds"`
}

// Usage reads the process's Usage from /proc. A process that exited is an
// error.
func (p *Process) Usage() (Usage, error) {
	select {
	case <-p.done:
		if p.err != nil {
			return Usage{}, fmt.Errorf("%s (PID %d) exited: %w", p.Role, p.PID(), p.err)
		}
		return Usage{}, fmt.Errorf("%s (PID %d) exited", p.Role, p.PID())
	default:
	}
	return ReadUsage(p.PID())
}

// ReadUsage reads the Usage of the process pid of this machine: VmRSS and
// RssAnon from /proc/PID/status, utime+stime from /proc/PID/stat.
func ReadUsage(pid int) (Usage, error) { return readUsage("/proc", pid) }

func readUsage(proc string, pid int) (Usage, error) {
	dir := filepath.Join(proc, strconv.Itoa(pid))
	status, err := os.ReadFile(filepath.Join(dir, "status"))
	if err != nil {
		return Usage{}, fmt.Errorf("read the status of PID %d: %w", pid, err)
	}
	stat, err := os.ReadFile(filepath.Join(dir, "stat"))
	if err != nil {
		return Usage{}, fmt.Errorf("read the stat of PID %d: %w", pid, err)
	}
	u := Usage{PID: pid}
	if u.RSSMiB, err = StatusMiB(string(status), "VmRSS"); err != nil {
		return Usage{}, fmt.Errorf("PID %d: %w", pid, err)
	}
	if u.AnonMiB, err = StatusMiB(string(status), "RssAnon"); err != nil {
		return Usage{}, fmt.Errorf("PID %d: %w", pid, err)
	}
	if u.CPUSeconds, err = parseCPU(string(stat)); err != nil {
		return Usage{}, fmt.Errorf("PID %d: %w", pid, err)
	}
	return u, nil
}

// StatusMiB returns the field (VmRSS, RssAnon, VmHWM, ...) of a
// /proc/PID/status text, in MiB.
func StatusMiB(status, field string) (float64, error) {
	for line := range strings.Lines(status) {
		rest, ok := strings.CutPrefix(line, field+":")
		if !ok {
			continue
		}
		f := strings.Fields(rest)
		if len(f) != 2 || f[1] != "kB" {
			return 0, fmt.Errorf("%s line %q", field, strings.TrimSpace(line))
		}
		kb, err := strconv.ParseFloat(f[0], 64)
		if err != nil {
			return 0, fmt.Errorf("%s: %w", field, err)
		}
		return kb / 1024, nil
	}
	return 0, fmt.Errorf("no %s line (a kernel thread, or a zombie)", field)
}

// parseCPU returns utime+stime of a /proc/PID/stat text, in seconds. The
// command name (field 2) is in parentheses and may hold spaces and
// parentheses itself, so the fields are counted after its last ')'.
func parseCPU(stat string) (float64, error) {
	i := strings.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, errors.New("stat: no ')' after the command name")
	}
	// f[0] is field 3 (state): utime (14) and stime (15) are f[11], f[12].
	f := strings.Fields(stat[i+1:])
	if len(f) < 13 {
		return 0, fmt.Errorf("stat: %d fields after the command name, want at least 13", len(f))
	}
	var ticks float64
	for _, s := range f[11:13] {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("stat: CPU time %q: %w", s, err)
		}
		ticks += float64(v)
	}
	return ticks / userHZ, nil
}

// ProvisionerProgram is the provisioner's process name (its
// /proc/PID/comm) on the real nodes.
const ProvisionerProgram = "provisioner"

// NodeUsage is the Usage of a node's process.
type NodeUsage struct {
	Node string `json:"node"`
	Usage
}

// ReadNodes returns the Usage of the process named program on each of
// nodes, in their order (NodeProcesses). A node without exactly one such
// process, or whose process cannot be read, is left out, and logf says
// why.
func ReadNodes(program string, nodes []string, logf func(format string, args ...any)) []NodeUsage {
	pids, err := NodeProcesses(program, nodes)
	if err != nil {
		logf("The %s processes of %v not read: %v", program, nodes, err)
	}
	var out []NodeUsage
	for _, node := range nodes {
		if len(pids[node]) != 1 {
			logf("%s: %d %s processes %v, not read", node, len(pids[node]), program, pids[node])
			continue
		}
		u, err := ReadUsage(pids[node][0])
		if err != nil {
			logf("%s: %v", node, err)
			continue
		}
		out = append(out, NodeUsage{Node: node, Usage: u})
	}
	return out
}

// NodeProcesses returns the PIDs, sorted, of the processes of this machine
// named program (their /proc/PID/comm) in the cgroups of each of nodes: the
// local cluster's kubelets put every pod of node N under the cgroup /N
// (scripts/node-start.sh, cgroupRoot), as scripts/footprint.sh reads it.
// Processes that exit meanwhile are skipped; nodes without one are not in
// the map.
func NodeProcesses(program string, nodes []string) (map[string][]int, error) {
	return nodeProcesses("/proc", program, nodes)
}

func nodeProcesses(proc, program string, nodes []string) (map[string][]int, error) {
	entries, err := os.ReadDir(proc)
	if err != nil {
		return nil, fmt.Errorf("list the processes: %w", err)
	}
	out := map[string][]int{}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || !e.IsDir() {
			continue
		}
		comm, err := os.ReadFile(filepath.Join(proc, e.Name(), "comm"))
		if err != nil || strings.TrimSpace(string(comm)) != program {
			continue
		}
		cgroup, err := os.ReadFile(filepath.Join(proc, e.Name(), "cgroup"))
		if err != nil {
			continue
		}
		if node := cgroupNode(string(cgroup), nodes); node != "" {
			out[node] = append(out[node], pid)
		}
	}
	for _, pids := range out {
		slices.Sort(pids)
	}
	return out, nil
}

// cgroupNode returns the node of nodes that is the first path element of a
// cgroup of a /proc/PID/cgroup text (lines ID:CONTROLLERS:PATH, one per
// hierarchy; one line 0::PATH with cgroup v2), "" when none is.
func cgroupNode(cgroup string, nodes []string) string {
	for line := range strings.Lines(cgroup) {
		parts := strings.SplitN(strings.TrimSpace(line), ":", 3)
		if len(parts) != 3 {
			continue
		}
		first, _, _ := strings.Cut(strings.TrimPrefix(parts[2], "/"), "/")
		if first != "" && slices.Contains(nodes, first) {
			return first
		}
	}
	return ""
}
