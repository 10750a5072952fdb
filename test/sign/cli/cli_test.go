// Package cli_test runs the oslayer binary's keygen, trust and verify
// commands: files, modes, exit codes and output.
package cli_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/oslayer/oslayer/assemble"
	"github.com/oslayer/oslayer/sign"
	"github.com/oslayer/oslayer/test/fixtures"
	"github.com/oslayer/oslayer/test/oslayerbin"
	"github.com/oslayer/oslayer/test/regtest"
)

// oslayerBin is the command (test/oslayerbin: built once per test run).
func oslayerBin(t *testing.T) string { return oslayerbin.Path(t) }

type result struct {
	stdout, stderr string
	code           int
}

func oslayer(t *testing.T, bin string, env []string, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir()}, env...)
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err := cmd.Run()
	r := result{stdout: o.String(), stderr: e.String()}
	if ee, ok := err.(*exec.ExitError); ok {
		r.code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("oslayer %v: %v", args, err)
	}
	return r
}

func TestKeygenTrustVerify(t *testing.T) {
	bin := oslayerBin(t)
	ctx := context.Background()
	dir := t.TempDir()
	keys := filepath.Join(dir, "keys")

	// keygen: password from the environment; not on a terminal without it.
	if r := oslayer(t, bin, nil, "keygen", "--output-dir", keys); r.code != 1 || !strings.Contains(r.stderr, "COSIGN_PASSWORD") {
		t.Fatalf("keygen without COSIGN_PASSWORD off a terminal: %+v", r)
	}
	if r := oslayer(t, bin, []string{"COSIGN_PASSWORD=pw"}, "keygen", "--output-dir", keys); r.code != 0 {
		t.Fatalf("keygen: %+v", r)
	}
	st, err := os.Stat(filepath.Join(keys, "cosign.key"))
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("cosign.key: %v %v", st, err)
	}
	if r := oslayer(t, bin, []string{"COSIGN_PASSWORD=pw"}, "keygen", "--output-dir", keys); r.code != 1 || !strings.Contains(r.stderr, "exists") {
		t.Fatalf("keygen over an existing key: %+v", r)
	}
	if r := oslayer(t, bin, []string{"COSIGN_PASSWORD="}, "keygen", "--output-dir", filepath.Join(dir, "nopw")); r.code != 0 || !strings.Contains(r.stderr, "not protected by a password") {
		t.Fatalf("keygen with an empty password: %+v", r)
	}

	// Sign an image with the generated key through the library stages.
	reg := regtest.Start(t, regtest.Config{})
	img, _ := random.Image(256, 1)
	h, _ := img.Digest()
	d, _ := name.NewDigest(reg.Host + "/pool@" + h.String())
	if err := remote.Write(d, img); err != nil {
		t.Fatal(err)
	}
	for _, s := range sign.Stages(sign.KeyFile(filepath.Join(keys, "cosign.key"), sign.Password([]byte("pw")))) {
		if _, err := s.Run(ctx, &assemble.Built{Pool: "worker"}, &assemble.Published{Ref: d.String(), Digest: &d}); err != nil {
			t.Fatal(err)
		}
	}
	pub := filepath.Join(keys, "cosign.pub")
	r := oslayer(t, bin, nil, "verify", d.String(), "--key", pub)
	if r.code != 0 || !strings.HasPrefix(r.stdout, "OK "+d.String()) {
		t.Fatalf("verify signed: %+v", r)
	}
	r = oslayer(t, bin, nil, "verify", d.String(), "--key", pub, "-o", "json")
	var v sign.Verification
	if err := json.Unmarshal([]byte(r.stdout), &v); err != nil || r.code != 0 || v.Signatures != 1 || v.Attestations != 1 {
		t.Fatalf("verify -o json: %+v %v", r, err)
	}
	r = oslayer(t, bin, nil, "verify", d.String(), "--key", filepath.Join(dir, "nopw", "cosign.pub"))
	if r.code != 1 || !strings.HasPrefix(r.stdout, "FAIL ") || !strings.Contains(r.stderr, "verification failed") {
		t.Fatalf("verify with another key: %+v", r)
	}
	if r := oslayer(t, bin, nil, "verify", d.String()); r.code != 2 {
		t.Fatalf("verify without --key: %+v", r)
	}
	// Nothing checked is not a failed check: exit 2, not 1.
	gone := "127.0.0.1:1/pool@" + d.DigestStr()
	if r := oslayer(t, bin, nil, "verify", gone, "--key", pub, "--timeout", "5s"); r.code != 2 || !strings.Contains(r.stderr, "127.0.0.1:1") {
		t.Fatalf("verify against an unreachable registry: %+v", r)
	}

	// trust writes the files.
	out := filepath.Join(dir, "trust")
	r = oslayer(t, bin, nil, "trust", "--key", pub, "--repo", reg.Host+"/pool", "--output-dir", out)
	if r.code != 0 {
		t.Fatalf("trust: %+v", r)
	}
	for _, f := range []string{"policy.json", "policy-fragment.json", "trust-osc.yaml", "99-oslayer-trust.yaml",
		"registries.d/oslayer-" + strings.ReplaceAll(reg.Host, ":", "-") + "-pool.yaml"} {
		if _, err := os.Stat(filepath.Join(out, f)); err != nil {
			t.Fatalf("trust did not write %s: %v\n%s", f, err, r.stdout)
		}
	}
	if _, err := os.Stat(filepath.Join(out, sign.TrustClusterImagePolicyFile)); err == nil {
		t.Fatalf("trust wrote %s without --cluster-image-policy", sign.TrustClusterImagePolicyFile)
	}
	cip := filepath.Join(dir, "trust-openshift")
	if r := oslayer(t, bin, nil, "trust", "--key", pub, "--repo", reg.Host+"/pool", "--output-dir", cip, "--cluster-image-policy"); r.code != 0 {
		t.Fatalf("trust --cluster-image-policy: %+v", r)
	}
	if b, err := os.ReadFile(filepath.Join(cip, sign.TrustClusterImagePolicyFile)); err != nil ||
		!strings.Contains(string(b), "kind: ClusterImagePolicy") || !strings.Contains(string(b), "- "+reg.Host+"/pool\n") {
		t.Fatalf("trust --cluster-image-policy wrote %v:\n%s", err, b)
	}
	// Bad input exits 2 and writes nothing.
	if r := oslayer(t, bin, nil, "trust", "--key", pub, "--repo", reg.Host+"/pool:v1", "--output-dir", out); r.code != 2 {
		t.Fatalf("trust with a tag: %+v", r)
	}
	bad := filepath.Join(dir, "trust-bad")
	if r := oslayer(t, bin, nil, "trust", "--key", pub, "--repo", reg.Host+"/pool", "--output-dir", bad, "--accept-image", reg.Host+"/pool:v1"); r.code != 2 || !strings.Contains(r.stderr, "--accept-image") && !strings.Contains(r.stderr, "accepted image") {
		t.Fatalf("trust --accept-image of the signed repository: %+v", r)
	}
	if _, err := os.Stat(bad); !os.IsNotExist(err) {
		t.Fatalf("a refused trust wrote %s: %v", bad, err)
	}
	acc := filepath.Join(dir, "trust-accept")
	if r := oslayer(t, bin, nil, "trust", "--key", pub, "--repo", reg.Host+"/pool", "--output-dir", acc, "--accept-image", "registry.k8s.io/pause:3.10"); r.code != 0 {
		t.Fatalf("trust --accept-image: %+v", r)
	}
	if b, err := os.ReadFile(filepath.Join(acc, "policy.json")); err != nil || !strings.Contains(string(b), `"registry.k8s.io/pause": [`) || !strings.Contains(string(b), `"type": "reject"`) {
		t.Fatalf("trust --accept-image wrote %v:\n%s", err, b)
	}

	// oslayer build --sign-key: a wrong password file fails before anything
	// is pushed and the tag does not exist; the right one signs and attests.
	root, _ := fixtures.RepoRoot()
	target := reg.Host + "/pools/worker:latest"
	buildArgs := []string{"build", "--base", "oci:" + filepath.Join(root, "examples", "base"), "--pool", "worker",
		"--osc", filepath.Join(root, "examples", "gardener", "worker-osc.yaml"), "--push", target,
		"--sign-key", filepath.Join(keys, "cosign.key")}
	pwFile := filepath.Join(dir, "pw")
	os.WriteFile(pwFile, []byte("wrong\n"), 0o600)
	r = oslayer(t, bin, nil, append(buildArgs, "--sign-key-password-file", pwFile)...)
	if r.code == 0 || !strings.Contains(r.stderr, "--sign-key: key ") || !strings.Contains(r.stderr, "wrong or missing password") {
		t.Fatalf("build with a wrong key password: %+v", r)
	}
	tag, _ := name.NewTag(target)
	if _, err := remote.Head(tag); err == nil {
		t.Fatalf("%s exists after a failed signed build", target)
	}
	os.WriteFile(pwFile, []byte("pw\n"), 0o600)
	r = oslayer(t, bin, nil, append(buildArgs, "--sign-key-password-file", pwFile)...)
	if r.code != 0 {
		t.Fatalf("signed build: %+v", r)
	}
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	built := lines[len(lines)-1]
	r = oslayer(t, bin, nil, "verify", target, "--key", pub)
	if r.code != 0 || !strings.HasPrefix(r.stdout, "OK "+built) || !strings.Contains(r.stdout, "worker-osc.yaml") {
		t.Fatalf("verify of the signed build %s: %+v", built, r)
	}
	// COSIGN_PASSWORD works too; rebuilding signs nothing new.
	r = oslayer(t, bin, []string{"COSIGN_PASSWORD=pw"}, append(buildArgs, "-o", "json")...)
	if r.code != 0 || !strings.Contains(r.stdout, `"existing": true`) {
		t.Fatalf("rebuild with COSIGN_PASSWORD: %+v", r)
	}
}

