package sign_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"

	"github.com/oslayer/oslayer/assemble"

	"github.com/oslayer/oslayer/sign"
	"github.com/oslayer/oslayer/test/regtest"
)

// signRace runs the sign and attest stages for d with each key at once and
// returns each one's error and how often it wrote the signature and the
// attestation tag.
func signRace(ctx context.Context, t *testing.T, d name.Digest, ks ...keyFiles) ([]error, []string) {
	t.Helper()
	errs := make([]error, len(ks))
	writes := make([]string, len(ks))
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i, k := range ks {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			var out []any
			out, errs[i] = runStages(ctx, sign.Stages(keyFile(k.priv)), fakeBuild(t, d), d)
			if errs[i] == nil {
				ar := out[1].(*sign.AttestResult)
				writes[i] = fmt.Sprintf("%d+%d%v", out[0].(*sign.SignResult).Writes, ar.Writes, ar.Readded)
			}
		}()
	}
	close(start)
	wg.Wait()
	return errs, writes
}

// TestTwoSignersOneDigest: two builds sign and attest one digest at the
// same time with different keys (as two pools built from the same inputs
// do). Both succeed only if each one's signature and attestation are in
// the registry afterwards: each key verifies the image. Before signatures
// were merged and read back, one key lost (10 of 10 trials).
//
// OSLAYER_SIGN_RACE_DELAY (a duration) puts a proxy in front of the
// registry that delays every blob upload by a random time up to it: a
// signer stalled between reading a tag and writing it, as on a loaded
// machine (a stress run: -count=N with it set).
func TestTwoSignersOneDigest(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	r := regtest.Start(t, regtest.Config{})
	host := r.Host
	if v := os.Getenv("OSLAYER_SIGN_RACE_DELAY"); v != "" {
		delay, err := time.ParseDuration(v)
		if err != nil || delay <= 0 {
			t.Fatalf("OSLAYER_SIGN_RACE_DELAY=%q: want a positive duration", v)
		}
		proxy := regtest.NewProxy(t, r.Host)
		proxy.SetFail(func(req *http.Request) int {
			if strings.Contains(req.URL.Path, "/blobs/uploads/") {
				time.Sleep(rand.N(delay))
			}
			return 0
		})
		host = proxy.Host
	}
	k1, k2 := sharedKey(t, 0), sharedKey(t, 1)
	const trials = 6
	for i := 0; i < trials; i++ {
		d := pushRandom(t, host, "pool")
		start := time.Now()
		errs, writes := signRace(ctx, t, d, k1, k2)
		for j, err := range errs {
			if err != nil {
				t.Fatalf("trial %d: signer %d: %v", i, j+1, err)
			}
		}
		for j, k := range []keyFiles{k1, k2} {
			pub, err := sign.LoadPublicKey(ctx, k.pub)
			if err != nil {
				t.Fatal(err)
			}
			v, err := sign.Verify(ctx, d.String(), pub)
			if err != nil {
				t.Fatalf("trial %d: both signers succeeded but key %d does not verify: %v", i, j+1, err)
			}
			if v.Signatures != 1 || v.Attestations != 1 {
				t.Fatalf("trial %d: key %d: %d signatures, %d attestations; want 1 and 1", i, j+1, v.Signatures, v.Attestations)
			}
		}
		if n, _ := attachedLayers(t, d, ".sig"); n != 2 {
			t.Fatalf("trial %d: %d signature layers, want 2", i, n)
		}
		if n, _ := attachedLayers(t, d, ".att"); n != 4 {
			t.Fatalf("trial %d: %d attestation layers, want 4 (provenance and SBOM of each)", i, n)
		}
		t.Logf("trial %d: two signers in %v, signature+attestation writes [re-added] %v", i, time.Since(start).Round(time.Millisecond), writes)
	}
}

