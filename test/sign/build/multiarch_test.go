package build_test

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/oslayer/oslayer/assemble"
	"github.com/oslayer/oslayer/internal/registry"
	"github.com/oslayer/oslayer/preflight"
	"github.com/oslayer/oslayer/publish"
	"github.com/oslayer/oslayer/render"
	"github.com/oslayer/oslayer/sign"
	"github.com/oslayer/oslayer/test/fixtures"
	"github.com/oslayer/oslayer/test/regtest"
	"github.com/oslayer/oslayer/test/synth"
)

// multiRequest is the worker pool of the examples onto base for arches.
func multiRequest(t *testing.T, base string, arches ...string) assemble.Request {
	t.Helper()
	root, err := fixtures.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	arch, err := assemble.ParsePlatforms(strings.Join(arches, ","))
	if err != nil {
		t.Fatal(err)
	}
	return assemble.Request{
		Render:   render.Request{OSCs: []string{filepath.Join(root, "examples", "gardener", "worker-osc.yaml")}, Pool: "worker"},
		Base:     base,
		Registry: &registry.Options{},
		Arch:     arch,
		Version:  "test",
		Flags:    map[string]string{"bake-secrets": "false", "arch": strings.Join(arches, ",")},
	}
}

// multiStages are the stages of `oslayer build --sign-key`: preflight
// (content and written image, read back) and signature and attestation.
func multiStages(priv string) []assemble.Stage {
	reg := &registry.Options{}
	pf := preflight.Stages(preflight.Options{Open: func(ctx context.Context, ref string, p *v1.Platform) (v1.Image, error) {
		img, _, err := reg.Image(ctx, ref, p)
		return img, err
	}})
	return append(pf, sign.Stages(sign.KeyFile(priv, sign.Password([]byte(password))), sign.WithVersion("test"))...)
}

