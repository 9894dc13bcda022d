package bench

import (
	"fmt"
	"image/color"
	"slices"
	"strconv"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
)

// cdfPrefix marks a metric as a point of a distribution: cdf_p050 is the
// value at the 50th percentile.
const cdfPrefix = "cdf_p"

// cdfPanels returns a CDF panel per workload that has cdf_pNNN metrics
// (x: the value, y: the percentile; a line per config, in its colour) and
// the metrics left for bar panels.
func cdfPanels(rows []Row, metrics, configs []string, colors []color.Color) ([]*plot.Plot, []string, error) {
	var rest []string
	for _, m := range metrics {
		if !strings.HasPrefix(m, cdfPrefix) {
			rest = append(rest, m)
		}
	}
	if len(rest) == len(metrics) {
		return nil, metrics, nil
	}
	type key struct{ workload, config string }
	pts := map[key]plotter.XYs{}
	var keys []key
	var workloads []string
	for _, r := range rows {
		pct, ok := strings.CutPrefix(r.Metric, cdfPrefix)
		if !ok {
			continue
		}
		p, err := strconv.Atoi(pct)
		if err != nil {
			return nil, nil, fmt.Errorf("%w: metric %q: want %s and a percentile", ErrFigure, r.Metric, cdfPrefix)
		}
		k := key{r.Workload, r.Config}
		if _, ok := pts[k]; !ok {
			keys = append(keys, k)
		}
		pts[k] = append(pts[k], plotter.XY{X: r.Value, Y: float64(p) / 100})
		if !slices.Contains(workloads, r.Workload) {
			workloads = append(workloads, r.Workload)
		}
	}
	var panels []*plot.Plot
	for _, w := range workloads {
		p := plot.New()
		p.Title.Text = w + ": CDF of the latency"
		p.Title.TextStyle.Font.Size = 12
		p.X.Label.Text = "latency (" + unitOf(cdfPrefix) + ")"
		p.Y.Label.Text = "cumulative fraction (of 1)"
		p.X.Tick.Marker = compactTicks{}
		p.X.Min, p.Y.Min, p.Y.Max = 0, 0, 1
		for _, k := range keys {
			if k.workload != w {
				continue
			}
			xy := slices.Clone(pts[k])
			slices.SortFunc(xy, func(a, b plotter.XY) int {
				switch {
				case a.Y < b.Y:
					return -1
				case a.Y > b.Y:
					return 1
				}
				return 0
			})
			l, err := plotter.NewLine(xy)
			if err != nil {
				return nil, nil, fmt.Errorf("%w: %s %s: %w", ErrFigure, w, k.config, err)
			}
			l.Color = colors[slices.Index(configs, k.config)]
			l.Width = vg.Points(1.5)
			p.Add(l)
		}
		panels = append(panels, p)
	}
	return panels, rest, nil
}