// TestSignRacingCosign: `cosign sign` with another key writes the same
// digest's signature tag while oslayer signs and attests it. First a fixed
// interleaving: cosign reads the tag, oslayer's sign stage writes, then
// cosign writes what it read plus its own signature (dropping oslayer's);
// the attest stage, the last before the tag moves, must notice and add the
// signature back. Then free races. Afterwards oslayer's key verifies the
// image, with oslayer's verifier and the cosign CLI.
func TestSignRacingCosign(t *testing.T) {
	cosignBin := regtest.Require(t, "cosign")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	r := regtest.Start(t, regtest.Config{})
	env := append(toolEnv(t), "COSIGN_PASSWORD="+testPassword)
	ours, theirs := sharedKey(t, 0), sharedKey(t, 1)
	check := func(what string, d name.Digest) {
		t.Helper()
		v := verifyWith(t, ctx, ours, d.String())
		if v.Signatures != 1 {
			t.Fatalf("%s: %d signatures by our key", what, v.Signatures)
		}
		if o, ok := run(t, toolEnv(t), cosignBin, "verify", "--key", ours.pub, "--insecure-ignore-tlog", "--allow-http-registry", d.String()); !ok {
			t.Fatalf("%s: cosign verify with our key:\n%s", what, o)
		}
	}

	// cosign goes through a proxy that holds its signature-tag write until
	// oslayer's sign stage is done.
	proxy := regtest.NewProxy(t, r.Host)
	held, release := make(chan struct{}, 1), make(chan struct{})
	proxy.SetFail(func(req *http.Request) int {
		if req.Method == http.MethodPut && strings.Contains(req.URL.Path, "/manifests/sha256-") && strings.HasSuffix(req.URL.Path, ".sig") {
			select {
			case held <- struct{}{}:
			default:
			}
			<-release
		}
		return 0
	})
	d := pushRandom(t, r.Host, "pool")
	cosignDone := make(chan string, 1)
	go func() {
		out, ok := run(t, env, cosignBin, "sign", "--key", theirs.priv, "--tlog-upload=false", "--allow-http-registry", "-y",
			proxy.Host+"/pool@"+d.DigestStr())
		if !ok {
			out = "failed: " + out
		} else {
			out = ""
		}
		cosignDone <- out
	}()
	select {
	case <-held:
	case <-time.After(60 * time.Second):
		close(release)
		t.Fatalf("cosign sign never wrote its signature tag:\n%s", <-cosignDone)
	}
	stages := sign.Stages(keyFile(ours.priv))
	b, p := fakeBuild(t, d), &assemble.Published{Ref: d.String(), Digest: &d}
	if _, err := stages[0].Run(ctx, b, p); err != nil {
		close(release)
		t.Fatal(err)
	}
	close(release)
	if out := <-cosignDone; out != "" {
		t.Fatalf("cosign sign: %s", out)
	}
	if _, err := stages[1].Run(ctx, b, p); err != nil {
		t.Fatalf("attest after cosign replaced the signature tag: %v", err)
	}
	check("cosign wrote after our sign stage", d)

	const trials = 3
	for i := 0; i < trials; i++ {
		d := pushRandom(t, r.Host, "pool")
		var (
			wg       sync.WaitGroup
			out      string
			cosignOK bool
			err      error
		)
		wg.Add(2)
		go func() {
			defer wg.Done()
			out, cosignOK = run(t, env, cosignBin, "sign", "--key", theirs.priv, "--tlog-upload=false", "--allow-http-registry", "-y", d.String())
		}()
		go func() {
			defer wg.Done()
			_, err = runStages(ctx, sign.Stages(keyFile(ours.priv)), fakeBuild(t, d), d)
		}()
		wg.Wait()
		if !cosignOK {
			t.Fatalf("trial %d: cosign sign:\n%s", i, out)
		}
		if err != nil {
			t.Fatalf("trial %d: oslayer stages: %v", i, err)
		}
		check("race", d)
	}
}

// TestTwoKeyAttestations: the same inputs built to two tags with keys K1
// and K2 give one digest; K2's provenance must not delete K1's, so the
// image still verifies with K1 (with oslayer and with cosign
// verify-attestation). Before, the second attest replaced every
// provenance attestation ("Found: 0" for K1).
func TestTwoKeyAttestations(t *testing.T) {
	ctx := context.Background()
	r := regtest.Start(t, regtest.Config{})
	k1, k2 := sharedKey(t, 0), sharedKey(t, 1)
	d := pushRandom(t, r.Host, "pool")
	copyManifest(t, d.String(), r.Host+"/pool:a")
	signBoth(t, ctx, k1, d)
	copyManifest(t, d.String(), r.Host+"/pool:b")
	signBoth(t, ctx, k2, d)
	for j, k := range []keyFiles{k1, k2} {
		v := verifyWith(t, ctx, k, r.Host+"/pool:a")
		if v.Signatures != 1 || v.Attestations != 1 {
			t.Fatalf("key %d: %d signatures and %d attestations on pool:a, want 1 and 1", j+1, v.Signatures, v.Attestations)
		}
	}
	// Re-attesting with K1 (a new statement: another version) replaces
	// only K1's own provenance.
	st := sign.Stages(keyFile(k1.priv), sign.WithVersion("v2"))
	out, err := runStages(ctx, st, fakeBuild(t, d), d)
	if err != nil {
		t.Fatal(err)
	}
	// Each key's provenance and SBOM: four layers, K1's provenance replaced.
	if ar := out[1].(*sign.AttestResult); ar.Replaced != 1 || ar.Attestations != 4 {
		t.Fatalf("re-attest with K1: %+v, want 1 replaced and 4 left", ar)
	}
	verifyWith(t, ctx, k2, r.Host+"/pool:b")
	cosignBin := regtest.Require(t, "cosign")
	for j, k := range []keyFiles{k1, k2} {
		if o, ok := run(t, toolEnv(t), cosignBin, "verify-attestation", "--key", k.pub, "--type", "slsaprovenance1",
			"--insecure-ignore-tlog", "--allow-http-registry", r.Host+"/pool:a"); !ok {
			t.Fatalf("cosign verify-attestation with key %d:\n%s", j+1, o)
		}
	}
}

