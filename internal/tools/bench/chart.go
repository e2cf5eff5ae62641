package bench

import (
	"errors"
	"fmt"
	"image/color"
	"math"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// Colours that stay apart for colour-blind readers (Okabe and Ito).
var (
	p50Colour  = color.RGBA{R: 0, G: 114, B: 178, A: 255}
	p99Colour  = color.RGBA{R: 213, G: 94, B: 0, A: 255}
	gridColour = color.Gray{Y: 215}
	noteColour = color.Gray{Y: 90}
)

// WriteChart draws the placement latency (p50 and p99) of the open-loop runs against their
// offered load into path, each point labelled with the throughput achieved; the format follows
// the extension (.png, .svg, .pdf). Latency is on a log scale, since past saturation an open-loop
// run's latency grows by orders of magnitude.
func (r *Result) WriteChart(path string) error {
	var p50, p99 plotter.XYs
	var achieved []string
	for _, x := range r.Runs {
		if x.Mode != "open" || x.Orders == 0 {
			continue
		}
		// The axis is linear in log10(ms): plot's own log scale misplaces the axis label.
		p50 = append(p50, plotter.XY{X: x.OfferedRate, Y: math.Log10(msOf(x.P50Us))})
		p99 = append(p99, plotter.XY{X: x.OfferedRate, Y: math.Log10(msOf(x.P99Us))})
		achieved = append(achieved, formatCount(x.OrdersPerSec)+"/s")
	}
	if len(p50) < 2 {
		return errors.New("bench: a chart needs at least two open-loop runs (--sweep)")
	}

	p := plot.New()
	p.Title.Text = fmt.Sprintf("Placement latency against offered load: pmx dev on Postgres with fsync %s, %d cores\n"+
		"open loop, %d bots, %d markets, %s per point; under each point the orders/s achieved",
		r.Machine.Postgres.Fsync, r.Machine.Cores, r.Bots, r.Markets, time.Duration(r.DurationSeconds*float64(time.Second)))
	p.Title.TextStyle.Font.Size = vg.Points(13)
	p.Title.Padding = vg.Points(10)
	p.X.Label.Text = "offered load (order placements per second)"
	p.Y.Label.Text = "placement latency (ms, log scale)"
	for _, a := range []*plot.Axis{&p.X, &p.Y} {
		a.Label.TextStyle.Font.Size = vg.Points(12)
		a.Tick.Label.Font.Size = vg.Points(11)
	}
	p.Y.Tick.Marker = logTicks{}
	// Ticks at the offered rates: each point sits on its label.
	xticks := []plot.Tick{{Value: 0, Label: "0"}}
	for _, xy := range p50 {
		xticks = append(xticks, plot.Tick{Value: xy.X, Label: formatCount(xy.X)})
	}
	p.X.Tick.Marker = plot.ConstantTicks(xticks)
	// Bottom right: latency rises with load, so that corner stays empty.
	p.Legend.Top, p.Legend.Left = false, false
	p.Legend.XOffs, p.Legend.YOffs = -vg.Points(10), vg.Points(10)
	p.Legend.TextStyle.Font.Size = vg.Points(12)
	p.Legend.Padding = vg.Points(5)

	grid := plotter.NewGrid()
	grid.Vertical.Color, grid.Horizontal.Color = gridColour, gridColour
	p.Add(grid)
	for _, s := range []struct {
		name   string
		xys    plotter.XYs
		colour color.Color
		shape  draw.GlyphDrawer
	}{{"p50", p50, p50Colour, draw.CircleGlyph{}}, {"p99", p99, p99Colour, draw.BoxGlyph{}}} {
		l, pts, err := plotter.NewLinePoints(s.xys)
		if err != nil {
			return err
		}
		l.Color, l.Width = s.colour, vg.Points(2)
		pts.Color, pts.Shape, pts.Radius = s.colour, s.shape, vg.Points(3.5)
		p.Add(l, pts)
		p.Legend.Add("placement latency "+s.name, l, pts)
	}
	labels, err := plotter.NewLabels(plotter.XYLabels{XYs: p50, Labels: achieved})
	if err != nil {
		return err
	}
	for i := range labels.TextStyle {
		labels.TextStyle[i].Color = noteColour
		labels.TextStyle[i].Font.Size = vg.Points(10)
		labels.TextStyle[i].XAlign = draw.XCenter
	}
	labels.Offset = vg.Point{Y: -vg.Points(18)}
	p.Add(labels)

	p.X.Min, p.X.Max = 0, p.X.Max*1.06
	p.Y.Min, p.Y.Max = p.Y.Min-0.35, p.Y.Max+0.25
	return p.Save(10*vg.Inch, 6*vg.Inch, path)
}

func msOf(us int64) float64 { return math.Max(float64(us), 1) / 1000 }

// logTicks marks an axis of log10 values at 1, 2 and 5 times each power of ten, labelled with
// the value itself, and with unlabelled minor ticks between.
type logTicks struct{}

func (logTicks) Ticks(lo, hi float64) []plot.Tick {
	var ticks []plot.Tick
	for e := math.Floor(lo); e <= math.Ceil(hi); e++ {
		for m := 1; m <= 9; m++ {
			v := float64(m) * math.Pow(10, e)
			lv := math.Log10(v)
			if lv < lo || lv > hi {
				continue
			}
			t := plot.Tick{Value: lv}
			if m == 1 || m == 2 || m == 5 {
				t.Label = trimFloat(v)
			}
			ticks = append(ticks, t)
		}
	}
	return ticks
}

// trimFloat prints v without trailing zeros, with thousands separators from 1,000.
func trimFloat(v float64) string {
	if v >= 1000 {
		return formatCount(v)
	}
	return fmt.Sprintf("%.4g", v)
}
