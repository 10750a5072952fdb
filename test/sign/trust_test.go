package sign_test

import (
	"bytes"
	"context"
	"encoding/json"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/oslayer/oslayer/sign"
	"github.com/oslayer/oslayer/sources/gardener"
	"github.com/oslayer/oslayer/sources/machineconfig"
	"github.com/oslayer/oslayer/sources/model"
	"sigs.k8s.io/yaml"
)

// TestTrustFiles: the policy, registries.d file and key that `oslayer
// trust` writes, and the same three as an OperatingSystemConfig and a
// MachineConfig that oslayer's own input decoders accept.
func TestTrustFiles(t *testing.T) {
	ctx := context.Background()
	key := sharedKey(t, 0)
	b, err := sign.Trust("127.0.0.1:5000/pools/worker", key.pem, sign.TrustOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if b.Repository != "127.0.0.1:5000/pools/worker" {
		t.Fatalf("repository %q", b.Repository)
	}
	files := map[string]sign.TrustFile{}
	var paths []string
	for _, f := range b.Files {
		files[f.Path] = f
		paths = append(paths, f.Path)
	}
	sort.Strings(paths)
	keyName := ""
	for _, p := range paths {
		if strings.HasSuffix(p, ".pub") {
			keyName = p
		}
	}
	if !regexp.MustCompile(`^oslayer-[0-9a-f]{16}\.pub$`).MatchString(keyName) {
		t.Fatalf("key file %q in %v", keyName, paths)
	}
	want := []string{"99-oslayer-trust.yaml", keyName, "policy-fragment.json", "policy.json", "registries.d/oslayer-127.0.0.1-5000-pools-worker.yaml", "trust-osc.yaml"}
	sort.Strings(want)
	if strings.Join(paths, " ") != strings.Join(want, " ") {
		t.Fatalf("files %v, want %v", paths, want)
	}
	nodeKey := "/etc/pki/containers/" + keyName
	if !bytes.Equal(files[keyName].Content, key.pem) || files[keyName].NodePath != nodeKey {
		t.Fatalf("key file %+v", files[keyName])
	}

	var policy map[string]any
	if err := json.Unmarshal(files["policy.json"].Content, &policy); err != nil {
		t.Fatal(err)
	}
	wantPolicy := map[string]any{
		"default": []any{map[string]any{"type": "reject"}},
		"transports": map[string]any{
			"docker": map[string]any{"127.0.0.1:5000/pools/worker": []any{map[string]any{
				"type": "sigstoreSigned", "keyPath": nodeKey, "signedIdentity": map[string]any{"type": "matchRepository"},
			}}},
			"docker-daemon": map[string]any{"": []any{map[string]any{"type": "insecureAcceptAnything"}}},
		},
	}
	if got, _ := json.Marshal(policy); string(got) != mustJSON(t, wantPolicy) {
		t.Fatalf("policy.json\n%s\nwant\n%s", got, mustJSON(t, wantPolicy))
	}
	var frag map[string]any
	if err := json.Unmarshal(files["policy-fragment.json"].Content, &frag); err != nil {
		t.Fatal(err)
	}
	if got, _ := json.Marshal(frag); string(got) != mustJSON(t, map[string]any{"transports": map[string]any{"docker": wantPolicy["transports"].(map[string]any)["docker"]}}) {
		t.Fatalf("fragment %s", got)
	}
	regd := files["registries.d/oslayer-127.0.0.1-5000-pools-worker.yaml"]
	if string(regd.Content) != "docker:\n  127.0.0.1:5000/pools/worker:\n    use-sigstore-attachments: true\n" {
		t.Fatalf("registries.d:\n%s", regd.Content)
	}
	if regd.NodePath != "/etc/containers/registries.d/oslayer-127.0.0.1-5000-pools-worker.yaml" {
		t.Fatalf("registries.d node path %q", regd.NodePath)
	}

	// The node files, as oslayer's decoders see them.
	wantNode := map[string][]byte{
		"/etc/containers/policy.json": files["policy.json"].Content,
		regd.NodePath:                 regd.Content,
		nodeKey:                       key.pem,
	}
	checkConfig := func(what string, c *model.Config) {
		t.Helper()
		if len(c.Files) != len(wantNode) {
			t.Fatalf("%s: %d files, want %d: %+v", what, len(c.Files), len(wantNode), c.Files)
		}
		for _, f := range c.Files {
			w, ok := wantNode[f.Path]
			if !ok || !bytes.Equal(f.Data, w) || f.Mode != 0o644 {
				t.Fatalf("%s: file %s mode %o:\n%s", what, f.Path, f.Mode, f.Data)
			}
		}
	}
	osc, err := gardener.Decode(ctx, "trust-osc.yaml", files["trust-osc.yaml"].Content, gardener.Options{})
	if err != nil {
		t.Fatalf("gardener.Decode(trust-osc.yaml): %v\n%s", err, files["trust-osc.yaml"].Content)
	}
	checkConfig("trust-osc.yaml", osc)
	mc, err := machineconfig.Decode(ctx, "99-oslayer-trust.yaml", files["99-oslayer-trust.yaml"].Content, machineconfig.Options{Pool: "worker"})
	if err != nil {
		t.Fatalf("machineconfig.Decode(99-oslayer-trust.yaml): %v\n%s", err, files["99-oslayer-trust.yaml"].Content)
	}
	checkConfig("99-oslayer-trust.yaml", mc)
	var mcDoc struct {
		Metadata struct {
			Name   string            `json:"name"`
			Labels map[string]string `json:"labels"`
		} `json:"metadata"`
		Spec struct {
			Config struct {
				Ignition struct {
					Version string `json:"version"`
				} `json:"ignition"`
			} `json:"config"`
		} `json:"spec"`
	}
	if err := yaml.Unmarshal(files["99-oslayer-trust.yaml"].Content, &mcDoc); err != nil {
		t.Fatal(err)
	}
	if mcDoc.Spec.Config.Ignition.Version != "3.4.0" || mcDoc.Metadata.Labels["machineconfiguration.openshift.io/role"] != "worker" || mcDoc.Metadata.Name != "99-worker-oslayer-trust" {
		t.Fatalf("MachineConfig %+v", mcDoc)
	}
}

func TestTrustOptionsAndErrors(t *testing.T) {
	key := sharedKey(t, 0)
	b, err := sign.Trust("docker.io/library/pool", key.pem, sign.TrustOptions{NodeKeyPath: "/etc/pki/containers/pool.pub", Pool: "infra"})
	if err != nil {
		t.Fatal(err)
	}
	if b.Repository != "docker.io/library/pool" {
		t.Fatalf("docker hub scope %q", b.Repository)
	}
	for _, f := range b.Files {
		if f.Path == "99-oslayer-trust.yaml" && !bytes.Contains(f.Content, []byte("machineconfiguration.openshift.io/role: infra")) {
			t.Fatalf("pool label missing:\n%s", f.Content)
		}
		if f.Path == "policy.json" && !bytes.Contains(f.Content, []byte(`"keyPath": "/etc/pki/containers/pool.pub"`)) {
			t.Fatalf("keyPath not used:\n%s", f.Content)
		}
	}
	for _, c := range []struct {
		repo string
		pub  []byte
		opt  sign.TrustOptions
		want string
	}{
		{"", key.pem, sign.TrustOptions{}, `repository ""`},
		{"reg.example/pool@sha256:" + strings.Repeat("0", 64), key.pem, sign.TrustOptions{}, "without scheme, tag or digest"},
		{"reg.example/pool:v1", key.pem, sign.TrustOptions{}, `repository "reg.example/pool:v1"`},
		{"https://reg.example/pool", key.pem, sign.TrustOptions{}, "without scheme"},
		{`0."/0`, key.pem, sign.TrustOptions{}, `registry host "0.\""`},
		{"reg.example/pool", []byte("not a key"), sign.TrustOptions{}, "public key --key"},
		{"reg.example/pool", key.pem, sign.TrustOptions{NodeKeyPath: "relative.pub"}, "must be absolute"},
	} {
		if _, err := sign.Trust(c.repo, c.pub, c.opt); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Trust(%q): err %v, want %q", c.repo, err, c.want)
		}
	}
}

