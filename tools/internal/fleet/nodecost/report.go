package nodecost

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"hostpath.dev/tools/internal/fleet"
)

// Cost is a real node's provisioner at one reading against itself before
// the first step: its growth over the fake nodes, per 100 of them, of the
// resident set and of its anonymous part. OK is false when the process
// read is not the one read before (it restarted) or was not read.
type Cost struct {
	Node          string  `json:"node"`
	RSSMiB        float64 `json:"rssMiB"`
	AnonMiB       float64 `json:"anonMiB"`
	RSSPer100     float64 `json:"rssMiBPer100Nodes"`
	AnonPer100    float64 `json:"anonMiBPer100Nodes"`
	OK            bool    `json:"ok"`
	BeforeRSSMiB  float64 `json:"beforeRssMiB"`
	BeforeAnonMiB float64 `json:"beforeAnonMiB"`
}

// Costs returns the Cost of each real node at reading r of a step of nodes
// fake nodes, against before; a node not read at r is left out.
func Costs(before []fleet.NodeUsage, r Reading, nodes int) []Cost {
	was := map[string]fleet.NodeUsage{}
	for _, u := range before {
		was[u.Node] = u
	}
	var out []Cost
	for _, u := range r.Real {
		c := Cost{Node: u.Node, RSSMiB: u.RSSMiB, AnonMiB: u.AnonMiB}
		if b, ok := was[u.Node]; ok && b.PID == u.PID && nodes > 0 {
			c.OK, c.BeforeRSSMiB, c.BeforeAnonMiB = true, b.RSSMiB, b.AnonMiB
			c.RSSPer100 = (u.RSSMiB - b.RSSMiB) * 100 / float64(nodes)
			c.AnonPer100 = (u.AnonMiB - b.AnonMiB) * 100 / float64(nodes)
		}
		out = append(out, c)
	}
	return out
}

// Report prints res: the real nodes' provisioners before, then at each
// reading of each step, with their growth per 100 fake nodes.
func Report(w io.Writer, res Result) error {
	fmt.Fprintf(w, "What the nodes cost each provisioner instance: fake nodes' pods and HostDefinitions (pool %s), no processes, %s\n",
		res.Pool, res.Date.Format("2006-01-02 15:04 UTC"))
	fmt.Fprintf(w, "Before: %s\n", usageText(res.Before))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "nodes\tafter (s)\tnode\tRSS MiB\tanon MiB\tRSS per 100 nodes\tanon per 100 nodes\t")
	for _, st := range res.Steps {
		for _, r := range st.Readings {
			for _, c := range Costs(res.Before, r, st.Nodes) {
				per, anon := "-", "-"
				if c.OK {
					per, anon = fmt.Sprintf("%.2f", c.RSSPer100), fmt.Sprintf("%.2f", c.AnonPer100)
				}
				fmt.Fprintf(tw, "%d\t%.0f\t%s\t%.1f\t%.1f\t%s\t%s\t\n", st.Nodes, r.AfterSeconds, c.Node, c.RSSMiB, c.AnonMiB, per, anon)
			}
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w, "(per 100 nodes: the growth from before over the fake nodes; \"-\": the process restarted or was not read)")
	return nil
}

// usageText is each node's RSS and anonymous memory, for a log line.
func usageText(us []fleet.NodeUsage) string {
	parts := make([]string, 0, len(us))
	for _, u := range us {
		parts = append(parts, fmt.Sprintf("%s %.1f MiB (anon %.1f, PID %d)", u.Node, u.RSSMiB, u.AnonMiB, u.PID))
	}
	return strings.Join(parts, ", ")
}
