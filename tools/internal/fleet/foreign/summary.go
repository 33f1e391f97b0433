package foreign

import (
	"bufio"
	"fmt"
	"io"
	"slices"
	"strconv"
	"text/tabwriter"
	"time"

	"hostpath.dev/tools/internal/fleet"
)

// Spread is the least, median and greatest of N values; all zero for none.
type Spread struct {
	N      int     `json:"n"`
	Min    float64 `json:"min"`
	Median float64 `json:"median"`
	Max    float64 `json:"max"`
}

// spreadOf returns the Spread of values; the median of an even number of
// values is the mean of the middle two.
func spreadOf(values []float64) Spread {
	if len(values) == 0 {
		return Spread{}
	}
	v := slices.Clone(values)
	slices.Sort(v)
	n := len(v)
	median := v[n/2]
	if n%2 == 0 {
		median = (v[n/2-1] + v[n/2]) / 2
	}
	return Spread{N: n, Min: v[0], Median: median, Max: v[n-1]}
}

// NodeCost is a real node's provisioner through the readings: its RSS at
// each (0: not read there, or another process than the one read before),
// and its growth from before to idle, over the fleet's size, per 100 nodes
// (0 unless both were read); the same of its anonymous memory (RssAnon:
// the heap and stacks, without the pages of its binary).
type NodeCost struct {
	Node               string  `json:"node"`
	PID                int     `json:"pid"`
	BeforeMiB          float64 `json:"beforeMiB"`
	IdleMiB            float64 `json:"idleMiB"`
	ClaimsMiB          float64 `json:"claimsMiB"`
	DeletedMiB         float64 `json:"deletedMiB"`
	MiBPer100Nodes     float64 `json:"mibPer100Nodes"`
	BeforeAnonMiB      float64 `json:"beforeAnonMiB,omitempty"`
	IdleAnonMiB        float64 `json:"idleAnonMiB,omitempty"`
	ClaimsAnonMiB      float64 `json:"claimsAnonMiB,omitempty"`
	DeletedAnonMiB     float64 `json:"deletedAnonMiB,omitempty"`
	AnonMiBPer100Nodes float64 `json:"anonMiBPer100Nodes,omitempty"`
}

// rssPer100 is MiBPer100Nodes, and whether it was read (both the before and
// the idle reading taken); anonPer100 the same of the anonymous memory.
func (c NodeCost) rssPer100() (float64, bool) {
	return c.MiBPer100Nodes, c.BeforeMiB > 0 && c.IdleMiB > 0
}

func (c NodeCost) anonPer100() (float64, bool) {
	return c.AnonMiBPer100Nodes, c.BeforeAnonMiB > 0 && c.IdleAnonMiB > 0
}

// perText is a per-100-nodes figure, or "-" when not read.
func perText(v float64, ok bool) string {
	if !ok {
		return "-"
	}
	return f2(v)
}

// Summary is the figures of a Result. Per instance figures are of the
// fleet's provisioners, each compared with itself across the readings.
type Summary struct {
	// IdleMiB, ClaimsMiB and DeletedMiB are the RSS at idle, claims and
	// deleted.
	IdleMiB    Spread `json:"idleMiB"`
	ClaimsMiB  Spread `json:"claimsMiB"`
	DeletedMiB Spread `json:"deletedMiB"`
	// GrowthMiBPer1000 is the RSS from idle to claims per 1,000 claims.
	GrowthMiBPer1000 Spread `json:"growthMiBPer1000"`
	// WindowSeconds is from idle to annotated: the claims' creation and
	// annotation. CPUSeconds is the CPU time in it; IdleCPUSeconds what the
	// instance's idle rate (from up to idle) makes of it;
	// NetCPUSecondsPer1000 the difference per 1,000 claims.
	WindowSeconds        float64 `json:"windowSeconds"`
	CPUSeconds           Spread  `json:"cpuSeconds"`
	IdleCPUSeconds       Spread  `json:"idleCPUSeconds"`
	NetCPUSecondsPer1000 Spread  `json:"netCPUSecondsPer1000"`
	// Real are the real nodes' provisioners; PerNodeMiBPer100 the Spread
	// of their MiBPer100Nodes: the per-node cost; PerNodeAnonMiBPer100
	// that of their AnonMiBPer100Nodes.
	Real                 []NodeCost `json:"real"`
	PerNodeMiBPer100     Spread     `json:"perNodeMiBPer100"`
	PerNodeAnonMiBPer100 Spread     `json:"perNodeAnonMiBPer100"`
	// CreateWatch is the API server's watch events for claims from idle to
	// annotated, DeleteWatch from claims to deleted; nil when not read.
	CreateWatch *WatchCounts `json:"createWatch,omitempty"`
	DeleteWatch *WatchCounts `json:"deleteWatch,omitempty"`
	// NodeWatchPerUpdate is the Result's NodeWatch over its NodeUpdates:
	// the API server's watch events for Nodes, and their bytes, per Node
	// status update; nil when not read.
	NodeWatchPerUpdate *WatchCounts `json:"nodeWatchPerUpdate,omitempty"`
	// NodeVolumes and MultihostVolumes are the hostpath volumes step's
	// claim and PV watch events per volume without and with the fleet;
	// nil when not measured.
	NodeVolumes      *VolumesFigures `json:"nodeVolumes,omitempty"`
	MultihostVolumes *VolumesFigures `json:"multihostVolumes,omitempty"`
	// Notes say what was left out, and why.
	Notes []string `json:"notes,omitempty"`
}

