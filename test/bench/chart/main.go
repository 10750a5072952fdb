// Command chart draws the WAN benchmark's round-trip sweep (the CSV
// BenchmarkWAN writes with -bench.wan-csv) as an SVG line chart with
// gonum/plot: build time of a changed pool pushed with a tag into its
// base's repository, oslayer and crane append, against the round trip.
// It is a module of its own so that the plotting library stays out of
// oslayer's dependencies.
//
//	go run . SWEEP.csv OUT.svg
package main

import (
	"encoding/csv"
	"fmt"
	"os"
	"strconv"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
)

func main() {
	if len(os.Args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: chart SWEEP.csv OUT.svg")
		os.Exit(2)
	}
	if err := run(os.Args[1], os.Args[2]); err != nil {
		fmt.Fprintln(os.Stderr, "chart:", err)
		os.Exit(1)
	}
}

// run reads the sweep and writes the chart.
func run(in, out string) error {
	oslayer, crane, err := read(in)
	if err != nil {
		return err
	}
	p := plot.New()
	p.Title.Text = "Changed pool, tag in the base's repository (400-layer base)"
	p.X.Label.Text = "round trip (ms)"
	p.Y.Label.Text = "build and push (s)"
	if err := plotutil.AddLinePoints(p, "oslayer build", oslayer, "crane append", crane); err != nil {
		return err
	}
	p.Legend.Top = true
	p.Legend.Left = true
	return p.Save(7*vg.Inch, 4*vg.Inch, out)
}

// read parses rtt_ms,oslayer_s,oslayer_requests,crane_s,crane_requests
// lines (after a header).
func read(path string) (oslayer, crane plotter.XYs, err error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	rows, err := csv.NewReader(f).ReadAll()
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", path, err)
	}
	if len(rows) < 2 {
		return nil, nil, fmt.Errorf("%s: no data rows", path)
	}
	for i, r := range rows[1:] {
		if len(r) < 5 {
			return nil, nil, fmt.Errorf("%s: line %d: want 5 fields, got %d", path, i+2, len(r))
		}
		var v [3]float64
		for j, k := range []int{0, 1, 3} {
			if v[j], err = strconv.ParseFloat(r[k], 64); err != nil {
				return nil, nil, fmt.Errorf("%s: line %d: %w", path, i+2, err)
			}
		}
		oslayer = append(oslayer, plotter.XY{X: v[0], Y: v[1]})
		crane = append(crane, plotter.XY{X: v[0], Y: v[2]})
	}
	return oslayer, crane, nil
}
