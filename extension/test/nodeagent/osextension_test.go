// Package nodeagent runs gardener-node-agent's own OperatingSystemConfig
// reconciler on what the extension's node side (pkg/nodeside) computes.
package nodeagent

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/Masterminds/semver/v3"
	"github.com/go-logr/logr"
	"github.com/go-logr/logr/testr"
	"github.com/spf13/afero"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	kubernetesscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	fakeclient "sigs.k8s.io/controller-runtime/pkg/client/fake"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/yaml"

	"github.com/gardener/gardener/pkg/api/indexer"
	nodeagentconfigv1alpha1 "github.com/gardener/gardener/pkg/apis/config/nodeagent/v1alpha1"
	extensionsv1alpha1 "github.com/gardener/gardener/pkg/apis/extensions/v1alpha1"
	fakecontainerd "github.com/gardener/gardener/pkg/nodeagent/containerd/fake"
	"github.com/gardener/gardener/pkg/nodeagent/controller/operatingsystemconfig"
	fakedbus "github.com/gardener/gardener/pkg/nodeagent/dbus/fake"
	machinev1alpha1 "github.com/gardener/machine-controller-manager/pkg/apis/machine/v1alpha1"

	"github.com/oslayer/oslayer/extension/pkg/nodeside"
	"github.com/oslayer/oslayer/test/fixtures"
	"github.com/oslayer/oslayer/test/regtest"
	"github.com/oslayer/oslayer/test/synth"
)

// nodeName is the name and host name of the emulated node.
const nodeName = "oracle-node"

// The in-place update cases: the node runs version1 (image1) and the OSC
// asks for version2 (image2).
const (
	version1 = "41.20250101.0"
	version2 = "41.20250201.0"
	image1   = "registry.example:5000/pools/worker@sha256:1111111111111111111111111111111111111111111111111111111111111111"
	image2   = "registry.example:5000/pools/worker@sha256:2222222222222222222222222222222222222222222222222222222222222222"
	// annotationUpdating is the node agent's annotation of the version an
	// update is under way to (unexported in its package).
	annotationUpdating = "node-agent.gardener.cloud/updating-operating-system-version"
)

// standIn records its name and arguments in $STANDIN_DIR/calls; for
// `status` it prints $STANDIN_DIR/NAME.status. Otherwise, while the count
// in NAME.failures is above 0, it counts it down, prints NAME.stderr to
// stderr and exits 1; then it exits 0.
const standIn = `#!/bin/sh
n=$(basename "$0")
printf '%s\n' "$n $*" >>"$STANDIN_DIR/calls"
if [ "$1" = status ]; then
	cat "$STANDIN_DIR/$n.status" 2>/dev/null
	exit 0
fi
k=$(cat "$STANDIN_DIR/$n.failures" 2>/dev/null || echo 0)
if [ "$k" -gt 0 ]; then
	echo $((k - 1)) >"$STANDIN_DIR/$n.failures"
	cat "$STANDIN_DIR/$n.stderr" >&2
	exit 1
fi
exit 0
`

// oscNode is a node root, the API server's fake client holding its Node
// and the OSC Secret, and gardener-node-agent's real reconciler on it.
type oscNode struct {
	t        *testing.T
	root     string
	standIns string // the stand-ins' state: calls, bootc.status/.stderr/.exit
	c        client.Client
	r        *operatingsystemconfig.Reconciler
	restarts int
}

// newOSCNode makes an FCOS-shaped root (test/synth's skeleton, booted
// once with systemd-tmpfiles) running version1, and the node agent's
// reconciler on it with the fakes of runNodeAgent.
func newOSCNode(t *testing.T) *oscNode {
	regtest.RequireRoot(t, "the skeleton keeps owners")
	root := t.TempDir()
	synth.WriteTree(t, root, synth.Skeleton())
	regtest.Run(t, nil, regtest.Require(t, "systemd-tmpfiles"), "--root="+root, "--create", "--boot")
	n := agentOn(t, root)
	n.setVersion(version1)
	return n
}