// Summarize computes the Summary of res; readings not taken (a Run that
// failed) leave their figures empty.
func Summarize(res Result) Summary {
	s := Summary{WindowSeconds: seconds(res.Idle.At, res.Annotated.At)}
	up, ann, claims, deleted := byNode(res.Up.Fleet), byNode(res.Annotated.Fleet), byNode(res.WithClaims.Fleet), byNode(res.Deleted.Fleet)
	upWindow := seconds(res.Up.At, res.Idle.At)
	per1000 := func(v float64) float64 { return v * 1000 / float64(res.Claims) }
	var idleRSS, claimsRSS, deletedRSS, growth, cpu, idleCPU, net []float64
	for _, u := range res.Idle.Fleet {
		idleRSS = append(idleRSS, u.RSSMiB)
		if c, ok := same(claims, u); ok && res.Claims > 0 {
			claimsRSS = append(claimsRSS, c.RSSMiB)
			growth = append(growth, per1000(c.RSSMiB-u.RSSMiB))
		}
		if d, ok := same(deleted, u); ok {
			deletedRSS = append(deletedRSS, d.RSSMiB)
		}
		a, ok := same(ann, u)
		if !ok || s.WindowSeconds <= 0 || res.Claims == 0 {
			continue
		}
		used := a.CPUSeconds - u.CPUSeconds
		cpu = append(cpu, used)
		if b, ok := same(up, u); ok && upWindow > 0 {
			idle := (u.CPUSeconds - b.CPUSeconds) / upWindow * s.WindowSeconds
			idleCPU = append(idleCPU, idle)
			net = append(net, per1000(used-idle))
		}
	}
	s.IdleMiB, s.ClaimsMiB, s.DeletedMiB = spreadOf(idleRSS), spreadOf(claimsRSS), spreadOf(deletedRSS)
	s.GrowthMiBPer1000 = spreadOf(growth)
	s.CPUSeconds, s.IdleCPUSeconds, s.NetCPUSecondsPer1000 = spreadOf(cpu), spreadOf(idleCPU), spreadOf(net)
	s.Real, s.Notes = realCosts(res)
	var perNode, perNodeAnon []float64
	for _, c := range s.Real {
		if v, ok := c.rssPer100(); ok {
			perNode = append(perNode, v)
		}
		if v, ok := c.anonPer100(); ok {
			perNodeAnon = append(perNodeAnon, v)
		}
	}
	s.PerNodeMiBPer100, s.PerNodeAnonMiBPer100 = spreadOf(perNode), spreadOf(perNodeAnon)
	s.CreateWatch = res.Annotated.Watch.Sub(res.Idle.Watch)
	s.DeleteWatch = res.Deleted.Watch.Sub(res.WithClaims.Watch)
	if res.NodeWatch != nil && res.NodeUpdates > 0 {
		n := float64(res.NodeUpdates)
		s.NodeWatchPerUpdate = &WatchCounts{Events: res.NodeWatch.Events / n, Bytes: res.NodeWatch.Bytes / n}
	}
	s.NodeVolumes, s.MultihostVolumes = summarizeVolumes(res, nodePart), summarizeVolumes(res, multihostPart)
	return s
}

