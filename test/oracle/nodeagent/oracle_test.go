// Package nodeagent is the node-agent oracle: it runs gardener-node-agent's
// real OperatingSystemConfig reconciler on a copy of a base's root file
// system, builds oslayer's image for the same OSC onto the same base, and
// compares what a node sees on both. See README.md.
package nodeagent

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"

	nodeagentconfigv1alpha1 "github.com/gardener/gardener/pkg/apis/config/nodeagent/v1alpha1"
	extensionsv1alpha1 "github.com/gardener/gardener/pkg/apis/extensions/v1alpha1"
	"github.com/gardener/gardener/pkg/nodeagent"

	"github.com/oslayer/oslayer/assemble"
	"github.com/oslayer/oslayer/publish"
	"github.com/oslayer/oslayer/render"
	"github.com/oslayer/oslayer/sources/gardener"
	"github.com/oslayer/oslayer/test/fixtures"
	"github.com/oslayer/oslayer/test/regtest"
)

// oscCase is one OSC input and the differences still expected for it.
type oscCase struct {
	// input is "fixtures:REL" (test/fixtures/testdata) or "testdata/NAME".
	input string
	// refs are Secret manifests (same form as input) for secretRef files;
	// a referenced Secret without one gets invented content (secretRef
	// files are runtime-delivered and not compared).
	refs []string
	// allowTop are the extra top-level directories the OSC writes to
	// (oslayer's --allow-toplevel).
	allowTop []string
	// want is the exact list of differences still expected, each with the
	// reason in a comment. The test fails when one disappears (shrink the
	// list) or a new one appears.
	want []string
}

// firstApplyRestart is the node agent's restart of containerd.service on
// its first reconciliation of any OSC: without a last-applied OSC it counts
// containerd's configuration as changed (changes.go
// computeOperatingSystemConfigChanges) and restarts containerd.service
// (reconciler.go executeUnitCommands) even when the OSC neither names the
// unit nor has a containerd criConfig. It neither enables the unit nor
// repeats the restart after a reboot (the OSC is then applied), so it is
// not content of the OSC; oslayer's image does not start containerd at
// boot for it.
const firstApplyRestart = "started on node, not started at boot from image: containerd.service"

// provision is oslayer's refusal of a provision OSC (per-machine user
// data, never given to the node agent on a real node; run here anyway).
const provision = `spec.purpose is "provision": a provision OperatingSystemConfig is the per-machine user data that bootstraps gardener-node-agent (placeholders such as <<BOOTSTRAP_TOKEN>> and <<MACHINE_NAME>> are filled in for each machine), not pool content; give the reconcile OSC (the gardener-node-agent Secret's osc.yaml)`

