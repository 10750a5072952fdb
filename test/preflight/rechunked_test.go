package preflight_test

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/oslayer/oslayer/preflight"
	"github.com/oslayer/oslayer/test/regtest"
	"github.com/oslayer/oslayer/test/synth"
)

const rechunkedOSC = `  - path: /etc/motd.d/pool
    permissions: 420
    content:
      inline: {data: "built on a rechunked base\n"}
`

// TestRechunkedBase: a base shaped like a chunkah-rechunked Fedora CoreOS
// (400 layers, no ostree.commit or ostree.final-diffid) builds through a
// real registry with every check run and passing (the layer count above
// 127 a warning); skopeo reads the result; `oslayer preflight` of the built
// image runs every check, with --base and without it (the added layers
// from oslayer's history entries). On a 600-layer base the build fails
// naming the limit and moves no tag, unless --max-layers allows it.
func TestRechunkedBase(t *testing.T) {
	skopeo := regtest.Require(t, "skopeo")
	reg := regtest.Start(t, regtest.Config{})
	base, err := synth.ChunkahBase(400)
	if err != nil {
		t.Fatal(err)
	}
	baseRef := push(t, base, reg.Host+"/fcos/next:rechunked")
	osc := filepath.Join(t.TempDir(), "osc.yaml")
	if err := os.WriteFile(osc, []byte(synth.OSCFiles(rechunkedOSC)), 0o644); err != nil {
		t.Fatal(err)
	}
	target := reg.Host + "/pool/worker:latest"
	out, stderr, code := cli(t, "build", "--base", baseRef, "--pool", "pool", "--osc", osc, "--push", target, "-o", "json")
	if code != 0 {
		t.Fatalf("build on the 400-layer base: exit %d\n%s", code, stderr)
	}
	var res struct {
		Tagged bool   `json:"tagged"`
		Digest string `json:"digest"`
		Stages struct {
			Preflight preflight.Report `json:"preflight"`
		} `json:"stages"`
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("build result: %v\n%s", err, out)
	}
	rep := res.Stages.Preflight
	n := rep.Layers.Layers
	if !res.Tagged || rep.Result != "passed" || n <= 400 || rep.Layers.History != n || len(rep.AddedLayers) != n-400 {
		t.Fatalf("build: tagged=%v preflight %+v", res.Tagged, rep)
	}
	if got := messages(&rep, "layers"); len(got) != 1 || !strings.Contains(got[0], "more than 127 (preflight.warnLayers)") {
		t.Errorf("layers findings %q, want the warning above 127", got)
	}
	for _, c := range rep.Checks {
		if c.Status == "skipped" && c.Name != "base-layers-present" {
			t.Errorf("check %s skipped in the build: %s", c.Name, c.Reason)
		}
	}
	raw, err := exec.Command(skopeo, "inspect", "--tls-verify=false", "--raw", "docker://"+target).Output()
	var m struct{ Layers []json.RawMessage }
	if err != nil || json.Unmarshal(raw, &m) != nil || len(m.Layers) != n {
		t.Errorf("skopeo inspect --raw: %v, %d layers, want %d", err, len(m.Layers), n)
	}

	digested := reg.Host + "/pool/worker@" + res.Digest
	for _, args := range [][]string{{digested, "--base", baseRef}, {digested}} {
		prep, code, errOut := preflightJSON(t, args...)
		if code != 0 || prep.Result != "passed" || len(prep.AddedLayers) != n-400 || prep.Layers.Layers != n {
			t.Fatalf("preflight %v: exit %d, %+v\n%s", args, code, prep, errOut)
		}
		for _, c := range prep.Checks {
			if c.Status == "skipped" && c.Name != "usr-override" && (c.Name != "base-layers-present" || len(args) > 1) {
				t.Errorf("preflight %v: check %s skipped: %s", args, c.Name, c.Reason)
			}
		}
	}
	text, _, code := cli(t, "preflight", digested)
	if code != 0 || !strings.Contains(text, strconv.Itoa(n)+" layers (warning above 127, error at 500)") {
		t.Errorf("preflight text: exit %d\n%s", code, text)
	}

	big, err := synth.ChunkahBase(600)
	if err != nil {
		t.Fatal(err)
	}
	bigRef := push(t, big, reg.Host+"/fcos/next:big")
	bigTarget := reg.Host + "/pool/big:latest"
	_, stderr, code = cli(t, "build", "--base", bigRef, "--pool", "pool", "--osc", osc, "--push", bigTarget)
	if code == 0 || !strings.Contains(stderr, "at or above the limit of 500 (--max-layers)") {
		t.Fatalf("build on the 600-layer base: exit %d\n%s", code, stderr)
	}
	tag, err := name.ParseReference(bigTarget)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := remote.Head(tag); err == nil {
		t.Errorf("tag %s exists after the layer limit failed the build", bigTarget)
	}
	if _, stderr, code = cli(t, "build", "--base", bigRef, "--pool", "pool", "--osc", osc, "--push", bigTarget, "--max-layers", "700"); code != 0 {
		t.Errorf("build on the 600-layer base with --max-layers 700: exit %d\n%s", code, stderr)
	}
	if _, stderr, code = cli(t, "preflight", bigRef, "--max-layers", "600", "--warn-layers", "550"); code != 1 || !strings.Contains(stderr, ": 1 error,") {
		t.Errorf("preflight of the 600-layer base at --max-layers 600: exit %d\n%s", code, stderr)
	}
}
