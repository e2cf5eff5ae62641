package charttest

import (
	"bytes"
	"fmt"
	"html/template"
	"math"
	"strings"
	"testing"
	"time"
)

// The rendered page: Grafana's grid of 24 columns and 30 px rows, on a page this wide.
const (
	pageWidth  = 1560
	gridMargin = 8
	gridRow    = 30
	titleSpace = 64
)

// The plot inside a panel: room for the title above, the y axis' labels left, the time axis and
// the legend below.
const (
	plotTop    = 30
	plotLeft   = 64
	plotRight  = 12
	plotBottom = 22
	legendLine = 16
)

// palette is Grafana's classic series palette, in its order.
var palette = []string{"#7EB26D", "#EAB839", "#6ED0E0", "#EF843C", "#E24D42", "#1F78C1", "#BA43A9", "#705DA0", "#508642", "#CCA300"}

// renderDashboard draws the dashboard's rows and time series panels, at their grid positions,
// from the series the queries answered: an HTML page of SVG plots in Grafana's dark theme.
func renderDashboard(d grafanaDashboard, start, end time.Time) []byte {
	col := float64(pageWidth-2*gridMargin) / 24
	var boxes []panelBox
	height := 0
	for _, p := range d.Panels {
		b := panelBox{Title: p.Title, Row: p.Type == "row",
			X: gridMargin + int(float64(p.GridPos.X)*col), Y: titleSpace + p.GridPos.Y*gridRow,
			W: int(float64(p.GridPos.W)*col) - gridMargin, H: p.GridPos.H*gridRow - gridMargin}
		if !b.Row {
			b.SVG = template.HTML(plot(p, b.W, b.H, start, end))
		}
		boxes = append(boxes, b)
		height = max(height, b.Y+b.H+gridMargin)
	}
	var out bytes.Buffer
	err := page.Execute(&out, map[string]any{"Title": d.Title, "Boxes": boxes, "Width": pageWidth, "Height": height,
		"From": start.UTC().Format("2006-01-02 15:04:05"), "To": end.UTC().Format("15:04:05 MST")})
	if err != nil {
		panic(err) // the template is fixed: an error is a bug here
	}
	return out.Bytes()
}

type panelBox struct {
	Title      string
	Row        bool
	X, Y, W, H int
	SVG        template.HTML
}