// realCosts follows each real node's provisioner read before through the
// idle, claims and deleted readings.
func realCosts(res Result) ([]NodeCost, []string) {
	var out []NodeCost
	var notes []string
	for _, b := range res.Before.Real {
		c := NodeCost{Node: b.Node, PID: b.PID, BeforeMiB: b.RSSMiB, BeforeAnonMiB: b.AnonMiB}
		for _, step := range []struct {
			name      string
			r         Reading
			mib, anon *float64
		}{{"idle", res.Idle, &c.IdleMiB, &c.IdleAnonMiB}, {"claims", res.WithClaims, &c.ClaimsMiB, &c.ClaimsAnonMiB}, {"deleted", res.Deleted, &c.DeletedMiB, &c.DeletedAnonMiB}} {
			u, ok := byNode(step.r.Real)[b.Node]
			switch {
			case !ok && step.r.At.IsZero(): // not taken
			case !ok:
				notes = append(notes, fmt.Sprintf("%s: its provisioner was not read at the %s reading", b.Node, step.name))
			case u.PID != b.PID:
				notes = append(notes, fmt.Sprintf("%s: its provisioner is PID %d at the %s reading, %d before (restarted): left out", b.Node, u.PID, step.name, b.PID))
			default:
				*step.mib, *step.anon = u.RSSMiB, u.AnonMiB
			}
		}
		if res.Instances > 0 {
			if _, ok := c.rssPer100(); ok {
				c.MiBPer100Nodes = (c.IdleMiB - c.BeforeMiB) * 100 / float64(res.Instances)
			}
			if _, ok := c.anonPer100(); ok {
				c.AnonMiBPer100Nodes = (c.IdleAnonMiB - c.BeforeAnonMiB) * 100 / float64(res.Instances)
			}
		}
		out = append(out, c)
	}
	return out, notes
}

func byNode(us []fleet.NodeUsage) map[string]fleet.NodeUsage {
	m := make(map[string]fleet.NodeUsage, len(us))
	for _, u := range us {
		m[u.Node] = u
	}
	return m
}

// same returns the usage of u's node in m if it is of u's process.
func same(m map[string]fleet.NodeUsage, u fleet.NodeUsage) (fleet.NodeUsage, bool) {
	v, ok := m[u.Node]
	return v, ok && v.PID == u.PID
}

// seconds is from a to b, 0 unless both are set and b is later.
func seconds(a, b time.Time) float64 {
	if a.IsZero() || b.IsZero() || !b.After(a) {
		return 0
	}
	return b.Sub(a).Seconds()
}

