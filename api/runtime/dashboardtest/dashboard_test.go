package dashboardtest

import (
	"slices"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

func TestMetricNames(t *testing.T) {
	for _, tc := range []struct {
		expr string
		want []string
	}{
		{expr: `up`, want: []string{"up"}},
		{expr: `sum by (class) (rate(a_total{namespace="$namespace"}[$__rate_interval]))`, want: []string{"a_total"}},
		{expr: `histogram_quantile(0.99, sum by (le, route) (rate(b_bucket{route!~"GET /(healthz|readyz)"}[5m])))`, want: []string{"b_bucket"}},
		{expr: `sum(rate(a[5m])) without (pod) / on (node) group_left (pool) b offset 1h`, want: []string{"a", "b"}},
		{expr: `a * on(x) group_left b or c unless d and bool e`, want: []string{"a", "b", "c", "d", "e"}},
		{expr: `count_values("v", a) > bool 1e-3 + .5 + Inf`, want: []string{"a"}},
		{expr: `topk(3, a) + max(b{route="PUT /v1/pools/{pool}/volumes/{name}"}) + ${x} - $y`, want: []string{"a", "b"}},
		{expr: `label_replace(a, "dst", "$1", "src", "(.*)") # comment c`, want: []string{"a"}},
		{expr: `rate(a[5m:1m]) + a + min_over_time(c:rule[1h] @ end())`, want: []string{"a", "c:rule"}},
		{expr: `sum(increase(a_total{code=~"5.."}[$__range])) or vector(0)`, want: []string{"a_total"}},
		{expr: `max by (phase) (a{phase="Error"})`, want: []string{"a"}},
	} {
		if got := MetricNames(tc.expr); !slices.Equal(got, tc.want) {
			t.Errorf("MetricNames(%q) = %q, want %q", tc.expr, got, tc.want)
		}
	}
}

func TestDescribedAndMissing(t *testing.T) {
	d := &Dashboard{Panels: []Panel{
		{Type: "row", Panels: []Panel{{Targets: []Target{{Expr: `rate(hostpath_manager_a_bucket[5m]) + hostpath_manager_b_total`}}}}},
		{Targets: []Target{{Expr: `hostpath_manager_c_count + hostdefiner_other`}}},
	}}
	reg := prometheus.NewRegistry()
	reg.MustRegister(
		prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: "hostpath_manager", Name: "a", Help: "a"}, []string{"x"}),
		prometheus.NewCounter(prometheus.CounterOpts{Name: "hostpath_manager_b_total", Help: "b"}),
	)
	names, err := Described(reg)
	if err != nil || !names["hostpath_manager_a"] || !names["hostpath_manager_b_total"] || len(names) != 2 {
		t.Errorf("Described = %v, %v; want hostpath_manager_a and hostpath_manager_b_total", names, err)
	}
	missing, err := d.Missing(Manager, reg)
	if err != nil || !slices.Equal(missing, []string{"hostpath_manager_c_count"}) {
		t.Errorf("Missing(Manager) = %q, %v; want [hostpath_manager_c_count]", missing, err)
	}
}

// TestDashboard checks the shape of manifests/monitoring/dashboard.json;
// the tests next to each program's metrics check that it queries only
// metrics the program exports.
func TestDashboard(t *testing.T) {
	d, err := Load()
	if err != nil {
		t.Fatal(err)
	}
	want := Datasource{Type: "prometheus", UID: "${datasource}"}
	i := slices.IndexFunc(d.Templating.List, func(v Variable) bool { return v.Name == "datasource" })
	if i < 0 || d.Templating.List[i].Type != "datasource" || d.Templating.List[i].Query != "prometheus" {
		t.Errorf("no variable datasource of type datasource with query prometheus in %+v", d.Templating.List)
	}

	ids := map[int]bool{}
	panels := map[string]int{} // by program
	for _, p := range d.AllPanels() {
		if ids[p.ID] {
			t.Errorf("panel %q: id %d used twice", p.Title, p.ID)
		}
		ids[p.ID] = true
		if p.Type == "row" {
			if len(p.Targets) != 0 {
				t.Errorf("row %q has queries", p.Title)
			}
			continue
		}
		if p.Datasource == nil || *p.Datasource != want {
			t.Errorf("panel %q: datasource %+v, want %+v", p.Title, p.Datasource, want)
		}
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, tg := range p.Targets {
			if tg.Datasource != nil && *tg.Datasource != want {
				t.Errorf("panel %q, query %s: datasource %+v, want %+v", p.Title, tg.RefID, tg.Datasource, want)
			}
			if len(MetricNames(tg.Expr)) == 0 {
				t.Errorf("panel %q, query %s: no metric in %q", p.Title, tg.RefID, tg.Expr)
			}
		}
		for _, prog := range Programs {
			if slices.ContainsFunc(p.Metrics(), prog.Owns) {
				panels[prog.Name]++
			}
		}
	}
	for _, prog := range Programs {
		if panels[prog.Name] == 0 {
			t.Errorf("no panel shows metrics of the %s (%q)", prog.Name, prog.Prefixes)
		}
	}
	// A name no program owns would escape the programs' tests.
	for _, name := range d.Metrics() {
		if !slices.ContainsFunc(Programs, func(p Program) bool { return p.Owns(name) }) {
			t.Errorf("metric %s belongs to no program: its prefix is none of %v", name, Programs)
		}
	}
}
