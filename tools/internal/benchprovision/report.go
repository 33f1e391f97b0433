package benchprovision

import (
	"cmp"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"

	"hostpath.dev/e2e/framework/apimetrics"
)

// BaselineKind is the KIND, in run labels, of the no-op floor's runs
// (tools/internal/noopprovisioner), which every other run is compared with.
const BaselineKind = "noop"

// ParseLabel splits a run label KIND@SETTING ("ours@200/400") into the kind
// of provisioner and the kube-controller-manager setting it ran at; a
// label without "@" is a kind alone.
func ParseLabel(label string) (kind, setting string) {
	kind, setting, _ = strings.Cut(label, "@")
	return kind, setting
}

// pair is a run and the baseline run at the same setting and round;
// either may be missing.
type pair struct {
	setting   string
	round     int
	run, base *Result
}

// pairs groups results by setting, in the order the settings first appear,
// then by round: each run of another kind than baseline is paired with the
// baseline run of its setting and round (the first such), else with the
// setting's first baseline run; a setting with only baseline runs gives
// one pair without run.
func pairs(results []Result, baseline string) []pair {
	type key struct {
		setting string
		round   int
	}
	var settings []string
	bases := map[key]*Result{}
	firstBase := map[string]*Result{}
	runs := map[string][]*Result{}
	for i := range results {
		r := &results[i]
		kind, setting := ParseLabel(r.Label)
		if !slices.Contains(settings, setting) {
			settings = append(settings, setting)
		}
		k := key{setting, r.Round}
		switch {
		case kind != baseline:
			runs[setting] = append(runs[setting], r)
		case bases[k] == nil:
			bases[k] = r
			if firstBase[setting] == nil {
				firstBase[setting] = r
			}
		}
	}
	var out []pair
	for _, s := range settings {
		if len(runs[s]) == 0 {
			out = append(out, pair{setting: s, base: firstBase[s]})
		}
		for _, r := range runs[s] {
			base := cmp.Or(bases[key{s, r.Round}], firstBase[s])
			out = append(out, pair{setting: s, round: r.Round, run: r, base: base})
		}
	}
	return out
}

// figure is one row of a pair's table; ok is false when the run did not
// is missing or did not measure it.
type figure struct {
	name   string
	format string
	value  func(Result) (v float64, ok bool)
}

// always is a figure every run measures.
func always(f func(Result) float64) func(Result) (float64, bool) {
	return func(r Result) (float64, bool) { return f(r), true }
}

var figures = []figure{
	{"claims created (s)", "%.2f", always(func(r Result) float64 { return r.CreateSeconds })},
	{"all PVs exist (s)", "%.2f", always(func(r Result) float64 { return r.AllPVsSeconds })},
	{"all claims Bound (s)", "%.2f", always(func(r Result) float64 { return r.AllBoundSeconds })},
	{"PVs/s", "%.1f", always(func(r Result) float64 { return r.PVsPerSecond })},
	{"binds/s", "%.1f", always(func(r Result) float64 { return r.BindsPerSecond })},
	{"claim->PV p50 (s)", "%.2f", always(func(r Result) float64 { return r.LatencyP50Seconds })},
	{"claim->PV p95 (s)", "%.2f", always(func(r Result) float64 { return r.LatencyP95Seconds })},
	{"claim->PV max (s)", "%.2f", always(func(r Result) float64 { return r.LatencyMaxSeconds })},
	{"claim->Bound p50 (s)", "%.2f", always(func(r Result) float64 { return r.BoundP50Seconds })},
	{"claim->Bound p95 (s)", "%.2f", always(func(r Result) float64 { return r.BoundP95Seconds })},
	{"claim->Bound max (s)", "%.2f", always(func(r Result) float64 { return r.BoundMaxSeconds })},
	{"all PVs Released (s)", "%.2f", func(r Result) (float64, bool) { return r.ReleasedSeconds, r.ReleasedTimes != nil }},
	{"all PVs deleted (s)", "%.2f", always(func(r Result) float64 { return r.PVsGoneSeconds })},
	{"Released->gone p50 (s)", "%.2f", func(r Result) (float64, bool) { return r.GoneP50Seconds, r.GoneTimes != nil }},
	{"Released->gone p95 (s)", "%.2f", func(r Result) (float64, bool) { return r.GoneP95Seconds, r.GoneTimes != nil }},
	{"Released->gone max (s)", "%.2f", func(r Result) (float64, bool) { return r.GoneMaxSeconds, r.GoneTimes != nil }},
	{"all directories gone (s)", "%.2f", func(r Result) (float64, bool) { return r.DirsGoneSeconds, r.Dirs > 0 }},
	{"deletes/s", "%.1f", always(func(r Result) float64 { return r.DeletesPerSecond })},
	{"API requests, all clients", "%.0f", func(r Result) (float64, bool) { return float64(apimetrics.Total(r.APIRequests)), r.APIRequests != nil }},
	{"claim+PV watch events per watcher", "%.0f", func(r Result) (float64, bool) { return r.WatchEventsPerWatcher, r.WatchEvents != nil }},
	{"provisioner peak RSS, summed (MiB)", "%.1f", func(r Result) (float64, bool) { return r.ProvisionerPeakMiB, r.ProvisionerInstances > 0 }},
	{"provisioner CPU, summed (s)", "%.1f", func(r Result) (float64, bool) { return r.ProvisionerCPUSeconds, r.ProvisionerInstances > 0 }},
	{"manager peak RSS, summed (MiB)", "%.1f", func(r Result) (float64, bool) { return r.ManagerPeakMiB, r.ManagerInstances > 0 }},
	{"manager CPU, summed (s)", "%.1f", func(r Result) (float64, bool) { return r.ManagerCPUSeconds, r.ManagerInstances > 0 }},
}

