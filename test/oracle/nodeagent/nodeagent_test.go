package nodeagent

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
	"sync"
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

	"github.com/gardener/gardener/pkg/api/indexer"
	nodeagentconfigv1alpha1 "github.com/gardener/gardener/pkg/apis/config/nodeagent/v1alpha1"
	fakecontainerd "github.com/gardener/gardener/pkg/nodeagent/containerd/fake"
	"github.com/gardener/gardener/pkg/nodeagent/controller/operatingsystemconfig"
	fakedbus "github.com/gardener/gardener/pkg/nodeagent/dbus/fake"
	filespkg "github.com/gardener/gardener/pkg/nodeagent/files"
)

// nodeName is the name and host name of the emulated node.
const nodeName = "oracle-node"

// oscSecretName is the name of the Secret the node agent watches.
const oscSecretName = "gardener-node-agent-oracle"

// imageFile is the content of filePathInImage in image for imageRef files:
// the node agent's extractor and oslayer's image reader return the same
// bytes (no registry is involved on either side).
func imageFile(image, filePathInImage string) []byte {
	return []byte(fmt.Sprintf("#!/bin/sh\n# %s from %s\n", filePathInImage, image))
}

// imageFileMode is the mode the file has inside the image; both sides
// must ignore it and use the OSC's permissions.
const imageFileMode = 0o755

// extractor stands in for gardener-node-agent's containerd extractor: the
// real one mounts the image and copies filePathInImage with
// files.Copy(fs, source, destination, permissions). This one places the
// image's file in the node agent's temporary directory and calls the same
// files.Copy.
type extractor struct{ fs afero.Afero }

func (e extractor) CopyFromImage(_ context.Context, image, filePathInImage, destination string, permissions os.FileMode) error {
	dir, err := e.fs.TempDir(nodeagentconfigv1alpha1.TempDir, "oracle-image-")
	if err != nil {
		return err
	}
	defer e.fs.RemoveAll(dir)
	src := path.Join(dir, path.Base(filePathInImage))
	if err := e.fs.WriteFile(src, imageFile(image, filePathInImage), imageFileMode); err != nil {
		return err
	}
	return filespkg.Copy(e.fs, src, destination, permissions)
}

// agentRun is what the node agent did to a node.
type agentRun struct {
	// Actions are the systemd calls, in order, as "enable X", "disable X",
	// "restart X", "stop X", "start X".
	Actions []string
	// Passes is how many reconciliations ran (the node agent restarts
	// itself when the OSC changes its own unit and resumes after that).
	Passes int
}

var execMu sync.Mutex

