package benchprovision

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
)

// Plot size, for a README or a design doc.
const (
	plotWidth  = 16 * vg.Centimeter
	plotHeight = 10 * vg.Centimeter
)

// series is one line of a plot.
type series struct {
	name   string
	points plotter.XYs
	// run is the index of the run, for its colour; dashed draws it dashed.
	run    int
	dashed bool
}

// cdfPoints is the empirical CDF of sorted values: a step from 0 up to 1
// (plotted with PostStep).
func cdfPoints(sorted []float64) plotter.XYs {
	pts := plotter.XYs{{X: 0, Y: 0}}
	n := float64(len(sorted))
	for i, v := range sorted {
		pts = append(pts, plotter.XY{X: v, Y: float64(i+1) / n})
	}
	return pts
}

// countPoints is how many of the sorted times have passed, over time.
func countPoints(sorted []float64) plotter.XYs {
	pts := plotter.XYs{{X: 0, Y: 0}}
	for i, v := range sorted {
		pts = append(pts, plotter.XY{X: v, Y: float64(i + 1)})
	}
	return pts
}

// slugRuns are the runs of characters a file name does not keep of a
// setting, slugEnds those at its ends.
var (
	slugRuns = regexp.MustCompile(`[^A-Za-z0-9]+`)
	slugEnds = regexp.MustCompile(`^-+|-+$`)
)

// slug is setting as a file name part ("200/400" -> "200-400").
func slug(setting string) string {
	s := slugEnds.ReplaceAllString(slugRuns.ReplaceAllString(setting, "-"), "")
	if s == "" {
		return "run"
	}
	return s
}

// WritePlots writes SVG files into dir (created if needed) for each
// kube-controller-manager setting of the results, every run of the setting
// on the same axes: cdf-SETTING.svg, the CDF of the claims' create->Bound
// latency; timeline-SETTING.svg, the PVs created and claims Bound over
// time since the first claim; and, when the runs recorded it,
// deletion-SETTING.svg, the PVs Released and gone over time since the
// namespace delete. It returns the files written, in order. The output
// depends on the results alone.
func WritePlots(dir string, results []Result) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	var settings []string
	bySetting := map[string][]Result{}
	for _, r := range results {
		_, s := ParseLabel(r.Label)
		if !slices.Contains(settings, s) {
			settings = append(settings, s)
		}
		bySetting[s] = append(bySetting[s], r)
	}
	var files []string
	for _, s := range settings {
		var cdf, progress, deletion []series
		for i, r := range bySetting[s] {
			if r.GoneTimes != nil {
				deletion = append(deletion,
					series{name: r.Label + " Released", points: countPoints(r.ReleasedTimes), run: i, dashed: true},
					series{name: r.Label + " gone", points: countPoints(r.GoneTimes), run: i})
			}
			cdf = append(cdf, series{name: r.Label, points: cdfPoints(r.BoundLatencies), run: i})
			progress = append(progress,
				series{name: r.Label + " PVs", points: countPoints(r.PVTimes), run: i, dashed: true},
				series{name: r.Label + " Bound", points: countPoints(r.BoundTimes), run: i})
		}
		where := "kube-controller-manager " + s
		for _, p := range []struct {
			file, title, x, y string
			lines             []series
		}{
			{"cdf-" + slug(s) + ".svg", "Claim create to Bound, " + where, "latency (s)", "fraction of claims", cdf},
			{"timeline-" + slug(s) + ".svg", "PVs and Bound claims over time, " + where, "time since the first claim (s)", "count", progress},
			{"deletion-" + slug(s) + ".svg", "PVs Released and gone over time, " + where, "time since the namespace delete (s)", "count", deletion},
		} {
			if len(p.lines) == 0 {
				continue
			}
			file := filepath.Join(dir, p.file)
			if err := writePlot(file, p.title, p.x, p.y, p.lines); err != nil {
				return files, err
			}
			files = append(files, file)
		}
	}
	return files, nil
}

// writePlot renders step lines into an SVG file.
func writePlot(file, title, xLabel, yLabel string, lines []series) error {
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text, p.Y.Label.Text = xLabel, yLabel
	p.X.Min, p.Y.Min = 0, 0
	// Bottom right: the lines rise to the top right.
	p.Legend.Top, p.Legend.Left = false, false
	p.Legend.XOffs, p.Legend.YOffs = -vg.Points(8), vg.Points(8)
	p.Add(plotter.NewGrid())
	for _, s := range lines {
		l, err := plotter.NewLine(s.points)
		if err != nil {
			return fmt.Errorf("%s: series %s: %w", file, s.name, err)
		}
		l.StepStyle = plotter.PostStep
		l.LineStyle.Color = plotutil.Color(s.run)
		l.LineStyle.Width = vg.Points(1.5)
		if s.dashed {
			l.LineStyle.Dashes = []vg.Length{vg.Points(6), vg.Points(3)}
		}
		p.Add(l)
		p.Legend.Add(s.name, l)
	}
	wt, err := p.WriterTo(plotWidth, plotHeight, "svg")
	if err != nil {
		return fmt.Errorf("%s: %w", file, err)
	}
	var buf bytes.Buffer
	if _, err := wt.WriteTo(&buf); err != nil {
		return fmt.Errorf("%s: %w", file, err)
	}
	return os.WriteFile(file, buf.Bytes(), 0o644)
}