// TestTwoKeysTwoTags: the same inputs built to two tags with two keys give
// one digest, signed and attested by both; `oslayer verify` of either tag
// passes with either key. Before, the second build's attestation replaced
// the first's and `oslayer verify ...:a --key K1.pub` failed ("Found: 0").
func TestTwoKeysTwoTags(t *testing.T) {
	bin := oslayerBin(t)
	dir := t.TempDir()
	env := []string{"COSIGN_PASSWORD=pw"}
	var keys [2]string
	for i := range keys {
		keys[i] = filepath.Join(dir, "k"+string(rune('1'+i)))
		if r := oslayer(t, bin, env, "keygen", "--output-dir", keys[i]); r.code != 0 {
			t.Fatalf("keygen: %+v", r)
		}
	}
	reg := regtest.Start(t, regtest.Config{})
	root, _ := fixtures.RepoRoot()
	var digests [2]string
	for i, tag := range []string{"a", "b"} {
		r := oslayer(t, bin, env, "build", "--base", "oci:"+filepath.Join(root, "examples", "base"), "--pool", "worker",
			"--osc", filepath.Join(root, "examples", "gardener", "worker-osc.yaml"), "--push", reg.Host+"/pools/worker:"+tag,
			"--sign-key", filepath.Join(keys[i], "cosign.key"))
		if r.code != 0 {
			t.Fatalf("build to :%s with key %d: %+v", tag, i+1, r)
		}
		lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
		digests[i] = lines[len(lines)-1]
	}
	if digests[0] != digests[1] {
		t.Fatalf("same inputs, two digests: %s %s", digests[0], digests[1])
	}
	for _, tag := range []string{"a", "b"} {
		for i := range keys {
			r := oslayer(t, bin, nil, "verify", reg.Host+"/pools/worker:"+tag, "--key", filepath.Join(keys[i], "cosign.pub"))
			if r.code != 0 || !strings.HasPrefix(r.stdout, "OK ") {
				t.Errorf("verify :%s --key k%d: %+v", tag, i+1, r)
			}
		}
	}
}