var cases = []oscCase{
	// The worker pool OSCs gardener generates, as OSC, as the node agent's
	// Secret (secretRefs resolved or not) and as bare osc.yaml.
	{input: "fixtures:gardener/generated/osc-worker-a-reconcile-full.yaml"},
	{input: "fixtures:gardener/generated/osc-worker-a-reconcile.yaml"},
	{input: "fixtures:gardener/generated/osc-worker-a-reconcile-with-secretref.yaml",
		refs: []string{"fixtures:gardener/generated/secret-example-file-referenced.yaml"}},
	{input: "fixtures:gardener/generated/secret-osc-worker-a-resolved.yaml"},
	{input: "fixtures:gardener/generated/secret-osc-worker-a-unresolved.yaml",
		refs: []string{"fixtures:gardener/generated/secret-example-file-referenced.yaml"}},
	{input: "fixtures:gardener/generated/osc.yaml-worker-a-resolved"},
	refused("fixtures:gardener/generated/osc-worker-a-provision.yaml", provision),
	refused("fixtures:gardener/verbatim/osc-crddeletionprotection-testdata.yaml", provision),
	// gardener's integration-test OSC names units without a type suffix
	// ("unit1"): systemd refuses to enable them, so the node agent stops
	// there on a real node, and oslayer refuses the name. Both refuse.
	{input: "fixtures:gardener/generated/osc-nodeagent-integration-test.yaml",
		refs:     []string{"fixtures:gardener/generated/secret-file9-nodeagent-integration-test.yaml"},
		allowTop: []string{"another", "changed", "example", "secretref", "seventh", "sixth", "third", "unchanged"},
		want: []string{"node agent fails: dbus enable unit1: Failed to enable unit, unit unit1.service does not exist.",
			`oslayer refuses: render: osc-nodeagent-integration-test.yaml (OperatingSystemConfig ) spec.units[0]: invalid unit name "unit1": no unit type suffix (e.g. .service)`}},
	{input: "fixtures:gardener/generated/secret-osc-nodeagent-integration-test.yaml",
		refs:     []string{"fixtures:gardener/generated/secret-file9-nodeagent-integration-test.yaml"},
		allowTop: []string{"another", "changed", "example", "secretref", "seventh", "sixth", "third", "unchanged"},
		want: []string{"node agent fails: dbus enable unit1: Failed to enable unit, unit unit1.service does not exist.",
			`oslayer refuses: render: secret-osc-nodeagent-integration-test.yaml (OperatingSystemConfig kube-system/gardener-node-agent-test) data[osc.yaml].spec.units[0]: invalid unit name "unit1": no unit type suffix (e.g. .service)`}},
	// An extension file without content: the node agent skips it, oslayer
	// refuses the document.
	{input: "fixtures:gardener/verbatim/osc.yaml-nodeagent-secrets_test",
		want: []string{"oslayer refuses: render: osc.yaml-nodeagent-secrets_test (OperatingSystemConfig ) status.extensionFiles[0]: /some/other/path: content must have exactly one of inline, secretRef, imageRef (has 0)"}},
	{input: "fixtures:gardener/verbatim/secret-nodeagent-secrets_test.yaml",
		want: []string{"oslayer refuses: render: secret-nodeagent-secrets_test.yaml (OperatingSystemConfig kube-system/secret-name) data[osc.yaml].status.extensionFiles[0]: /some/other/path: content must have exactly one of inline, secretRef, imageRef (has 0)"}},
	// Examples from gardener's documentation and the OS extensions, with
	// fields the OSC API no longer has (a file-level "encoding",
	// "spec.cri"): the node agent's decoder drops them (as the API server
	// prunes them from the CRD) and so does oslayer, with a warning. Those
	// without a containerd criConfig or a containerd.service unit differ
	// only in the node agent's first-reconciliation restart of containerd.
	{input: "fixtures:gardener/verbatim/docs-osc-reconcile-example.yaml"},
	{input: "fixtures:gardener/verbatim/docs-osc-cri-example.yaml", want: []string{firstApplyRestart}},
	{input: "fixtures:gardener/verbatim/os-coreos-example-40-operatingsystemconfig.yaml", want: []string{firstApplyRestart}},
	{input: "fixtures:gardener/verbatim/os-gardenlinux-example-40-operatingsystemconfig-gardenlinux.yaml"},
	{input: "fixtures:gardener/verbatim/os-gardenlinux-example-40-operatingsystemconfig-memoryonegardenlinux.yaml"},
	{input: "testdata/os-ubuntu-example-40-operatingsystemconfig.yaml", want: []string{firstApplyRestart}},
	{input: "testdata/os-suse-chost-example-40-operatingsystemconfig-chost.yaml", want: []string{firstApplyRestart}},
	{input: "testdata/os-suse-chost-example-40-operatingsystemconfig-memoryonechost.yaml"},
	{input: "testdata/os-centos-example-operatingsystemconfig.yaml", want: []string{firstApplyRestart}},
	// Written for this oracle: setuid/setgid/sticky permissions, the
	// default mode, b64, /usr/local, a unit without [Install], stop with
	// enable, OS units disabled, stopped and given a drop-in, hostName and
	// secretRef files, and a criConfig (the node agent adds
	// containerd.service to the OSC for its PATH drop-in, so it enables and
	// starts containerd, as the image does).
	{input: "testdata/oracle-edge-semantics.yaml"},
}

// refused is a case whose only expected difference is that oslayer
// refuses the input with msg.
func refused(input, msg string) oscCase {
	return oscCase{input: input, want: []string{"oslayer refuses: render: " + path.Base(input) + ": " + msg}}
}

func TestMain(m *testing.M) {
	// gardener-node-agent.service sets no UMask=, so the agent runs with
	// systemd's default 022; file modes depend on it.
	syscall.Umask(0o022)
	os.Exit(m.Run())
}

