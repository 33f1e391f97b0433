package orphans

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"
)

// Write prints the report in format: OutputTable (a header saying what was
// compared and with which token, the findings as a table, a summary line)
// or OutputJSON (the Report).
func Write(w io.Writer, r *Report, format string) error {
	if format == OutputJSON {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		if err := enc.Encode(r); err != nil {
			return fmt.Errorf("write the report: %w", err)
		}
		return nil
	}
	var b strings.Builder
	fmt.Fprintf(&b, "Provisioners %s; managers in namespace %s; token: %s\n", r.Provisioner, r.Namespace, r.Token)
	if len(r.Findings) > 0 {
		tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "NODE\tPOOL\tDIRECTORY\tFINDING\tDETAIL")
		for _, f := range r.Findings {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", dash(f.Node), dash(f.Pool), dash(f.Directory), f.Kind, f.Detail)
		}
		_ = tw.Flush()
	}
	b.WriteString(summary(r) + "\n")
	if _, err := io.WriteString(w, b.String()); err != nil {
		return fmt.Errorf("write the report: %w", err)
	}
	return nil
}

// summary is the report's last line: the findings by kind, and what was
// looked at.
func summary(r *Report) string {
	unreachable, pools := 0, map[string]bool{}
	for _, n := range r.Nodes {
		if n.Error != "" {
			unreachable++
		}
		for _, p := range n.Pools {
			pools[p] = true
		}
	}
	scope := fmt.Sprintf("%d %s", len(r.Nodes), plural(len(r.Nodes), "node", "nodes"))
	if unreachable > 0 {
		scope += fmt.Sprintf(" (%d unreachable)", unreachable)
	}
	if names := slices.Sorted(maps.Keys(pools)); len(names) > 0 {
		scope += ", " + plural(len(names), "pool", "pools") + " " + strings.Join(names, ", ")
	}
	if len(r.Findings) == 0 {
		return "Nothing found on " + scope + "."
	}
	var counts []string
	for _, k := range Kinds {
		if n := r.Counts[string(k)]; n > 0 {
			counts = append(counts, fmt.Sprintf("%d %s", n, k))
		}
	}
	return fmt.Sprintf("%d %s (%s) on %s. Nothing was deleted.", len(r.Findings), plural(len(r.Findings), "finding", "findings"),
		strings.Join(counts, ", "), scope)
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// dash shows an empty cell as "-".
func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