// cell is the figure of r formatted and its value; "-" and false when r
// is missing or did not measure it.
func (f figure) cell(r *Result) (string, float64, bool) {
	if r == nil {
		return "-", 0, false
	}
	v, ok := f.value(*r)
	if !ok {
		return "-", 0, false
	}
	return fmt.Sprintf(f.format, v), v, true
}

// ratio is a/b formatted, "-" when either is missing or b is 0.
func ratio(a float64, aok bool, b float64, bok bool) string {
	if !aok || !bok || b == 0 {
		return "-"
	}
	return fmt.Sprintf("%.2f", a/b)
}

// Report writes, for each run and the baseline run (label kind baseline) at
// the same kube-controller-manager setting, what each ran with, a table of
// every figure of both with the ratio run/baseline, the line
//
//	ratio to baseline: X.XXx (kube-controller-manager SETTING: ...)
//
// (time until all claims Bound, run/baseline), and a table of the API
// requests by verb and resource of both.
//
// A setting run in several rounds (Result.Round) gets, after its pairs, the
// ratios of every figure over the rounds: min, median and max.
func Report(w io.Writer, results []Result, baseline string) error {
	var sb strings.Builder
	ps := pairs(results, baseline)
	for i, p := range ps {
		if i > 0 {
			sb.WriteString("\n")
		}
		if err := writePair(&sb, p, baseline); err != nil {
			return err
		}
		if i == len(ps)-1 || ps[i+1].setting != p.setting {
			if err := writeRounds(&sb, ps, p.setting, baseline); err != nil {
				return err
			}
		}
	}
	_, err := io.WriteString(w, sb.String())
	return err
}

// writeRounds writes, for a setting with complete pairs in two rounds or
// more, each figure's ratio run/baseline over those rounds.
func writeRounds(sb *strings.Builder, ps []pair, setting, baseline string) error {
	var rounds []pair
	for _, p := range ps {
		if p.setting == setting && p.run != nil && p.base != nil && p.round > 0 {
			rounds = append(rounds, p)
		}
	}
	if len(rounds) < 2 {
		return nil
	}
	runKind, _ := ParseLabel(rounds[0].run.Label)
	fmt.Fprintf(sb, "\n== kube-controller-manager %s: %s/%s over %d rounds, each against the %s run of its round ==\n",
		cmp.Or(setting, "(unnamed setting)"), runKind, baseline, len(rounds), baseline)
	tw := tabwriter.NewWriter(sb, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "figure\tmin\tmedian\tmax\n")
	for _, f := range figures {
		var rs []float64
		for _, p := range rounds {
			_, a, aok := f.cell(p.run)
			_, b, bok := f.cell(p.base)
			if aok && bok && b != 0 {
				rs = append(rs, a/b)
			}
		}
		if len(rs) == 0 {
			continue
		}
		slices.Sort(rs)
		fmt.Fprintf(tw, "%s\t%.2fx\t%.2fx\t%.2fx\n", f.name, rs[0], median(rs), rs[len(rs)-1])
	}
	return tw.Flush()
}

// median is the median of sorted values (the mean of the two middle ones
// for an even count).
func median(sorted []float64) float64 {
	n := len(sorted)
	if n%2 == 1 {
		return sorted[n/2]
	}
	return (sorted[n/2-1] + sorted[n/2]) / 2
}

