package sign_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/oslayer/oslayer/sign"
	"github.com/oslayer/oslayer/test/regtest"
)

// TestKeyCompat: keys are interchangeable with the cosign CLI both ways. A
// key made by `cosign generate-key-pair` signs through oslayer; a key made
// by oslayer signs through `cosign sign` and oslayer's signature verifies.
// cosign's own signature of the same digest is recognized as a duplicate.
func TestKeyCompat(t *testing.T) {
	cosignBin := regtest.Require(t, "cosign")
	ctx := context.Background()
	r := regtest.Start(t, regtest.Config{})
	env := toolEnv(t)
	env = append(env, "COSIGN_PASSWORD="+testPassword)

	// cosign's key, oslayer's signature, cosign verifies.
	dir := t.TempDir()
	if out, ok := runDir(t, dir, env, cosignBin, "generate-key-pair"); !ok {
		t.Fatalf("cosign generate-key-pair:\n%s", out)
	}
	ck := keyFiles{priv: filepath.Join(dir, "cosign.key"), pub: filepath.Join(dir, "cosign.pub")}
	d := pushRandom(t, r.Host, "pool")
	signBoth(t, ctx, ck, d)
	if out, ok := run(t, env, cosignBin, "verify", "--key", ck.pub, "--insecure-ignore-tlog", "--allow-http-registry", d.String()); !ok {
		t.Fatalf("cosign verify of a signature made with a cosign key:\n%s", out)
	}

	// oslayer's key, cosign's signature, oslayer verifies it; then oslayer
	// signing the same digest adds nothing.
	ok := newKey(t, testPassword)
	d2 := pushRandom(t, r.Host, "pool")
	if out, good := run(t, env, cosignBin, "sign", "--key", ok.priv, "--tlog-upload=false", "--allow-http-registry", "-y", d2.String()); !good {
		t.Fatalf("cosign sign with an oslayer key:\n%s", out)
	}
	pub, err := sign.LoadPublicKey(ctx, ok.pub)
	if err != nil {
		t.Fatal(err)
	}
	sv, err := sign.LoadKey(ok.priv, sign.Password([]byte(testPassword)))
	if err != nil {
		t.Fatal(err)
	}
	res, err := sign.NewSigner(sv).Sign(ctx, d2)
	if err != nil {
		t.Fatal(err)
	}
	if !res.Existing || res.Signatures != 1 {
		t.Fatalf("signing a digest cosign already signed with the same key: %+v, want Existing with 1 signature", res)
	}
	v, err := sign.Verify(ctx, d2.String(), pub)
	if v == nil || v.Signatures != 1 || v.SignatureError != "" {
		t.Fatalf("verify of cosign's signature: %+v %v", v, err)
	}
	if err == nil {
		t.Fatalf("no attestation was made, verify must fail")
	}
}
