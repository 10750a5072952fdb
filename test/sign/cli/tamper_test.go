package cli_test

import (
	"encoding/base64"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/sigstore/cosign/v2/pkg/oci"
	"github.com/sigstore/cosign/v2/pkg/oci/empty"
	"github.com/sigstore/cosign/v2/pkg/oci/mutate"
	ociremote "github.com/sigstore/cosign/v2/pkg/oci/remote"
	"github.com/sigstore/cosign/v2/pkg/oci/static"
	ctypes "github.com/sigstore/cosign/v2/pkg/types"

	"github.com/oslayer/oslayer/sign"
	"github.com/oslayer/oslayer/test/fixtures"
	"github.com/oslayer/oslayer/test/regtest"
)

// TestVerifyTamperedSBOM: an image built and signed by `oslayer build`,
// whose SBOM statement in the attestation tag is then edited (its DSSE
// signature kept), fails `oslayer verify --key` (exit 1, saying the SBOM
// does not verify), as `cosign verify-attestation --type spdxjson` does;
// the provenance still verifies. With the SBOM attestation removed
// altogether, verify fails too: the provenance records that oslayer
// attached one. Only an image whose provenance records none (signed
// before oslayer attached SBOMs; here its provenance re-attested by
// cosign without that record) passes with the note that there is none.
// Before, the edited SBOM read as absent, and the stripped one passed:
// verify exited 0.
func TestVerifyTamperedSBOM(t *testing.T) {
	cosignBin := regtest.Require(t, "cosign")
	bin := oslayerBin(t)
	dir := t.TempDir()
	keys := filepath.Join(dir, "keys")
	pw := []string{"COSIGN_PASSWORD=pw"}
	if r := oslayer(t, bin, pw, "keygen", "--output-dir", keys); r.code != 0 {
		t.Fatalf("keygen: %+v", r)
	}
	pub := filepath.Join(keys, "cosign.pub")
	reg := regtest.Start(t, regtest.Config{})
	root, _ := fixtures.RepoRoot()
	target := reg.Host + "/pools/worker:latest"
	r := oslayer(t, bin, pw, "build", "--base", "oci:"+filepath.Join(root, "examples", "base"), "--pool", "worker",
		"--osc", filepath.Join(root, "examples", "gardener", "worker-osc.yaml"), "--push", target,
		"--sign-key", filepath.Join(keys, "cosign.key"), "-o", "json")
	if r.code != 0 {
		t.Fatalf("signed build: %+v", r)
	}
	tag, _ := name.NewTag(target)
	desc, err := remote.Head(tag)
	if err != nil {
		t.Fatal(err)
	}
	d := tag.Context().Digest(desc.Digest.String())
	if r := oslayer(t, bin, nil, "verify", d.String(), "--key", pub); r.code != 0 || !strings.Contains(r.stdout, "sbom:        OK") {
		t.Fatalf("verify before tampering: %+v", r)
	}

	// Rewrite the attestation tag: the SBOM envelope with an edited
	// statement (a file's checksum), the signature it had; the
	// provenance as it was.
	atts, err := ociremote.SignedImage(d)
	if err != nil {
		t.Fatal(err)
	}
	as, err := atts.Attestations()
	if err != nil {
		t.Fatal(err)
	}
	l, err := as.Get()
	if err != nil {
		t.Fatal(err)
	}
	var prov, tampered []oci.Signature
	for _, a := range l {
		ann, _ := a.Annotations()
		if ann["predicateType"] != sign.SBOMPredicateType {
			prov = append(prov, a)
			continue
		}
		tampered = append(tampered, editSBOM(t, a, ann))
	}
	if len(prov) != 1 || len(tampered) != 1 {
		t.Fatalf("attestations: %d provenance and %d SBOM, want one each", len(prov), len(tampered))
	}
	at, err := ociremote.AttestationTag(d)
	if err != nil {
		t.Fatal(err)
	}
	writeAtts := func(l ...oci.Signature) {
		t.Helper()
		s, err := mutate.AppendSignatures(empty.Signatures(), false, l...)
		if err != nil {
			t.Fatal(err)
		}
		if err := remote.Write(at, s); err != nil {
			t.Fatal(err)
		}
	}
	writeAtts(append(prov, tampered...)...)

	r = oslayer(t, bin, nil, "verify", d.String(), "--key", pub)
	if r.code != 1 || !strings.HasPrefix(r.stdout, "FAIL ") || !strings.Contains(r.stdout, "sbom:        FAIL") ||
		!strings.Contains(r.stdout, "none verifies with this key") || !strings.Contains(r.stderr, "sbom:") {
		t.Fatalf("verify of an image with an edited SBOM: want exit 1 naming the SBOM, got %+v", r)
	}
	cosignArgs := []string{"verify-attestation", "--key", pub, "--insecure-ignore-tlog", "--allow-http-registry"}
	if out, err := exec.Command(cosignBin, append(cosignArgs, "--type", "spdxjson", d.String())...).CombinedOutput(); err == nil {
		t.Fatalf("cosign verify-attestation --type spdxjson accepted the edited SBOM:\n%s", out)
	}
	if out, err := exec.Command(cosignBin, append(cosignArgs, "--type", "slsaprovenance1", d.String())...).CombinedOutput(); err != nil {
		t.Fatalf("cosign verify-attestation --type slsaprovenance1 after editing the SBOM only: %v\n%s", err, out)
	}

	// The SBOM attestation stripped: the provenance says there was one.
	writeAtts(prov...)
	r = oslayer(t, bin, nil, "verify", d.String(), "--key", pub)
	if r.code != 1 || !strings.Contains(r.stdout, "sbom:        FAIL") || !strings.Contains(r.stderr, "the SBOM was removed") {
		t.Fatalf("verify of an image whose SBOM attestation was stripped: want exit 1, got %+v", r)
	}

	// An image signed before oslayer attached SBOMs: its provenance
	// (attested by cosign, without internalParameters.sbom) and no SBOM.
	writeAtts()
	pred := filepath.Join(dir, "provenance.json")
	writeJSON(t, pred, predicateWithout(t, prov[0], sign.ParamSBOM))
	attest := exec.Command(cosignBin, "attest", "--key", filepath.Join(keys, "cosign.key"), "--type", "slsaprovenance1",
		"--predicate", pred, "--tlog-upload=false", "--allow-http-registry", "-y", d.String())
	attest.Env = append(os.Environ(), pw...)
	if out, err := attest.CombinedOutput(); err != nil {
		t.Fatalf("cosign attest: %v\n%s", err, out)
	}
	r = oslayer(t, bin, nil, "verify", d.String(), "--key", pub)
	if r.code != 0 || !strings.Contains(r.stdout, "sbom:        none by this key") {
		t.Fatalf("verify of an image signed before SBOMs: %+v", r)
	}
}

