// Package build_test signs and attests images built by build.Build (the
// library behind `oslayer build --sign-key`) and checks them with the
// cosign CLI, upstream skopeo enforcing the `oslayer trust` files, and
// sign.Verify; and that a failing sign stage leaves the tag unmoved.
package build_test

import (
	"bytes"
	"context"
	"net/http"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"

	"github.com/oslayer/oslayer/assemble"
	"github.com/oslayer/oslayer/internal/registry"
	"github.com/oslayer/oslayer/publish"
	"github.com/oslayer/oslayer/render"
	"github.com/oslayer/oslayer/sign"
	"github.com/oslayer/oslayer/test/fixtures"
	"github.com/oslayer/oslayer/test/regtest"
	"github.com/oslayer/oslayer/test/synth"
)

const password = "pool-key-password"

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

func tool(t *testing.T, env []string, bin string, args ...string) (string, bool) {
	t.Helper()
	var out bytes.Buffer
	cmd := exec.CommandContext(ctxT(t), bin, args...)
	cmd.Env = env
	cmd.Stdout, cmd.Stderr = &out, &out
	// Run first: the output is read once the tool has ended.
	ok := cmd.Run() == nil
	return out.String(), ok
}

func buildPool(t *testing.T, base, target string, stages ...assemble.Stage) (*assemble.Result, error) {
	t.Helper()
	root, err := fixtures.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	reg := &registry.Options{}
	pub, err := publish.New(target, reg)
	if err != nil {
		t.Fatal(err)
	}
	return assemble.Build(ctxT(t), assemble.Request{
		Render:   render.Request{OSCs: []string{filepath.Join(root, "examples", "gardener", "worker-osc.yaml")}, Pool: "worker"},
		Base:     base,
		Registry: reg,
		Version:  "test",
		Flags:    map[string]string{"bake-secrets": "false"},
	}, pub, stages...)
}