// agentOn is gardener-node-agent's reconciler on the node root root, with
// the fakes of newOSCNode.
func agentOn(t *testing.T, root string) *oscNode {
	n := &oscNode{t: t, root: root, standIns: t.TempDir()}
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: nodeName, Labels: map[string]string{corev1.LabelHostname: nodeName}}}
	n.c = fakeclient.NewClientBuilder().WithScheme(kubernetesscheme.Scheme).WithObjects(node).
		WithIndex(&corev1.Pod{}, indexer.PodNodeName, indexer.PodNodeNameIndexerFunc).Build()
	fs := afero.Afero{Fs: afero.NewBasePathFs(afero.NewOsFs(), n.root)}
	if err := fs.MkdirAll(nodeagentconfigv1alpha1.TempDir, 0o755); err != nil {
		t.Fatal(err)
	}
	defaultConfig, err := os.ReadFile(filepath.Join("testdata", "containerd-config-default.toml"))
	if err != nil {
		t.Fatal(err)
	}
	prev := operatingsystemconfig.Exec
	t.Cleanup(func() { operatingsystemconfig.Exec = prev })
	operatingsystemconfig.Exec = func(_ context.Context, command string, args ...string) ([]byte, error) {
		if command == "containerd" && strings.Join(args, " ") == "config default" {
			return defaultConfig, nil
		}
		return nil, errors.New("oracle: command " + command + " " + strings.Join(args, " ") + " is not emulated")
	}
	n.r = &operatingsystemconfig.Reconciler{
		Client: n.c, APIReader: n.c, LeaseClient: n.c, ContainerdClient: fakecontainerd.NewClient(),
		Config: nodeagentconfigv1alpha1.OperatingSystemConfigControllerConfig{
			SyncPeriod: &metav1.Duration{Duration: time.Hour}, SecretName: oscSecretName, KubernetesVersion: semver.MustParse("1.34.3"),
		},
		Clock: clock.RealClock{}, ConfigDir: nodeagentconfigv1alpha1.BaseDir, Recorder: events.NewFakeRecorder(1000),
		DBus: fakedbus.New(), FS: fs, Extractor: extractor{fs: fs}, CancelContext: func() { n.restarts++ },
		HostName: nodeName, NodeName: nodeName, MachineName: nodeName,
	}
	return n
}

// setVersion writes the os-release of a node running version (what the
// node agent reads the OS version from).
func (n *oscNode) setVersion(version string) {
	p := filepath.Join(n.root, "etc", "os-release")
	_ = os.Remove(p)
	content := "NAME=\"Fedora CoreOS\"\nVERSION=\"" + version + "\"\nID=fedora\nPRETTY_NAME=\"Fedora CoreOS " + version + "\"\n"
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		n.t.Fatal(err)
	}
}

// osc is the reconcile OSC gardener generates for worker-a with in-place
// updates to version, and the extension's status for image.
func (n *oscNode) osc(version, image string) *extensionsv1alpha1.OperatingSystemConfig {
	b, err := os.ReadFile(fixtures.Path(n.t, "gardener", "generated", "osc-worker-a-reconcile.yaml"))
	if err != nil {
		n.t.Fatal(err)
	}
	osc := &extensionsv1alpha1.OperatingSystemConfig{}
	if err := yaml.Unmarshal(b, osc); err != nil {
		n.t.Fatal(err)
	}
	osc.Spec.InPlaceUpdates = &extensionsv1alpha1.InPlaceUpdates{OperatingSystemVersion: version, KubeletVersion: "1.34.3"}
	r := nodeside.Reconcile{Image: image, Version: version}
	osc.Status.ExtensionFiles = nodeside.ExtensionFiles(r)
	osc.Status.ExtensionUnits = nodeside.ExtensionUnits(r)
	osc.Status.InPlaceUpdates = &extensionsv1alpha1.InPlaceUpdatesStatus{OSUpdate: nodeside.OSUpdate(r)}
	return osc
}