// predicateWithout is the SLSA predicate of provenance attestation a with
// the internal parameter param removed.
func predicateWithout(t *testing.T, a oci.Signature, param string) map[string]any {
	t.Helper()
	p, err := a.Payload()
	if err != nil {
		t.Fatal(err)
	}
	var env struct {
		Payload string `json:"payload"`
	}
	if err := json.Unmarshal(p, &env); err != nil {
		t.Fatal(err)
	}
	b, err := base64.StdEncoding.DecodeString(env.Payload)
	if err != nil {
		t.Fatal(err)
	}
	var st struct {
		Predicate map[string]any `json:"predicate"`
	}
	if err := json.Unmarshal(b, &st); err != nil {
		t.Fatal(err)
	}
	bd := st.Predicate["buildDefinition"].(map[string]any)
	ip, _ := bd["internalParameters"].(map[string]any)
	if _, ok := ip[param]; !ok {
		t.Fatalf("the provenance has no internalParameters.%s", param)
	}
	delete(ip, param)
	return st.Predicate
}

func writeJSON(t *testing.T, path string, v any) {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// editSBOM returns the attestation a (annotations ann) with one checksum
// in its SPDX statement changed and its DSSE signatures kept.
func editSBOM(t *testing.T, a oci.Signature, ann map[string]string) oci.Signature {
	t.Helper()
	p, err := a.Payload()
	if err != nil {
		t.Fatal(err)
	}
	var env map[string]any
	if err := json.Unmarshal(p, &env); err != nil {
		t.Fatal(err)
	}
	st, err := base64.StdEncoding.DecodeString(env["payload"].(string))
	if err != nil {
		t.Fatal(err)
	}
	var sbom sign.SBOMStatement
	if err := json.Unmarshal(st, &sbom); err != nil || sbom.Predicate == nil || len(sbom.Predicate.Files) == 0 {
		t.Fatalf("SBOM statement: %v", err)
	}
	f := &sbom.Predicate.Files[0]
	for i := range f.Checksums {
		if f.Checksums[i].Algorithm == "SHA256" {
			f.Checksums[i].ChecksumValue = strings.Repeat("0", 64)
		}
	}
	st, err = json.Marshal(sbom)
	if err != nil {
		t.Fatal(err)
	}
	env["payload"] = base64.StdEncoding.EncodeToString(st)
	b, err := json.Marshal(env)
	if err != nil {
		t.Fatal(err)
	}
	out, err := static.NewAttestation(b, static.WithLayerMediaType(ctypes.DssePayloadType), static.WithAnnotations(ann))
	if err != nil {
		t.Fatal(err)
	}
	return out
}