// labelOf is the label of r, or "KIND@SETTING" when r is missing.
func labelOf(r *Result, kind, setting string) string {
	if r != nil {
		return r.Label
	}
	if setting == "" {
		return kind
	}
	return kind + "@" + setting
}

// writePair writes the section of one pair.
func writePair(sb *strings.Builder, p pair, baseline string) error {
	runKind := "run"
	if p.run != nil {
		runKind, _ = ParseLabel(p.run.Label)
	}
	runLabel, baseLabel := labelOf(p.run, runKind, p.setting), labelOf(p.base, baseline, p.setting)
	round := ""
	if p.round > 0 {
		round = fmt.Sprintf(", round %d", p.round)
	}
	fmt.Fprintf(sb, "== kube-controller-manager %s: %s vs %s%s ==\n", cmp.Or(p.setting, "(unnamed setting)"), runLabel, baseLabel, round)
	for _, r := range []*Result{p.run, p.base} {
		if r == nil {
			continue
		}
		fmt.Fprintf(sb, "%s: %d claims over %s; provisioner: %s; kube-controller-manager client limits: %s\n",
			r.Label, r.Count, strings.Join(r.Nodes, ", "), cmp.Or(r.Settings, "-"), cmp.Or(r.KCM, "-"))
	}
	tw := tabwriter.NewWriter(sb, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "figure\t%s\t%s\t%s/%s\n", runLabel, baseLabel, runKind, baseline)
	for _, f := range figures {
		a, av, aok := f.cell(p.run)
		b, bv, bok := f.cell(p.base)
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", f.name, a, b, ratio(av, aok, bv, bok))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	sb.WriteString("times: lower is better; rates (/s): higher is better\n")
	if p.run != nil && p.base != nil && p.base.AllBoundSeconds > 0 {
		fmt.Fprintf(sb, "ratio to baseline: %.2fx (kube-controller-manager %s: time until all claims Bound, %s/%s)\n",
			p.run.AllBoundSeconds/p.base.AllBoundSeconds, cmp.Or(p.setting, "-"), runKind, baseline)
	}
	return writeRequests(sb, p, runLabel, baseLabel)
}

// MinRequestShare is the share of the larger run's total under which a
// (verb, resource) pair of the requests table is summed into one row of
// others (namespace deletion and background traffic: dozens of pairs of a
// few requests each).
const MinRequestShare = 0.005

// writeRequests writes the table of API requests of a pair, most first.
func writeRequests(sb *strings.Builder, p pair, runLabel, baseLabel string) error {
	counts := map[apimetrics.RequestKey][2]int64{}
	measured := [2]bool{}
	for i, r := range []*Result{p.run, p.base} {
		if r == nil || r.APIRequests == nil {
			continue
		}
		measured[i] = true
		for _, c := range r.APIRequests {
			k := apimetrics.RequestKey{Verb: c.Verb, Resource: c.Resource}
			v := counts[k]
			v[i] += c.Count
			counts[k] = v
		}
	}
	if !measured[0] && !measured[1] {
		return nil
	}
	keys := make([]apimetrics.RequestKey, 0, len(counts))
	for k := range counts {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b apimetrics.RequestKey) int {
		ca, cb := counts[a], counts[b]
		return cmp.Or(cmp.Compare(cb[0]+cb[1], ca[0]+ca[1]), cmp.Compare(a.Verb, b.Verb), cmp.Compare(a.Resource, b.Resource))
	})
	sb.WriteString("API requests from the first claim until every PV was gone, by every client (" + apimetrics.RequestsMetric + "):\n")
	tw := tabwriter.NewWriter(sb, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "verb\tresource\t%s\t%s\n", runLabel, baseLabel)
	cell := func(i int, n int64) string {
		if !measured[i] {
			return "-"
		}
		return fmt.Sprint(n)
	}
	var total, other [2]int64
	for _, c := range counts {
		total[0], total[1] = total[0]+c[0], total[1]+c[1]
	}
	minRow := int64(MinRequestShare * float64(max(total[0], total[1])))
	others := 0
	for _, k := range keys {
		c := counts[k]
		if max(c[0], c[1]) < minRow {
			other[0], other[1] = other[0]+c[0], other[1]+c[1]
			others++
			continue
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", k.Verb, k.Resource, cell(0, c[0]), cell(1, c[1]))
	}
	if others > 0 {
		fmt.Fprintf(tw, "(%d others)\t(under %d each)\t%s\t%s\n", others, minRow, cell(0, other[0]), cell(1, other[1]))
	}
	fmt.Fprintf(tw, "total\t\t%s\t%s\n", cell(0, total[0]), cell(1, total[1]))
	return tw.Flush()
}
