package preflight_test

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/oslayer/oslayer/preflight"
	"github.com/oslayer/oslayer/test/regtest"
	"github.com/oslayer/oslayer/test/synth"
)

func short(h v1.Hash) string { return h.String()[:19] }

func layersOf(t testing.TB, img v1.Image) []v1.Layer {
	t.Helper()
	ls, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	return ls
}

func digestOf(t testing.TB, l v1.Layer) v1.Hash {
	t.Helper()
	d, err := l.Digest()
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func diffIDOf(t testing.TB, l v1.Layer) v1.Hash {
	t.Helper()
	d, err := l.DiffID()
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// reassemble rebuilds like with a different layer list, keeping its labels.
func reassemble(t testing.TB, like v1.Image, layers []v1.Layer) v1.Image {
	t.Helper()
	img := mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON)
	var adds []mutate.Addendum
	for i, l := range layers {
		adds = append(adds, mutate.Addendum{Layer: l, History: v1.History{CreatedBy: fmt.Sprintf("layer %d", i)}})
	}
	img, err := mutate.Append(img, adds...)
	if err != nil {
		t.Fatal(err)
	}
	orig, err := like.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	return synth.WithConfig(t, img, func(cf *v1.ConfigFile) {
		cf.OS, cf.Architecture, cf.Config = orig.OS, orig.Architecture, orig.Config
	})
}

func messages(rep *preflight.Report, check string) []string {
	var out []string
	for _, f := range rep.Findings {
		if f.Check == check {
			out = append(out, f.Message)
		}
	}
	return out
}

func checkStatus(rep *preflight.Report, check string) string {
	for _, c := range rep.Checks {
		if c.Name == check {
			return c.Status
		}
	}
	return "absent"
}

// TestCustomerBase: a customer builds their own base FROM the official
// image with buildah (RUN and COPY), pushes it, and preflight with
// --require-base confirms it still carries every official layer; then the
// customer base is tampered with in the ways that break nodes.
func TestCustomerBase(t *testing.T) {
	bb := regtest.Require(t, "buildah")
	reg := regtest.Start(t, regtest.Config{})
	official := officialBase(t, "a")
	offRef := push(t, official, reg.Host+"/fcos/coreos:43")
	bd := newBuildah(t, bb)
	custRef := reg.Host + "/customer/base:1"
	bd.build(custRef, "FROM "+offRef+"\nRUN mkdir -p /usr/share/customer && echo tuned > /usr/share/customer/tuning\nCOPY motd /etc/motd\n",
		map[string]string{"motd": "welcome\n"})

	rep, code, stderr := preflightJSON(t, custRef, "--require-base", offRef)
	if code != 0 || checkStatus(rep, "base-layers-present") != "passed" || len(messages(rep, "base-layers-present")) != 0 {
		t.Fatalf("customer base: exit %d, base-layers-present %s %q\n%s", code, checkStatus(rep, "base-layers-present"), messages(rep, "base-layers-present"), stderr)
	}
	if len(rep.AddedLayers) != 1 || rep.AddedLayers[0].Index != 5 {
		t.Errorf("added layers %+v, want the one buildah layer at index 5", rep.AddedLayers)
	}

	cust := pull(t, custRef)
	c := layersOf(t, cust)
	o := layersOf(t, official)
	if len(c) != 6 {
		t.Fatalf("customer image has %d layers, want 6", len(c))
	}
	for i := range o {
		if digestOf(t, c[i]) != digestOf(t, o[i]) {
			t.Fatalf("buildah changed base layer %d", i)
		}
	}
	foreign := gzLayer(t, []entry{{name: "usr/share/chunk-1", body: []byte("patched"), mode: 0o644}})
	cases := []struct {
		name   string
		layers []v1.Layer
		want   []string
	}{
		{"dropped", []v1.Layer{c[0], c[1], c[3], c[4], c[5]}, []string{
			fmt.Sprintf("base layer 2 of %s (%s, diff_id %s) is missing from the image", offRef, short(digestOf(t, o[2])), short(diffIDOf(t, o[2])))}},
		{"reordered", []v1.Layer{c[0], c[2], c[1], c[3], c[4], c[5]}, []string{
			fmt.Sprintf("base layer 1 of %s (%s) moved to index 2 of the image", offRef, short(digestOf(t, o[1]))),
			fmt.Sprintf("base layer 2 of %s (%s) moved to index 1 of the image", offRef, short(digestOf(t, o[2])))}},
		{"replaced", []v1.Layer{c[0], foreign, c[2], c[3], c[4], c[5]}, []string{
			fmt.Sprintf("base layer 1 of %s (%s) was replaced: the image has %s at index 1", offRef, short(digestOf(t, o[1])), short(digestOf(t, foreign)))}},
		{"inserted", []v1.Layer{c[0], c[1], foreign, c[2], c[3], c[4], c[5]}, []string{
			fmt.Sprintf("image layer 2 (%s) is not a layer of %s but sits among its layers: the base layers must come first, unbroken", short(digestOf(t, foreign)), offRef)}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ref := push(t, reassemble(t, cust, tc.layers), reg.Host+"/customer/base:"+tc.name)
			rep, code, stderr := preflightJSON(t, ref, "--require-base", offRef)
			if code != 1 || checkStatus(rep, "base-layers-present") != "failed" {
				t.Fatalf("exit %d, status %s\n%s", code, checkStatus(rep, "base-layers-present"), stderr)
			}
			if got := messages(rep, "base-layers-present"); !slices.Equal(got, tc.want) {
				t.Errorf("findings:\n got  %q\n want %q", got, tc.want)
			}
		})
	}
	t.Run("rebuilt base", func(t *testing.T) {
		rebuilt := push(t, officialBase(t, "b"), reg.Host+"/fcos/coreos:43-rebuilt")
		ref := reg.Host + "/customer/base:rebuilt"
		bd.build(ref, "FROM "+rebuilt+"\nCOPY motd /etc/motd\n", map[string]string{"motd": "welcome\n"})
		rep, code, stderr := preflightJSON(t, ref, "--require-base", offRef)
		want := []string{fmt.Sprintf("none of the 5 layers of %s (preflight.requireBase) are in the image: it was built from a different or rebuilt base; rebuild it FROM %s", offRef, offRef)}
		if got := messages(rep, "base-layers-present"); code != 1 || !slices.Equal(got, want) {
			t.Errorf("exit %d, findings:\n got  %q\n want %q\n%s", code, got, want, stderr)
		}
	})
}