// apply stores osc in the OSC Secret and runs the node agent until it
// stops restarting itself; it returns the last pass's result.
func (n *oscNode) apply(osc *extensionsv1alpha1.OperatingSystemConfig) (reconcile.Result, error) {
	n.t.Helper()
	raw, err := yaml.Marshal(osc)
	if err != nil {
		n.t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var log logr.Logger = logr.Discard()
	if os.Getenv("ORACLE_VERBOSE") != "" {
		log = testr.New(n.t)
	}
	ctx = logf.IntoContext(ctx, log)
	secret := wrapSecret(raw)
	if err := n.c.Get(ctx, client.ObjectKeyFromObject(secret), &corev1.Secret{}); err == nil {
		err = n.c.Update(ctx, secret)
	} else {
		err = n.c.Create(ctx, secret)
	}
	if err != nil {
		n.t.Fatal(err)
	}
	req := reconcile.Request{NamespacedName: types.NamespacedName{Namespace: secret.Namespace, Name: secret.Name}}
	for pass := 1; ; pass++ {
		before := n.restarts
		res, err := n.r.Reconcile(ctx, req)
		if err != nil || n.restarts == before {
			return res, err
		}
		if pass == 5 {
			n.t.Fatalf("node agent still restarting itself after %d passes", pass)
		}
	}
}

// node is the Node as the API server has it.
func (n *oscNode) node() *corev1.Node {
	node := &corev1.Node{}
	if err := n.c.Get(context.Background(), client.ObjectKey{Name: nodeName}, node); err != nil {
		n.t.Fatal(err)
	}
	return node
}

// readyForUpdate sets the condition machine-controller-manager sets once
// the node is drained for an in-place update.
func (n *oscNode) readyForUpdate() {
	node := n.node()
	node.Status.Conditions = append(node.Status.Conditions, corev1.NodeCondition{
		Type: machinev1alpha1.NodeInPlaceUpdate, Status: corev1.ConditionTrue, Reason: machinev1alpha1.ReadyForUpdate})
	if err := n.c.Status().Update(context.Background(), node); err != nil {
		n.t.Fatal(err)
	}
}

// runOnNode makes the node agent run its update command from the node
// root, with a PATH of the shell tools the command uses and the recording
// stand-ins for bootc and systemctl.
func (n *oscNode) runOnNode() {
	bin := n.t.TempDir()
	for _, tool := range []string{"sh", "tr", "grep", "tail", "mktemp", "cat", "rm", "basename", "awk"} {
		if err := os.Symlink(regtest.Require(n.t, tool), filepath.Join(bin, tool)); err != nil {
			n.t.Fatal(err)
		}
	}
	for _, s := range []string{"bootc", "systemctl"} {
		if err := os.WriteFile(filepath.Join(bin, s), []byte(standIn), 0o755); err != nil {
			n.t.Fatal(err)
		}
	}
	prev := operatingsystemconfig.ExecCommandCombinedOutput
	n.t.Cleanup(func() { operatingsystemconfig.ExecCommandCombinedOutput = prev })
	operatingsystemconfig.ExecCommandCombinedOutput = func(ctx context.Context, command string, args ...string) ([]byte, error) {
		cmd := exec.CommandContext(ctx, filepath.Join(n.root, command), args...)
		cmd.Env = []string{"PATH=" + bin, "STANDIN_DIR=" + n.standIns}
		return cmd.CombinedOutput()
	}
}

func (n *oscNode) set(file, content string) {
	if err := os.WriteFile(filepath.Join(n.standIns, file), []byte(content), 0o644); err != nil {
		n.t.Fatal(err)
	}
}

func (n *oscNode) calls() []string {
	b, err := os.ReadFile(filepath.Join(n.standIns, "calls"))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		n.t.Fatal(err)
	}
	return strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
}

// bootcBooted is `bootc status --json` of a node booted into image.
func bootcBooted(image string) string {
	_, digest, _ := strings.Cut(image, "@")
	return `{"apiVersion":"org.containers.bootc/v1","kind":"BootcHost","status":{"staged":null,` +
		`"booted":{"image":{"image":{"image":"registry.example:5000/pools/worker","transport":"registry"},"imageDigest":"` + digest + `"}},` +
		`"rollback":null}}`
}

// TestOSExtensionFiles: the node agent writes the extension's files of a
// reconcile OSC: the pool-image record and the update command, with
// their modes.
func TestOSExtensionFiles(t *testing.T) {
	n := newOSCNode(t)
	if _, err := n.apply(n.osc(version1, image1)); err != nil {
		t.Fatal(err)
	}
	expectNodeFile(t, n.root, nodeside.PoolImageFile, image1+"\n", 0o644)
	expectNodeFile(t, n.root, nodeside.UpdateCommand, nodeside.UpdateScript(), 0o755)
	if c := n.calls(); c != nil {
		t.Errorf("the update command ran without a version change: %q", c)
	}
}

