package nodeside

import (
	"encoding/json"
	"os"
	"strings"
	"testing"

	extensionsv1alpha1 "github.com/gardener/gardener/pkg/apis/extensions/v1alpha1"
	"sigs.k8s.io/yaml"

	"github.com/oslayer/oslayer/test/fixtures"
)

// TestNodeImages: the images a node of gardener's generated OSCs pulls:
// from the provision OSC the node agent's (gardener-node-init's script)
// and containerd's default pause image (no sandboxImage there); from the
// reconcile OSC the sandboxImage and every imageRef file.
func TestNodeImages(t *testing.T) {
	prov := gardenerProvisionOSC(t)
	b, err := os.ReadFile(fixtures.Path(t, "gardener", "generated", "osc-worker-a-reconcile-full.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	rec := &extensionsv1alpha1.OperatingSystemConfig{}
	if err := yaml.Unmarshal(b, rec); err != nil {
		t.Fatal(err)
	}
	const agent = "europe-docker.pkg.dev/gardener-project/releases/gardener/node-agent:v1.150.0"
	for _, c := range []struct {
		what string
		oscs []*extensionsv1alpha1.OperatingSystemConfig
		want []string
	}{
		{"provision", []*extensionsv1alpha1.OperatingSystemConfig{prov}, []string{agent, DefaultSandboxImage}},
		{"reconcile", []*extensionsv1alpha1.OperatingSystemConfig{rec}, []string{
			"europe-docker.pkg.dev/gardener-project/releases/gardener/node-agent:v1.150.0",
			"europe-docker.pkg.dev/gardener-project/releases/gardener/observability/opentelemetry-collector:v0.0.1",
			"europe-docker.pkg.dev/gardener-project/releases/hyperkube:v1.34.3",
			"registry.k8s.io/pause:3.10",
		}},
	} {
		if got := NodeImages(c.oscs...); strings.Join(got, " ") != strings.Join(c.want, " ") {
			t.Errorf("%s: %v, want %v", c.what, got, c.want)
		}
	}
	// The sandboxImage the OSC names replaces containerd's default.
	rec.Spec.CRIConfig.Containerd.SandboxImage = "registry.example/pause:9"
	if got := NodeImages(rec); !contains(got, "registry.example/pause:9") || contains(got, DefaultSandboxImage) {
		t.Errorf("with a sandboxImage: %v", got)
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// ostreeExtRefuses is ostree-rs-ext's check before it pulls an
// ostree-image-signed reference (rpm-ostree rebase, bootc switch
// --enforce-container-sigpolicy): bootc-dev/bootc
// crates/ostree-ext/src/container/skopeo.rs, ContainerPolicy::
// is_default_insecure (a default of exactly one requirement, of type
// insecureAcceptAnything; a missing default passes), called by store.rs
// ImageImporter::prepare_internal ("containers-policy.json specifies a
// default of `insecureAcceptAnything`; refusing usage"). A policy that is
// not JSON is an error there too.
func ostreeExtRefuses(t *testing.T, policy []byte) bool {
	t.Helper()
	insecure, err := ostreeExtDefaultInsecure(policy)
	if err != nil {
		t.Fatalf("ostree-rs-ext cannot parse the policy: %v", err)
	}
	return insecure
}

// ostreeExtDefaultInsecure is ContainerPolicy::is_default_insecure of a
// policy.json (serde's parse: an error for what is not JSON).
func ostreeExtDefaultInsecure(policy []byte) (bool, error) {
	var p struct {
		Default *[]struct {
			Type string `json:"type"`
		} `json:"default"`
	}
	if err := json.Unmarshal(policy, &p); err != nil {
		return false, err
	}
	return p.Default != nil && len(*p.Default) == 1 && (*p.Default)[0].Type == "insecureAcceptAnything", nil
}

// expectNodePolicy: the node's policy.json under root is one ostree-rs-ext
// accepts for the pivot and update, and names every image of images
// (their repositories accepted: the default rejects).
func expectNodePolicy(t *testing.T, root string, images []string) {
	t.Helper()
	b, _ := readNode(t, root, PolicyPath)
	if ostreeExtRefuses(t, []byte(b)) {
		t.Fatalf("ostree-rs-ext refuses the node's policy:\n%s", b)
	}
	var p struct {
		Transports map[string]map[string][]map[string]any `json:"transports"`
	}
	if err := json.Unmarshal([]byte(b), &p); err != nil {
		t.Fatal(err)
	}
	for _, img := range images {
		repo, _, _ := strings.Cut(img, ":")
		if reqs := p.Transports["docker"][repo]; len(reqs) != 1 || reqs[0]["type"] != "insecureAcceptAnything" {
			t.Errorf("the node's policy does not accept %s (%s): %v", img, repo, reqs)
		}
	}
}

// TestOstreeExtStandIn: the stand-in refuses what the real check refuses
// (its own unit test's cases: Fedora's stock policy refused; "{}" and a
// policy with default reject pass).
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