// TestBuildMultiArch builds the worker pool for amd64 and arm64 onto a
// two-platform base index on a loopback registry and checks the pool's
// OCI index with skopeo and crane, each platform image against its own
// base, the signatures of the index and of each platform with cosign and
// with skopeo enforcing the `oslayer trust` policy, reproducibility, that
// a platform image equals the single-platform build, and that a build
// with a platform the base lacks tags nothing.
func TestBuildMultiArch(t *testing.T) {
	cosignBin := regtest.Require(t, "cosign")
	skopeoBin := regtest.Require(t, "skopeo")
	craneBin := regtest.Require(t, "crane")
	r, baseIdx, baseRef := multiBase(t)
	ctx := ctxT(t)
	kp, dir, priv, pubPath := keyPair(t)

	// --arch all is every platform of the base's index, in its order.
	all := multiRequest(t, baseRef, assemble.ArchAll)
	ps, err := all.Platforms(ctx)
	if err != nil || len(ps) != 2 || ps[0].Architecture != "amd64" || ps[1].Architecture != "arm64" {
		t.Fatalf("platforms of %s: %v %v", baseRef, ps, err)
	}

	// A platform the base lacks: the build fails and the tag never appears.
	failTarget := r.Host + "/pools/failed:latest"
	fpub, err := publish.New(failTarget, &registry.Options{})
	if err != nil {
		t.Fatal(err)
	}
	fres, err := assemble.Build(ctx, multiRequest(t, baseRef, "amd64", "s390x"), fpub, multiStages(priv)...)
	if err == nil || !strings.Contains(err.Error(), "platform linux/s390x") || fres.Tagged {
		t.Fatalf("build for a platform the base lacks: err %v, tagged %v", err, fres.Tagged)
	}
	if _, err := remote.Head(ref(t, failTarget)); err == nil {
		t.Fatalf("tag %s exists after a failed platform", failTarget)
	} else if te, ok := err.(*transport.Error); !ok || te.StatusCode != http.StatusNotFound {
		t.Fatalf("HEAD %s: %v", failTarget, err)
	}

	target := r.Host + "/pools/worker:latest"
	pub, err := publish.New(target, &registry.Options{})
	if err != nil {
		t.Fatal(err)
	}
	res, err := assemble.Build(ctx, multiRequest(t, baseRef, "amd64", "arm64"), pub, multiStages(priv)...)
	if err != nil {
		t.Fatal(err)
	}
	if !res.Tagged || len(res.Platforms) != 2 || res.Stages[sign.StageSign] == nil {
		t.Fatalf("result: tagged %v, %d platforms, stages %v", res.Tagged, len(res.Platforms), res.Stages)
	}
	for _, p := range res.Platforms {
		if p.Stages[preflight.StageName] == nil || p.Stages[preflight.StageWritten] == nil || p.Stages[sign.StageSign] == nil || p.Stages[sign.StageAttest] == nil {
			t.Fatalf("platform %s: stages %v", p.Digest, p.Stages)
		}
	}
	t.Logf("built %s", res.Image)

	// The tag names the index; it lists both platforms, each an image
	// appended on that platform's base manifest.
	idx, err := remote.Index(ref(t, target))
	if err != nil {
		t.Fatal(err)
	}
	im, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if d, _ := idx.Digest(); d != res.Digest || im.MediaType != types.OCIImageIndex || len(im.Manifests) != 2 {
		t.Fatalf("tag %s: digest %s (built %s), %s with %d manifests", target, d, res.Digest, im.MediaType, len(im.Manifests))
	}
	baseIM, err := baseIdx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	var digests []string
	for i, want := range []string{"amd64", "arm64"} {
		desc := im.Manifests[i]
		if desc.Platform == nil || desc.Platform.OS != "linux" || desc.Platform.Architecture != want || desc.Digest != res.Platforms[i].Digest {
			t.Fatalf("index entry %d: %+v, want linux/%s %s", i, desc, want, res.Platforms[i].Digest)
		}
		img, err := idx.Image(desc.Digest)
		if err != nil {
			t.Fatal(err)
		}
		m, err := img.Manifest()
		if err != nil {
			t.Fatal(err)
		}
		cf, err := img.ConfigFile()
		if err != nil {
			t.Fatal(err)
		}
		base, err := baseIdx.Image(baseIM.Manifests[i].Digest)
		if err != nil {
			t.Fatal(err)
		}
		bm, err := base.Manifest()
		if err != nil {
			t.Fatal(err)
		}
		if cf.Architecture != want || res.Platforms[i].Base.Digest != baseIM.Manifests[i].Digest ||
			cf.Config.Labels[assemble.LabelBaseDigest] != baseIM.Manifests[i].Digest.String() {
			t.Fatalf("platform %s: config arch %q, base %s label %q, want base %s", want, cf.Architecture,
				res.Platforms[i].Base.Digest, cf.Config.Labels[assemble.LabelBaseDigest], baseIM.Manifests[i].Digest)
		}
		added := len(res.Platforms[i].Layers)
		if added == 0 || len(m.Layers) != len(bm.Layers)+added {
			t.Fatalf("platform %s: %d layers, base %d, added %d", want, len(m.Layers), len(bm.Layers), added)
		}
		for j, l := range bm.Layers {
			if m.Layers[j].Digest != l.Digest {
				t.Fatalf("platform %s: layer %d is %s, its base's is %s", want, j, m.Layers[j].Digest, l.Digest)
			}
		}
		digests = append(digests, r.Host+"/pools/worker@"+desc.Digest.String())
	}
	if im.Manifests[0].Digest == im.Manifests[1].Digest {
		t.Fatal("both platforms have the same image")
	}

	// skopeo and crane see the same index.
	home := t.TempDir()
	env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + home, "TUF_ROOT=" + filepath.Join(home, "tuf"), "XDG_RUNTIME_DIR=" + home,
		"DOCKER_CONFIG=" + filepath.Join(home, "docker")}
	rawIdx, err := idx.RawManifest()
	if err != nil {
		t.Fatal(err)
	}
	out, ok := tool(t, env, skopeoBin, "inspect", "--raw", "--tls-verify=false", "docker://"+target)
	if !ok || out != string(rawIdx) {
		t.Fatalf("skopeo inspect --raw %s:\n%s\nwant\n%s", target, out, rawIdx)
	}
	out, ok = tool(t, env, craneBin, "manifest", "--insecure", res.Image)
	if !ok || out != string(rawIdx) {
		t.Fatalf("crane manifest %s:\n%s", res.Image, out)
	}
	var craneIdx v1.IndexManifest
	if err := json.Unmarshal([]byte(out), &craneIdx); err != nil || len(craneIdx.Manifests) != 2 {
		t.Fatalf("crane manifest: %v %+v", err, craneIdx)
	}

	// cosign and the node policy verify the index and each platform.
	tdir := trustFiles(t, r.Host+"/pools/worker", kp.Public, pubPath)
	policy := []string{"--policy", filepath.Join(tdir, "policy.json"), "--registries.d", filepath.Join(tdir, "registries.d"), "--src-tls-verify=false"}
	for _, ref := range append([]string{res.Image}, digests...) {
		if out, ok := tool(t, env, cosignBin, "verify", "--key", pubPath, "--insecure-ignore-tlog", "--allow-http-registry", ref); !ok {
			t.Fatalf("cosign verify %s:\n%s", ref, out)
		}
		if out, ok := tool(t, env, skopeoBin, append(append([]string{"copy", "--remove-signatures"}, policy...),
			"docker://"+ref, "oci:"+filepath.Join(t.TempDir(), "oci"))...); !ok {
			t.Fatalf("skopeo copy with the trust policy %s:\n%s", ref, out)
		}
	}
	// The arm64 image through the index, as an arm64 node pulls it.
	if out, ok := tool(t, env, skopeoBin, append(append([]string{"copy", "--remove-signatures", "--override-arch", "arm64"}, policy...),
		"docker://"+res.Image, "oci:"+filepath.Join(t.TempDir(), "oci"))...); !ok {
		t.Fatalf("skopeo copy --override-arch arm64 %s:\n%s", res.Image, out)
	}
	// oslayer's own verify: the tag resolves to the index, whose signature
	// is checked with the amd64 image's signature and provenance.
	pv, err := sign.LoadPublicKey(ctx, pubPath)
	if err != nil {
		t.Fatal(err)
	}
	v, err := sign.Verify(ctx, target, pv)
	if err != nil || v.Index != res.Digest.String() || v.IndexSignatures != 1 || v.Digest != im.Manifests[0].Digest.String() || !v.OK() {
		t.Fatalf("verify %s: %v %+v", target, err, v)
	}
	// The policy can fail: another key verifies neither.
	other, err := sign.GenerateKeyPair([]byte(password))
	if err != nil {
		t.Fatal(err)
	}
	otherPub := filepath.Join(dir, "other.pub")
	os.WriteFile(otherPub, other.Public, 0o644)
	if out, ok := tool(t, env, cosignBin, "verify", "--key", otherPub, "--insecure-ignore-tlog", "--allow-http-registry", res.Image); ok {
		t.Fatalf("cosign verify with another key passed:\n%s", out)
	}
	opv, err := sign.LoadPublicKey(ctx, otherPub)
	if err != nil {
		t.Fatal(err)
	}
	if v, err := sign.Verify(ctx, target, opv); err == nil || v == nil || v.IndexSignatureError == "" || v.OK() {
		t.Fatalf("verify %s with another key: %v %+v", target, err, v)
	}
	odir := trustFiles(t, r.Host+"/pools/worker", other.Public, otherPub)
	if out, ok := tool(t, env, skopeoBin, "copy", "--remove-signatures", "--policy", filepath.Join(odir, "policy.json"),
		"--registries.d", filepath.Join(odir, "registries.d"), "--src-tls-verify=false",
		"docker://"+digests[1], "oci:"+filepath.Join(t.TempDir(), "oci")); ok {
		t.Fatalf("skopeo copy %s under another key's policy passed:\n%s", digests[1], out)
	}

	// Reproducible: the same inputs give the same index.
	res2, err := assemble.Build(ctx, multiRequest(t, baseRef, "amd64", "arm64"), pub, multiStages(priv)...)
	if err != nil {
		t.Fatal(err)
	}
	if res2.Image != res.Image {
		t.Fatalf("rebuild gave %s, first build %s", res2.Image, res.Image)
	}
	if sr := res2.Stages[sign.StageSign].(*sign.SignResult); !sr.Existing || sr.Signatures != 1 {
		t.Fatalf("rebuild index sign result %+v", sr)
	}

	// A single --arch arm64 build is one manifest, the index's arm64 image.
	single := multiRequest(t, baseRef, "arm64")
	spub, err := publish.New(r.Host+"/pools/single:latest", &registry.Options{})
	if err != nil {
		t.Fatal(err)
	}
	sres, err := assemble.Build(ctx, single, spub)
	if err != nil {
		t.Fatal(err)
	}
	if sres.Digest != im.Manifests[1].Digest {
		t.Fatalf("single arm64 build %s, index's arm64 image %s", sres.Digest, im.Manifests[1].Digest)
	}
	desc, err := remote.Get(ref(t, r.Host+"/pools/single:latest"))
	if err != nil || desc.MediaType != types.OCIManifestSchema1 {
		t.Fatalf("single build: %v %v", desc, err)
	}
}