type ruleAt struct {
	Rule     string
	Severity preflight.Severity
	Path     string
}

// TestBuildahMistakes: typical mistakes of a buildah-built layer are flagged
// under the names `bootc container lint` gives them.
func TestBuildahMistakes(t *testing.T) {
	bb := regtest.Require(t, "buildah")
	reg := regtest.Start(t, regtest.Config{})
	offRef := push(t, officialBase(t, "a"), reg.Host+"/fcos/coreos:43")
	bd := newBuildah(t, bb)
	ref := reg.Host + "/customer/mistakes:1"
	bd.build(ref, "FROM "+offRef+"\n"+
		"RUN mkdir -p /var/lib/app && echo state > /var/lib/app/state && echo started > /var/log/app.log\n"+
		"COPY containerenv /run/.containerenv\n",
		map[string]string{"containerenv": "engine=\"buildah\"\n"})
	rep, code, stderr := preflightJSON(t, ref, "--base", offRef)
	if code != 0 {
		t.Fatalf("exit %d (warnings only expected)\n%s", code, stderr)
	}
	var got []ruleAt
	for _, f := range rep.Findings {
		if f.Check == "content" {
			got = append(got, ruleAt{f.Rule, f.Severity, f.Path})
		}
	}
	want := []ruleAt{
		{"buildah-injected", preflight.Warning, "etc/hostname"},
		{"buildah-injected", preflight.Warning, "etc/resolv.conf"},
		{"nonempty-run-tmp", preflight.Warning, "run/.containerenv"},
		{"var-log", preflight.Warning, "var/log/app.log"},
		{"var-tmpfiles", preflight.Warning, "var/lib/app/state"},
	}
	cmp := func(a, b ruleAt) int { return strings.Compare(a.Rule+a.Path, b.Rule+b.Path) }
	slices.SortFunc(got, cmp)
	if !slices.Equal(got, want) {
		t.Errorf("content findings:\n got  %+v\n want %+v", got, want)
	}
	if _, code, _ := preflightJSON(t, ref, "--base", offRef, "--fatal-warnings"); code != 1 {
		t.Errorf("--fatal-warnings: exit %d, want 1", code)
	}
}

