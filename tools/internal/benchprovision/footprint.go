package benchprovision

import (
	"bufio"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// footprintRoles maps the PROGRAM column of scripts/footprint.sh to what a
// Result sums it into: the provisioner's processes (the no-op provisioner
// stands in for them) or the managers'. Other programs are not counted.
var footprintRoles = map[string]string{
	"provisioner":     "provisioner",
	"noopprovisioner": "provisioner",
	"manager":         "manager",
}

// Footprint is the summed peak RSS and CPU time of one role's processes.
type Footprint struct {
	Instances  int
	PeakMiB    float64
	CPUSeconds float64
}

// ParseFootprint reads the table scripts/footprint.sh prints,
//
//	PROGRAM NODE PID RSS_MiB PEAK_MiB CPU_s UP_s CPU_m
//
// one row per process (the header, blank lines and programs other than
// those of footprintRoles are skipped), and sums PEAK_MiB (VmHWM) and CPU_s
// per role ("provisioner", "manager").
func ParseFootprint(r io.Reader) (map[string]Footprint, error) {
	out := map[string]Footprint{}
	sc := bufio.NewScanner(r)
	for line := 1; sc.Scan(); line++ {
		f := strings.Fields(sc.Text())
		if len(f) == 0 || f[0] == "PROGRAM" {
			continue
		}
		role, ok := footprintRoles[f[0]]
		if !ok {
			continue
		}
		if len(f) < 6 {
			return nil, fmt.Errorf("line %d: %d columns, want at least 6 (PROGRAM NODE PID RSS_MiB PEAK_MiB CPU_s)", line, len(f))
		}
		peak, err := strconv.ParseFloat(f[4], 64)
		if err != nil {
			return nil, fmt.Errorf("line %d: PEAK_MiB %q: %w", line, f[4], err)
		}
		cpu, err := strconv.ParseFloat(f[5], 64)
		if err != nil {
			return nil, fmt.Errorf("line %d: CPU_s %q: %w", line, f[5], err)
		}
		fp := out[role]
		fp.Instances++
		fp.PeakMiB += peak
		fp.CPUSeconds += cpu
		out[role] = fp
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	return out, nil
}

// ApplyFootprint puts the footprint of each role into r.
func ApplyFootprint(r *Result, fp map[string]Footprint) {
	p, m := fp["provisioner"], fp["manager"]
	r.ProvisionerInstances, r.ProvisionerPeakMiB, r.ProvisionerCPUSeconds = p.Instances, p.PeakMiB, p.CPUSeconds
	r.ManagerInstances, r.ManagerPeakMiB, r.ManagerCPUSeconds = m.Instances, m.PeakMiB, m.CPUSeconds
}