// TestOSExtensionStageUnit: the node agent writes and enables the staging
// unit and restarts it whenever the pool image changes without a new
// version (content the agent also applies live), and not otherwise.
func TestOSExtensionStageUnit(t *testing.T) {
	n := newOSCNode(t)
	db := n.r.DBus.(*fakedbus.DBus)
	restarts := func(from int) int {
		k := 0
		for _, a := range db.Actions[from:] {
			if a.Action == fakedbus.ActionRestart && slices.Contains(a.UnitNames, nodeside.StageUnit) {
				k++
			}
		}
		return k
	}
	for i, c := range []struct {
		image string
		want  int
	}{{image1, 1}, {image1, 0}, {image2, 1}} {
		from := len(db.Actions)
		if _, err := n.apply(n.osc(version1, c.image)); err != nil {
			t.Fatal(err)
		}
		if got := restarts(from); got != c.want {
			t.Errorf("apply %d (%s): %d restarts of %s, want %d; actions %+v", i, c.image, got, nodeside.StageUnit, c.want, db.Actions[from:])
		}
	}
	unit := nodeside.ExtensionUnits(nodeside.Reconcile{})[0]
	// The agent writes units 0600.
	expectNodeFile(t, n.root, filepath.Join("/etc/systemd/system", nodeside.StageUnit), *unit.Content, 0o600)
	if !slices.ContainsFunc(db.Actions, func(a fakedbus.SystemdAction) bool {
		return a.Action == fakedbus.ActionEnable && slices.Contains(a.UnitNames, nodeside.StageUnit)
	}) {
		t.Errorf("%s never enabled; actions %+v", nodeside.StageUnit, db.Actions)
	}
}

// TestOSExtensionInPlaceUpdate: the OSC asks for version2; the node agent
// (its node drained: ReadyForUpdate) runs the update command, which
// switches to image2 with bootc and reboots. After the reboot the node
// runs version2 and the agent marks the update successful.
func TestOSExtensionInPlaceUpdate(t *testing.T) {
	n := newOSCNode(t)
	n.runOnNode()
	if _, err := n.apply(n.osc(version1, image1)); err != nil {
		t.Fatal(err)
	}
	n.set("bootc.status", bootcBooted(image1))
	n.readyForUpdate()
	_, err := n.apply(n.osc(version2, image2))
	// The command succeeded; the agent waits for the reboot.
	if err == nil || !strings.Contains(err.Error(), "stopping reconciliation until gardener-node-agent is restarted after the OS update") {
		t.Fatalf("after the update command: %v", err)
	}
	want := []string{"bootc status --json", "bootc switch --apply --enforce-container-sigpolicy " + image2}
	if c := n.calls(); strings.Join(c, "\n") != strings.Join(want, "\n") {
		t.Errorf("calls %q, want %q", c, want)
	}
	expectNodeFile(t, n.root, nodeside.PoolImageFile, image2+"\n", 0o644)
	if v := n.node().Annotations[annotationUpdating]; v != version2 {
		t.Errorf("annotation %s = %q, want %q", annotationUpdating, v, version2)
	}

	// The reboot: the node runs image2, whose os-release says version2.
	n.setVersion(version2)
	n.set("bootc.status", bootcBooted(image2))
	if _, err := n.apply(n.osc(version2, image2)); err != nil {
		t.Fatal(err)
	}
	node := n.node()
	if got := node.Labels[machinev1alpha1.LabelKeyNodeUpdateResult]; got != machinev1alpha1.LabelValueNodeUpdateSuccessful {
		t.Errorf("update result %q, want %q (annotations %v)", got, machinev1alpha1.LabelValueNodeUpdateSuccessful, node.Annotations)
	}
}

