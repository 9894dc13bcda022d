package bench

import (
	"errors"
	"fmt"
	"image/color"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/palette"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
	"gonum.org/v1/plot/vg/vgpdf"
	"gonum.org/v1/plot/vg/vgsvg"
)

// ErrFigure is returned when a figure cannot be drawn: no rows, or an
// unknown file format.
var ErrFigure = errors.New("bench: figure")

// WriteFigure draws the rows of one experiment as grouped bar charts, one
// panel per metric (one group per workload, one bar per config, each
// config the same colour in every panel; a distribution given as metrics
// cdf_pNNN, the value at percentile NNN, is drawn as a CDF instead, a
// panel per workload and a line per config), with the legend beside the
// panels, a dashed line at 1 on panels of ratios (speedups, normalised
// values), the title above them (one line per line of title), and, if paper is set, each value a paper reports for a bar (see
// PaperValues) as a black mark across that bar. The format follows the
// extension of path: .svg, .png or .pdf.
func WriteFigure(path, title string, rows []Row, paper bool) error {
	if len(rows) == 0 {
		return fmt.Errorf("%w: no rows to plot for %s", ErrFigure, title)
	}
	var marks, relative []Comparison // the paper's values for bars, and those relative to another config
	if paper {
		vals, err := PaperValuesFor(rows[0].Experiment)
		if err != nil {
			return err
		}
		for _, c := range Compare(rows, vals) {
			switch {
			case c.Over == "":
				marks = append(marks, c)
			case c.Found:
				relative = append(relative, c)
			}
		}
	}
	// A figure with a layout of the paper's panels draws those.
	layout := figureLayouts[rows[0].Experiment]
	if f, ok := layoutFuncs[rows[0].Experiment]; ok {
		l, err := f()
		if err != nil {
			return err
		}
		layout = l
	}
	if layout != nil {
		exp := rows[0].Experiment
		rows, marks = applyLayout(layout, rows, marks)
		if len(rows) == 0 {
			return fmt.Errorf("%w: no rows of %s's panels to plot for %s", ErrFigure, exp, title)
		}
	}
	rows = splitDerived(rows)
	rows, marks = splitExtremes(rows, marks)
	rows, marks, sweptKey := transposeSweep(rows, marks)
	rows, marks = nameSweep(rows, marks)
	rows, marks = groupMachines(rows, marks)
	var metrics, configs []string
	for _, r := range rows {
		if !slices.Contains(metrics, r.Metric) {
			metrics = append(metrics, r.Metric)
		}
		if !slices.Contains(configs, r.Config) {
			configs = append(configs, r.Config)
		}
	}
	colors := configColors(configs)
	// Distributions (metrics cdf_pNNN) are drawn as lines, a panel per
	// workload; every other metric as bars.
	panels, metrics, err := cdfPanels(rows, metrics, configs, colors)
	if err != nil {
		return err
	}
	metrics, same := dropRepeats(rows, metrics)
	maxBars := vg.Length(0) // the widest panel's bars and gaps
	ref := ""               // what the line at 1 is, for the legend
	for _, m := range metrics {
		p, bars, base, err := metricPanel(m, rows, configs, colors, marks)
		if err != nil {
			return err
		}
		if isRatio(m) {
			switch {
			case ref == "":
				ref = "1 = " + base
				if base == "" {
					ref = "1 = parity with the baseline"
				}
			case base != "" && ref != "1 = "+base, base == "" && ref != "1 = parity with the baseline":
				ref = "1 = each axis's baseline"
			}
		}
		if len(same[m]) > 0 {
			var words []string
			for _, s := range same[m] {
				words = append(words, metricWords(s))
			}
			p.Title.Text += " (" + strings.Join(words, ", ") + ": the same)"
		}
		if sweptKey != "" {
			p.X.Label.Text = sweepWords(sweptKey)
		}
		if i := slices.IndexFunc(layout, func(l panelLayout) bool { return l.key == m }); i >= 0 {
			layout[i].apply(p, rows)
		}
		panels = append(panels, p)
		maxBars = max(maxBars, bars)
	}
	if len(relative) > 0 {
		if ref == "" {
			ref = "1 = parity with the baseline"
		}
		p, bars, err := relativePanel(relative)
		if err != nil {
			return err
		}
		panels = append(panels, p)
		maxBars = max(maxBars, bars)
	}
	legend := figureLegend(configs, colors, len(marks) > 0 || len(relative) > 0, ref)

	// One column of panels, two if there are many and they are not wide
	// (two columns of wide panels make a figure too wide to read on a
	// slide: hw-validate's was 47 inches); each panel wide enough for its
	// bars, the legend in a column of its own on the right.
	panelW := max(5*vg.Inch, vg.Length(maxBars)+1.5*vg.Inch)
	cols := 1
	if len(panels) > 3 && panelW <= maxTwoColumnPanel {
		cols = 2
	}
	nrows := (len(panels) + cols - 1) / cols
	panelH := 3.2 * vg.Inch
	legendW := legendWidth(legend, append(slices.Clone(configs), "paper's value", ref)...)
	// A line of the title for each line of title (a changed machine says
	// so on a line of its own).
	titleH := 0.45*vg.Inch + vg.Length(strings.Count(title, "\n"))*0.25*vg.Inch
	width := vg.Length(cols)*panelW + legendW
	height := vg.Length(nrows)*panelH + titleH

	cw, err := newCanvas(path, width, height)
	if err != nil {
		return err
	}
	dc := draw.New(cw)
	sty := plot.New().Title.TextStyle
	sty.Font.Size = 14
	sty.XAlign, sty.YAlign = draw.XCenter, draw.YCenter
	// The first line of the title large, the others (notes such as a
	// changed machine) small.
	lines := strings.Split(title, "\n")
	dc.FillText(sty, vg.Point{X: (width - legendW) / 2, Y: height - 0.225*vg.Inch}, lines[0])
	sty.Font.Size = 10
	for i, l := range lines[1:] {
		dc.FillText(sty, vg.Point{X: width / 2, Y: height - 0.45*vg.Inch - vg.Length(i)*0.25*vg.Inch}, l)
	}

	for _, p := range panels {
		p.Y.Label.Text = wrapLabel(p.Y.Label.Text, maxAxisLabel)
	}
	grid := make([][]*plot.Plot, nrows)
	for i := range grid {
		grid[i] = make([]*plot.Plot, cols)
	}
	for i, p := range panels {
		grid[i/cols][i%cols] = p
	}
	area := draw.Crop(dc, 0, -legendW, 0, -titleH)
	tiles := draw.Tiles{Rows: nrows, Cols: cols, PadX: vg.Points(12), PadY: vg.Points(12),
		PadTop: vg.Points(4), PadBottom: vg.Points(4), PadLeft: vg.Points(4), PadRight: vg.Points(8)}
	// A log panel's y label is drawn by drawPanel, not by gonum, which
	// would also misplace it in Align's padding of its row.
	labels := make([]plot.Axis, len(panels))
	for i, p := range panels {
		labels[i] = p.Y
		if _, ok := p.Y.Scale.(clampedLog); ok {
			p.Y.Label.Text = ""
		}
	}
	canvases := plot.Align(grid, tiles, area)
	if !inside(canvases, area) {
		// Align lines up the panels' axes, but a panel whose tick labels
		// need more room than its tile (the paper's relative values,
		// long labels at an angle) pushes its neighbours off the figure:
		// then each panel fills its own tile.
		for i := range panels {
			canvases[i/cols][i%cols] = tiles.At(area, i%cols, i/cols)
		}
	}
	for i, p := range panels {
		drawPanel(p, canvases[i/cols][i%cols], labels[i])
	}
	legend.Draw(draw.Crop(dc, width-legendW+vg.Points(6), -vg.Points(6), 0, -titleH-vg.Points(8)))

	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := cw.WriteTo(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// maxAxisLabel is the longest y axis label drawn on one line: a panel is
// 3.2 inches high, and a longer label runs off it at 12 points.
const maxAxisLabel = 40

// wrapLabel breaks s into two lines at the space nearest its middle if
// it is longer than n characters.
func wrapLabel(s string, n int) string {
	if len([]rune(s)) <= n || strings.Contains(s, "\n") {
		return s
	}
	best := -1
	for i, r := range s {
		if r == ' ' && (best < 0 || abs(i-len(s)/2) < abs(best-len(s)/2)) {
			best = i
		}
	}
	if best < 0 {
		return s
	}
	return s[:best] + "\n" + s[best+1:]
}

func abs(i int) int { return max(i, -i) }

// drawPanel draws p on c, y its y axis with its label. gonum makes room for a y axis label as if it
// sat at the middle of the axis's data range, which on a log scale is
// near the top: the label's length above the panel pushed the data down
// (gpm-fig11's latencies began an inch under their title). A log panel's
// label is drawn here instead, beside its data, in the strip gonum would
// have given it.
func drawPanel(p *plot.Plot, c draw.Canvas, y plot.Axis) {
	label := y.Label
	if _, ok := p.Y.Scale.(clampedLog); !ok || label.Text == "" {
		p.Draw(c)
		return
	}
	p.Y.Label.Text = ""
	defer func() { p.Y.Label = label }()
	sty := label.TextStyle
	descent := sty.FontExtents().Descent
	strip := sty.Height(label.Text) + descent + label.Padding
	data := draw.Crop(c, strip, 0, 0, 0)
	p.Draw(data)
	dc := p.DataCanvas(data)
	sty.Rotation += math.Pi / 2
	c.FillText(sty, vg.Point{X: c.Min.X + label.TextStyle.Height(label.Text) - descent, Y: dc.Center().Y}, label.Text)
}

// inside reports whether every canvas lies within area.
func inside(canvases [][]draw.Canvas, area draw.Canvas) bool {
	const slack = 0.5 // points, for rounding
	for _, row := range canvases {
		for _, c := range row {
			if c.Min.X < area.Min.X-slack || c.Min.Y < area.Min.Y-slack || c.Max.X > area.Max.X+slack || c.Max.Y > area.Max.Y+slack ||
				c.Max.X <= c.Min.X || c.Max.Y <= c.Min.Y {
				return false
			}
		}
	}
	return true
}

// maxBarsWidth is the most a panel's bars and gaps take where bars can be
// narrowed to fit (down to 4 points).
const maxBarsWidth = 14 * vg.Inch

// maxTwoColumnPanel is the widest panel drawn two a row.
const maxTwoColumnPanel = 11 * vg.Inch

// newCanvas returns a canvas for the format of path's extension; PNGs are
// drawn at 150 dpi so that their labels are readable on a slide.
func newCanvas(path string, w, h vg.Length) (vg.CanvasWriterTo, error) {
	switch strings.ToLower(filepath.Ext(path)) {
	case ".svg":
		return vgsvg.New(w, h), nil
	case ".png":
		return vgimg.PngCanvas{Canvas: vgimg.NewWith(vgimg.UseWH(w, h), vgimg.UseDPI(150))}, nil
	case ".pdf":
		return vgpdf.New(w, h), nil
	}
	return nil, fmt.Errorf("%w: unknown format %q (want .svg, .png or .pdf)", ErrFigure, filepath.Ext(path))
}

// isRatio reports whether a metric is a ratio to a baseline, drawn with a
// reference line at 1.
func isRatio(metric string) bool {
	metric = strings.TrimSuffix(metric, extremes)
	return strings.HasPrefix(metric, derivedPrefix) || strings.Contains(metric, "speedup") || strings.HasSuffix(metric, "_norm") || strings.HasPrefix(metric, "x_") ||
		strings.HasPrefix(metric, "over_") || strings.HasPrefix(metric, "normalized_") || strings.HasPrefix(metric, "normalised_") ||
		strings.Contains(metric, "_over_") || strings.Contains(metric, "_vs_") || strings.HasPrefix(metric, "slowdown")
}

// metricPanel draws one metric: a group of bars per workload that has the
// metric, a bar per config present in it; a ratio's y axis names its
// baseline (the config that is 1 everywhere) and has a dashed line at 1;
// values more than 100x apart get a log scale. It returns the panel, the
// width its bars and the gaps between groups need, and the baseline.
func metricPanel(metric string, rows []Row, configs []string, colors []color.Color, marks []Comparison) (*plot.Plot, vg.Length, string, error) {
	exp := rows[0].Experiment
	var workloads, cfgs []string
	vals := map[[2]string]float64{}
	for _, r := range rows {
		if r.Metric != metric {
			continue
		}
		if !slices.Contains(workloads, r.Workload) {
			workloads = append(workloads, r.Workload)
		}
		if !slices.Contains(cfgs, r.Config) {
			cfgs = append(cfgs, r.Config)
		}
		vals[[2]string{r.Workload, r.Config}] = r.Value
	}
	// Configs keep the experiment's order (and colour).
	slices.SortStableFunc(cfgs, func(a, b string) int { return slices.Index(configs, a) - slices.Index(configs, b) })

	p := plot.New()
	p.Title.Text = metricWords(metric)
	p.Title.TextStyle.Font.Size = 12
	base := ""
	if isRatio(metric) {
		base = baselineOf(workloads, cfgs, vals)
		if c, ok := strings.CutPrefix(metric, derivedPrefix); ok {
			base = c[strings.LastIndex(c, "/")+1:]
		}
		if rest, ok := strings.CutPrefix(metric, "x_"); ok && base == "" {
			// x_pebble_keys_per_s: over Pebble's rate (metricWords).
			other, _, _ := strings.Cut(rest, "_")
			if w := metricTokens[other]; w != "" {
				other = w
			}
			base = other + "'s, the same file system and workload"
		}
		if base == "" {
			base = namedBaseline(exp, metric)
		}
	}
	over := base
	if strings.Contains(metric, "overhead") {
		// An overhead is relative too (with no line at 1): over what.
		over = figureBaselines[exp][strings.TrimSuffix(metric, extremes)]
	}
	p.Y.Label.Text = axisLabel(strings.TrimSuffix(metric, extremes), over)
	p.Y.Tick.Marker = compactTicks{}
	p.Y.Min = 0
	p.X.Tick.Label.Font.Size = 10
	long := 0
	for _, w := range workloads {
		long = max(long, len(w))
	}
	if long*len(workloads) > 60 {
		p.X.Tick.Label.Rotation = math.Pi / 6
		if len(workloads) > 30 {
			p.X.Tick.Label.Rotation = math.Pi / 3
		}
		p.X.Tick.Label.XAlign = draw.XRight
		p.X.Tick.Label.YAlign = draw.YTop
	}
	barW := vg.Points(float64(max(5, min(14, 90/max(len(cfgs), 1)))))
	// Many groups (hw-validate's 60 ratios): narrower bars and smaller
	// labels, so that the panel stays within maxBarsWidth.
	if w := maxBarsWidth / vg.Length(float64(len(workloads))*(float64(len(cfgs))+1.5)); w < barW {
		barW = max(w, vg.Points(4))
	}
	if len(workloads) > 30 {
		p.X.Tick.Label.Font.Size = 8
	}
	offset := func(i int) vg.Length { return barW * vg.Length(float64(i)-float64(len(cfgs)-1)/2) }
	for i, c := range cfgs {
		v := make(plotter.Values, len(workloads))
		for j, wl := range workloads {
			v[j] = vals[[2]string{wl, c}]
		}
		bars, err := plotter.NewBarChart(v, barW)
		if err != nil {
			return nil, 0, "", fmt.Errorf("%w: %s: %w", ErrFigure, metric, err)
		}
		bars.LineStyle.Width = 0
		bars.Color = colors[slices.Index(configs, c)]
		bars.Offset = offset(i)
		p.Add(bars)
	}
	if isRatio(metric) {
		if err := addReference(p, len(workloads)); err != nil {
			return nil, 0, "", err
		}
	}
	pm := paperMarks{width: barW * 0.7}
	for _, m := range marks {
		j := slices.Index(workloads, m.Workload)
		i := slices.Index(cfgs, m.Config)
		if m.Metric != metric || j < 0 || i < 0 {
			continue
		}
		pm.pts = append(pm.pts, paperMark{x: float64(j), off: offset(i), y: m.Value})
	}
	if len(pm.pts) > 0 {
		p.Add(pm)
	}
	p.NominalX(workloads...)
	// Room above the tallest bar (and below the lowest negative one, an
	// overhead under zero), and groups apart by a bar and a half.
	ymin, ymax := 0.0, 0.0
	for _, v := range vals {
		ymin, ymax = min(ymin, v), max(ymax, v)
	}
	for _, m := range pm.pts {
		ymin, ymax = min(ymin, m.y), max(ymax, m.y)
	}
	if isRatio(metric) {
		ymax = max(ymax, 1)
	}
	if ymax > 0 {
		p.Y.Max = ymax * 1.08
	}
	if ymin < 0 {
		p.Y.Min = ymin * 1.08
	}
	var ys []float64
	for _, v := range vals {
		ys = append(ys, v)
	}
	for _, m := range pm.pts {
		ys = append(ys, m.y)
	}
	if lo, hi, ok := logRange(ys); ok && hi/lo > 100 {
		// Values more than 100x apart: a log scale, so that the small
		// bars show.
		setLog(p, lo, hi)
	}
	p.X.Min, p.X.Max = -0.5, float64(len(workloads))-0.5
	return p, vg.Length(len(workloads)) * (vg.Length(len(cfgs)) + 1.5) * barW, base, nil
}

// qualitative is a palette of eight colours that stay apart on screen and
// paper.
var qualitative = []color.RGBA{
	{0x1f, 0x77, 0xb4, 0xff}, {0xff, 0x7f, 0x0e, 0xff}, {0x2c, 0xa0, 0x2c, 0xff}, {0xd6, 0x27, 0x28, 0xff},
	{0x94, 0x67, 0xbd, 0xff}, {0x8c, 0x56, 0x4b, 0xff}, {0xe3, 0x77, 0xc2, 0xff}, {0x17, 0xbe, 0xcf, 0xff},
}

// configColors returns a colour per config that tells them apart: the
// qualitative palette for up to eight; for more, configs named
// "machine/model" get a hue per model and a shade per machine (so that the
// same model looks alike across machines); otherwise hues spread around the
// circle with alternating brightness.
func configColors(configs []string) []color.Color {
	n := len(configs)
	out := make([]color.Color, n)
	// The minima and maxima over the benchmarks, drawn in a panel of
	// their own, in greys: the benchmarks keep the palette.
	if i, j := slices.Index(configs, "min"), slices.Index(configs, "max"); i >= 0 && j >= 0 && n-2 <= len(qualitative) {
		k := 0
		for c := range configs {
			switch c {
			case i:
				out[c] = color.Gray{Y: 120}
			case j:
				out[c] = color.Gray{Y: 190}
			default:
				out[c] = qualitative[k]
				k++
			}
		}
		return out
	}
	if n <= len(qualitative) {
		for i := range out {
			out[i] = qualitative[i]
		}
		return out
	}
	var prefixes, suffixes []string
	for _, c := range configs {
		i := strings.LastIndex(c, "/")
		if i < 0 {
			prefixes = nil
			break
		}
		if !slices.Contains(prefixes, c[:i]) {
			prefixes = append(prefixes, c[:i])
		}
		if !slices.Contains(suffixes, c[i+1:]) {
			suffixes = append(suffixes, c[i+1:])
		}
	}
	if len(prefixes) > 0 && len(prefixes) <= 3 && len(suffixes) <= len(qualitative) {
		for k, c := range configs {
			i := strings.LastIndex(c, "/")
			base := qualitative[slices.Index(suffixes, c[i+1:])]
			out[k] = shade(base, slices.Index(prefixes, c[:i]), len(prefixes))
		}
		return out
	}
	for i := range out {
		v := 0.95
		if i%2 == 1 {
			v = 0.6
		}
		out[i] = palette.HSVA{H: float64(i) / float64(n), S: 0.8, V: v, A: 1}
	}
	return out
}

// shade returns c darkened (i = 0), as is, or lightened (i = n-1) for the
// i-th of n machines.
func shade(c color.RGBA, i, n int) color.Color {
	if n <= 1 {
		return c
	}
	t := float64(i)/float64(n-1)*2 - 1 // -1 .. 1
	mix := func(v uint8) uint8 {
		if t < 0 {
			return uint8(float64(v) * (1 + 0.45*t))
		}
		return uint8(float64(v) + (255-float64(v))*0.55*t)
	}
	return color.RGBA{mix(c.R), mix(c.G), mix(c.B), 0xff}
}

// figureLegend names each config's colour, the paper's mark, and what the
// dashed line at 1 is (ref, if not "").
func figureLegend(configs []string, colors []color.Color, paper bool, ref string) plot.Legend {
	l := plot.NewLegend()
	l.Top, l.Left = true, true
	l.TextStyle.Font.Size = 10
	l.ThumbnailWidth = vg.Points(14)
	l.Padding = vg.Points(4)
	for i, c := range configs {
		l.Add(c, swatch{colors[i]})
	}
	if paper {
		l.Add("paper's value", paperMarks{width: vg.Points(12)})
	}
	if ref != "" {
		line := plotter.NewFunction(func(float64) float64 { return 1 })
		line.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
		line.Color = color.Gray{Y: 60}
		line.Width = vg.Points(1)
		l.Add(ref, line)
	}
	return l
}

// legendWidth is the width of the legend's column.
func legendWidth(l plot.Legend, names ...string) vg.Length {
	w := vg.Length(0)
	for _, n := range names {
		w = max(w, l.TextStyle.Rectangle(n).Size().X)
	}
	return w + l.ThumbnailWidth + vg.Points(24)
}

// swatch is a legend thumbnail: a filled square of one colour.
type swatch struct{ c color.Color }

// Thumbnail draws the swatch (plot.Thumbnailer).
func (s swatch) Thumbnail(c *draw.Canvas) {
	c.FillPolygon(s.c, c.ClipPolygonY([]vg.Point{
		{X: c.Min.X, Y: c.Min.Y}, {X: c.Min.X, Y: c.Max.Y},
		{X: c.Max.X, Y: c.Max.Y}, {X: c.Max.X, Y: c.Min.Y},
	}))
}

// paperMark is a paper's value for one bar: x is the workload's group,
// off the bar's offset in it, y the value.
type paperMark struct {
	x   float64
	off vg.Length
	y   float64
}

// paperMarks draws the papers' values as a black line across each bar
// with a ring on it (a plot.Plotter, plot.DataRanger and
// plot.Thumbnailer).
type paperMarks struct {
	pts   []paperMark
	width vg.Length
}

var markLine = draw.LineStyle{Color: color.Black, Width: vg.Points(2)}
var markRing = draw.GlyphStyle{Color: color.Black, Radius: vg.Points(3), Shape: draw.RingGlyph{}}

// Plot draws the marks.
func (m paperMarks) Plot(c draw.Canvas, plt *plot.Plot) {
	trX, trY := plt.Transforms(&c)
	for _, p := range m.pts {
		x, y := trX(p.x)+p.off, trY(p.y)
		c.StrokeLine2(markLine, x-m.width/2-1, y, x+m.width/2+1, y)
		c.DrawGlyph(markRing, vg.Point{X: x, Y: y})
	}
}

// DataRange makes room for the marks on the y axis.
func (m paperMarks) DataRange() (xmin, xmax, ymin, ymax float64) {
	xmin, xmax, ymin, ymax = math.Inf(1), math.Inf(-1), 0, math.Inf(-1)
	for _, p := range m.pts {
		xmin, xmax, ymax = min(xmin, p.x), max(xmax, p.x), max(ymax, p.y)
	}
	return xmin, xmax, ymin, ymax
}

// Thumbnail draws the mark in the legend.
func (m paperMarks) Thumbnail(c *draw.Canvas) {
	y := (c.Min.Y + c.Max.Y) / 2
	c.StrokeLine2(markLine, c.Min.X, y, c.Max.X, y)
	c.DrawGlyph(markRing, vg.Point{X: (c.Min.X + c.Max.X) / 2, Y: y})
}

// compactTicks labels the y axis with short numbers (250k, 1.5M, 0.25)
// instead of fixed-precision ones ("250000.00"); log places them at
// powers of ten.
type compactTicks struct{ log bool }

// Ticks returns the default ticks relabelled.
func (c compactTicks) Ticks(lo, hi float64) []plot.Tick {
	var ticks []plot.Tick
	if c.log {
		// Only the ticks on the axis: one below it would sit on its
		// bottom (clampedLog) over the first.
		for _, t := range (plot.LogTicks{Prec: -1}).Ticks(lo, hi) {
			if t.Value >= lo && t.Value <= hi {
				ticks = append(ticks, t)
			}
		}
		// Fewer than three powers of ten on the axis (10 and 100 of
		// 1.2 to 600): label the 2s and 5s between them too.
		labelled := 0
		for _, t := range ticks {
			if t.Label != "" {
				labelled++
			}
		}
		if labelled < 3 {
			for i, t := range ticks {
				m := t.Value / math.Pow(10, math.Floor(math.Log10(t.Value)+1e-9))
				if math.Abs(m-2) < 1e-6 || math.Abs(m-5) < 1e-6 {
					ticks[i].Label = "x"
				}
			}
		}
	} else {
		ticks = plot.DefaultTicks{}.Ticks(lo, hi)
		// Fewer than four labels (0, 2, 4) say too little: label the
		// minor ticks too where there are few.
		labelled := 0
		for _, t := range ticks {
			if t.Label != "" {
				labelled++
			}
		}
		if labelled < 4 && len(ticks) <= 9 {
			for i := range ticks {
				ticks[i].Label = "x"
			}
		}
	}
	for i := range ticks {
		if ticks[i].Label != "" {
			ticks[i].Label = compact(ticks[i].Value)
		}
	}
	return ticks
}

func compact(v float64) string {
	a := math.Abs(v)
	switch {
	case a >= 1e9:
		return strconv.FormatFloat(v/1e9, 'g', 3, 64) + "G"
	case a >= 1e6:
		return strconv.FormatFloat(v/1e6, 'g', 3, 64) + "M"
	case a >= 1e4:
		return strconv.FormatFloat(v/1e3, 'g', 3, 64) + "k"
	}
	return strconv.FormatFloat(v, 'g', 6, 64)
}

// logRange returns the smallest and largest positive values (bars and
// marks of one panel), and whether a log scale can show them: none is
// negative and some are positive. A panel needs one when hi/lo > 100.
func logRange(values []float64) (lo, hi float64, ok bool) {
	lo, hi = math.Inf(1), 0
	for _, v := range values {
		if v < 0 {
			return 0, 0, false
		}
		if v > 0 {
			lo, hi = min(lo, v), max(hi, v)
		}
	}
	return lo, hi, hi > 0
}

// setLog puts p's y axis on a log scale from below lo to above hi (bars
// start at the axis's bottom) and says so in its label.
func setLog(p *plot.Plot, lo, hi float64) {
	p.Y.Scale = clampedLog{}
	p.Y.Tick.Marker = compactTicks{log: true}
	p.Y.Min, p.Y.Max = lo/2, hi*2
	p.Y.Label.Text += ", log scale"
}

// panelLayout is one panel of a paper's figure, for experiments whose
// metrics are not one panel each in the paper (figureLayouts): the series
// it draws, which workloads (renamed for the x axis), its title and axis
// labels, and whether it is on a log scale.
type panelLayout struct {
	// key is the panel's metric after applyLayout (isRatio of it gives
	// the line at 1).
	key            string
	title          string
	series         []panelSeries
	workload       func(string) (string, bool)
	xLabel, yLabel string
	log            bool
}

// panelSeries is a metric (of config, or any config if "") drawn in a
// panel, as config label in the legend ("": the row's config), in the
// group of bars workload ("": the row's workload, renamed by the panel).
type panelSeries struct {
	metric, config, label, workload string
	// of, if set, is the one workload the series draws; config, if it
	// ends in "*", matches the configs it begins.
	of string
}

// figureLayouts are the experiments drawn in their paper's layout rather
// than a panel per metric.
var figureLayouts = map[string][]panelLayout{
	// GPM Fig. 11: (a) the speedup due to HCL per transactional workload
	// (ours: gpKVS), (b) logging latency against concurrent logging
	// threads.
	"gpm-fig11": {
		{key: "hcl_speedup", title: "(a) speedup due to HCL",
			series: []panelSeries{
				{"hcl_speedup", "", "HCL over conventional logging", "", ""},
				{"hcl_speedup_vs_conv_per_warp", "", "HCL over a log per warp", "", ""},
			},
			workload: func(w string) (string, bool) { return w, !strings.HasPrefix(w, "log-") && w != "logging" },
			xLabel:   "workload", yLabel: "HCL's speedup (×)"},
		{key: "latency_us", title: "(b) logging latency against concurrent logging threads",
			series: []panelSeries{
				{"latency_us", "pm-far/gpm/hcl", "HCL", "", ""},
				{"latency_us", "pm-far/gpm/conv", "conventional logging", "", ""},
			},
			workload: func(w string) (string, bool) { return strings.CutPrefix(w, "log-") },
			xLabel:   "concurrent logging threads", yLabel: "logging latency (µs)", log: true},
	},
	// SBRP Fig. 11: one panel, the recovery time normalised (the raw
	// cycles and whether the crash came before the commit are in the
	// CSV).
	"sbrp-fig11": {
		{key: "recovery_norm", title: "recovery time after a crash, normalised to epoch-near",
			series: []panelSeries{{"recovery_norm", "", "", "", ""}}, workload: allWorkloads, xLabel: "workload"},
	},
	// COSPlay Fig. 10: TPCC's speedups per BMO (COSPlay's best windows
	// are in the CSV).
	"cosplay-fig10": {
		{key: "speedup", title: "TPCC: speedup over Baseline (sfences) per BMO",
			series: []panelSeries{{"speedup", "", "", "", ""}}, workload: allWorkloads, xLabel: "BMO"},
	},
	// COSPlay Fig. 11: (a) COSPlay over SBatch at the same window, (b)
	// each at its best window, and the windows (b) compares; each with
	// its minimum and maximum over the benchmarks (the paper's values) in
	// a panel of its own.
	"cosplay-fig11": {
		{key: "speedup_iso_window", title: "(a) COSPlay's speedup over SBatch at COSPlay's best window",
			series: []panelSeries{{"speedup_iso_window", "", "", "", ""}}, workload: allWorkloads, xLabel: "benchmark (a bar per BMO)"},
		{key: "speedup_best_windows", title: "(b) COSPlay's speedup over SBatch, each at its best window",
			series: []panelSeries{{"speedup_best_windows", "", "", "", ""}}, workload: allWorkloads, xLabel: "benchmark (a bar per BMO)"},
		{key: "sbatch_over_cosplay_window", title: "(b) the best windows: SBatch's over COSPlay's",
			series: []panelSeries{{"sbatch_over_cosplay_window", "", "", "", ""}}, workload: allWorkloads, xLabel: "benchmark (a bar per BMO)"},
	},
	// COSPlay Fig. 9: (a) Enc, (b) HD, COSPlay's performance normalised
	// to Unordered at windows 1 to 32 (six of them drawn; the CSV has
	// every window), beside Baseline's.
	"cosplay-fig9": {
		fig9Panel("enc_perf_over_unordered", "(a) Enc", "Enc"),
		fig9Panel("hd_perf_over_unordered", "(b) HD", "HD"),
	},
	// COSPlay Fig. 13: (a) Enc, (b) HD, performance normalised to
	// Unordered; and §6.2's gaps, min and max over the benchmarks and both
	// BMOs (the paper's values).
	"cosplay-fig13": {
		fig13Panel("enc_perf_over_unordered", "(a) Enc", "Enc"),
		fig13Panel("hd_perf_over_unordered", "(b) HD", "HD"),
		{key: "slowdown_vs_unordered", title: "§6.2: slowdown over Unordered, min and max over the benchmarks and both BMOs",
			series: []panelSeries{
				{"slowdown_vs_unordered", "baseline", "Baseline", "", ""},
				{"slowdown_vs_unordered", "cosplay", "COSPlay", "", ""},
			},
			workload: allWorkloads},
	},
	// COSPlay Fig. 14: (a) the throughputs over Baseline's on one core,
	// Baseline's and COSPlay's in a panel each, (b) COSPlay's speedup at
	// each thread count.
	"cosplay-fig14": {
		{key: "baseline_throughput", title: "(a) Baseline's throughput over Baseline's on one core",
			series: []panelSeries{{"baseline_throughput", "", "", "", ""}}, workload: allWorkloads, xLabel: "benchmark (a bar per thread count)",
			yLabel: "throughput over Baseline's on one core (×)"},
		{key: "cosplay_throughput", title: "(a) COSPlay's throughput (at its best window) over Baseline's on one core",
			series: []panelSeries{{"cosplay_throughput", "", "", "", ""}}, workload: allWorkloads, xLabel: "benchmark (a bar per thread count)",
			yLabel: "throughput over Baseline's on one core (×)"},
		{key: "speedup", title: "(b) COSPlay's speedup over Baseline at the same thread count",
			series: []panelSeries{{"speedup", "", "", "", ""}}, workload: allWorkloads, xLabel: "benchmark (a bar per thread count)"},
	},
	// The scoped persist barrier paper's Table 3: the NV writes per
	// level (the tree's workgroups, depth and levels are in the CSV).
	"gope-table3": {
		{key: "nv_writes", title: "NV writes a crash at each level makes the insertion write again",
			series: []panelSeries{{"nv_writes", "", "", "", ""}}, workload: allWorkloads, xLabel: "the level the crash hits"},
	},
	// The scoped persist barrier paper's Fig. 7: a group of bars per
	// NVW-FIFO size, a bar per scope.
	"gope-fig7": {gopeFig7Panel("time_norm", "insertion time normalised to the DRAM-only baseline"),
		gopeFig7Panel("nvw_full_stall", "stalls on a full NVW-FIFO")},
}

// layoutFuncs build the layouts of experiments whose panels depend on the
// papers' values.
var layoutFuncs = map[string]func() ([]panelLayout, error){"lin-table5": linTable5Layout}

// linTable5Layout draws the re-study's Table V: per kernel, the overhead
// of the cheapest persistency scheme (and durable transaction) the crash
// checker accepts, beside our run of the one the paper recommends (with
// the paper's value on it), and their averages.
func linTable5Layout() ([]panelLayout, error) {
	vals, err := PaperValuesFor("lin-table5")
	if err != nil {
		return nil, err
	}
	panel := func(key, title, kind, pick string, txn bool) panelLayout {
		series := []panelSeries{
			{metric: "overhead_pct", config: kind + "=*", label: "our pick"},
			{metric: "overhead_pct", config: kind, label: "our pick"},
		}
		for _, v := range vals {
			if v.Workload != "average" && strings.HasPrefix(v.Config, "undo_") == txn {
				series = append(series, panelSeries{metric: "overhead_pct", config: v.Config, label: pick, of: v.Workload})
			}
		}
		return panelLayout{key: key, title: title, series: series, workload: allWorkloads,
			xLabel: "kernel", yLabel: "overhead over the nvm baseline (%)"}
	}
	return []panelLayout{
		panel("pm_overhead_pct", "the cheapest persistency scheme the crash checker accepts", "PM", "the paper's pick (our run)", false),
		panel("dt_overhead_pct", "the cheapest durable transaction the crash checker accepts", "DT", "the paper's pick (our run)", true),
	}, nil
}

// allWorkloads keeps every workload as it is (panelLayout.workload).
func allWorkloads(w string) (string, bool) { return w, true }

// fig13Panel is a panel of COSPlay Fig. 13: bmo's Baseline, COSPlay and
// FreeSwitch over Unordered.
func fig13Panel(key, title, bmo string) panelLayout {
	return panelLayout{key: key, title: title + ": performance normalised to Unordered",
		series: []panelSeries{
			{"perf_over_unordered", bmo + " baseline", "Baseline", "", ""},
			{"perf_over_unordered", bmo + " cosplay", "COSPlay", "", ""},
			{"perf_over_unordered", bmo + " freeswitch", "FreeSwitch", "", ""},
		},
		workload: allWorkloads, xLabel: "benchmark", yLabel: "performance over Unordered (×)"}
}

// fig9Panel is a panel of COSPlay Fig. 9 for one BMO: a group per
// benchmark, a bar for Baseline and for COSPlay at windows 1 to 32.
func fig9Panel(key, title, bmo string) panelLayout {
	series := []panelSeries{{"perf_over_unordered", bmo + " baseline", "Baseline", "", ""}}
	for _, w := range []int{1, 2, 4, 8, 16, 32} {
		series = append(series, panelSeries{"perf_over_unordered", fmt.Sprintf("%s window=%d", bmo, w), fmt.Sprintf("COSPlay, window %d", w), "", ""})
	}
	return panelLayout{key: key, title: title + ": COSPlay's performance normalised to Unordered by window",
		series: series, workload: allWorkloads, xLabel: "benchmark", yLabel: "performance over Unordered (×)"}
}

// gopeFig7Panel is a panel of gope-fig7's metric: a group per NVW-FIFO
// size (L1/L2 entries), a bar per scope.
func gopeFig7Panel(metric, title string) panelLayout {
	var series []panelSeries
	for _, f := range []string{"16-64", "64-256", "256-1024"} {
		for _, sc := range []string{"workgroup", "kernel"} {
			series = append(series, panelSeries{metric, sc + "-scope/" + f, sc + " scope", strings.Replace(f, "-", "/", 1), ""})
		}
	}
	return panelLayout{key: metric, title: title, series: series, workload: allWorkloads,
		xLabel: "NVW-FIFO entries (L1/L2), the largest tree"}
}

// applyLayout returns the rows and the paper's marks of layout's panels:
// each series' rows with the panel's key as metric, the series' label as
// config and the workload renamed.
func applyLayout(layout []panelLayout, rows []Row, marks []Comparison) ([]Row, []Comparison) {
	var out []Row
	var outMarks []Comparison
	for _, l := range layout {
		for _, s := range l.series {
			match := func(metric, config, workload string) (string, string, bool) {
				w, ok := l.workload(workload)
				prefix, wild := strings.CutSuffix(s.config, "*")
				if !ok || metric != s.metric || (s.of != "" && workload != s.of) ||
					(s.config != "" && config != s.config && !(wild && strings.HasPrefix(config, prefix))) {
					return "", "", false
				}
				if s.label != "" {
					config = s.label
				}
				if s.workload != "" {
					w = s.workload
				}
				return w, config, true
			}
			for _, r := range rows {
				if w, c, ok := match(r.Metric, r.Config, r.Workload); ok {
					out = append(out, Row{r.Experiment, w, c, l.key, r.Value})
				}
			}
			for _, m := range marks {
				if w, c, ok := match(m.Metric, m.Config, m.Workload); ok {
					m.Workload, m.Config, m.Metric = w, c, l.key
					outMarks = append(outMarks, m)
				}
			}
		}
	}
	return out, outMarks
}

// apply sets the panel's title and labels, and its log scale, over the
// rows of its key.
func (l panelLayout) apply(p *plot.Plot, rows []Row) {
	p.Title.Text = l.title
	if l.yLabel != "" {
		p.Y.Label.Text = l.yLabel
	}
	p.X.Label.Text = l.xLabel
	if _, ok := p.Y.Scale.(clampedLog); ok {
		p.Y.Label.Text += ", log scale"
		return
	}
	if !l.log {
		return
	}
	var ys []float64
	for _, r := range rows {
		if r.Metric == l.key {
			ys = append(ys, r.Value)
		}
	}
	if lo, hi, ok := logRange(ys); ok {
		setLog(p, lo, hi)
	}
}

// clampedLog is a log scale on which values at or below the axis's
// minimum (a bar's base at 0) sit at the bottom.
type clampedLog struct{}

// Normalize returns the fractional position of x (plot.Normalizer).
func (clampedLog) Normalize(lo, hi, x float64) float64 {
	return plot.LogScale{}.Normalize(lo, hi, max(x, lo))
}

// baselineOf returns the config of a ratio panel that is 1 for every
// workload while others are not (the baseline the ratios are over), or ""
// where none is or several are (sbrp-fig8: gpm, epoch-far and epoch-near
// miss alike).
func baselineOf(workloads, configs []string, vals map[[2]string]float64) string {
	if len(configs) < 2 {
		return ""
	}
	base := ""
	for _, c := range configs {
		one := true
		for _, w := range workloads {
			v, ok := vals[[2]string{w, c}]
			one = one && ok && v == 1
		}
		if one && base != "" {
			return ""
		}
		if one {
			base = c
		}
	}
	return base
}

// axisLabel is the y axis's label for metric: the metric, the baseline a
// ratio is over, and its unit.
func axisLabel(metric, baseline string) string {
	name := metricWords(metric)
	if baseline != "" && !strings.Contains(name, " over ") {
		name += " over " + baseline
	}
	if u := unitOf(metric); u != "" && !strings.HasSuffix(name, u) {
		return name + " (" + u + ")"
	}
	return name
}

// unitOf is the unit of a metric, read off its name ("" where it says
// none).
func unitOf(metric string) string {
	m := strings.ToLower(metric)
	switch {
	case isRatio(m) || strings.Contains(m, "_over_") || strings.HasPrefix(m, "slowdown") || strings.Contains(m, "throughput"):
		return "×"
	case strings.HasPrefix(m, "cycles_per_"):
		return "cycles per " + strings.ReplaceAll(strings.TrimPrefix(m, "cycles_per_"), "_", " ")
	case m == "cycles" || strings.HasSuffix(m, "_cycles") || strings.HasPrefix(m, "cdf_p") || strings.HasSuffix(m, "_stall"):
		return "cycles"
	case strings.HasSuffix(m, "_us") || m == "us" || strings.HasPrefix(m, "us_per_"):
		return "µs"
	case strings.HasSuffix(m, "_ns"):
		return "ns"
	case strings.HasSuffix(m, "_ms"):
		return "ms"
	case strings.HasSuffix(m, "_per_s"):
		return "per second"
	case strings.HasSuffix(m, "_gbps") || m == "gbps":
		return "GB/s"
	case strings.HasSuffix(m, "_pct") || strings.HasSuffix(m, "_percent"):
		return "%"
	case strings.Contains(m, "page_writes_per_"):
		return strings.ReplaceAll(m[strings.Index(m, "page_writes_per_"):], "_", " ")
	case strings.Contains(m, "bytes"):
		return strings.ReplaceAll(m[strings.Index(m, "bytes"):], "_", " ")
	case strings.Contains(m, "window") || strings.Contains(m, "misses") || strings.Contains(m, "threads") ||
		strings.Contains(m, "writes") || strings.Contains(m, "count") || strings.Contains(m, "entries") ||
		m == "keys" || m == "persists" || m == "workgroups" || strings.HasPrefix(m, "depth") ||
		m == "verbs" || m == "coroutines" || m == "levels" || m == "states" || m == "batches" || m == "ops" || m == "gets" || m == "sets":
		return "count"
	case strings.HasSuffix(m, "_mib"):
		return "MiB"
	case strings.Contains(m, "syncs_per_"):
		return strings.ReplaceAll(m[strings.Index(m, "syncs_per_"):], "_", " ")
	case m == "cpu_per_wall":
		return "CPU s per wall s"
	}
	return ""
}

// addReference draws the dashed line at 1 of a ratio panel over n
// workload groups (the legend says what 1 is).
func addReference(p *plot.Plot, n int) error {
	ref := plotter.NewFunction(func(float64) float64 { return 1 })
	ref.XMin, ref.XMax = -0.5, float64(n)-0.5
	ref.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
	ref.Color = color.Gray{Y: 60}
	ref.Width = vg.Points(1)
	p.Add(ref)
	return nil
}

// relativePanel draws the values a paper states relative to another
// config ("sbrp-near over epoch-near"): ours as a grey bar each, the
// paper's as a mark. It returns the panel and the width its bars need.
func relativePanel(cmps []Comparison) (*plot.Plot, vg.Length, error) {
	p := plot.New()
	p.Title.Text = "the paper's relative values: ours (bars), the paper's (marks)"
	p.Title.TextStyle.Font.Size = 12
	p.Y.Label.Text = metricWords(cmps[0].Metric) + ", X over Y (×)"
	p.Y.Tick.Marker = compactTicks{}
	p.Y.Min = 0
	barW := vg.Points(14)
	var names []string
	v := make(plotter.Values, len(cmps))
	pm := paperMarks{width: barW}
	ymax := 1.0
	for i, c := range cmps {
		names = append(names, c.Workload+": "+c.Label())
		if len(cmps) <= 4 {
			// Few: level, on two lines, so that the panel keeps its
			// height.
			names[i] = c.Workload + ":\n" + c.Label()
		}
		v[i] = c.Ours
		pm.pts = append(pm.pts, paperMark{x: float64(i), y: c.Value})
		ymax = max(ymax, c.Ours, c.Value)
	}
	bars, err := plotter.NewBarChart(v, barW)
	if err != nil {
		return nil, 0, fmt.Errorf("%w: %w", ErrFigure, err)
	}
	bars.LineStyle.Width = 0
	bars.Color = color.Gray{Y: 150}
	p.Add(bars)
	if err := addReference(p, len(cmps)); err != nil {
		return nil, 0, err
	}
	p.Add(pm)
	p.NominalX(names...)
	p.X.Tick.Label.Font.Size = 9
	if len(cmps) > 4 {
		p.X.Tick.Label.Rotation = math.Pi / 6
		p.X.Tick.Label.XAlign = draw.XRight
		p.X.Tick.Label.YAlign = draw.YTop
	}
	p.X.Min, p.X.Max = -0.5, float64(len(cmps))-0.5
	p.Y.Max = ymax * 1.08
	return p, vg.Length(len(cmps)) * 2.5 * barW, nil
}

// dropRepeats leaves out of metrics each metric whose every value equals
// an earlier metric's at the same workload and config (micro-persist's
// durable_cycles where it is its cycles), and returns per metric kept the
// metrics it stands for.
func dropRepeats(rows []Row, metrics []string) ([]string, map[string][]string) {
	type key struct{ workload, config, metric string }
	vals := map[key]float64{}
	for _, r := range rows {
		vals[key{r.Workload, r.Config, r.Metric}] = r.Value
	}
	var kept []string
	same := map[string][]string{}
	for _, m := range metrics {
		dup := ""
		for _, k := range kept {
			all := true
			for _, r := range rows {
				if r.Metric != m {
					continue
				}
				v, ok := vals[key{r.Workload, r.Config, k}]
				all = all && ok && v == r.Value
			}
			if all {
				dup = k
				break
			}
		}
		if dup == "" {
			kept = append(kept, m)
		} else {
			same[dup] = append(same[dup], m)
		}
	}
	return kept, same
}

// extremes names the panel of a metric's minimum and maximum over the
// benchmarks (rows of workload "min" and "max"), apart from the
// benchmarks' panel.
const extremes = ": min and max over the benchmarks"

// splitExtremes moves the rows (and the paper's marks) of workloads "min"
// and "max" of a metric that also has other workloads to a metric of
// their own (metric + extremes), so that aggregates are not drawn as if
// they were benchmarks.
func splitExtremes(rows []Row, marks []Comparison) ([]Row, []Comparison) {
	other := map[string]bool{}
	for _, r := range rows {
		if r.Workload != "min" && r.Workload != "max" {
			other[r.Metric] = true
		}
	}
	move := func(workload, metric string) bool {
		return (workload == "min" || workload == "max") && other[metric]
	}
	out := slices.Clone(rows)
	for i, r := range out {
		if move(r.Workload, r.Metric) {
			out[i].Metric += extremes
		}
	}
	outMarks := slices.Clone(marks)
	for i, m := range outMarks {
		if move(m.Workload, m.Metric) {
			outMarks[i].Metric += extremes
		}
	}
	return out, outMarks
}

// groupMachines keeps a panel to at most eight colours: when rows have
// more than eight configs, all named "machine/model" with at most eight
// models, each bar group becomes a workload on one machine ("stream" over
// "pm-near") and each colour a model (micro-persist: 6 colours, not 18).
// Distributions (cdf_pNNN) are left as they are.
func groupMachines(rows []Row, marks []Comparison) ([]Row, []Comparison) {
	var configs, models []string
	for _, r := range rows {
		if strings.HasPrefix(r.Metric, cdfPrefix) {
			return rows, marks
		}
		if slices.Contains(configs, r.Config) {
			continue
		}
		configs = append(configs, r.Config)
		i := strings.LastIndex(r.Config, "/")
		if i < 0 {
			return rows, marks
		}
		if !slices.Contains(models, r.Config[i+1:]) {
			models = append(models, r.Config[i+1:])
		}
	}
	if len(configs) <= len(qualitative) || len(models) > len(qualitative) {
		return rows, marks
	}
	split := func(workload, config string) (string, string) {
		i := strings.LastIndex(config, "/")
		return workload + "\n" + config[:i], config[i+1:]
	}
	out := slices.Clone(rows)
	for i := range out {
		out[i].Workload, out[i].Config = split(out[i].Workload, out[i].Config)
	}
	outMarks := slices.Clone(marks)
	for i := range outMarks {
		if strings.Contains(outMarks[i].Config, "/") {
			outMarks[i].Workload, outMarks[i].Config = split(outMarks[i].Workload, outMarks[i].Config)
		}
	}
	return out, outMarks
}

// transposeSweep redraws a sweep of more than eight values (configs
// key=value of one key, cosplay-fig1's eleven latencies) as groups of
// bars, one per value, with a colour per workload (at most eight), so
// that no panel has more colours than the palette. It returns the key,
// or "" where rows are left as they are.
func transposeSweep(rows []Row, marks []Comparison) ([]Row, []Comparison, string) {
	var configs, workloads []string
	key := ""
	for _, r := range rows {
		if !slices.Contains(configs, r.Config) {
			configs = append(configs, r.Config)
		}
		if !slices.Contains(workloads, r.Workload) && r.Workload != "min" && r.Workload != "max" {
			workloads = append(workloads, r.Workload)
		}
		k, v, ok := strings.Cut(r.Config, "=")
		if _, err := strconv.ParseFloat(v, 64); !ok || err != nil || (key != "" && k != key) {
			return rows, marks, ""
		}
		key = k
	}
	if len(configs) <= len(qualitative) || len(workloads) > len(qualitative) {
		return rows, marks, ""
	}
	out := slices.Clone(rows)
	for i, r := range out {
		out[i].Workload, out[i].Config = strings.TrimPrefix(r.Config, key+"="), r.Workload
	}
	outMarks := slices.Clone(marks)
	for i, m := range outMarks {
		if v, ok := strings.CutPrefix(m.Config, key+"="); ok {
			outMarks[i].Workload, outMarks[i].Config = v, m.Workload
		}
	}
	return out, outMarks, key
}

// sweepWords names a swept key on an axis.
func sweepWords(key string) string {
	if w, ok := sweepNames[key]; ok {
		return w
	}
	return key
}

// sweepNames are the words for the keys experiments sweep.
var sweepNames = map[string]string{
	"bmo": "persist latency added at the memory controller (cycles)",
}

// sweepValues say a config key=value of a sweep in words (nameSweep):
// the words before and after the value.
var sweepValues = map[string][2]string{
	"persist.buffer_entries": {"", " persist-buffer entries"},
	"nvm_bandwidth_pct":      {"NVM bandwidth ", "%"},
	"persist.window":         {"flush window of ", ""},
	"threads":                {"threads: ", ""},
}

// nameSweep renames configs key=value, all of one key that sweepValues
// has, in words (sbrp-fig10b's nvm_bandwidth_pct=50: NVM bandwidth 50%).
func nameSweep(rows []Row, marks []Comparison) ([]Row, []Comparison) {
	key := ""
	for _, r := range rows {
		k, _, ok := strings.Cut(r.Config, "=")
		if _, known := sweepValues[k]; !ok || !known || (key != "" && k != key) {
			return rows, marks
		}
		key = k
	}
	words := sweepValues[key]
	name := func(c string) string {
		v, ok := strings.CutPrefix(c, key+"=")
		if !ok {
			return c
		}
		return words[0] + v + words[1]
	}
	out := slices.Clone(rows)
	for i := range out {
		out[i].Config = name(out[i].Config)
	}
	outMarks := slices.Clone(marks)
	for i := range outMarks {
		outMarks[i].Config = name(outMarks[i].Config)
	}
	return out, outMarks
}

// derivedPrefix names the metric of a config that is one config's value
// over another's (splitDerived): derivedPrefix + the config.
const derivedPrefix = "ratio "

// splitDerived moves the rows of a config named "a/b" whose every value
// is the value of the config ending in " a" over that of the config
// ending in " b" at its workload and metric (hw-validate's model/measured
// beside "h100 model" and "h100 measured") to a panel of their own, a
// group per workload and metric: a ratio drawn on its own axis, not on the
// cycles or GB/s of the values it divides.
func splitDerived(rows []Row) []Row {
	type key struct{ workload, config, metric string }
	vals := map[key]float64{}
	var configs []string
	for _, r := range rows {
		vals[key{r.Workload, r.Config, r.Metric}] = r.Value
		if !slices.Contains(configs, r.Config) {
			configs = append(configs, r.Config)
		}
	}
	end := func(suffix string) string {
		for _, c := range configs {
			if strings.HasSuffix(c, " "+suffix) {
				return c
			}
		}
		return ""
	}
	var derived []string
	for _, c := range configs {
		a, b, ok := strings.Cut(c, "/")
		num, den := end(a), end(b)
		if !ok || num == "" || den == "" {
			continue
		}
		all := true
		for _, r := range rows {
			if r.Config != c {
				continue
			}
			n, ok1 := vals[key{r.Workload, num, r.Metric}]
			d, ok2 := vals[key{r.Workload, den, r.Metric}]
			all = all && ok1 && ok2 && d != 0 && math.Abs(n/d-r.Value) <= 1e-4*math.Abs(r.Value)
		}
		if all {
			derived = append(derived, c)
		}
	}
	if len(derived) == 0 {
		return rows
	}
	out := slices.Clone(rows)
	for i, r := range out {
		if slices.Contains(derived, r.Config) {
			out[i].Workload = r.Workload + " (" + metricWords(r.Metric) + ")"
			out[i].Metric = derivedPrefix + r.Config
		}
	}
	// The ratios' panel last.
	slices.SortStableFunc(out, func(x, y Row) int {
		return cmpBool(strings.HasPrefix(x.Metric, derivedPrefix), strings.HasPrefix(y.Metric, derivedPrefix))
	})
	return out
}

func cmpBool(a, b bool) int {
	switch {
	case a == b:
		return 0
	case a:
		return 1
	}
	return -1
}