// TestTrustBasePolicy: the repository is added to an existing policy
// (RHCOS-like, with GPG requirements for Red Hat registries) without
// touching the rest; a broken base policy is refused.
func TestTrustBasePolicy(t *testing.T) {
	key := sharedKey(t, 0)
	base := []byte(`{
  "default": [{"type": "insecureAcceptAnything"}],
  "transports": {
    "docker": {
      "registry.redhat.io": [{"type": "signedBy", "keyType": "GPGKeys", "keyPath": "/etc/pki/rpm-gpg/RPM-GPG-KEY-redhat-release"}],
      "reg.example/pool": [{"type": "reject"}]
    },
    "docker-daemon": {"": [{"type": "insecureAcceptAnything"}]}
  }
}`)
	b, err := sign.Trust("reg.example/pool", key.pem, sign.TrustOptions{BasePolicy: base})
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	for _, f := range b.Files {
		if f.Path == "policy.json" {
			if err := json.Unmarshal(f.Content, &got); err != nil {
				t.Fatal(err)
			}
		}
	}
	var want map[string]any
	if err := json.Unmarshal(base, &want); err != nil {
		t.Fatal(err)
	}
	// The default that accepts anything becomes reject: ostree-rs-ext
	// refuses ostree-image-signed under it.
	want["default"] = []any{map[string]any{"type": "reject"}}
	want["transports"].(map[string]any)["docker"].(map[string]any)["reg.example/pool"] = []any{map[string]any{
		"type": "sigstoreSigned", "keyPath": b.Files[2].NodePath, "signedIdentity": map[string]any{"type": "matchRepository"},
	}}
	if mustJSON(t, got) != mustJSON(t, want) {
		t.Fatalf("merged policy\n%s\nwant\n%s", mustJSON(t, got), mustJSON(t, want))
	}
	for _, bad := range []string{`{`, `{"transports":{}}`, `{"default":[],"transports":[]}`} {
		if _, err := sign.Trust("reg.example/pool", key.pem, sign.TrustOptions{BasePolicy: []byte(bad)}); err == nil || !strings.Contains(err.Error(), "base policy") {
			t.Errorf("base policy %s: err %v", bad, err)
		}
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