// TestOSExtensionUpdateNetworkFailure: bootc cannot reach the registry
// twice; the node agent reads the command's output as retriable and runs
// it again until it succeeds. (When its retries run out it requeues the
// OSC; that path ends on the agent's timeout, which may kill a running
// attempt, so it is not run here.)
func TestOSExtensionUpdateNetworkFailure(t *testing.T) {
	n := newOSCNode(t)
	n.runOnNode()
	// Retry at once, and never run out within the test.
	defer setRetry(time.Millisecond, 10*time.Minute)()
	if _, err := n.apply(n.osc(version1, image1)); err != nil {
		t.Fatal(err)
	}
	n.set("bootc.status", bootcBooted(image1))
	n.set("bootc.stderr", `ERROR Switching: Pulling: Creating importer: failed to invoke method OpenImage: pinging container registry registry.example:5000: Get "https://registry.example:5000/v2/": dial tcp 10.0.0.5:5000: connect: connection refused`+"\n")
	n.set("bootc.failures", "2")
	n.readyForUpdate()
	_, err := n.apply(n.osc(version2, image2))
	if err == nil || !strings.Contains(err.Error(), "stopping reconciliation until gardener-node-agent is restarted after the OS update") {
		t.Fatalf("the node agent did not retry the update to success: %v", err)
	}
	var want []string
	for range 3 {
		want = append(want, "bootc status --json", "bootc switch --apply --enforce-container-sigpolicy "+image2)
	}
	if c := n.calls(); strings.Join(c, "\n") != strings.Join(want, "\n") {
		t.Errorf("calls %q, want %q", c, want)
	}
	if got, ok := n.node().Labels[machinev1alpha1.LabelKeyNodeUpdateResult]; ok {
		t.Errorf("update result %q after a retried network failure", got)
	}
}

// TestOSExtensionUpdateInvalidArgument: an osUpdate whose argument is a
// tag, not a digest: the command refuses it before touching bootc and
// the node agent reads it as fatal.
func TestOSExtensionUpdateInvalidArgument(t *testing.T) {
	n := newOSCNode(t)
	n.runOnNode()
	if _, err := n.apply(n.osc(version1, image1)); err != nil {
		t.Fatal(err)
	}
	n.set("bootc.status", bootcBooted(image1))
	n.readyForUpdate()
	osc := n.osc(version2, image2)
	osc.Status.InPlaceUpdates.OSUpdate.Args = []string{"registry.example:5000/pools/worker:" + version2}
	_, err := n.apply(osc)
	if err == nil || !strings.Contains(err.Error(), "non-retriable error detected") || !strings.Contains(err.Error(), "invalid arguments") {
		t.Fatalf("the node agent did not take the refusal as fatal: %v", err)
	}
	if c := n.calls(); c != nil {
		t.Errorf("bootc ran for an invalid argument: %q", c)
	}
	if got := n.node().Labels[machinev1alpha1.LabelKeyNodeUpdateResult]; got != machinev1alpha1.LabelValueNodeUpdateFailed {
		t.Errorf("update result %q, want %q", got, machinev1alpha1.LabelValueNodeUpdateFailed)
	}
}

// setRetry sets the node agent's retry interval and timeout of the update
// command (exported for tests) and returns the restore.
func setRetry(interval, timeout time.Duration) func() {
	i, to := operatingsystemconfig.OSUpdateRetryInterval, operatingsystemconfig.OSUpdateRetryTimeout
	operatingsystemconfig.OSUpdateRetryInterval, operatingsystemconfig.OSUpdateRetryTimeout = interval, timeout
	return func() {
		operatingsystemconfig.OSUpdateRetryInterval, operatingsystemconfig.OSUpdateRetryTimeout = i, to
	}
}

// expectNodeFile checks p's content and mode on the node root.
func expectNodeFile(t *testing.T, root, p, want string, mode os.FileMode) {
	t.Helper()
	full := filepath.Join(root, p)
	b, err := os.ReadFile(full)
	if err != nil {
		t.Errorf("%s: %v", p, err)
		return
	}
	if string(b) != want {
		t.Errorf("%s = %q, want %q", p, b, want)
	}
	if fi, err := os.Stat(full); err != nil || fi.Mode().Perm() != mode {
		t.Errorf("%s mode %v (%v), want %04o", p, fi.Mode(), err, mode)
	}
}
