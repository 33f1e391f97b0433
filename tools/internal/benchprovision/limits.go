package benchprovision

import (
	"bufio"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"
)

// The provisioner's flags that set what the no-op floor must match.
const (
	FlagKubeAPIQPS   = "kube-api-qps"
	FlagKubeAPIBurst = "kube-api-burst"
	FlagWorkers      = "workers"
	// FlagEventQPS and FlagEventBurst limit the events' own client; a
	// provisioner without them sends its events on the other client.
	FlagEventQPS   = "event-qps"
	FlagEventBurst = "event-burst"
)

// Limits are a provisioner's API client limits and workers.
type Limits struct {
	QPS     float64
	Burst   int
	Workers int
	// EventQPS and EventBurst are those of the events' client; 0 when the
	// events go through the client of QPS and Burst.
	EventQPS   float64
	EventBurst int
}

// Times is n instances' limits together.
func (l Limits) Times(n int) Limits {
	return Limits{QPS: l.QPS * float64(n), Burst: l.Burst * n, Workers: l.Workers * n,
		EventQPS: l.EventQPS * float64(n), EventBurst: l.EventBurst * n}
}

// String is "QPS BURST WORKERS EVENT_QPS EVENT_BURST", for a shell's read.
func (l Limits) String() string {
	return fmt.Sprintf("%s %d %d %s %d", strconv.FormatFloat(l.QPS, 'f', -1, 64), l.Burst, l.Workers,
		strconv.FormatFloat(l.EventQPS, 'f', -1, 64), l.EventBurst)
}

// flagDefault matches a flag's line in pflag's usage:
//
//	--kube-api-qps float32   The sustained queries per second to the API server. (default 50)
var flagDefault = regexp.MustCompile(`^\s*(?:-\w, )?--([A-Za-z0-9][-A-Za-z0-9_.]*)(?: \S+)?\s{2,}.*\(default (.*)\)\s*$`)

// FlagDefaults reads the defaults a program's --help (pflag's usage) gives
// for its flags, by flag name; a quoted string default is unquoted.
func FlagDefaults(help io.Reader) (map[string]string, error) {
	out := map[string]string{}
	sc := bufio.NewScanner(help)
	for sc.Scan() {
		m := flagDefault.FindStringSubmatch(sc.Text())
		if m == nil {
			continue
		}
		v := m[2]
		if u, err := strconv.Unquote(v); err == nil {
			v = u
		}
		out[m[1]] = v
	}
	return out, sc.Err()
}

// FlagValue is the value args give the flag --name ("--name=v" or
// "--name v"; the last one wins, as with pflag).
func FlagValue(args []string, name string) (string, bool) {
	var v string
	var found bool
	for i := 0; i < len(args); i++ {
		a, ok := strings.CutPrefix(args[i], "--"+name)
		switch {
		case !ok:
		case strings.HasPrefix(a, "="):
			v, found = a[1:], true
		case a == "" && i+1 < len(args):
			v, found = args[i+1], true
			i++
		}
	}
	return v, found
}

// InstanceLimits are the limits of one provisioner running with args, the
// flags not in args taking the defaults (FlagDefaults of its --help). The
// event flags are optional: without them, EventQPS and EventBurst are 0.
func InstanceLimits(args []string, defaults map[string]string) (Limits, error) {
	get := func(name string, optional bool) (string, error) {
		if v, ok := FlagValue(args, name); ok {
			return v, nil
		}
		if v, ok := defaults[name]; ok {
			return v, nil
		}
		if optional {
			return "0", nil
		}
		return "", fmt.Errorf("--%s is neither in the arguments nor has a default in the help", name)
	}
	var l Limits
	for _, f := range []struct {
		name     string
		optional bool
		parse    func(string) error
	}{
		{FlagKubeAPIQPS, false, func(s string) (err error) { l.QPS, err = strconv.ParseFloat(s, 64); return err }},
		{FlagKubeAPIBurst, false, func(s string) (err error) { l.Burst, err = strconv.Atoi(s); return err }},
		{FlagWorkers, false, func(s string) (err error) { l.Workers, err = strconv.Atoi(s); return err }},
		{FlagEventQPS, true, func(s string) (err error) { l.EventQPS, err = strconv.ParseFloat(s, 64); return err }},
		{FlagEventBurst, true, func(s string) (err error) { l.EventBurst, err = strconv.Atoi(s); return err }},
	} {
		s, err := get(f.name, f.optional)
		if err != nil {
			return l, err
		}
		if err := f.parse(s); err != nil {
			return l, fmt.Errorf("--%s %q: %w", f.name, s, err)
		}
	}
	if l.QPS <= 0 || l.Burst < 1 || l.Workers < 1 || l.EventQPS < 0 || l.EventBurst < 0 {
		return l, fmt.Errorf("limits %s are not all positive", l)
	}
	return l, nil
}
