package bench

import (
	"fmt"
	"image/color"
	"slices"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
)

// WriteFigure draws the rows of one experiment as grouped bars (one group
// per workload, one bar per config) of the first metric, and saves it to
// path; the format follows the extension (.svg, .png, .pdf).
func WriteFigure(path, title string, rows []Row) error {
	if len(rows) == 0 {
		return fmt.Errorf("bench: no rows to plot for %s", title)
	}
	metric := rows[0].Metric
	var workloads, configs []string
	vals := map[[2]string]float64{}
	for _, r := range rows {
		if r.Metric != metric {
			continue
		}
		if !slices.Contains(workloads, r.Workload) {
			workloads = append(workloads, r.Workload)
		}
		if !slices.Contains(configs, r.Config) {
			configs = append(configs, r.Config)
		}
		vals[[2]string{r.Workload, r.Config}] = r.Value
	}
	p := plot.New()
	p.Title.Text = title
	p.Y.Label.Text = metric
	p.Legend.Top = true
	p.Legend.Left = true
	w := vg.Points(float64(min(18, 90/max(len(configs), 1))))
	for i, c := range configs {
		v := make(plotter.Values, len(workloads))
		for j, wl := range workloads {
			v[j] = vals[[2]string{wl, c}]
		}
		bars, err := plotter.NewBarChart(v, w)
		if err != nil {
			return err
		}
		bars.LineStyle.Width = vg.Length(0)
		bars.Color = plotutil.Color(i)
		if len(configs) > 7 {
			bars.Color = color.Gray{Y: uint8(40 + 180*i/len(configs))}
		}
		bars.Offset = w * vg.Length(float64(i)-float64(len(configs)-1)/2)
		p.Add(bars)
		p.Legend.Add(c, bars)
	}
	p.NominalX(workloads...)
	width := vg.Length(max(6, len(workloads)*len(configs)/3+4)) * vg.Inch
	return p.Save(width, 4*vg.Inch, path)
}
