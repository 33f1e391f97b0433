package foreign

import (
	"bufio"
	"fmt"
	"text/tabwriter"
)

// VolumesFigures compare the API server's claim and PV watch events per
// hostpath volume of one mode before the fleet started and with it up.
type VolumesFigures struct {
	// Real is the real nodes' instances, Instances K, the fleet's in the
	// run with it; Volumes that run's volumes.
	Real      int `json:"real"`
	Instances int `json:"instances"`
	Volumes   int `json:"volumes"`
	// Without and With are the claims' and PVs' watch events and bytes per
	// volume without the fleet and with it; nil when not measured.
	Without *WatchCounts `json:"without,omitempty"`
	With    *WatchCounts `json:"with,omitempty"`
	// Ratio is With's events over Without's; PerInstance is With less
	// Without over K: what each fleet instance received per volume. Both
	// 0 and nil unless both runs were measured.
	Ratio       float64      `json:"ratio"`
	PerInstance *WatchCounts `json:"perInstance,omitempty"`
}

// summarizeVolumes makes the VolumesFigures of the volumes that part
// picks from each run (its node-mode or its multihost volumes): the first
// run without the fleet against the last one with it; nil when neither
// measured them.
func summarizeVolumes(res Result, part func(VolumesRun) *VolumeWatch) *VolumesFigures {
	var without, with *VolumesRun
	for i := range res.VolumeRuns {
		r := &res.VolumeRuns[i]
		switch {
		case part(*r) == nil:
		case r.Instances == 0 && without == nil:
			without = r
		case r.Instances > 0:
			with = r
		}
	}
	if without == nil && with == nil {
		return nil
	}
	f := &VolumesFigures{}
	if without != nil {
		f.Real, f.Volumes, f.Without = without.RealInstances, part(*without).Volumes, part(*without).PerVolume()
	}
	if with != nil {
		f.Real, f.Instances, f.Volumes, f.With = with.RealInstances, with.Instances, part(*with).Volumes, part(*with).PerVolume()
	}
	if f.Without == nil || f.With == nil {
		return f
	}
	if f.Without.Events > 0 {
		f.Ratio = f.With.Events / f.Without.Events
	}
	k := float64(f.Instances)
	f.PerInstance = &WatchCounts{Events: (f.With.Events - f.Without.Events) / k, Bytes: (f.With.Bytes - f.Without.Bytes) / k}
	return f
}

// nodePart and multihostPart pick a run's volumes of one mode.
func nodePart(r VolumesRun) *VolumeWatch      { return r.Node }
func multihostPart(r VolumesRun) *VolumeWatch { return r.Multihost }

// reportVolumes prints the hostpath volumes step: a row per run and mode,
// then the comparison of each mode. Nothing when the step was off.
func reportVolumes(bw *bufio.Writer, res Result, s Summary) error {
	if res.Volumes == 0 && res.MultihostVolumes == 0 && len(res.VolumeRuns) == 0 {
		return nil
	}
	fmt.Fprintln(bw)
	if len(res.VolumeRuns) == 0 {
		fmt.Fprintf(bw, "hostpath volumes (%d node-mode, %d multihost): not measured (see the log)\n", res.Volumes, res.MultihostVolumes)
		return nil
	}
	tw := tabwriter.NewWriter(bw, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "hostpath volumes, API server watch events\tinstances\tvolumes\tclaim events\tPV events\tper volume\tKiB per volume\tBound in (s)\tgone in (s)\n")
	for _, r := range res.VolumeRuns {
		for _, m := range []struct {
			name string
			w    *VolumeWatch
		}{{"node-mode", r.Node}, {"multihost", r.Multihost}} {
			if m.w == nil {
				continue
			}
			per := m.w.PerVolume()
			fmt.Fprintf(tw, "%s, %d fleet instances\t%d\t%d\t%.0f\t%.0f\t%s\t%s\t%s\t%s\n", m.name, r.Instances, r.RealInstances+r.Instances,
				m.w.Volumes, m.w.Claims.Events, m.w.PVs.Events, f1(per.Events), f1(per.Bytes/(1<<10)), f1(m.w.BoundSeconds), f1(m.w.GoneSeconds))
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, l := range []struct {
		mode, note string
		asked      int
		f          *VolumesFigures
	}{
		{"node-mode", "pending-state events", res.Volumes, s.NodeVolumes},
		{"multihost", "every instance watches them", res.MultihostVolumes, s.MultihostVolumes},
	} {
		if l.asked > 0 || l.f != nil {
			fmt.Fprintf(bw, "claim and PV watch events per %s volume: %s\n", l.mode, volumesText(l.f, l.note))
		}
	}
	return nil
}

// volumesText is "R instances E (B KiB), R+K instances E' (B' KiB)
// (X.XXx); each fleet instance P (Q KiB) per volume (note)", with "-" for
// what was not measured and the note only with the last figure.
func volumesText(f *VolumesFigures, note string) string {
	if f == nil {
		return "not measured"
	}
	each := func(w *WatchCounts, f func(float64) string) string {
		if w == nil {
			return "-"
		}
		return fmt.Sprintf("%s (%s KiB)", f(w.Events), f(w.Bytes/(1<<10)))
	}
	ratio := "-"
	if f.Ratio > 0 {
		ratio = f2(f.Ratio) + "x"
	}
	with := "-"
	if f.Instances > 0 {
		with = fmt.Sprintf("%d", f.Real+f.Instances)
	}
	text := fmt.Sprintf("%d instances %s, %s instances %s (%s); each fleet instance %s per volume",
		f.Real, each(f.Without, f1), with, each(f.With, f1), ratio, each(f.PerInstance, f2))
	if f.PerInstance != nil {
		text += " (" + note + ")"
	}
	return text
}
