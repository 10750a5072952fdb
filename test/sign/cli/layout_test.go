package cli_test

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"

	"github.com/oslayer/oslayer/publish"
	"github.com/oslayer/oslayer/test/regtest"
	"github.com/oslayer/oslayer/test/synth"
)

const layoutOSC = `  - path: /etc/motd.d/pool
    permissions: 420
    content:
      inline: {data: "signed layout\n"}
`

// TestSignedLayout: `build --push oci:DIR --sign-key --sign-identity`
// stores the signature and the provenance in the layout as `cosign save`
// does; cosign verify --local-image and verify-attestation --local-image
// accept it with the key and refuse another key, as does `oslayer verify
// oci:DIR:TAG`. A rebuild adds nothing; without --sign-identity the build
// stops before writing a blob.
func TestSignedLayout(t *testing.T) {
	cosign := regtest.Require(t, "cosign")
	bin := oslayerBin(t)
	dir := t.TempDir()
	for _, k := range []string{"keys", "other"} {
		if r := oslayer(t, bin, []string{"COSIGN_PASSWORD=pw"}, "keygen", "--output-dir", filepath.Join(dir, k)); r.code != 0 {
			t.Fatalf("keygen: %+v", r)
		}
	}
	base, err := synth.FCOSBase(0.0005)
	if err != nil {
		t.Fatal(err)
	}
	lp, err := layout.Write(filepath.Join(dir, "base"), empty.Index)
	if err != nil {
		t.Fatal(err)
	}
	if err := lp.AppendImage(base, layout.WithAnnotations(map[string]string{publish.RefNameAnnotation: "stable"})); err != nil {
		t.Fatal(err)
	}
	osc := filepath.Join(dir, "osc.yaml")
	if err := os.WriteFile(osc, []byte(synth.OSCFiles(layoutOSC)), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "out")
	env := []string{"COSIGN_PASSWORD=pw"}
	args := []string{"build", "--base", "oci:" + filepath.Join(dir, "base") + ":stable", "--pool", "pool", "--osc", osc,
		"--push", "oci:" + out + ":latest", "--sign-key", filepath.Join(dir, "keys", "cosign.key")}

	r := oslayer(t, bin, env, args...)
	if r.code == 0 || !strings.Contains(r.stderr, "--sign-identity") {
		t.Fatalf("signed layout build without --sign-identity: %+v", r)
	}
	if _, err := os.Stat(filepath.Join(out, "blobs")); err == nil {
		t.Errorf("the refused build wrote blobs into %s", out)
	}

	args = append(args, "--sign-identity", "registry.example.com/os/pool")
	r = oslayer(t, bin, env, append(args, "-o", "json")...)
	if r.code != 0 {
		t.Fatalf("signed layout build: %+v", r)
	}
	var res struct {
		Digest string `json:"digest"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &res); err != nil || res.Digest == "" {
		t.Fatalf("build result %v: %s", err, r.stdout)
	}
	var idx struct {
		Manifests []struct {
			Digest      string            `json:"digest"`
			Annotations map[string]string `json:"annotations"`
		} `json:"manifests"`
	}
	raw, err := os.ReadFile(filepath.Join(out, "index.json"))
	if err != nil || json.Unmarshal(raw, &idx) != nil {
		t.Fatalf("index.json: %v\n%s", err, raw)
	}
	kinds := map[string]string{}
	for _, m := range idx.Manifests {
		kinds[m.Annotations[publish.KindAnnotation]] = m.Digest
	}
	if kinds[publish.KindImage] != res.Digest || kinds[publish.KindSignatures] == "" || kinds[publish.KindAttestations] == "" || len(idx.Manifests) != 3 {
		t.Fatalf("index.json of the signed layout:\n%s", raw)
	}

	pub := filepath.Join(dir, "keys", "cosign.pub")
	other := filepath.Join(dir, "other", "cosign.pub")
	run := func(args ...string) (string, error) {
		b, err := exec.Command(cosign, args...).CombinedOutput()
		return string(b), err
	}
	if o, err := run("verify", "--key", pub, "--insecure-ignore-tlog=true", "--local-image", out); err != nil || !strings.Contains(o, res.Digest) {
		t.Errorf("cosign verify --local-image: %v\n%s", err, o)
	}
	if o, err := run("verify-attestation", "--key", pub, "--insecure-ignore-tlog=true", "--type", "slsaprovenance1", "--local-image", out); err != nil {
		t.Errorf("cosign verify-attestation --local-image: %v\n%s", err, o)
	}
	if o, err := run("verify-attestation", "--key", pub, "--insecure-ignore-tlog=true", "--type", "spdxjson", "--local-image", out); err != nil || !slices.Equal(regtest.DSSEPredicateTypes(o), []string{"https://spdx.dev/Document"}) {
		t.Errorf("cosign verify-attestation --type spdxjson --local-image: %v\n%s", err, o)
	}
	if o, err := run("verify", "--key", other, "--insecure-ignore-tlog=true", "--local-image", out); err == nil {
		t.Errorf("cosign verify --local-image with another key passed:\n%s", o)
	}

	r = oslayer(t, bin, nil, "verify", "oci:"+out+":latest", "--key", pub)
	if r.code != 0 || !strings.HasPrefix(r.stdout, "OK oci:"+out+"@"+res.Digest) || !strings.Contains(r.stdout, "identity registry.example.com/os/pool") ||
		!strings.Contains(r.stdout, "sbom:        OK (SPDX-2.3, ") || !strings.Contains(r.stdout, "/etc/motd.d/pool") {
		t.Errorf("oslayer verify of the layout: %+v", r)
	}
	if r = oslayer(t, bin, nil, "verify", "oci:"+out+":latest", "--key", other); r.code != 1 {
		t.Errorf("oslayer verify of the layout with another key: %+v", r)
	}

	// A rebuild finds its signature and attestation and adds none.
	r = oslayer(t, bin, env, args...)
	if r.code != 0 || strings.Count(r.stdout+r.stderr, "(already there)") != 2 {
		t.Errorf("rebuild of the signed layout: %+v", r)
	}
	if o, err := run("verify", "--key", pub, "--insecure-ignore-tlog=true", "--local-image", out); err != nil || strings.Count(o, `"critical"`) != 1 {
		t.Errorf("cosign verify after the rebuild (want one signature): %v\n%s", err, o)
	}
}