var page = template.Must(template.New("dashboard").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>{{.Title}}</title>
<style>
body { margin: 0; background: #111217; color: #ccccdc; font: 12px/1.4 "Inter", "Helvetica", "Arial", sans-serif; }
#dashboard { position: relative; width: {{.Width}}px; height: {{.Height}}px; }
header { position: absolute; left: 8px; top: 12px; right: 8px; display: flex; justify-content: space-between; }
header h1 { margin: 0; font-size: 18px; font-weight: 500; color: #ccccdc; }
header span { color: #8e8e9e; }
.row { position: absolute; font-size: 14px; font-weight: 500; color: #ccccdc; padding-top: 6px; }
.panel { position: absolute; background: #181b1f; border: 1px solid #2c3235; border-radius: 2px; }
.panel h2 { position: absolute; left: 8px; top: 6px; margin: 0; font-size: 13px; font-weight: 500; color: #ccccdc; }
svg { position: absolute; left: 0; top: 0; }
svg text { fill: #9fa7b3; font-size: 11px; }
</style></head>
<body><div id="dashboard">
<header><h1>Dashboards / pmx / {{.Title}}</h1><span>namespace pmx · release pmx · {{.From}} to {{.To}}</span></header>
{{range .Boxes}}{{if .Row}}<div class="row" style="left:{{.X}}px;top:{{.Y}}px;width:{{.W}}px">⌄ {{.Title}}</div>
{{else}}<div class="panel" style="left:{{.X}}px;top:{{.Y}}px;width:{{.W}}px;height:{{.H}}px"><h2>{{.Title}}</h2>{{.SVG}}</div>
{{end}}{{end}}</div></body></html>
`))

// plot draws a panel's series as lines over [start, end], its y axis from 0 (the panels' minimum)
// to a round maximum in the panel's unit, with a legend of its series below.
func plot(p grafanaPanel, w, h int, start, end time.Time) string {
	var b strings.Builder
	fmt.Fprintf(&b, `<svg width="%d" height="%d" xmlns="http://www.w3.org/2000/svg">`, w, h)
	legendRows := min(len(p.series), 4)
	bottom := h - plotBottom - legendRows*legendLine
	right := w - plotRight
	if len(p.series) == 0 {
		fmt.Fprintf(&b, `<text x="%d" y="%d" text-anchor="middle" style="font-size:14px">No data</text></svg>`, w/2, h/2)
		return b.String()
	}
	top := 0.0
	for _, s := range p.series {
		for _, v := range s.Values {
			if !math.IsNaN(v) && !math.IsInf(v, 0) {
				top = max(top, v)
			}
		}
	}
	step := niceStep(top)
	top = math.Max(step, math.Ceil(top/step)*step)
	t0, t1 := float64(start.UnixMilli())/1000, float64(end.UnixMilli())/1000
	x := func(t float64) float64 { return plotLeft + (t-t0)/(t1-t0)*float64(right-plotLeft) }
	y := func(v float64) float64 { return float64(bottom) - v/top*float64(bottom-plotTop) }
	for v := 0.0; v <= top+step/2; v += step {
		fmt.Fprintf(&b, `<line x1="%d" x2="%d" y1="%.1f" y2="%.1f" stroke="#2c3235"/>`, plotLeft, right, y(v), y(v))
		fmt.Fprintf(&b, `<text x="%d" y="%.1f" text-anchor="end">%s</text>`, plotLeft-6, y(v)+4, template.HTMLEscapeString(format(v, p.FieldConfig.Defaults.Unit)))
	}
	for tick := math.Ceil(t0/10) * 10; tick <= t1; tick += 10 {
		fmt.Fprintf(&b, `<text x="%.1f" y="%d" text-anchor="middle">%s</text>`, x(tick), bottom+15, time.Unix(int64(tick), 0).UTC().Format("15:04:05"))
	}
	for i, s := range p.series {
		var path strings.Builder
		pen := "M"
		for j, t := range s.Times {
			v := s.Values[j]
			if math.IsNaN(v) || math.IsInf(v, 0) {
				pen = "M"
				continue
			}
			fmt.Fprintf(&path, "%s%.1f,%.1f ", pen, x(t), y(v))
			pen = "L"
		}
		color := palette[i%len(palette)]
		fmt.Fprintf(&b, `<path d="%s" fill="none" stroke="%s" stroke-width="1.5"/>`, path.String(), color)
		if i < legendRows {
			ly := bottom + plotBottom + i*legendLine + 8
			name := s.Legend
			if i == legendRows-1 && len(p.series) > legendRows {
				name += fmt.Sprintf("  (+%d more)", len(p.series)-legendRows)
			}
			fmt.Fprintf(&b, `<rect x="%d" y="%d" width="14" height="3" fill="%s"/><text x="%d" y="%d">%s</text>`,
				plotLeft, ly-4, color, plotLeft+20, ly, template.HTMLEscapeString(name))
		}
	}
	b.WriteString(`</svg>`)
	return b.String()
}

// niceStep is a round tick step that divides [0, top] into about four.
func niceStep(top float64) float64 {
	if top <= 0 {
		return 1
	}
	raw := top / 4
	mag := math.Pow(10, math.Floor(math.Log10(raw)))
	for _, m := range []float64{1, 2, 2.5, 5, 10} {
		if raw <= m*mag {
			return m * mag
		}
	}
	return 10 * mag
}

// format writes v in a Grafana unit as the panels use them.
func format(v float64, unit string) string {
	switch unit {
	case "s":
		switch {
		case v == 0:
			return "0 s"
		case v < 1e-3:
			return trim(v*1e6) + " µs"
		case v < 1:
			return trim(v*1e3) + " ms"
		}
		return trim(v) + " s"
	case "percentunit":
		return trim(v*100) + "%"
	case "reqps":
		return short(v) + " req/s"
	case "ops":
		return short(v) + " ops/s"
	}
	return short(v)
}

func short(v float64) string {
	switch {
	case v >= 1e6:
		return trim(v/1e6) + " M"
	case v >= 1e3:
		return trim(v/1e3) + " K"
	}
	return trim(v)
}

func trim(v float64) string {
	return strings.TrimSuffix(strings.TrimRight(fmt.Sprintf("%.2f", v), "0"), ".")
}

// TestRenderUnits checks the axis labels in the panels' units and the legend's label filling.
func TestRenderUnits(t *testing.T) {
	for _, c := range []struct {
		v    float64
		unit string
		want string
	}{
		{0, "s", "0 s"}, {0.0004, "s", "400 µs"}, {0.0125, "s", "12.5 ms"}, {2, "s", "2 s"},
		{0.25, "percentunit", "25%"}, {1500, "reqps", "1.5 K req/s"}, {750, "ops", "750 ops/s"},
		{2_000_000, "short", "2 M"}, {3, "short", "3"},
	} {
		if got := format(c.v, c.unit); got != c.want {
			t.Errorf("format(%v, %q) = %q, want %q", c.v, c.unit, got, c.want)
		}
	}
	for top, want := range map[float64]float64{0: 1, 1: 0.25, 7: 2, 950: 250, 1800: 500, 30: 10} {
		if got := niceStep(top); got != want {
			t.Errorf("niceStep(%v) = %v, want %v", top, got, want)
		}
	}
	if got := legend("p99 {{route}} {{ code }}", map[string]string{"route": "/api/v1/order", "code": "201"}); got != "p99 /api/v1/order 201" {
		t.Errorf("legend: %q", got)
	}
}
