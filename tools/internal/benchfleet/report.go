package benchfleet

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"hostpath.dev/e2e/framework/apimetrics"
	"hostpath.dev/tools/internal/benchprovision"
	"hostpath.dev/tools/internal/fleet"
)

// writeVerbs are the verbs that change objects.
var writeVerbs = []string{"POST", "PUT", "PATCH", "DELETE"}

// heartbeats are resources written on a timer whatever the claims do (node
// and fake-node Leases, leader election), left out of the writes per
// volume.
var heartbeats = []string{"leases"}

// reviews are resources whose POST asks a question and stores nothing (the
// managers' TokenReviews and SubjectAccessReviews on a cache miss), left out
// of the writes per volume and counted by ReviewsPerVolume.
var reviews = []string{"tokenreviews", "subjectaccessreviews", "selfsubjectaccessreviews", "localsubjectaccessreviews", "selfsubjectreviews"}

// ReviewsPerVolume returns the POSTs of reviews during a run divided by the
// run's claims.
func ReviewsPerVolume(r benchprovision.Result) float64 {
	if r.Count == 0 {
		return 0
	}
	var n int64
	for _, c := range r.APIRequests {
		if c.Verb == "POST" && slices.Contains(reviews, c.Resource) {
			n += c.Count
		}
	}
	return float64(n) / float64(r.Count)
}

// WritesPerVolume returns the API writes (POST, PUT, PATCH, DELETE) of
// every client during a run, Leases and reviews left out, divided by the
// run's claims, and the same per resource, largest first.
func WritesPerVolume(r benchprovision.Result) (float64, []apimetrics.RequestCount) {
	if r.Count == 0 {
		return 0, nil
	}
	byResource := map[string]int64{}
	var total int64
	for _, c := range r.APIRequests {
		if !slices.Contains(writeVerbs, c.Verb) || slices.Contains(heartbeats, c.Resource) || slices.Contains(reviews, c.Resource) {
			continue
		}
		byResource[c.Verb+" "+c.Resource] += c.Count
		total += c.Count
	}
	out := make([]apimetrics.RequestCount, 0, len(byResource))
	for k, n := range byResource {
		verb, res, _ := strings.Cut(k, " ")
		out = append(out, apimetrics.RequestCount{Verb: verb, Resource: res, Count: n})
	}
	slices.SortFunc(out, func(a, b apimetrics.RequestCount) int {
		if a.Count != b.Count {
			return int(b.Count - a.Count)
		}
		return strings.Compare(a.Verb+a.Resource, b.Verb+b.Resource)
	})
	return float64(total) / float64(r.Count), out
}

// minListed is the fewest writes per volume of a verb and resource that
// the report names; the others (the namespace's deletion, mostly) are
// summed.
const minListed = 0.1