// TestNodeAgentOracle runs every case (see the package comment).
func TestNodeAgentOracle(t *testing.T) {
	regtest.Require(t, "umoci")
	regtest.Require(t, "systemctl")
	regtest.Require(t, "systemd-tmpfiles")
	repo := repoRoot(t)
	fixturesDir := fixtures.Dir(t)

	baseLayout := oracleBase(t, repo)
	baseRoot := unpack(t, baseLayout, baseTag)
	baseSnap, err := snapshot(baseRoot)
	if err != nil {
		t.Fatal(err)
	}
	var total, clean, agreedPaths, differences int
	for _, c := range cases {
		name := filepath.Base(strings.TrimPrefix(c.input, "fixtures:"))
		t.Run(name, func(t *testing.T) {
			got, agreed := runCase(t, c, fixturesDir, baseLayout, baseRoot, baseSnap)
			total++
			agreedPaths += agreed
			differences += len(got)
			if len(got) == 0 {
				clean++
			}
			t.Logf("%d node paths agree; %d differences", agreed, len(got))
			if extra, gone := setDiff(got, c.want), setDiff(c.want, got); len(extra)+len(gone) > 0 {
				t.Errorf("differences changed for %s\nnew (fix oslayer or list them with the reason):\n  %s\nlisted but gone (remove them from the list):\n  %s\nall current differences:\n  %q",
					c.input, strings.Join(extra, "\n  "), strings.Join(gone, "\n  "), got)
			}
		})
	}
	t.Logf("node-agent oracle: %d cases, %d without differences; %d node paths agree, %d differences listed", total, clean, agreedPaths, differences)
}

// runCase returns the differences for one case and the number of node
// paths that agree.
func runCase(t *testing.T, c oscCase, fixturesDir, baseLayout, baseRoot string, baseSnap map[string]node) ([]string, int) {
	input := inputPath(t, c.input, fixturesDir)
	raw, err := os.ReadFile(input)
	if err != nil {
		t.Fatal(err)
	}
	secret, err := oscSecret(raw)
	if err != nil {
		t.Fatal(err)
	}

	// The node: a copy of the booted base, then the node agent.
	nodeRoot := filepath.Join(t.TempDir(), "node")
	if err := copyTree(baseRoot, nodeRoot); err != nil {
		t.Fatal(err)
	}
	osc, decodeErr := decodeOSC(secret)
	var refs []*corev1.Secret
	if decodeErr == nil {
		refs = refSecrets(t, osc, c.refs, fixturesDir)
	}
	var diffs []string
	run, agentErr := runNodeAgent(t, nodeRoot, secret, refs)
	if agentErr == nil {
		t.Logf("node agent: %d passes, systemd calls %q", run.Passes, run.Actions)
		agentErr = applyEnablement(nodeRoot, run.Actions)
	}
	if agentErr != nil {
		diffs = append(diffs, "node agent fails: "+firstLine(agentErr.Error()))
	}

	// The image: oslayer's build onto the same base, unpacked and booted.
	imgRoot, report, buildErr := buildImage(t, input, c, baseLayout)
	if buildErr != nil {
		diffs = append(diffs, "oslayer refuses: "+firstLine(strings.ReplaceAll(buildErr.Error(), input, filepath.Base(input))))
	}
	if agentErr != nil || buildErr != nil {
		slices.Sort(diffs)
		return diffs, 0
	}

	nodeSnap, err := snapshot(nodeRoot)
	if err != nil {
		t.Fatal(err)
	}
	imgSnap, err := snapshot(imgRoot)
	if err != nil {
		t.Fatal(err)
	}
	d, agreed := compareTrees(baseSnap, nodeSnap, imgSnap, nodeRoot, imgRoot, deliberate(osc))
	diffs = append(diffs, d...)
	diffs = append(diffs, unreported(osc, report)...)
	diffs = append(diffs, unwarned(secret, report)...)
	diffs = append(diffs, runDiffs(run.Actions, nodeRoot, imgRoot)...)
	slices.Sort(diffs)
	return diffs, agreed
}