// TestBuildMultiArchLayout writes the two-platform pool image to an OCI
// layout: its index.json names the pool's index, which skopeo reads, and
// each platform opens from it.
func TestBuildMultiArchLayout(t *testing.T) {
	skopeoBin := regtest.Require(t, "skopeo")
	_, _, baseRef := multiBase(t)
	ctx := ctxT(t)
	dir := filepath.Join(t.TempDir(), "out")
	pub, err := publish.New("oci:"+dir+":worker", &registry.Options{})
	if err != nil {
		t.Fatal(err)
	}
	res, err := assemble.Build(ctx, multiRequest(t, baseRef, assemble.ArchAll), pub)
	if err != nil {
		t.Fatal(err)
	}
	if want := "oci:" + dir + "@" + res.Digest.String(); res.Image != want || !res.Tagged {
		t.Fatalf("image %s, want %s (tagged %v)", res.Image, want, res.Tagged)
	}
	home := t.TempDir()
	env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + home, "XDG_RUNTIME_DIR=" + home}
	out, ok := tool(t, env, skopeoBin, "inspect", "--raw", "oci:"+dir+":worker")
	if !ok {
		t.Fatalf("skopeo inspect --raw: %s", out)
	}
	var im v1.IndexManifest
	if err := json.Unmarshal([]byte(out), &im); err != nil || im.MediaType != types.OCIImageIndex || len(im.Manifests) != 2 {
		t.Fatalf("skopeo inspect --raw oci:%s:worker: %v\n%s", dir, err, out)
	}
	for i, arch := range []string{"amd64", "arm64"} {
		img, rs, err := (&registry.Options{}).Image(ctx, "oci:"+dir+":worker", &v1.Platform{OS: "linux", Architecture: arch})
		if err != nil {
			t.Fatal(err)
		}
		if rs.Digest != res.Platforms[i].Digest || rs.IndexDigest == nil || *rs.IndexDigest != res.Digest {
			t.Fatalf("%s from the layout: %s in %v, built %s in %s", arch, rs.Digest, rs.IndexDigest, res.Platforms[i].Digest, res.Digest)
		}
		if _, err := img.Layers(); err != nil {
			t.Fatal(err)
		}
	}
}

func ref(t *testing.T, s string) name.Reference {
	t.Helper()
	r, err := name.ParseReference(s)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// multiBase starts a registry with the two-platform (amd64, arm64)
// synthetic base index at fcos/base:stable.
func multiBase(t *testing.T) (*regtest.Registry, v1.ImageIndex, string) {
	t.Helper()
	r := regtest.Start(t, regtest.Config{})
	idx, err := synth.MultiArchBase(0.0002, "amd64", "arm64")
	if err != nil {
		t.Fatal(err)
	}
	ref := r.Host + "/fcos/base:stable"
	if _, err := synth.PushIndex(ctxT(t), idx, ref); err != nil {
		t.Fatal(err)
	}
	return r, idx, ref
}
