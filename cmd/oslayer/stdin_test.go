package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// --osc - reads the OSC from standard input: the same image as from the
// file; standard input can be given once.
func TestOSCFromStdin(t *testing.T) {
	osc := example(t, "gardener", "worker-osc.yaml")
	data, err := os.ReadFile(osc)
	if err != nil {
		t.Fatal(err)
	}
	build := func(stdin []byte, oscs ...string) (string, error) {
		args := []string{"build", "--base", "oci:" + example(t, "base"), "--pool", "worker", "--push", "oci:" + filepath.Join(t.TempDir(), "o")}
		for _, o := range oscs {
			args = append(args, "--osc", o)
		}
		stdout, _, err := runCLIIO(t, stdin, args...)
		_, d, _ := strings.Cut(strings.TrimSpace(stdout), "@")
		return d, err
	}
	fromFile, err := build(nil, osc)
	if err != nil {
		t.Fatal(err)
	}
	fromStdin, err := build(data, "-")
	if err != nil || fromStdin != fromFile {
		t.Errorf("--osc -: %s (%v), from the file: %s", fromStdin, err, fromFile)
	}
	if _, err := build(data, "-", "-"); err == nil || !strings.Contains(err.Error(), "standard input can be given once") {
		t.Errorf("--osc - twice: %v", err)
	}
}
