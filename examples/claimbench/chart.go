package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"html"
	"math"
	"os"
	"slices"
	"strings"
)

// Chart geometry, in SVG user units.
const (
	panelW, panelH = 440, 250
	marginL        = 70 // room for the y tick labels
	marginT        = 40 // the engine's title
	marginB        = 40 // the x tick labels
	legendRowH     = 16
	gap            = 40 // between the two panels
)

// palette colours the series of a chart, in order of first appearance.
var palette = []string{"#222222", "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#17becf"}

// readResults reads -json output (one result per line; other lines, such
// as pickup latency results, are kept and ignored by the chart).
func readResults(files []string) ([]result, error) {
	var out []result
	for _, name := range files {
		f, err := os.Open(strings.TrimSpace(name))
		if err != nil {
			return nil, err
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
		for line := 1; sc.Scan(); line++ {
			text := strings.TrimSpace(sc.Text())
			if text == "" {
				continue
			}
			var r result
			if err := json.Unmarshal([]byte(text), &r); err != nil {
				f.Close()
				return nil, fmt.Errorf("%s:%d: %w", name, line, err)
			}
			out = append(out, r)
		}
		err = sc.Err()
		f.Close()
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

// engineChart is one engine's results: its series by name, each a value
// per worker count.
type engineChart struct {
	title   string
	workers []int
	series  []string
	rate    map[string]map[int]float64
	ratio   map[string]map[int]float64
}

// seriesName labels a result's line: its measure, and the strategy for
// library measures.
func seriesName(r result) string {
	if r.Strategy == "" {
		return r.Measure
	}
	return r.Measure + "/" + r.Strategy
}

// groupCharts groups the throughput results by engine, in order of first
// appearance. A later result for the same engine, series and worker count
// replaces an earlier one.
func groupCharts(results []result) []*engineChart {
	var charts []*engineChart
	byEngine := map[string]*engineChart{}
	for _, r := range results {
		switch r.Measure {
		case measureCeiling, measureBatched, measureLater, measurePerRow, measurePiped, measureDelete, measurePipedDel, measureHeld, measureHeldDel, measureAdvisory, measureAdvisoryDel:
		default:
			continue
		}
		key := r.Engine + " " + r.Version
		c := byEngine[key]
		if c == nil {
			c = &engineChart{
				title: fmt.Sprintf("%s %s: batch %d, %d rows, %s", r.Engine, r.Version, r.Batch, r.Rows, r.Date),
				rate:  map[string]map[int]float64{}, ratio: map[string]map[int]float64{},
			}
			byEngine[key] = c
			charts = append(charts, c)
		}
		name := seriesName(r)
		if c.rate[name] == nil {
			c.series = append(c.series, name)
			c.rate[name], c.ratio[name] = map[int]float64{}, map[int]float64{}
		}
		c.rate[name][r.Workers] = r.RowsPerS
		if r.Measure == measureCeiling {
			c.ratio[name][r.Workers] = 1
		} else {
			c.ratio[name][r.Workers] = r.Ratio
		}
		if !slices.Contains(c.workers, r.Workers) {
			c.workers = append(c.workers, r.Workers)
		}
	}
	for _, c := range charts {
		slices.Sort(c.workers)
	}
	return charts
}

// writeChart draws results as an SVG file: per engine, rows/s and the
// ratio to the same run's ceiling against the worker count, one line per
// measure and strategy.
func writeChart(path string, results []result) error {
	charts := groupCharts(results)
	if len(charts) == 0 {
		return errors.New("-chart: no throughput results to draw")
	}
	var b strings.Builder
	width := marginL + panelW + gap + marginL + panelW + 20
	var heights []int
	height := 0
	for _, c := range charts {
		h := marginT + panelH + marginB + legendRowH*((len(c.series)+2)/3) + 20
		heights = append(heights, h)
		height += h
	}
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="11">`+"\n", width, height, width, height)
	fmt.Fprintf(&b, `<rect width="%d" height="%d" fill="white"/>`+"\n", width, height)
	y := 0
	for i, c := range charts {
		fmt.Fprintf(&b, `<text x="10" y="%d" font-size="13" font-weight="bold">%s</text>`+"\n", y+18, html.EscapeString(c.title))
		top := y + marginT
		drawPanel(&b, c, c.rate, marginL, top, "rows/s", "%.0f", false)
		drawPanel(&b, c, c.ratio, marginL+panelW+gap+marginL, top, "ratio to the ceiling", "%.2f", true)
		ly := top + panelH + marginB
		for j, name := range c.series {
			x := 10 + (j%3)*((width-20)/3)
			row := ly + (j/3)*legendRowH
			fmt.Fprintf(&b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="%s" stroke-width="2"/>`, x, row, x+20, row, colour(j))
			fmt.Fprintf(&b, `<text x="%d" y="%d">%s</text>`+"\n", x+26, row+4, html.EscapeString(name))
		}
		y += heights[i]
	}
	b.WriteString("</svg>\n")
	return os.WriteFile(path, []byte(b.String()), 0o644)
}

