package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/oslayer/oslayer/test/fixtures"
)

// --osc - reads the OSC from standard input: the same image as from the
// file; standard input can be given once.
func TestOSCFromStdin(t *testing.T) {
	root, err := fixtures.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	osc := filepath.Join(root, "examples", "gardener", "worker-osc.yaml")
	data, err := os.ReadFile(osc)
	if err != nil {
		t.Fatal(err)
	}
	build := func(stdin []byte, oscs ...string) (string, error) {
		cmd := newRootCmd()
		var out, errb bytes.Buffer
		cmd.SetIn(bytes.NewReader(stdin))
		cmd.SetOut(&out)
		cmd.SetErr(&errb)
		args := []string{"build", "--base", "oci:" + filepath.Join(root, "examples", "base"), "--pool", "worker", "--push", "oci:" + filepath.Join(t.TempDir(), "o")}
		for _, o := range oscs {
			args = append(args, "--osc", o)
		}
		cmd.SetArgs(args)
		err := cmd.ExecuteContext(context.Background())
		_, d, _ := strings.Cut(strings.TrimSpace(out.String()), "@")
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
