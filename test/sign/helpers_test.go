// Package sign_test checks oslayer's signatures and attestations with the
// real verifiers: the cosign CLI and upstream skopeo enforcing the
// policy.json and registries.d files `oslayer trust` writes, against a
// loopback registry.
package sign_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/oslayer/oslayer/assemble"
	"github.com/oslayer/oslayer/internal/registry"
	"github.com/oslayer/oslayer/sign"
	"github.com/oslayer/oslayer/sources/model"
	"github.com/oslayer/oslayer/test/regtest"
)

const testPassword = "correct horse"

type keyFiles struct {
	priv, pub string
	pem       []byte
}

// newKey writes a cosign key pair encrypted with pw into a temp dir.
func newKey(t *testing.T, pw string) keyFiles {
	t.Helper()
	return writeKey(t, t.TempDir(), pw)
}

// writeKey generates a cosign key pair encrypted with pw and writes it
// into dir as cosign.key and cosign.pub.
func writeKey(t *testing.T, dir, pw string) keyFiles {
	t.Helper()
	kp, err := sign.GenerateKeyPair([]byte(pw))
	if err != nil {
		t.Fatal(err)
	}
	k := keyFiles{priv: filepath.Join(dir, "cosign.key"), pub: filepath.Join(dir, "cosign.pub"), pem: kp.Public}
	if err := os.WriteFile(k.priv, kp.Private, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(k.pub, kp.Public, 0o644); err != nil {
		t.Fatal(err)
	}
	return k
}

// keyFile signs with the private key at path, encrypted with testPassword.
func keyFile(path string) sign.KeyFunc {
	return sign.KeyFile(path, sign.Password([]byte(testPassword)))
}

// verifyWith loads k's public key and verifies ref with it, failing the
// test on either error.
func verifyWith(t *testing.T, ctx context.Context, k keyFiles, ref string) *sign.Verification {
	t.Helper()
	pub, err := sign.LoadPublicKey(ctx, k.pub)
	if err != nil {
		t.Fatal(err)
	}
	v, err := sign.Verify(ctx, ref, pub)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// Key generation and decryption use scrypt, which is slow on purpose: the
// package generates two keys once and shares them between tests (each test
// has its own registry).
var (
	keysMu  sync.Mutex
	keysDir string
	keys    = map[int]keyFiles{}
)

// sharedKey returns the package's key number slot (0 or 1), encrypted with
// testPassword.
func sharedKey(t *testing.T, slot int) keyFiles {
	t.Helper()
	keysMu.Lock()
	defer keysMu.Unlock()
	if k, ok := keys[slot]; ok {
		return k
	}
	dir := filepath.Join(keysDir, strconv.Itoa(slot))
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	k := writeKey(t, dir, testPassword)
	keys[slot] = k
	return k
}

func TestMain(m *testing.M) {
	d, err := os.MkdirTemp("", "oslayer-sign-keys-")
	if err != nil {
		panic(err)
	}
	keysDir = d
	code := m.Run()
	os.RemoveAll(d)
	os.Exit(code)
}

// pushRandom pushes a random single-arch image to host/repo by digest and
// returns the digested reference.
func pushRandom(t *testing.T, host, repo string) name.Digest {
	t.Helper()
	img, err := random.Image(512, 2)
	if err != nil {
		t.Fatal(err)
	}
	h, err := img.Digest()
	if err != nil {
		t.Fatal(err)
	}
	d, err := name.NewDigest(host + "/" + repo + "@" + h.String())
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(d, img); err != nil {
		t.Fatalf("push %s: %v", d, err)
	}
	return d
}

// fakeBuild is a build result naming real-looking inputs.
// signable starts a registry of its own and pushes a random image to its
// repository "pool"; it returns the shared key 0 and the image's digest.
func signable(t *testing.T) (keyFiles, name.Digest) {
	t.Helper()
	r := regtest.Start(t, regtest.Config{})
	return sharedKey(t, 0), pushRandom(t, r.Host, "pool")
}

func fakeBuild(t *testing.T, d name.Digest) *assemble.Built {
	t.Helper()
	base, _ := v1.NewHash("sha256:" + strings.Repeat("ab", 32))
	l1, _ := v1.NewHash("sha256:" + strings.Repeat("01", 32))
	l1d, _ := v1.NewHash("sha256:" + strings.Repeat("02", 32))
	h, err := v1.NewHash(d.DigestStr())
	if err != nil {
		t.Fatal(err)
	}
	return &assemble.Built{
		Digest: h,
		Base:   assemble.Base{Ref: "quay.io/fedora/fedora-coreos:stable", Digest: base},
		Added:  []assemble.AddedLayer{{Digest: l1, DiffID: l1d, Size: 1234, Source: "files"}},
		Pool:   "worker-a",
		Inputs: []model.Input{
			{Path: "osc-worker-a-reconcile.yaml", Kind: "OperatingSystemConfig", Name: "osc-worker-a", SHA256: strings.Repeat("cd", 32)},
			{Path: "secrets/secret-osc.yaml", Kind: "Secret", Name: "kube-system/osc-secret", SHA256: strings.Repeat("ef", 32)},
		},
		InputsDigest: "sha256:" + strings.Repeat("99", 32),
		Flags:        map[string]string{"bake-secrets": "false"},
	}
}

// signBoth runs the sign and attest stages for d with the key k.
func signBoth(t *testing.T, ctx context.Context, k keyFiles, d name.Digest, opts ...sign.Option) {
	t.Helper()
	stages := sign.Stages(keyFile(k.priv), opts...)
	b := fakeBuild(t, d)
	p := &assemble.Published{Ref: d.String(), Digest: &d}
	for _, s := range stages {
		if _, err := s.Run(ctx, b, p); err != nil {
			t.Fatalf("stage %s on %s: %v", s.Name(), d, err)
		}
	}
}

// toolEnv keeps external tools away from the host's config and network.
func toolEnv(t *testing.T) []string {
	home := t.TempDir()
	return []string{
		"PATH=" + os.Getenv("PATH"),
		"HOME=" + home,
		"TUF_ROOT=" + filepath.Join(home, "tuf"),
		"DOCKER_CONFIG=" + filepath.Join(home, "docker"),
		"XDG_RUNTIME_DIR=" + home,
		"NO_PROXY=*", "no_proxy=*",
	}
}

// run runs a tool with a deadline and returns its combined output and
// whether it exited 0.
func run(t *testing.T, env []string, bin string, args ...string) (string, bool) {
	t.Helper()
	return runDir(t, "", env, bin, args...)
}

// runDir is run in the working directory dir.
func runDir(t *testing.T, dir string, env []string, bin string, args ...string) (string, bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = env
	cmd.Dir = dir
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("%s %s: timed out\n%s", bin, strings.Join(args, " "), out.String())
	}
	return out.String(), err == nil
}

// copyManifest copies the manifest at from to the tag to (same repository).
func copyManifest(t *testing.T, from, to string) { t.Helper(); copyManifestTo(t, from, to) }

// copyImage copies the image d to repo (blobs and manifest) and returns it
// there; the digest does not change.
func copyImage(t *testing.T, d name.Digest, repo string) name.Digest {
	t.Helper()
	img, err := remote.Image(d)
	if err != nil {
		t.Fatal(err)
	}
	to, err := name.NewDigest(repo + "@" + d.DigestStr())
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(to, img); err != nil {
		t.Fatalf("copy %s to %s: %v", d, to, err)
	}
	return to
}

// copyManifestTo copies the manifest at from to the tag to, which may be
// in another repository of the same registry (the manifest's blobs are
// copied too).
func copyManifestTo(t *testing.T, from, to string) {
	t.Helper()
	fr, err := name.ParseReference(from)
	if err != nil {
		t.Fatal(err)
	}
	desc, err := remote.Get(fr)
	if err != nil {
		t.Fatalf("get %s: %v", from, err)
	}
	tr, err := name.NewTag(to)
	if err != nil {
		t.Fatal(err)
	}
	if tr.Context() != fr.Context() {
		img, err := desc.Image()
		if err != nil {
			t.Fatal(err)
		}
		if err := remote.Write(tr, img); err != nil {
			t.Fatalf("copy %s to %s: %v", from, to, err)
		}
		return
	}
	if err := remote.Put(tr, rawManifest{desc.Manifest, desc.MediaType}); err != nil {
		t.Fatalf("put %s: %v", to, err)
	}
}

type rawManifest struct {
	b  []byte
	mt types.MediaType
}

func (r rawManifest) RawManifest() ([]byte, error)        { return r.b, nil }
func (r rawManifest) MediaType() (types.MediaType, error) { return r.mt, nil }

// tamperProxy serves the registry at upstream but, once target is set,
// rewrites the manifest served for that digest: it adds an annotation, as
// a compromised registry or a man in the middle would. Everything else
// passes through.
type tamperProxy struct {
	Host   string
	mu     sync.Mutex
	target string
}

func newTamperProxy(t *testing.T, upstream string) *tamperProxy {
	t.Helper()
	u, _ := url.Parse("http://" + upstream)
	rp := httputil.NewSingleHostReverseProxy(u)
	tp := &tamperProxy{}
	rp.ModifyResponse = func(resp *http.Response) error {
		tp.mu.Lock()
		target := tp.target
		tp.mu.Unlock()
		if target == "" || resp.Request.Method != http.MethodGet || resp.StatusCode != http.StatusOK ||
			!strings.HasSuffix(resp.Request.URL.Path, "/manifests/"+target) {
			return nil
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			return err
		}
		var m map[string]any
		if err := json.Unmarshal(b, &m); err != nil {
			return err
		}
		m["annotations"] = map[string]string{"tampered": "yes"}
		nb, _ := json.Marshal(m)
		resp.Body = io.NopCloser(bytes.NewReader(nb))
		resp.ContentLength = int64(len(nb))
		resp.Header.Set("Content-Length", strconv.Itoa(len(nb)))
		return nil
	}
	srv := httptest.NewServer(rp)
	t.Cleanup(srv.Close)
	tp.Host = strings.TrimPrefix(srv.URL, "http://")
	return tp
}

// Tamper starts rewriting the manifest of d.
func (tp *tamperProxy) Tamper(d name.Digest) {
	tp.mu.Lock()
	defer tp.mu.Unlock()
	tp.target = d.DigestStr()
}

// writeTrust writes the files `oslayer trust` writes for repo into a temp
// dir, with the policy's keyPath pointing at pub (the node would have it at
// /etc/pki/containers/...).
func writeTrust(t *testing.T, repo, pub string) (policy, registriesD string, b *sign.TrustBundle) {
	t.Helper()
	return writeTrustOpts(t, repo, pub, sign.TrustOptions{})
}

// writeTrustOpts is writeTrust with options (NodeKeyPath is pub).
func writeTrustOpts(t *testing.T, repo, pub string, o sign.TrustOptions) (policy, registriesD string, b *sign.TrustBundle) {
	t.Helper()
	pem, err := os.ReadFile(pub)
	if err != nil {
		t.Fatal(err)
	}
	o.NodeKeyPath = pub
	b, err = sign.Trust(repo, pem, o)
	if err != nil {
		t.Fatalf("Trust(%s): %v", repo, err)
	}
	dir := t.TempDir()
	for _, f := range b.Files {
		p := filepath.Join(dir, filepath.FromSlash(f.Path))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, f.Content, os.FileMode(f.Mode)); err != nil {
			t.Fatal(err)
		}
	}
	return filepath.Join(dir, sign.TrustPolicyFile), filepath.Join(dir, "registries.d"), b
}

func regOpts() *registry.Options { return &registry.Options{} }

func jsonRoundTrip(t *testing.T, v any) any {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var out any
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return out
}
