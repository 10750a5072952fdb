package nodeside

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// bootcStandInEnv makes the test binary act as bootc (TestMain).
const bootcStandInEnv = "NODESIDE_BOOTC_STANDIN"

func TestMain(m *testing.M) {
	if os.Getenv(bootcStandInEnv) != "" {
		os.Exit(bootcStandIn(os.Args[1:]))
	}
	os.Exit(m.Run())
}

// bootcStandIn is bootc's `status --json` (another image booted) and
// `switch`, with the policy check of `switch --enforce-container-sigpolicy`:
// bootc-dev/bootc crates/lib/src/cli.rs imgref_for_switch and utils.rs
// sigpolicy_from_opt make the flag SignatureSource::ContainerPolicy (without
// it ContainerPolicyAllowInsecure: no check), and ostree-ext's
// ImageImporter::prepare_internal (container/store.rs) then refuses when
// container_policy_is_default_insecure (container/skopeo.rs), reading
// $CONTAINERS_POLICY_JSON first, as resolve_policy_path does. It records
// its arguments in $STANDIN_DIR/calls.
func bootcStandIn(args []string) int {
	f, err := os.OpenFile(filepath.Join(os.Getenv("STANDIN_DIR"), "calls"), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err == nil {
		fmt.Fprintln(f, "bootc "+strings.Join(args, " "))
		f.Close()
	}
	if len(args) > 0 && args[0] == "status" {
		fmt.Print(bootcStatus(otherDigest, otherDigest))
		return 0
	}
	if !slices.Contains(args, "--enforce-container-sigpolicy") {
		return 0
	}
	b, err := os.ReadFile(os.Getenv("CONTAINERS_POLICY_JSON"))
	if err != nil {
		fmt.Fprintf(os.Stderr, "error: Switching (ostree): Opening policy file: %v\n", err)
		return 1
	}
	if insecure, err := ostreeExtDefaultInsecure(b); err != nil || insecure {
		fmt.Fprintf(os.Stderr, "error: Switching (ostree): Fetching manifest: containers-policy.json specifies a default of `insecureAcceptAnything`; refusing usage (%v)\n", err)
		return 1
	}
	return 0
}

// TestUpdateUnderNodePolicy: the update command, as the user data writes
// it, against the bootc stand-in with the node's policy: the policy the
// pivot writes is accepted; the base's stock policy (default
// insecureAcceptAnything, what a node of older user data has) is refused,
// and the update fails as a system failure.
func TestUpdateUnderNodePolicy(t *testing.T) {
	osc := edgeOSC(gardenerProvisionOSC(t))
	policy, sigstore, pub, _ := trustBundle(t, NodeImages(osc)...)
	for _, c := range []struct {
		what   string
		policy []byte
		want   int
	}{
		{"the pivot's policy", policy, 0},
		{"the stock policy", []byte(`{"default":[{"type":"insecureAcceptAnything"}],"transports":{"docker-daemon":{"":[{"type":"insecureAcceptAnything"}]}}}`), 70},
	} {
		ud, err := UserData(Provision{OSC: osc, Secrets: edgeSecrets, Image: testImage, Policy: c.policy, SigstoreConfig: sigstore, PublicKey: pub})
		if err != nil {
			t.Fatal(err)
		}
		root := applyFirstBoot(t, ud)
		n := newNode(t)
		n.cmd = filepath.Join(root, UpdateCommand)
		if err := os.Symlink(os.Args[0], filepath.Join(n.bin, "bootc")); err != nil {
			t.Fatal(err)
		}
		n.env = []string{bootcStandInEnv + "=1", "CONTAINERS_POLICY_JSON=" + filepath.Join(root, PolicyPath)}
		out, code := n.run(testImage)
		if code != c.want || (code != 0) != strings.Contains(out, "refusing usage") {
			t.Errorf("%s: exit %d, want %d:\n%s", c.what, code, c.want, out)
		}
		expectCalls(t, n, "bootc status --json", "bootc switch --apply --enforce-container-sigpolicy "+testImage)
	}
}
