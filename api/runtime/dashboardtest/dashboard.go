// Package dashboardtest is for tests only: it reads the Grafana dashboard
// manifests/monitoring/dashboard.json and the metric names its PromQL
// queries select, so that each program's tests can check them against the
// metrics the program registers (docs/operations.md, "Monitoring"). Only _test.go
// files import it (make verify keeps it, like every package whose name
// ends in "test", out of the binaries); it is exported, in the manager
// module's runtime tree, because the tests of the provisioner and the host
// definer use it too.
package dashboardtest

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
)

// File is the dashboard's path from the repository's root.
const File = "manifests/monitoring/dashboard.json"

// Dashboard is the part of a Grafana dashboard the tests look at.
type Dashboard struct {
	// Title is the dashboard's title.
	Title string `json:"title"`
	// Panels are the top-level panels, rows among them.
	Panels []Panel `json:"panels"`
	// Templating holds the dashboard's variables.
	Templating struct {
		// List are the variables.
		List []Variable `json:"list"`
	} `json:"templating"`
}

// Panel is a Grafana panel.
type Panel struct {
	// ID is the panel's number, unique in the dashboard.
	ID int `json:"id"`
	// Type is "timeseries", "stat", "row", ...
	Type string `json:"type"`
	// Title is the panel's title.
	Title string `json:"title"`
	// Datasource is where the panel's queries run; nil for none.
	Datasource *Datasource `json:"datasource"`
	// Targets are the panel's queries.
	Targets []Target `json:"targets"`
	// Panels are those of a collapsed row.
	Panels []Panel `json:"panels"`
}

// Target is one query of a panel.
type Target struct {
	// RefID names the query in its panel.
	RefID string `json:"refId"`
	// Datasource is where the query runs; nil for the panel's.
	Datasource *Datasource `json:"datasource"`
	// Expr is the PromQL expression.
	Expr string `json:"expr"`
}

// Datasource refers to a Grafana data source.
type Datasource struct {
	// Type is the data source's plugin, "prometheus".
	Type string `json:"type"`
	// UID names the data source, here the variable "${datasource}".
	UID string `json:"uid"`
}

// Variable is a dashboard variable.
type Variable struct {
	// Name is how queries refer to it ($name, ${name}).
	Name string `json:"name"`
	// Type is "datasource", "textbox", "query", ...
	Type string `json:"type"`
	// Query is, for a "datasource" variable, the plugin it offers.
	Query any `json:"query"`
}

// Load reads the repository's dashboard, looking for File from the working
// directory up to the root (`go test` runs in the package's directory).
// The file is outside every module, so go test's cache does not see it
// change: run the tests with -count=1, as `make unit` does.
func Load() (*Dashboard, error) {
	dir, err := os.Getwd()
	if err != nil {
		return nil, fmt.Errorf("find %s: %w", File, err)
	}
	for {
		data, err := os.ReadFile(filepath.Join(dir, File))
		if err == nil {
			return Parse(data)
		}
		if !errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("read %s: %w", File, err)
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return nil, fmt.Errorf("no %s above the working directory", File)
		}
		dir = parent
	}
}

// Parse decodes a dashboard's JSON.
func Parse(data []byte) (*Dashboard, error) {
	var d Dashboard
	if err := json.Unmarshal(data, &d); err != nil {
		return nil, fmt.Errorf("parse the dashboard: %w", err)
	}
	return &d, nil
}

// AllPanels returns every panel, those of collapsed rows included, in order.
func (d *Dashboard) AllPanels() []Panel {
	var all []Panel
	var walk func([]Panel)
	walk = func(ps []Panel) {
		for _, p := range ps {
			all = append(all, p)
			walk(p.Panels)
		}
	}
	walk(d.Panels)
	return all
}

// Metrics returns the metric names the panels' queries select, sorted,
// each once.
func (d *Dashboard) Metrics() []string {
	var names []string
	for _, p := range d.AllPanels() {
		names = append(names, p.Metrics()...)
	}
	slices.Sort(names)
	return slices.Compact(names)
}

// Metrics returns the metric names the panel's queries select, in order.
func (p Panel) Metrics() []string {
	var names []string
	for _, t := range p.Targets {
		names = append(names, MetricNames(t.Expr)...)
	}
	return names
}

// Program is one of the programs the dashboard shows, known by the
// prefixes of its metrics' names.
type Program struct {
	// Name is the program's.
	Name string
	// Prefixes start the names of the program's metrics.
	Prefixes []string
}

// The programs and the prefixes of their metrics.
var (
	// Manager is the manager: its HTTP metrics.
	Manager = Program{Name: "manager", Prefixes: []string{"hostpath_manager_"}}
	// Provisioner is the provisioner: its fan-out metrics and those of
	// sig-storage-lib-external-provisioner, registered with the
	// subsystem "controller".
	Provisioner = Program{Name: "provisioner", Prefixes: []string{"hostpath_provisioner_", "controller_"}}
	// HostDefiner is the host definer.
	HostDefiner = Program{Name: "hostdefiner", Prefixes: []string{"hostdefiner_"}}
	// Reviews are the review budget's metrics, which all three programs
	// export (pkg/review).
	Reviews = Program{Name: "review budget", Prefixes: []string{"hostpath_review"}}
	// Programs are the three programs and the review budget they share.
	Programs = []Program{Manager, Provisioner, HostDefiner, Reviews}
)

// Owns tells whether metric is one of p's by its prefix.
func (p Program) Owns(metric string) bool {
	return slices.ContainsFunc(p.Prefixes, func(prefix string) bool { return strings.HasPrefix(metric, prefix) })
}

// histogramSuffixes end the names of a histogram's series.
var histogramSuffixes = []string{"_bucket", "_sum", "_count"}

// Missing returns the metrics of p that d queries and c does not describe,
// sorted. A name ending in _bucket, _sum or _count is there when the name
// without the suffix is (Describe does not tell a histogram from a counter,
// so any described metric counts).
func (d *Dashboard) Missing(p Program, c prometheus.Collector) ([]string, error) {
	described, err := Described(c)
	if err != nil {
		return nil, err
	}
	var missing []string
	for _, name := range d.Metrics() {
		if !p.Owns(name) || described[name] {
			continue
		}
		if slices.ContainsFunc(histogramSuffixes, func(s string) bool {
			base, ok := strings.CutSuffix(name, s)
			return ok && described[base]
		}) {
			continue
		}
		missing = append(missing, name)
	}
	return missing, nil
}

// descName is the start of prometheus.Desc's String: Desc has no getter
// for its name.
var descName = regexp.MustCompile(`^Desc\{fqName: ("(?:[^"\\]|\\.)*")`)

// Described returns the fully-qualified names of the metrics c describes
// (a Registry describes every collector registered with it). It reads them
// from each Desc's String, `Desc{fqName: "...", ...}`, and fails when that
// format changes rather than find nothing.
func Described(c prometheus.Collector) (map[string]bool, error) {
	ch := make(chan *prometheus.Desc)
	go func() {
		c.Describe(ch)
		close(ch)
	}()
	names := map[string]bool{}
	var err error
	for desc := range ch {
		m := descName.FindStringSubmatch(desc.String())
		if m == nil {
			err = fmt.Errorf("no fqName in %s", desc)
			continue
		}
		name, uerr := strconv.Unquote(m[1])
		if uerr != nil {
			err = fmt.Errorf("unquote the fqName of %s: %w", desc, uerr)
			continue
		}
		names[name] = true
	}
	return names, err
}