func colour(i int) string { return palette[i%len(palette)] }

// drawPanel draws one panel of values by series and worker count with its
// top-left corner at (x0, y0). With unit, the y axis reaches at least 1 and
// a dashed line marks 1 (the ceiling).
func drawPanel(b *strings.Builder, c *engineChart, values map[string]map[int]float64, x0, y0 int, label, tick string, unit bool) {
	top := 0.0
	for _, m := range values {
		for _, v := range m {
			top = math.Max(top, v)
		}
	}
	if unit {
		top = math.Max(top, 1)
	}
	top = niceCeil(top * 1.05)
	px := func(k int) float64 {
		if len(c.workers) == 1 {
			return float64(x0) + panelW/2
		}
		return float64(x0) + 20 + float64(k)*(panelW-40)/float64(len(c.workers)-1)
	}
	py := func(v float64) float64 { return float64(y0) + panelH - v/top*panelH }
	fmt.Fprintf(b, `<rect x="%d" y="%d" width="%d" height="%d" fill="none" stroke="#999"/>`+"\n", x0, y0, panelW, panelH)
	for t := range 6 {
		v := top * float64(t) / 5
		fmt.Fprintf(b, `<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#eee"/>`, x0, py(v), x0+panelW, py(v))
		fmt.Fprintf(b, `<text x="%d" y="%.1f" text-anchor="end">`+tick+`</text>`+"\n", x0-4, py(v)+4, v)
	}
	if unit {
		fmt.Fprintf(b, `<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#222" stroke-dasharray="4 3"/>`+"\n", x0, py(1), x0+panelW, py(1))
	}
	for k, w := range c.workers {
		fmt.Fprintf(b, `<text x="%.1f" y="%d" text-anchor="middle">%d</text>`, px(k), y0+panelH+14, w)
	}
	fmt.Fprintf(b, `<text x="%d" y="%d" text-anchor="middle">workers</text>`+"\n", x0+panelW/2, y0+panelH+30)
	fmt.Fprintf(b, `<text x="%d" y="%d" text-anchor="middle" transform="rotate(-90 %d %d)">%s</text>`+"\n",
		x0-52, y0+panelH/2, x0-52, y0+panelH/2, html.EscapeString(label))
	for j, name := range c.series {
		var pts []string
		for k, w := range c.workers {
			v, ok := values[name][w]
			if !ok {
				continue
			}
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", px(k), py(v)))
			fmt.Fprintf(b, `<circle cx="%.1f" cy="%.1f" r="3" fill="%s"><title>%s, %d workers: `+tick+`</title></circle>`,
				px(k), py(v), colour(j), html.EscapeString(name), w, v)
		}
		if len(pts) > 1 {
			fmt.Fprintf(b, `<polyline points="%s" fill="none" stroke="%s" stroke-width="2"/>`, strings.Join(pts, " "), colour(j))
		}
		b.WriteString("\n")
	}
}

// niceCeil rounds v up to 1, 2 or 5 times a power of ten.
func niceCeil(v float64) float64 {
	if v <= 0 {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 2, 5, 10} {
		if m*p >= v {
			return m * p
		}
	}
	return 10 * p
}