// deliberate returns the paths left out of the comparison for osc, with
// the reason (the README lists them):
//   - secretRef files and hostName files: delivered at runtime, never baked
//     (an image is readable by everyone who can pull it; one image serves
//     every host of the pool);
//   - what the node agent generates from spec.criConfig (containerd's
//     config.toml from the node's containerd binary, conf.d, certs.d, the
//     PATH drop-in with the agent's own environment): node-generated;
//   - the node agent's own state (last-applied OSC, computed changes,
//     temporary directory);
//   - oslayer's own machinery (/usr/lib/oslayer, its tmpfiles rules and
//     prune unit).
func deliberate(osc *extensionsv1alpha1.OperatingSystemConfig) ignored {
	runtime := map[string]string{}
	if osc != nil {
		for _, f := range append(slices.Clone(osc.Spec.Files), osc.Status.ExtensionFiles...) {
			switch {
			case f.Content.SecretRef != nil:
				runtime[f.Path] = "secretRef"
			case f.HostName != nil:
				runtime[f.Path] = "hostName"
			}
		}
	}
	prefixes := map[string]string{
		"/etc/containerd": "criConfig",
		extensionsv1alpha1.ContainerDRuntimeContainersBinFolder:             "criConfig",
		"/etc/systemd/system/containerd.service.d/30-env_config.conf":       "criConfig",
		nodeagentconfigv1alpha1.LastAppliedOperatingSystemConfigFilePath:    "node agent state",
		nodeagentconfigv1alpha1.BaseDir + "/last-computed-osc-changes.yaml": "node agent state",
		nodeagentconfigv1alpha1.TempDir:                                     "node agent state",
		"/usr/lib/oslayer":                                                  "oslayer",
		"/usr/lib/tmpfiles.d/oslayer-":                                      "oslayer",
		"/etc/systemd/system/oslayer-":                                      "oslayer",
		"/usr/libexec/oslayer":                                              "oslayer",
		"/usr/lib/systemd/system/oslayer-":                                  "oslayer",
		"/etc/systemd/system-preset/20-oslayer.preset":                      "oslayer",
	}
	return func(p string) string {
		if r := runtime[p]; r != "" {
			return r
		}
		if strings.Contains(p, ".wants/oslayer-") || strings.Contains(p, ".requires/oslayer-") {
			return "oslayer"
		}
		for pre, r := range prefixes {
			if p == pre || strings.HasPrefix(p, pre) && (strings.HasSuffix(pre, "-") || strings.HasPrefix(p, pre+"/")) {
				return r
			}
		}
		return ""
	}
}

// buildImage builds oslayer's image for the case onto the oracle base
// into an OCI layout, and returns its unpacked, booted root.
func buildImage(t *testing.T, input string, c oscCase, baseLayout string) (string, *render.Report, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out := filepath.Join(t.TempDir(), "image")
	pub, err := publish.New("oci:"+out+":oracle", nil)
	if err != nil {
		t.Fatal(err)
	}
	res, err := assemble.Build(ctx, assemble.Request{
		Render: render.Request{OSCs: []string{input}, Pool: poolOf(t, input), Images: images{}, AllowTopLevel: c.allowTop},
		Base:   "oci:" + baseLayout + ":" + baseTag,
	}, pub)
	if err != nil {
		return "", nil, err
	}
	return unpack(t, out, "oracle"), res.Report, nil
}

// unreported lists what the comparison leaves out as runtime-delivered
// (secretRef and hostName files, spec.criConfig) but oslayer's report does
// not name as runtime-delivered: leaving it out is only honest when the
// user is told.
func unreported(osc *extensionsv1alpha1.OperatingSystemConfig, rep *render.Report) []string {
	said := map[string]bool{}
	if rep != nil {
		for _, r := range rep.Runtime {
			said[r.Item] = true
		}
	}
	var want []string
	for _, f := range append(slices.Clone(osc.Spec.Files), osc.Status.ExtensionFiles...) {
		if f.Content.SecretRef != nil || f.HostName != nil {
			want = append(want, f.Path)
		}
	}
	if osc.Spec.CRIConfig != nil {
		want = append(want, "spec.criConfig")
	}
	var out []string
	for _, w := range want {
		if !said[w] {
			out = append(out, "not reported as runtime-delivered: "+w)
		}
	}
	return out
}

// unwarned checks, for an OSC with a field the OSC API does not have
// (which the node agent's decoder drops), that oslayer's report warns about
// it. The field is found independently of oslayer: by a strict decode with
// sigs.k8s.io/yaml, which names the first unknown field.
func unwarned(secret *corev1.Secret, rep *render.Report) []string {
	err := yaml.UnmarshalStrict(secret.Data[nodeagentconfigv1alpha1.DataKeyOperatingSystemConfig], &extensionsv1alpha1.OperatingSystemConfig{})
	if err == nil {
		return nil
	}
	m := regexp.MustCompile(`unknown field "([^"]+)"`).FindStringSubmatch(err.Error())
	if m == nil {
		return []string{"strict decode of the OSC fails without naming an unknown field: " + err.Error()}
	}
	if rep != nil {
		for _, w := range rep.Warnings {
			if strings.Contains(w, "."+m[1]+": unknown field ignored") {
				return nil
			}
		}
	}
	return []string{"no warning in oslayer's report for the ignored field " + m[1]}
}

// images is oslayer's imageRef reader for the oracle: the same bytes the
// node agent's extractor copies.
type images struct{}

func (images) ReadFile(_ context.Context, image, p string) ([]byte, uint32, string, error) {
	sum := sha256.Sum256([]byte(image))
	name, _, _ := strings.Cut(image, ":")
	return imageFile(image, p), imageFileMode, name + "@sha256:" + hex.EncodeToString(sum[:]), nil
}

