package v1alpha1

import (
	"bytes"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
)

// TestDeepCopyGenerated runs the go:generate directive of doc.go with
// another output file and fails when zz_generated.deepcopy.go differs
// from what it gives (a type changed without `go generate`).
func TestDeepCopyGenerated(t *testing.T) {
	doc, err := os.ReadFile("doc.go")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^//go:generate go run (\S+@v\S+) (.*) --output-file zz_generated\.deepcopy\.go \.$`).FindSubmatch(doc)
	if m == nil {
		t.Fatal("doc.go has no go:generate directive running a pinned deepcopy-gen")
	}
	const out = "zz_check.deepcopy.go"
	t.Cleanup(func() { os.Remove(out) })
	args := append([]string{"run", string(m[1])}, append(strings.Fields(string(m[2])), "--output-file", out, ".")...)
	cmd := exec.Command("go", args...)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go %v: %v\n%s", args, err, b)
	}
	want, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile("zz_generated.deepcopy.go")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("zz_generated.deepcopy.go is not what %s generates: run go generate in %s", m[1], "extension/pkg/apis/config/v1alpha1")
	}
}
