package benchprovision

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
)

// RateFlags are the provisioner flags a run sets or strips.
var RateFlags = []string{"--kube-api-qps", "--kube-api-burst"}

// WithRates returns args without any RateFlags (as "--flag=v" or "--flag v",
// also with one dash) and, when qps > 0, with "--kube-api-qps=qps" and
// "--kube-api-burst=burst" appended. args is not changed.
func WithRates(args []string, qps float64, burst int) []string {
	out := []string{}
	for i := 0; i < len(args); i++ {
		a := args[i]
		name, _, hasValue := strings.Cut(a, "=")
		if isRateFlag(name) {
			if !hasValue {
				i++ // the value is the next argument
			}
			continue
		}
		out = append(out, a)
	}
	if qps > 0 {
		out = append(out, fmt.Sprintf("--kube-api-qps=%g", qps), fmt.Sprintf("--kube-api-burst=%d", burst))
	}
	return out
}

func isRateFlag(name string) bool {
	for _, f := range RateFlags {
		if name == f || name == f[1:] {
			return true
		}
	}
	return false
}

// figure is one row of the comparison table.
type figure struct {
	name   string
	format string
	value  func(Result) float64
}

var figures = []figure{
	{"claims created (s)", "%.2f", func(r Result) float64 { return r.CreateSeconds }},
	{"all PVs exist (s)", "%.2f", func(r Result) float64 { return r.AllPVsSeconds }},
	{"all claims Bound (s)", "%.2f", func(r Result) float64 { return r.AllBoundSeconds }},
	{"PVs/s", "%.1f", func(r Result) float64 { return r.PVsPerSecond }},
	{"binds/s", "%.1f", func(r Result) float64 { return r.BindsPerSecond }},
	{"claim->PV p50 (s)", "%.2f", func(r Result) float64 { return r.LatencyP50Seconds }},
	{"claim->PV p95 (s)", "%.2f", func(r Result) float64 { return r.LatencyP95Seconds }},
	{"all PVs deleted (s)", "%.2f", func(r Result) float64 { return r.PVsGoneSeconds }},
	{"all directories gone (s)", "%.2f", func(r Result) float64 { return r.DirsGoneSeconds }},
	{"deletes/s", "%.1f", func(r Result) float64 { return r.DeletesPerSecond }},
}

// Compare writes a table of the figures of a and b and the ratio a/b of each.
func Compare(w io.Writer, a, b Result) error {
	var sb strings.Builder
	fmt.Fprintf(&sb, "%d claims over %s (%s: %s, %s: %s)\n", a.Count, strings.Join(a.Nodes, ", "), a.Label, a.Namespace, b.Label, b.Namespace)
	tw := tabwriter.NewWriter(&sb, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "figure\t%s\t%s\t%s/%s\t\n", a.Label, b.Label, a.Label, b.Label)
	fmt.Fprintf(tw, "provisioner\t%s\t%s\t\t\n", a.Settings, b.Settings)
	for _, f := range figures {
		va, vb := f.value(a), f.value(b)
		ratio := "-"
		if vb != 0 {
			ratio = fmt.Sprintf("%.2f", va/vb)
		}
		fmt.Fprintf(tw, "%s\t"+f.format+"\t"+f.format+"\t%s\t\n", f.name, va, vb, ratio)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	sb.WriteString("times: lower is better; rates (/s): higher is better\n")
	_, err := io.WriteString(w, sb.String())
	return err
}