// TestStaleMergeKeepsConfirmedLayers forces the interleaving behind a rare
// TestTwoSignersOneDigest failure (3 attestation layers instead of 4):
// signer B reads the signature (or attestation) tag and stalls while it
// uploads the blobs of what it merged; meanwhile signer A signs, attests,
// attaches its SBOM and confirms all of it with its own key, and returns;
// then B goes on. B's merge was based on a tag that is no longer the tag,
// so B must notice and merge again rather than drop A's signature, or
// A's provenance and SBOM, after A has already succeeded. B reaches the
// registry through a proxy that holds its first blob upload of the stage;
// A goes straight to the registry.
func TestStaleMergeKeepsConfirmedLayers(t *testing.T) {
	a, b := sharedKey(t, 0), sharedKey(t, 1)
	for stage, tag := range []string{".sig", ".att"} {
		t.Run(tag, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			r := regtest.Start(t, regtest.Config{})
			proxy := regtest.NewProxy(t, r.Host)
			d := pushRandom(t, r.Host, "pool")
			db, err := name.NewDigest(proxy.Host + "/pool@" + d.DigestStr())
			if err != nil {
				t.Fatal(err)
			}
			stB := sign.Stages(keyFile(b.priv))
			bb, pb := fakeBuild(t, db), &assemble.Published{Ref: db.String(), Digest: &db}
			for _, s := range stB[:stage] {
				if _, err := s.Run(ctx, bb, pb); err != nil {
					t.Fatal(err)
				}
			}
			var once sync.Once
			held, release := make(chan struct{}), make(chan struct{})
			proxy.SetFail(func(req *http.Request) int {
				if req.Method == http.MethodPost && strings.HasSuffix(req.URL.Path, "/blobs/uploads/") {
					once.Do(func() { close(held); <-release })
				}
				return 0
			})
			errB := make(chan error, 1)
			go func() {
				_, err := runStages(ctx, stB[stage:], bb, db)
				errB <- err
			}()
			select {
			case <-held:
			case err := <-errB:
				t.Fatalf("signer B uploaded no blob for %s: %v", tag, err)
			case <-time.After(60 * time.Second):
				t.Fatalf("signer B uploaded no blob for %s within 60 s", tag)
			}
			_, err = runStages(ctx, sign.Stages(keyFile(a.priv)), fakeBuild(t, d), d)
			close(release)
			if err != nil {
				t.Fatalf("signer A: %v", err)
			}
			if err := <-errB; err != nil {
				t.Fatalf("signer B: %v", err)
			}
			v := verifyWith(t, ctx, a, d.String())
			if v.Signatures != 1 || v.Attestations != 1 || v.SBOM == nil {
				t.Fatalf("key A after B's stale merge: %d signatures, %d attestations, SBOM %v; want 1, 1, present",
					v.Signatures, v.Attestations, v.SBOM != nil)
			}
			// B signed through the proxy: its signature names the proxy's
			// repository, so B is checked by what the tags hold.
			if n, _ := attachedLayers(t, d, ".sig"); n != 2 {
				t.Fatalf("%d signature layers, want 2", n)
			}
			if n, _ := attachedLayers(t, d, ".att"); n != 4 {
				t.Fatalf("%d attestation layers, want 4 (provenance and SBOM of each)", n)
			}
		})
	}
}
