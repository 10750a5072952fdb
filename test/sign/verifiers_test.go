package sign_test

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"

	"github.com/oslayer/oslayer/sign"
	"github.com/oslayer/oslayer/test/regtest"
)

// verdicts are what each verifier said about one image.
type verdicts struct {
	cosignSig, cosignAtt, skopeo, oslayer bool
	out                                   string
}

// TestVerifiersAgree signs images with oslayer's library code and checks
// them with the real cosign CLI, upstream skopeo enforcing the files
// `oslayer trust` writes (the node's check), and sign.Verify (what
// `oslayer verify` runs): the signed image passes all; an unsigned image,
// an image signed with another key, a signature copied onto another digest
// and a tampered manifest fail.
func TestVerifiersAgree(t *testing.T) {
	cosignBin := regtest.Require(t, "cosign")
	skopeoBin := regtest.Require(t, "skopeo")
	ctx := context.Background()
	r := regtest.Start(t, regtest.Config{})
	tp := newTamperProxy(t, r.Host)
	key := sharedKey(t, 0)
	other := sharedKey(t, 1)
	pub, err := sign.LoadPublicKey(ctx, key.pub)
	if err != nil {
		t.Fatal(err)
	}
	env := toolEnv(t)

	check := func(t *testing.T, d name.Digest) verdicts {
		t.Helper()
		var v verdicts
		var out string
		out, v.cosignSig = run(t, env, cosignBin, "verify", "--key", key.pub, "--insecure-ignore-tlog", "--allow-http-registry", d.String())
		v.out += "cosign verify:\n" + out
		out, v.cosignAtt = run(t, env, cosignBin, "verify-attestation", "--key", key.pub, "--insecure-ignore-tlog", "--allow-http-registry", "--type", "slsaprovenance1", d.String())
		v.out += "cosign verify-attestation:\n" + out
		policy, regd, _ := writeTrust(t, d.Context().Name(), key.pub)
		out, v.skopeo = run(t, env, skopeoBin, "copy", "--remove-signatures", "--policy", policy, "--registries.d", regd,
			"--src-tls-verify=false", "docker://"+d.String(), "oci:"+filepath.Join(t.TempDir(), "oci"))
		v.out += "skopeo copy:\n" + out
		res, err := sign.Verify(ctx, d.String(), pub, sign.WithRegistry(regOpts()))
		v.oslayer = err == nil && res != nil && res.OK()
		if err != nil && !errors.Is(err, sign.ErrVerify) {
			t.Fatalf("sign.Verify(%s): not a verification failure: %v", d, err)
		}
		v.out += "sign.Verify: " + errString(err) + "\n"
		return v
	}

	signed := pushRandom(t, r.Host, "pool")
	signBoth(t, ctx, key, signed)

	unsigned := pushRandom(t, r.Host, "pool")

	otherKey := pushRandom(t, r.Host, "pool")
	signBoth(t, ctx, other, otherKey)

	// A valid signature and attestation of `signed` copied to another
	// digest's .sig/.att tags.
	copied := pushRandom(t, r.Host, "pool")
	for _, suffix := range []string{".sig", ".att"} {
		copyManifest(t, r.Host+"/pool:"+tagOf(signed)+suffix, r.Host+"/pool:"+tagOf(copied)+suffix)
	}

	// The signed image and its signature copied as they are to another
	// repository: the digest matches, the signed identity does not.
	moved := copyImage(t, signed, r.Host+"/elsewhere")
	for _, suffix := range []string{".sig", ".att"} {
		copyManifestTo(t, r.Host+"/pool:"+tagOf(signed)+suffix, r.Host+"/elsewhere:"+tagOf(moved)+suffix)
	}

	// Signed through the proxy (so the signed identity is the proxy's
	// repository), then the proxy serves a rewritten manifest for it.
	tampered := pushRandom(t, tp.Host, "tampered")
	signBoth(t, ctx, key, tampered)
	if v := check(t, tampered); !v.cosignSig || !v.skopeo || !v.oslayer {
		t.Fatalf("before tampering, %s should verify:\n%s", tampered, v.out)
	}
	tp.Tamper(tampered)

	for _, c := range []struct {
		name string
		d    name.Digest
		want verdicts
	}{
		{"signed", signed, verdicts{cosignSig: true, cosignAtt: true, skopeo: true, oslayer: true}},
		{"unsigned", unsigned, verdicts{}},
		{"other-key", otherKey, verdicts{}},
		{"copied-signature", copied, verdicts{}},
		// cosign checks the digest only; the node's matchRepository and
		// oslayer verify also check the repository the signature names.
		{"other-repository", moved, verdicts{cosignSig: true, cosignAtt: true}},
		// cosign never reads the image manifest when given a digest: it
		// checks only the signature tag, so it still accepts. The node
		// (skopeo) and oslayer verify read the manifest and refuse bytes
		// that do not hash to the digest.
		{"tampered-manifest", tampered, verdicts{cosignSig: true, cosignAtt: true}},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := check(t, c.d)
			t.Logf("%s\n%s", c.d, got.out)
			if got.cosignSig != c.want.cosignSig || got.cosignAtt != c.want.cosignAtt || got.skopeo != c.want.skopeo || got.oslayer != c.want.oslayer {
				t.Fatalf("%s: cosign verify=%v verify-attestation=%v skopeo=%v oslayer=%v, want %v/%v/%v/%v\n%s",
					c.d, got.cosignSig, got.cosignAtt, got.skopeo, got.oslayer,
					c.want.cosignSig, c.want.cosignAtt, c.want.skopeo, c.want.oslayer, got.out)
			}
			// The node's verdict and oslayer's must always agree.
			if got.skopeo != got.oslayer {
				t.Fatalf("skopeo and oslayer verify disagree on %s\n%s", c.d, got.out)
			}
		})
	}

	// The image signed with the other key is valid for that key: the
	// failure above is the key, not a broken signature.
	opub, err := sign.LoadPublicKey(ctx, other.pub)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sign.Verify(ctx, otherKey.String(), opub, sign.WithRegistry(regOpts())); err != nil {
		t.Fatalf("%s with its own key: %v", otherKey, err)
	}
}

// tagOf returns the cosign tag stem of d: "sha256-HEX".
func tagOf(d name.Digest) string { return strings.Replace(d.DigestStr(), ":", "-", 1) }

func errString(err error) string {
	if err == nil {
		return "ok"
	}
	return err.Error()
}