func TestBuildSignedImage(t *testing.T) {
	cosignBin := regtest.Require(t, "cosign")
	skopeoBin := regtest.Require(t, "skopeo")
	r := regtest.Start(t, regtest.Config{})
	// The pool image goes through a counting proxy: its host is part of the
	// signed identity, so every build and check uses it.
	proxy := regtest.NewProxy(t, r.Host)
	target := proxy.Host + "/pools/worker:latest"
	base, err := synth.FCOSBase(0.0002)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := synth.Push(ctxT(t), base, r.Host+"/fcos/base:stable"); err != nil {
		t.Fatal(err)
	}
	kp, _, priv, pubPath := keyPair(t)

	// A wrong password: the build fails at "sign" and the tag never appears.
	bad := sign.Stages(sign.KeyFile(priv, sign.Password([]byte("wrong"))), sign.WithVersion("test"))
	res, err := buildPool(t, r.Host+"/fcos/base:stable", target, bad...)
	if err == nil || !strings.HasPrefix(err.Error(), "sign: ") || !strings.Contains(err.Error(), "wrong or missing password") {
		t.Fatalf("build with a wrong key password: err %v", err)
	}
	t.Logf("build error: %v", err)
	if res == nil || res.Tagged {
		t.Fatalf("tagged after a failed sign stage: %+v", res)
	}
	tag, err := name.NewTag(target)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := remote.Head(tag); err == nil {
		t.Fatalf("tag pools/worker:latest exists after a failed sign stage")
	} else if te, ok := err.(*transport.Error); !ok || te.StatusCode != http.StatusNotFound {
		t.Fatalf("HEAD tag: %v", err)
	}

	good := sign.Stages(sign.KeyFile(priv, sign.Password([]byte(password))), sign.WithVersion("test"))
	res, err = buildPool(t, r.Host+"/fcos/base:stable", target, good...)
	if err != nil {
		t.Fatal(err)
	}
	if !res.Tagged || res.Stages["sign"] == nil || res.Stages["attest"] == nil {
		t.Fatalf("result: tagged %v stages %v", res.Tagged, res.Stages)
	}
	img := res.Image
	t.Logf("built and signed %s", img)

	home := t.TempDir()
	env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + home, "TUF_ROOT=" + filepath.Join(home, "tuf"), "XDG_RUNTIME_DIR=" + home}
	if out, ok := tool(t, env, cosignBin, "verify", "--key", pubPath, "--insecure-ignore-tlog", "--allow-http-registry", img); !ok {
		t.Fatalf("cosign verify %s:\n%s", img, out)
	}
	if out, ok := tool(t, env, cosignBin, "verify-attestation", "--key", pubPath, "--insecure-ignore-tlog", "--allow-http-registry", "--type", "slsaprovenance1", img); !ok {
		t.Fatalf("cosign verify-attestation %s:\n%s", img, out)
	}
	// The SBOM: cosign verifies it as an SPDX JSON attestation.
	if out, ok := tool(t, env, cosignBin, "verify-attestation", "--key", pubPath, "--insecure-ignore-tlog", "--allow-http-registry", "--type", "spdxjson", img); !ok || !slices.Equal(regtest.DSSEPredicateTypes(out), []string{"https://spdx.dev/Document"}) {
		t.Fatalf("cosign verify-attestation --type spdxjson %s:\n%s", img, out)
	}
	tdir := trustFiles(t, proxy.Host+"/pools/worker", kp.Public, pubPath)
	if out, ok := tool(t, env, skopeoBin, "copy", "--remove-signatures", "--policy", filepath.Join(tdir, "policy.json"),
		"--registries.d", filepath.Join(tdir, "registries.d"), "--src-tls-verify=false", "docker://"+img, "oci:"+filepath.Join(t.TempDir(), "oci")); !ok {
		t.Fatalf("skopeo copy with the trust policy %s:\n%s", img, out)
	}
	pv, err := sign.LoadPublicKey(ctxT(t), pubPath)
	if err != nil {
		t.Fatal(err)
	}
	// The tag too: verify resolves it to the signed digest.
	v, err := sign.Verify(ctxT(t), target, pv)
	if err != nil {
		t.Fatal(err)
	}
	if v.Ref != img {
		t.Fatalf("verified %s, built %s", v.Ref, img)
	}
	if len(v.Inputs) != len(res.Inputs) || len(v.Inputs) == 0 {
		t.Fatalf("provenance names %d inputs, build had %d", len(v.Inputs), len(res.Inputs))
	}
	for i, in := range res.Inputs {
		// The provenance names inputs relative to the directory that holds
		// them all, never by where that is.
		uri := v.Inputs[i].URI
		if uri == "" || path.IsAbs(uri) || strings.HasPrefix(uri, "../") || !strings.HasSuffix(filepath.ToSlash(in.Path), "/"+uri) || v.Inputs[i].Digest["sha256"] != strings.TrimPrefix(in.SHA256, "sha256:") {
			t.Fatalf("input %d: %+v, build had %+v", i, v.Inputs[i], in)
		}
	}
	if v.Base == nil || v.Base.Digest["sha256"] != res.Base.Digest.Hex {
		t.Fatalf("provenance base %+v, build base %s", v.Base, res.Base.Digest)
	}
	if got := len(v.Provenance.Predicate.RunDetails.Byproducts); got != len(res.Layers) {
		t.Fatalf("provenance names %d layers, build added %d", got, len(res.Layers))
	}
	// The SBOM names every regular file the build placed, with the digest
	// of the ownership manifest and where it came from.
	if v.SBOM == nil || v.SBOMError != "" {
		t.Fatalf("verify found no valid SBOM: %q", v.SBOMError)
	}
	files := map[string]string{}
	for _, f := range v.SBOM.Files {
		for _, c := range f.Checksums {
			if c.Algorithm == "SHA256" {
				files[f.FileName] = "sha256:" + c.ChecksumValue
			}
		}
	}
	placed := 0
	for _, b := range res.Report.Baked {
		if b.Type != "file" {
			continue
		}
		placed++
		if got := files["."+b.Path]; got != "sha256:"+strings.TrimPrefix(b.SHA256, "sha256:") {
			t.Errorf("SBOM file %s: %q, the ownership manifest says %s", b.Path, got, b.SHA256)
		}
	}
	if placed == 0 || len(v.SBOM.Files) != placed {
		t.Fatalf("SBOM lists %d files, the build placed %d", len(v.SBOM.Files), placed)
	}

	// Rebuilding with unchanged inputs gives the same digest and signs and
	// attests nothing new.
	proxy.Reset()
	res2, err := buildPool(t, r.Host+"/fcos/base:stable", target, good...)
	if err != nil {
		t.Fatal(err)
	}
	if res2.Image != img {
		t.Fatalf("rebuild gave %s, first build %s", res2.Image, img)
	}
	for _, q := range proxy.Requests() {
		if (q.Method == http.MethodPut || q.Method == http.MethodPost || q.Method == http.MethodPatch) &&
			(strings.Contains(q.Path, "/blobs/") || strings.Contains(q.Path, "sha256-")) {
			t.Fatalf("rebuild with signing wrote %s %s:\n%s", q.Method, q.Path, proxy.Dump())
		}
	}
	if sr := res2.Stages["sign"].(*sign.SignResult); !sr.Existing || sr.Signatures != 1 {
		t.Fatalf("rebuild sign result %+v", sr)
	}
	if ar := res2.Stages["attest"].(*sign.AttestResult); !ar.Existing || ar.Attestations != 2 || ar.SBOM == nil || !ar.SBOM.Existing {
		t.Fatalf("rebuild attest result %+v", ar)
	}
}

// trustFiles writes the files `oslayer trust` writes for repo and the
// public key pem (at pubPath on the node) into a temp dir and returns it.
func trustFiles(t *testing.T, repo string, pem []byte, pubPath string) string {
	t.Helper()
	tb, err := sign.Trust(repo, pem, sign.TrustOptions{NodeKeyPath: pubPath})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for _, f := range tb.Files {
		p := filepath.Join(dir, f.Path)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, f.Content, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// keyPair generates a cosign key pair encrypted with password and writes
// it into a temp dir (returned) as cosign.key (priv) and cosign.pub.
func keyPair(t *testing.T) (kp *sign.KeyPair, dir, priv, pubPath string) {
	t.Helper()
	kp, err := sign.GenerateKeyPair([]byte(password))
	if err != nil {
		t.Fatal(err)
	}
	dir = t.TempDir()
	priv, pubPath = filepath.Join(dir, "cosign.key"), filepath.Join(dir, "cosign.pub")
	if err := os.WriteFile(priv, kp.Private, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(pubPath, kp.Public, 0o644); err != nil {
		t.Fatal(err)
	}
	return kp, dir, priv, pubPath
}