// TestCommand: the standalone command on a remote reference, an OCI layout,
// its table and JSON output, and its exit codes.
func TestCommand(t *testing.T) {
	reg := regtest.Start(t, regtest.Config{})
	official := officialBase(t, "a")
	offRef := push(t, official, reg.Host+"/fcos/coreos:43")
	added := gzLayer(t, []entry{{name: "usr/", dir: true, mode: 0o755}, {name: "usr/lib/tmpfiles.d/pool.conf", body: []byte("d /var/lib/pool 0755 root root -\n"), mode: 0o644}})
	img, err := mutate.Append(official, mutate.Addendum{Layer: added, History: v1.History{CreatedBy: "oslayer pool layer"}})
	if err != nil {
		t.Fatal(err)
	}
	ref := push(t, img, reg.Host+"/pool/worker:1")

	t.Run("remote text", func(t *testing.T) {
		out, stderr, code := cli(t, "preflight", ref, "--base", offRef, "--arch", "x86_64", "--expect-version", "43")
		if code != 0 || !strings.Contains(out, "PASSED: 11 checks (10 passed, 0 warned, 0 failed, 1 skipped); 0 errors, 0 warnings, 0 notes; 1 added layer; ") {
			t.Errorf("exit %d\n%s\n%s", code, out, stderr)
		}
	})
	t.Run("oci layout json", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "layout")
		p, err := layout.Write(dir, empty.Index)
		if err != nil {
			t.Fatal(err)
		}
		if err := p.AppendImage(img, layout.WithAnnotations(map[string]string{"org.opencontainers.image.ref.name": "v1"})); err != nil {
			t.Fatal(err)
		}
		rep, code, stderr := preflightJSON(t, "oci:"+dir+":v1", "--require-base", offRef)
		d, _ := img.Digest()
		if code != 0 || rep.Result != "passed" || rep.Digest != d.String() || len(rep.AddedLayers) != 1 || rep.AddedLayers[0].Digest != digestOf(t, added).String() {
			t.Errorf("exit %d report %+v\n%s", code, rep, stderr)
		}
		if len(rep.Checks) != 11 {
			t.Errorf("%d checks in JSON, want 11", len(rep.Checks))
		}
	})
	t.Run("errors exit 1 with a table", func(t *testing.T) {
		bad, err := mutate.Append(official, mutate.Addendum{Layer: gzLayer(t, []entry{{name: "usr/etc/", dir: true, mode: 0o755}}), History: v1.History{CreatedBy: "bad"}})
		if err != nil {
			t.Fatal(err)
		}
		badRef := push(t, bad, reg.Host+"/pool/worker:bad")
		out, _, code := cli(t, "preflight", badRef, "--expect-version", "42")
		if code != 1 || !strings.HasPrefix(out, "CHECK") || !strings.Contains(out, "content/etc-usretc  error") || !strings.Contains(out, "/usr/etc") ||
			!strings.Contains(out, "FAILED: 11 checks (7 passed, 0 warned, 2 failed, 2 skipped); 2 errors, 0 warnings, 0 notes; 1 added layer; ") {
			t.Errorf("exit %d\n%s", code, out)
		}
	})
	t.Run("could not run exits 2", func(t *testing.T) {
		for _, args := range [][]string{
			{"preflight", reg.Host + "/pool/missing:1"},
			{"preflight", ref, "--skip", "nope"},
			{"preflight", ref, "--max-added-bytes", "lots"},
			{"preflight", ref, "--no-such-flag"},
			{"preflight"},
			{"preflight", "oci:" + filepath.Join(t.TempDir(), "none")},
		} {
			if _, stderr, code := cli(t, args...); code != 2 {
				t.Errorf("%v: exit %d, want 2\n%s", args, code, stderr)
			}
		}
	})
}

// TestNoBaseBlobDownloaded: with a 51-layer FCOS-shaped base, preflight
// fetches the two configs and the added layer, and no base layer blob.
func TestNoBaseBlobDownloaded(t *testing.T) {
	reg := regtest.Start(t, regtest.Config{})
	base, err := synth.FCOSBase(0.001)
	if err != nil {
		t.Fatal(err)
	}
	push(t, base, reg.Host+"/fcos/coreos:stable")
	added := gzLayer(t, []entry{{name: "etc/", dir: true, mode: 0o755}, {name: "etc/sysctl.d/99-pool.conf", body: []byte("vm.max_map_count = 262144\n"), mode: 0o644}})
	img, err := mutate.Append(base, mutate.Addendum{Layer: added, History: v1.History{CreatedBy: "pool"}})
	if err != nil {
		t.Fatal(err)
	}
	push(t, img, reg.Host+"/pool/worker:1")
	baseLayers := layersOf(t, base)
	if len(baseLayers) != 51 {
		t.Fatalf("synthetic base has %d layers", len(baseLayers))
	}
	proxy := regtest.NewProxy(t, reg.Host)
	baseCfg, _ := base.ConfigName()
	imgCfg, _ := img.ConfigName()
	for _, tc := range []struct {
		name string
		args []string
		want []string
	}{
		{"with --base", []string{"--base", proxy.Host + "/fcos/coreos:stable"}, []string{imgCfg.String(), baseCfg.String(), digestOf(t, added).String()}},
		{"final-diffid", nil, []string{imgCfg.String(), digestOf(t, added).String()}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			proxy.Reset()
			rep, code, stderr := preflightJSON(t, append([]string{proxy.Host + "/pool/worker:1"}, tc.args...)...)
			if code != 0 || len(rep.AddedLayers) != 1 || rep.AddedLayers[0].Index != 51 {
				t.Fatalf("exit %d added %+v\n%s", code, rep.AddedLayers, stderr)
			}
			var got []string
			for _, r := range proxy.Requests() {
				if r.Method == "GET" && strings.Contains(r.Path, "/blobs/sha256:") {
					got = append(got, r.Path[strings.LastIndex(r.Path, "/")+1:])
				}
			}
			slices.Sort(got)
			want := slices.Clone(tc.want)
			slices.Sort(want)
			if !slices.Equal(got, want) || proxy.BlobGets() != len(tc.want) {
				t.Errorf("blob GETs %d: %v, want %v\n%s", proxy.BlobGets(), got, want, proxy.Dump())
			}
			for _, l := range baseLayers {
				if slices.Contains(got, digestOf(t, l).String()) {
					t.Errorf("base layer %s downloaded", digestOf(t, l))
				}
			}
		})
	}
}
