package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/oslayer/oslayer/test/regtest"
	"github.com/oslayer/oslayer/test/synth"
)

// oslayerRun runs the command line args in this process and returns its
// exit code, stdout and stderr.
func oslayerRun(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	root := newRootCmd()
	var out, errOut bytes.Buffer
	root.SetArgs(args)
	root.SetOut(&out)
	root.SetErr(&errOut)
	code := run(root, &errOut)
	return code, out.String(), errOut.String()
}

// base-index publish reads the base once and pushes its index next to it;
// run again it finds the index there and reads no base layer. A layout
// reference is bad input: exit 2, nothing sent.
func TestBaseIndexPublish(t *testing.T) {
	reg := regtest.Memory(t) // the proxy counts what the command reads
	px := regtest.NewProxy(t, reg.Host)
	img, err := synth.FCOSBase(0.001)
	if err != nil {
		t.Fatal(err)
	}
	_, err = synth.Push(context.Background(), img, reg.Host+"/os/fcos:stable")
	if err != nil {
		t.Fatal(err)
	}
	m, err := img.Manifest()
	if err != nil {
		t.Fatal(err)
	}
	layerGets := func() int {
		n := 0
		for _, r := range px.Requests() {
			if r.Method == "GET" && strings.Contains(r.Path, "/blobs/") {
				for _, l := range m.Layers {
					if strings.HasSuffix(r.Path, l.Digest.String()) {
						n++
					}
				}
			}
		}
		return n
	}
	ref := px.Host + "/os/fcos:stable"
	for i, want := range []struct {
		out  string
		gets int
	}{{"published to " + px.Host + "/os/fcos:sha256-", len(m.Layers)}, {"already in the registry", 0}} {
		px.Reset()
		code, out, errOut := oslayerRun(t, "base-index", "publish", ref, "--base-index-cache", t.TempDir())
		if code != 0 || !strings.Contains(out, want.out) {
			t.Fatalf("run %d: exit %d, stdout %q, stderr %q; want %q", i+1, code, out, errOut, want.out)
		}
		if got := layerGets(); got != want.gets {
			t.Errorf("run %d: %d base layer reads, want %d", i+1, got, want.gets)
		}
	}
	px.Reset()
	code, _, errOut := oslayerRun(t, "base-index", "publish", "oci:/nowhere:x")
	if code != 2 || !strings.Contains(errOut, "give a registry reference") || len(px.Requests()) != 0 {
		t.Errorf("layout base: exit %d, stderr %q, %d requests; want 2, a message, none", code, errOut, len(px.Requests()))
	}
}
