package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A sweep becomes an SVG chart; a malformed line is an error naming it.
func TestChart(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "sweep.csv")
	out := filepath.Join(dir, "sweep.svg")
	csv := "rtt_ms,oslayer_s,oslayer_requests,crane_s,crane_requests\n0,0.1,11,0.2,414\n30,0.5,11,5.6,414\n"
	if err := os.WriteFile(in, []byte(csv), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := run(in, out); err != nil {
		t.Fatal(err)
	}
	svg, err := os.ReadFile(out)
	if err != nil || !strings.Contains(string(svg), "<svg") || !strings.Contains(string(svg), "crane append") {
		t.Fatalf("chart: %v\n%.300s", err, svg)
	}
	if err := os.WriteFile(in, []byte(csv+"100,x,1,2,3\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := run(in, out); err == nil || !strings.Contains(err.Error(), "line 4") {
		t.Errorf("malformed line: %v", err)
	}
}