// Report prints the figures of res: the fleet's provisioners (min, median,
// max), the real nodes', the watch events of claims and of Nodes, a line
// of the per-instance costs a scale model takes, and the hostpath volumes
// step's watch events per volume without and with the fleet.
func Report(w io.Writer, res Result) error {
	s := Summarize(res)
	bw := bufio.NewWriter(w)
	fmt.Fprintf(bw, "== %d claims of another provisioner (%s) over %d provisioner instances on fake nodes ==\n", res.Claims, res.Provisioner, res.Instances)
	fmt.Fprintf(bw, "claims created in %ss, all annotated %ss after the first create; the namespace and its claims gone %ss after its deletion; the idle, claims and deleted readings %ss after their step\n",
		f1(res.CreateSeconds), f1(res.AnnotateSeconds), f1(res.DeleteSeconds), f1(res.SettleSeconds))
	tw := tabwriter.NewWriter(bw, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "fleet provisioners, per instance\tmin\tmedian\tmax\n")
	row := func(name string, sp Spread, f func(float64) string) {
		if sp.N == 0 {
			fmt.Fprintf(tw, "%s\t-\t-\t-\n", name)
			return
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", name, f(sp.Min), f(sp.Median), f(sp.Max))
	}
	row(fmt.Sprintf("RSS idle, fleet of %d (MiB)", res.Instances), s.IdleMiB, f1)
	row(fmt.Sprintf("RSS with the %d claims (MiB)", res.Claims), s.ClaimsMiB, f1)
	row("RSS after their deletion (MiB)", s.DeletedMiB, f1)
	row("RSS growth per 1,000 claims (MiB)", s.GrowthMiBPer1000, f3)
	row(fmt.Sprintf("CPU while created and annotated, %ss (s)", f1(s.WindowSeconds)), s.CPUSeconds, f2)
	row("CPU at the idle rate over that time (s)", s.IdleCPUSeconds, f2)
	row("CPU per 1,000 claims, idle rate taken off (s)", s.NetCPUSecondsPer1000, f3)
	if err := tw.Flush(); err != nil {
		return err
	}
	if err := reportReal(bw, tw, s, res.Instances); err != nil {
		return err
	}
	fmt.Fprintf(bw, "API server watch events for claims: %s while created and annotated; %s while deleted\n",
		watchText(s.CreateWatch, res.Claims), watchText(s.DeleteWatch, res.Claims))
	fmt.Fprintf(bw, "Node watch events per Node status update: %s, %d updates\n", perUpdateText(s.NodeWatchPerUpdate), res.NodeUpdates)
	fmt.Fprintf(bw, "per instance: %s MiB per 100 nodes (median of %d real nodes), %s MiB of it anonymous; %s MiB of RSS and %s CPU-s per 1,000 claims of another provisioner (medians of %d instances)\n",
		medianText(s.PerNodeMiBPer100, f2), s.PerNodeMiBPer100.N, medianText(s.PerNodeAnonMiBPer100, f2), medianText(s.GrowthMiBPer1000, f3), medianText(s.NetCPUSecondsPer1000, f3), s.GrowthMiBPer1000.N)
	for _, n := range s.Notes {
		fmt.Fprintf(bw, "note: %s\n", n)
	}
	if err := reportVolumes(bw, res, s); err != nil {
		return err
	}
	return bw.Flush()
}

// reportReal prints the real nodes' table.
func reportReal(bw *bufio.Writer, tw *tabwriter.Writer, s Summary, instances int) error {
	fmt.Fprintln(bw)
	fmt.Fprintf(tw, "real nodes' provisioners, RSS (MiB)\tPID\tbefore the fleet\tfleet of %d up\twith the claims\tafter deletion\tper 100 nodes\tanonymous: before\tfleet up\twith the claims\tafter deletion\tper 100 nodes\n", instances)
	for _, c := range s.Real {
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", c.Node, c.PID, mib(c.BeforeMiB), mib(c.IdleMiB), mib(c.ClaimsMiB), mib(c.DeletedMiB), perText(c.rssPer100()),
			mib(c.BeforeAnonMiB), mib(c.IdleAnonMiB), mib(c.ClaimsAnonMiB), mib(c.DeletedAnonMiB), perText(c.anonPer100()))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(bw)
	return nil
}

// watchText is "E events (X per claim, B MiB)", or "not read".
func watchText(w *WatchCounts, claims int) string {
	if w == nil {
		return "not read"
	}
	per := "-"
	if claims > 0 {
		per = f1(w.Events / float64(claims))
	}
	return fmt.Sprintf("%s events (%s per claim, %s MiB)", strconv.FormatFloat(w.Events, 'f', 0, 64), per, f1(w.Bytes/(1<<20)))
}

// perUpdateText is "E (B KiB)", the events and bytes of one update, or
// "not read".
func perUpdateText(w *WatchCounts) string {
	if w == nil {
		return "not read"
	}
	return fmt.Sprintf("%s (%s KiB)", f1(w.Events), f1(w.Bytes/(1<<10)))
}

func medianText(sp Spread, f func(float64) string) string {
	if sp.N == 0 {
		return "-"
	}
	return f(sp.Median)
}

// mib is v with one decimal, "-" for 0 (not read).
func mib(v float64) string {
	if v == 0 {
		return "-"
	}
	return f1(v)
}

func f1(v float64) string { return strconv.FormatFloat(v, 'f', 1, 64) }
func f2(v float64) string { return strconv.FormatFloat(v, 'f', 2, 64) }
func f3(v float64) string { return strconv.FormatFloat(v, 'f', 3, 64) }