// runNodeAgent runs gardener-node-agent's OSC reconciler against root (a
// node's root file system) for the Secret secret and, for secretRef files,
// the kube-system Secrets refs. The reconciler is the real one; around it:
//   - the file system is afero's OS file system rooted at root;
//   - the API server is controller-runtime's fake client holding the Node
//     (registered, as after the kubelet started), the OSC Secret and refs;
//   - dbus is gardener's fake, which records the calls;
//   - `containerd config default` (the only command the reconciler runs
//     for these cases) returns containerd's default configuration as
//     gardener's own tests record it;
//   - imageRef files come from extractor.
//
// The process umask is 022, systemd's default for gardener-node-agent.service
// (the unit sets no UMask=).
func runNodeAgent(t *testing.T, root string, secret *corev1.Secret, refs []*corev1.Secret) (*agentRun, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var log logr.Logger = logr.Discard()
	if os.Getenv("ORACLE_VERBOSE") != "" {
		log = testr.New(t)
	}
	ctx = logf.IntoContext(ctx, log)

	fs := afero.Afero{Fs: afero.NewBasePathFs(afero.NewOsFs(), root)}
	// Created on a real node by gardener-node-init before the agent runs.
	if err := fs.MkdirAll(nodeagentconfigv1alpha1.TempDir, 0o755); err != nil {
		return nil, err
	}

	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: nodeName, Labels: map[string]string{corev1.LabelHostname: nodeName}}}
	objs := []client.Object{node, secret}
	for _, s := range refs {
		objs = append(objs, s)
	}
	c := fakeclient.NewClientBuilder().WithScheme(kubernetesscheme.Scheme).WithObjects(objs...).
		WithIndex(&corev1.Pod{}, indexer.PodNodeName, indexer.PodNodeNameIndexerFunc).Build()

	dbus := fakedbus.New()
	var restarts int
	r := &operatingsystemconfig.Reconciler{
		Client:           c,
		APIReader:        c,
		LeaseClient:      c,
		ContainerdClient: fakecontainerd.NewClient(),
		Config: nodeagentconfigv1alpha1.OperatingSystemConfigControllerConfig{
			SyncPeriod:        &metav1.Duration{Duration: time.Hour},
			SecretName:        secret.Name,
			KubernetesVersion: semver.MustParse("1.34.3"),
		},
		Clock:         clock.RealClock{},
		ConfigDir:     nodeagentconfigv1alpha1.BaseDir,
		Recorder:      events.NewFakeRecorder(1000),
		DBus:          dbus,
		FS:            fs,
		Extractor:     extractor{fs: fs},
		CancelContext: func() { restarts++ },
		HostName:      nodeName,
		NodeName:      nodeName,
		MachineName:   nodeName,
	}

	execMu.Lock()
	defer execMu.Unlock()
	defaultConfig, err := os.ReadFile(filepath.Join("testdata", "containerd-config-default.toml"))
	if err != nil {
		return nil, err
	}
	operatingsystemconfig.Exec = func(_ context.Context, command string, args ...string) ([]byte, error) {
		if command == "containerd" && strings.Join(args, " ") == "config default" {
			return defaultConfig, nil
		}
		return nil, fmt.Errorf("oracle: command %s %v is not emulated", command, args)
	}

	run := &agentRun{}
	req := reconcile.Request{NamespacedName: types.NamespacedName{Namespace: secret.Namespace, Name: secret.Name}}
	for {
		before := restarts
		run.Passes++
		if _, err := r.Reconcile(ctx, req); err != nil {
			return run, fmt.Errorf("reconcile pass %d: %w", run.Passes, err)
		}
		// The agent cancels its context to restart itself; the next
		// process resumes from the persisted changes file.
		if restarts == before {
			break
		}
		if run.Passes == 5 {
			return run, fmt.Errorf("node agent still restarting itself after %d passes", run.Passes)
		}
	}
	for _, a := range dbus.Actions {
		var verb string
		switch a.Action {
		case fakedbus.ActionEnable:
			verb = "enable"
		case fakedbus.ActionDisable:
			verb = "disable"
		case fakedbus.ActionRestart:
			verb = "restart"
		case fakedbus.ActionStart:
			verb = "start"
		case fakedbus.ActionStop:
			verb = "stop"
		default:
			continue
		}
		for _, u := range a.UnitNames {
			run.Actions = append(run.Actions, verb+" "+u)
		}
	}
	return run, nil
}

// applyEnablement does on root what systemd does for the node agent's
// dbus calls: EnableUnitFiles(runtime=false, force=true) and
// DisableUnitFiles(runtime=false) are `systemctl enable --force` and
// `systemctl disable`. A call the real systemd refuses (for instance a
// unit the OS does not ship, or a name without a unit type) makes the
// node agent's reconciliation stop with an error on a real node: the
// first such call is returned.
func applyEnablement(root string, actions []string) error {
	for _, a := range actions {
		verb, unit, _ := strings.Cut(a, " ")
		var args []string
		switch verb {
		case "enable":
			args = []string{"--root=" + root, "enable", "--force", "--", unit}
		case "disable":
			args = []string{"--root=" + root, "disable", "--", unit}
		default:
			continue
		}
		if out, err := exec.Command("systemctl", args...).CombinedOutput(); err != nil {
			return fmt.Errorf("dbus %s %s: %s", verb, unit, firstLine(string(out)))
		}
	}
	return nil
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	return s
}

// wrapSecret returns the Secret gardenlet writes for an OSC document: data
// key osc.yaml and the checksum annotation the node agent keys its state on.
func wrapSecret(oscYAML []byte) *corev1.Secret {
	sum := sha256.Sum256(oscYAML)
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: oscSecretName, Namespace: metav1.NamespaceSystem,
			Annotations: map[string]string{nodeagentconfigv1alpha1.AnnotationKeyChecksumDownloadedOperatingSystemConfig: hex.EncodeToString(sum[:])}},
		Data: map[string][]byte{nodeagentconfigv1alpha1.DataKeyOperatingSystemConfig: oscYAML},
	}
}