// oscSecret returns the Secret the node agent reads for an input: the
// input itself when it is a Secret manifest, else the Secret gardenlet
// would write for the OSC document.
func oscSecret(raw []byte) (*corev1.Secret, error) {
	var meta metav1.TypeMeta
	if err := yaml.Unmarshal(raw, &meta); err != nil || meta.Kind != "Secret" {
		return wrapSecret(raw), nil
	}
	var s corev1.Secret
	if err := yaml.Unmarshal(raw, &s); err != nil {
		return nil, err
	}
	s.Namespace = metav1.NamespaceSystem
	if _, ok := s.Annotations[nodeagentconfigv1alpha1.AnnotationKeyChecksumDownloadedOperatingSystemConfig]; !ok {
		w := wrapSecret(s.Data[nodeagentconfigv1alpha1.DataKeyOperatingSystemConfig])
		if s.Annotations == nil {
			s.Annotations = map[string]string{}
		}
		for k, v := range w.Annotations {
			s.Annotations[k] = v
		}
	}
	return &s, nil
}

// decodeOSC decodes the OSC of secret with the node agent's own decoder.
func decodeOSC(secret *corev1.Secret) (*extensionsv1alpha1.OperatingSystemConfig, error) {
	osc := &extensionsv1alpha1.OperatingSystemConfig{}
	err := runtime.DecodeInto(nodeagent.OSCDecoder, secret.Data[nodeagentconfigv1alpha1.DataKeyOperatingSystemConfig], osc)
	return osc, err
}

// refSecrets returns the kube-system Secrets the OSC's secretRef files
// name: from the case's manifests when given, else with invented content.
func refSecrets(t *testing.T, osc *extensionsv1alpha1.OperatingSystemConfig, manifests []string, fixturesDir string) []*corev1.Secret {
	have := map[string]*corev1.Secret{}
	for _, m := range manifests {
		raw, err := os.ReadFile(inputPath(t, m, fixturesDir))
		if err != nil {
			t.Fatal(err)
		}
		var s corev1.Secret
		if err := yaml.Unmarshal(raw, &s); err != nil {
			t.Fatal(err)
		}
		s.Namespace = metav1.NamespaceSystem
		s.ResourceVersion = ""
		have[s.Name] = &s
	}
	var out []*corev1.Secret
	for _, f := range append(slices.Clone(osc.Spec.Files), osc.Status.ExtensionFiles...) {
		ref := f.Content.SecretRef
		if ref == nil {
			continue
		}
		s := have[ref.Name]
		if s == nil {
			s = &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: ref.Name, Namespace: metav1.NamespaceSystem}, Data: map[string][]byte{}}
			have[ref.Name] = s
		}
		if _, ok := s.Data[ref.DataKey]; !ok {
			s.Data[ref.DataKey] = []byte("oracle: runtime-delivered " + ref.Name + "/" + ref.DataKey + "\n")
		}
	}
	for _, n := range sortedKeys(have) {
		out = append(out, have[n])
	}
	return out
}

func inputPath(t *testing.T, in, fixturesDir string) string {
	if rel, ok := strings.CutPrefix(in, "fixtures:"); ok {
		return filepath.Join(fixturesDir, filepath.FromSlash(rel))
	}
	p, err := filepath.Abs(filepath.FromSlash(in))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// repoRoot is the oslayer repository this module sits in (three levels
// up, where go.mod names github.com/oslayer/oslayer).
func repoRoot(t *testing.T) string {
	d, err := filepath.Abs(filepath.Join("..", "..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	gm, err := os.ReadFile(filepath.Join(d, "go.mod"))
	if err != nil || !bytes.HasPrefix(gm, []byte("module github.com/oslayer/oslayer\n")) {
		t.Fatalf("%s is not the oslayer repository: %v", d, err)
	}
	return d
}

// setDiff returns the elements of a not in b.
func setDiff(a, b []string) []string {
	var out []string
	for _, x := range a {
		if !slices.Contains(b, x) {
			out = append(out, x)
		}
	}
	return out
}

// poolOf is the worker pool an input is labelled for (an OSC for another
// pool than the one built is refused), or "oracle".
func poolOf(t *testing.T, input string) string {
	t.Helper()
	raw, err := os.ReadFile(input)
	if err != nil {
		t.Fatal(err)
	}
	if m := regexp.MustCompile(`(?m)^\s*` + regexp.QuoteMeta(gardener.PoolLabel) + `:\s*(\S+)\s*$`).FindSubmatch(raw); m != nil {
		return string(m[1])
	}
	return "oracle"
}