// Report prints res: the instance runs side by side, the multihost
// latencies, the backfill.
func Report(w io.Writer, res Result) error {
	bw := bufio.NewWriter(w)
	tw := tabwriter.NewWriter(bw, 0, 0, 2, ' ', 0)
	if len(res.Instances) > 0 {
		fmt.Fprintf(tw, "== node-mode claims over K provisioner instances (fake nodes) ==\n")
		row := func(name string, f func(InstanceResult) string) {
			cells := []string{name}
			for _, r := range res.Instances {
				cells = append(cells, f(r))
			}
			fmt.Fprintln(tw, strings.Join(cells, "\t"))
		}
		row("figure", func(r InstanceResult) string { return fmt.Sprintf("K=%d", r.Instances) })
		row("claims", func(r InstanceResult) string { return strconv.Itoa(r.Run.Count) })
		row("all PVs exist (s)", func(r InstanceResult) string { return f2(r.Run.AllPVsSeconds) })
		row("all claims Bound (s)", func(r InstanceResult) string { return f2(r.Run.AllBoundSeconds) })
		row("PVs/s", func(r InstanceResult) string { return f1(r.Run.PVsPerSecond) })
		row("claim->PV p50 (s)", func(r InstanceResult) string { return f2(r.Run.LatencyP50Seconds) })
		row("claim->PV p95 (s)", func(r InstanceResult) string { return f2(r.Run.LatencyP95Seconds) })
		row("all PVs and directories gone (s)", func(r InstanceResult) string {
			return f2(max(r.Run.PVsGoneSeconds, r.Run.DirsGoneSeconds))
		})
		row("API writes per volume (leases left out)", func(r InstanceResult) string { w, _ := WritesPerVolume(r.Run); return f2(w) })
		row("token and access reviews per volume", func(r InstanceResult) string { return f2(ReviewsPerVolume(r.Run)) })
		row("provisioner peak RSS, max (MiB)", func(r InstanceResult) string { return f1(r.Footprint.ProvisionerMaxMiB) })
		row("provisioner peak RSS, summed (MiB)", func(r InstanceResult) string { return f1(r.Footprint.ProvisionerSumMiB) })
		row("manager peak RSS, max (MiB)", func(r InstanceResult) string { return f1(r.Footprint.ManagerMaxMiB) })
		row("manager peak RSS, summed (MiB)", func(r InstanceResult) string { return f1(r.Footprint.ManagerSumMiB) })
		if err := tw.Flush(); err != nil {
			return err
		}
		fmt.Fprintf(bw, "API writes per volume by verb and resource:\n")
		for _, r := range res.Instances {
			_, by := WritesPerVolume(r.Run)
			parts := make([]string, 0, len(by))
			var rest float64
			for _, c := range by {
				per := float64(c.Count) / float64(r.Run.Count)
				if per < minListed {
					rest += per
					continue
				}
				parts = append(parts, fmt.Sprintf("%s %s %.2f", c.Verb, c.Resource, per))
			}
			if rest > 0 {
				parts = append(parts, fmt.Sprintf("others %.2f", rest))
			}
			fmt.Fprintf(bw, "  K=%d: %s\n", r.Instances, strings.Join(parts, ", "))
		}
		if len(res.Instances) > 1 {
			first, last := res.Instances[0], res.Instances[len(res.Instances)-1]
			a, _ := WritesPerVolume(first.Run)
			b, _ := WritesPerVolume(last.Run)
			fmt.Fprintf(bw, "writes per volume, K=%d / K=%d: %.2fx\n", last.Instances, first.Instances, ratio(b, a))
		}
		fmt.Fprintln(bw)
	}
	if len(res.Multihost) > 0 {
		fmt.Fprintf(tw, "== multihost claims, one at a time: create->Bound (s) ==\n")
		fmt.Fprintf(tw, "managers\tclaims\tp50\tmax\n")
		for _, m := range res.Multihost {
			fmt.Fprintf(tw, "%d\t%d\t%s\t%s\n", m.Endpoints, len(m.Latencies), f3(quantile(m.Latencies, 50)), f3(quantile(m.Latencies, 100)))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
		fmt.Fprintln(bw)
	}
	if b := res.Backfill; b != nil {
		fmt.Fprintf(bw, "== backfill of %d multihost volumes onto a new node (%s), from its manager pod Ready ==\n", b.Volumes, b.Node)
		fmt.Fprintf(tw, "every directory on its disk (s)\t%s\n", f2(b.DirsSeconds))
		fmt.Fprintf(tw, "its HostDefinition Ready with them (s)\t%s\n", f2(b.ReadySeconds))
		fmt.Fprintf(tw, "every PV lists it (s)\t%s\n", f2(b.PVsSeconds))
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	return bw.Flush()
}

// summary is "p50 X s, max Y s" of values.
func summary(values []float64) string {
	return fmt.Sprintf("p50 %ss, max %ss", f3(quantile(values, 50)), f3(quantile(values, 100)))
}

// quantile is the nearest-rank p-th percentile of values (0 for none).
func quantile(values []float64, p float64) float64 {
	ds := make([]time.Duration, len(values))
	for i, v := range values {
		ds[i] = time.Duration(v * float64(time.Second))
	}
	return benchprovision.Percentile(ds, p).Seconds()
}

func ratio(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return a / b
}

func f1(v float64) string { return strconv.FormatFloat(v, 'f', 1, 64) }
func f2(v float64) string { return strconv.FormatFloat(v, 'f', 2, 64) }
func f3(v float64) string { return strconv.FormatFloat(v, 'f', 3, 64) }

// footprint reads the peak RSS of every member's processes.
func footprint(members []*fleet.Member) (Footprint, error) {
	var fp Footprint
	for _, m := range members {
		for _, p := range []*fleet.Process{m.Manager, m.Provisioner} {
			if p == nil {
				continue
			}
			mib, err := PeakMiB(fmt.Sprintf("/proc/%d/status", p.PID()))
			if err != nil {
				return fp, fmt.Errorf("%s %s: %w", m.Node, p.Role, err)
			}
			fp.Processes++
			switch p.Role {
			case fleet.RoleManager:
				fp.ManagerSumMiB += mib
				fp.ManagerMaxMiB = max(fp.ManagerMaxMiB, mib)
			case fleet.RoleProvisioner:
				fp.ProvisionerSumMiB += mib
				fp.ProvisionerMaxMiB = max(fp.ProvisionerMaxMiB, mib)
			}
		}
	}
	return fp, nil
}

// PeakMiB reads VmHWM, the peak resident set, from a /proc/PID/status file.
func PeakMiB(statusFile string) (float64, error) {
	b, err := os.ReadFile(statusFile)
	if err != nil {
		return 0, err
	}
	mib, err := fleet.StatusMiB(string(b), "VmHWM")
	if err != nil {
		return 0, fmt.Errorf("%s: %w", statusFile, err)
	}
	return mib, nil
}
