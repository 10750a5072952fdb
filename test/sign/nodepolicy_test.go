package sign_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/oslayer/oslayer/sign"
	"github.com/oslayer/oslayer/test/regtest"
)

// ostreeExtRefuses is ostree-rs-ext's check before it pulls an
// ostree-image-signed reference (rpm-ostree rebase, bootc switch
// --enforce-container-sigpolicy): bootc-dev/bootc
// crates/ostree-ext/src/container/skopeo.rs, ContainerPolicy::
// is_default_insecure (a default of exactly one requirement, of type
// insecureAcceptAnything; a missing default passes), called by store.rs
// ImageImporter::prepare_internal, which fails with "containers-policy.json
// specifies a default of `insecureAcceptAnything`; refusing usage". Like
// serde there, a policy that is not JSON is an error, not a pass.
func ostreeExtRefuses(t *testing.T, policy []byte) bool {
	t.Helper()
	var p struct {
		Default *[]struct {
			Type string `json:"type"`
		} `json:"default"`
	}
	if err := json.Unmarshal(policy, &p); err != nil {
		t.Fatalf("ostree-rs-ext cannot parse the policy: %v", err)
	}
	return p.Default != nil && len(*p.Default) == 1 && (*p.Default)[0].Type == "insecureAcceptAnything"
}

// TestOstreeExtStandIn: the stand-in refuses what the real check refuses
// (its own unit test's cases: Fedora's stock policy; "{}" and a policy
// with default reject pass).
func TestOstreeExtStandIn(t *testing.T) {
	for policy, refused := range map[string]bool{
		`{"default":[{"type":"insecureAcceptAnything"}],"transports":{"docker-daemon":{"":[{"type":"insecureAcceptAnything"}]}}}`: true,
		`{}`: false,
		`{"default":[{"type":"reject"}],"transports":{"dir":{"":[{"type":"insecureAcceptAnything"}]}}}`: false,
	} {
		if got := ostreeExtRefuses(t, []byte(policy)); got != refused {
			t.Errorf("%s: refused %v, want %v", policy, got, refused)
		}
	}
}

// TestTrustNodePulls: the node policy `oslayer trust` writes is one
// ostree-rs-ext accepts for ostree-image-signed, with or without a base
// policy that accepts anything; and skopeo, enforcing it against a real
// registry, takes the signed pool image and every image the node pulls
// (named in AcceptImages, by tag or digest), and refuses an unsigned
// image of the pool's repository and an image the policy does not name.
func TestTrustNodePulls(t *testing.T) {
	skopeoBin := regtest.Require(t, "skopeo")
	ctx := context.Background()
	r := regtest.Start(t, regtest.Config{})
	key := sharedKey(t, 0)
	pool := pushRandom(t, r.Host, "pool")
	signBoth(t, ctx, key, pool)
	unsigned := pushRandom(t, r.Host, "pool")
	pause := pushRandom(t, r.Host, "pause")
	pauseTag, err := name.NewTag(r.Host + "/pause:3.10")
	if err != nil {
		t.Fatal(err)
	}
	desc, err := remote.Get(pause)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Tag(pauseTag, desc); err != nil {
		t.Fatal(err)
	}
	agent := pushRandom(t, r.Host, "gardener/node-agent")
	other := pushRandom(t, r.Host, "other")

	for _, base := range []string{"", `{"default":[{"type":"insecureAcceptAnything"}],"transports":{}}`} {
		policy, regd, _ := writeTrustOpts(t, pool.Context().Name(), key.pub, sign.TrustOptions{
			BasePolicy: []byte(base), AcceptImages: []string{pauseTag.String(), agent.String()},
		})
		b, err := os.ReadFile(policy)
		if err != nil {
			t.Fatal(err)
		}
		if ostreeExtRefuses(t, b) {
			t.Fatalf("base %q: ostree-rs-ext refuses the policy:\n%s", base, b)
		}
		env := toolEnv(t)
		for _, c := range []struct {
			ref  string
			want bool
		}{
			{pool.String(), true}, {unsigned.String(), false},
			{pauseTag.String(), true}, {pause.String(), true}, {agent.String(), true},
			{other.String(), false},
		} {
			out, ok := run(t, env, skopeoBin, "copy", "--remove-signatures", "--policy", policy, "--registries.d", regd,
				"--src-tls-verify=false", "docker://"+c.ref, "oci:"+filepath.Join(t.TempDir(), "oci"))
			if ok != c.want {
				t.Errorf("base %q: skopeo copy %s: accepted %v, want %v\n%s\npolicy:\n%s", base, c.ref, ok, c.want, out, b)
			}
		}
	}
}

// TestTrustAcceptImagesErrors: an image of the signed repository is never
// accepted unsigned; a malformed image is named.
func TestTrustAcceptImagesErrors(t *testing.T) {
	key := sharedKey(t, 0)
	for img, want := range map[string]string{
		"reg.example/pool:v1": "is in the signed repository reg.example/pool",
		"reg.example/Pause":   `accepted image "reg.example/Pause"`,
	} {
		_, err := sign.Trust("reg.example/pool", key.pem, sign.TrustOptions{AcceptImages: []string{img}})
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: err %v, want %q", img, err, want)
		}
	}
}
