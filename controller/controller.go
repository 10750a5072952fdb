// Package controller is oslayer's in-cluster build service: a
// controller-runtime reconciler of PoolImages (package api/v1alpha1) that
// reads a pool's configuration from the cluster (the Gardener node-agent's
// OSC Secret, an OpenShift MachineConfigPool's rendered MachineConfig, or
// ConfigMaps/Secrets holding documents), builds it in the controller
// process through build.Build with preflight and signing, pushes it,
// records the digest in the PoolImage's status and, with spec.publish,
// hands it on (an osImageURL MachineConfig for the OpenShift pool, a
// ConfigMap).
//
// It sits above builder in the pipeline: it composes the stages
// (preflight, registry/push, registry/sign) as the CLI does.
//
// Identical inputs build nothing: the digest of the spec and of every
// document read (status.sourcesDigest), the base digest and the presence of
// status.image in the registry decide. A failed build keeps the last good
// status.image, sets Degraded naming the step, document and field, and
// emits an Event; a failure of the input (a missing object, a document or
// field that does not render, a preflight check) is not retried until the
// input changes, a failure to run (registry down) is retried with backoff.
package controller

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/recorder"

	"github.com/oslayer/oslayer/api/v1alpha1"
	"github.com/oslayer/oslayer/internal/registry"
	"github.com/oslayer/oslayer/pipeline"
)

// Options configure the reconciler.
type Options struct {
	// Registry is the base of every build's registry options (transport,
	// mirrors, insecure hosts); the PoolImage's Secrets add credentials.
	Registry registry.Options
	// Version is the oslayer version recorded in every image.
	Version string
	// IndexCacheDir is the base index disk cache ("" means none).
	IndexCacheDir string
	// Logger receives the builds' logs; nil discards them.
	Logger *slog.Logger
	// BuildImage is the image of the build pod (spec.builder Job): the
	// project's image, the controller's own.
	BuildImage string
	// JobArgs are added to the build pod's oslayer build arguments (the
	// controller's registry flags: mirrors, insecure hosts, timeout).
	JobArgs []string
	// SecretsDir, when set, is where the pull, push, signing and build
	// Secrets are mounted (one directory per Secret): the build pod reads
	// them there instead of from the API.
	SecretsDir string
	// MaxConcurrentBuilds is how many PoolImages build at once (0 means
	// 1); one PoolImage never builds twice at once.
	MaxConcurrentBuilds int
	// APIInterval is how often a controller started on a cluster that
	// serves no MachineConfig (or BootcNodePool) API looks whether it does
	// now (0 means 30 s; one discovery request each time).
	APIInterval time.Duration
	// NoPoolPause turns off the pause of an OpenShift pool around a
	// build Job (pause.go): the pool then rolls once for the user's
	// change and once for the image.
	NoPoolPause bool
	// MaxPoolPause bounds that pause (0 means DefaultMaxPoolPause).
	MaxPoolPause time.Duration
}

// Reconciler reconciles PoolImages.
type Reconciler struct {
	Client   client.Client
	Recorder recorder.EventRecorder
	Options  Options
	// APIReader reads MachineConfigs (nil: Client): the manager's cache
	// holds only their metadata, a rendered MachineConfig is large and a
	// cluster keeps many.
	APIReader client.Reader
	// Dynamic reads the cluster's image references for spec.retention
	// (nil: SetupWithManager makes it).
	Dynamic dynamic.Interface

	namespaces []string        // the watched namespaces (none: all)
	keys       pipeline.Keys   // decrypted signing keys
	pushed     pipeline.Shared // what builds learnt about the target repositories
	jobRetries jobRetries      // when failed build Jobs are retried
	platforms  platformDigests // the platform images of indexes (bootcmatch.go)
	// openShift is set once the controller watches MachineConfigPools and
	// MachineConfigs (SetupWithManager, or later when the cluster starts
	// serving the MachineConfig API: openshiftapi.go).
	openShift atomic.Bool

	// pod is set in the build pod (BuildPod): only there the package
	// stage runs, its buildah output going to buildLog.
	pod      bool
	buildLog io.Writer
}

// keepBuilds is how many builds status.builds records.
const keepBuilds = 5

// Reasons of the conditions.
const (
	ReasonBuilt       = "Built"
	ReasonUpToDate    = "UpToDate"
	ReasonBuilding    = "Building"
	ReasonIdle        = "Idle"
	ReasonInvalid     = "InvalidInput"
	ReasonBuildFailed = "BuildFailed"
)

// Reconcile builds a PoolImage when its inputs changed.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var pi v1alpha1.PoolImage
	if err := r.Client.Get(ctx, req.NamespacedName, &pi); err != nil {
		if client.IgnoreNotFound(err) == nil {
			lastSuccess.DeleteLabelValues(req.Namespace, req.Name)
			r.jobRetries.forget(req.NamespacedName)
		}
		if client.IgnoreNotFound(err) != nil {
			return ctrl.Result{}, err
		}
		// Gone: what it published goes too, and its pauses end.
		return ctrl.Result{}, errors.Join(r.releasePauses(ctx, req.NamespacedName), r.prunePublished(ctx, req.NamespacedName, "", ""))
	}
	in, err := readInputs(ctx, r.reader(), &pi)
	if err != nil {
		var ie *inputError
		if errors.As(err, &ie) {
			return r.tendPause(ctx, &pi, "", ctrl.Result{}, r.fail(ctx, &pi, "", "source", err, true))
		}
		return ctrl.Result{}, err
	}
	res, err := r.reconcileInputs(ctx, &pi, in)
	return r.tendPause(ctx, &pi, in.digest, res, err) // pause.go
}

// reconcileInputs builds the inputs read when they changed, and
// publishes.
func (r *Reconciler) reconcileInputs(ctx context.Context, pi *v1alpha1.PoolImage, in *inputs) (ctrl.Result, error) {
	st := pi.Status
	if st.SourcesDigest == in.digest && st.Image != "" && r.imagePresent(ctx, pi, st.Image) {
		// Nothing changed since the last good build.
		if st.ObservedGeneration != pi.Generation || !meta.IsStatusConditionTrue(st.Conditions, v1alpha1.ConditionReady) {
			pi.Status.ObservedGeneration = pi.Generation
			setCond(pi, v1alpha1.ConditionReady, metav1.ConditionTrue, ReasonUpToDate, "image "+st.Image+" is the image of the current inputs")
			setCond(pi, v1alpha1.ConditionDegraded, metav1.ConditionFalse, ReasonUpToDate, "")
			r.decide(ctx, pi)
			if err := r.Client.Status().Update(ctx, pi); err != nil {
				return ctrl.Result{}, err
			}
		}
		return ctrl.Result{}, r.published(ctx, pi)
	}
	if in.digest == failedDigest(pi) {
		// The same input failed before; it builds again once it changes.
		// The last good image stays published.
		return ctrl.Result{}, r.published(ctx, pi)
	}
	if pi.Spec.Builder == v1alpha1.BuilderJob {
		return r.buildInJob(ctx, pi, in)
	}
	if in.packageStage {
		return ctrl.Result{}, r.fail(ctx, pi, in.digest, "config", errors.New(in.packageReason+" need a package stage, which runs buildah: set spec.builder: Job"), true)
	}
	return r.build(ctx, pi, in)
}

// invalidStep reports whether a failure in step is one of the input (not
// retried until the input changes).
func invalidStep(step string) bool {
	switch step {
	case "source", "render", "assemble", pipeline.StepPreflight, pipeline.StepPreflightWritten, "config":
		return true
	}
	return false
}

// failedDigest is the sources digest of the last build that failed on
// its input ("" if none).
func failedDigest(pi *v1alpha1.PoolImage) string {
	c := meta.FindStatusCondition(pi.Status.Conditions, v1alpha1.ConditionDegraded)
	if c == nil || c.Status != metav1.ConditionTrue || c.Reason != ReasonInvalid {
		return ""
	}
	return pi.Status.FailedSourcesDigest
}

func (r *Reconciler) build(ctx context.Context, pi *v1alpha1.PoolImage, in *inputs) (ctrl.Result, error) {
	log := r.logger().With("poolimage", pi.Namespace+"/"+pi.Name)
	what := "inputs " + in.digest
	if in.from != "" {
		what += " (" + in.from + ")"
	}
	if r.pauseWanted(pi) && !runFailed(pi) {
		// One reboot per change whatever the build's time: a change
		// that reboots anyway holds the pool's nodes until the image
		// is rendered with it (pause.go); a retry does not pause again.
		r.holdForBuild(ctx, pi, in, "the controller process")
	}
	setCond(pi, v1alpha1.ConditionBuilding, metav1.ConditionTrue, ReasonBuilding, "building "+what)
	if err := r.Client.Status().Update(ctx, pi); err != nil {
		return ctrl.Result{}, err
	}
	r.event(pi, corev1.EventTypeNormal, "BuildStarted", "build", "building pool %s onto %s from %s", poolName(pi), pi.Spec.Base, what)
	start := time.Now()
	res, step, err := r.run(ctx, pi, in, log)
	elapsed := time.Since(start)
	if err != nil && ctx.Err() != nil {
		// Stopped, not failed: the controller is stopping (a rollout);
		// the next leader builds these inputs again.
		log.Info("build stopped: the controller is stopping", "seconds", elapsed.Seconds())
		return ctrl.Result{}, nil
	}
	if err != nil {
		if in.from != "" {
			err = fmt.Errorf("%w (read from %s)", err, in.from)
		}
		invalid := invalidStep(step)
		rec := v1alpha1.BuildRecord{Time: metav1.Now(), Result: "Failed", Seconds: fmt.Sprintf("%.3f", elapsed.Seconds()), Message: err.Error()}
		if res != nil {
			rec.InputsDigest = res.InputsDigest
		}
		r.recordFailure(pi, rec, elapsed.Seconds())
		if ferr := r.fail(ctx, pi, in.digest, step, err, invalid); ferr != nil {
			return ctrl.Result{}, ferr
		}
		if invalid {
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, err // retried with the workqueue's backoff
	}
	st := &pi.Status
	st.InputsDigest = res.InputsDigest
	st.BaseDigest = res.Base.Digest.String()
	st.Image = res.Image
	_, st.Signed = res.Stages[pipeline.StepSign]
	log.Info("built", "image", res.Image, "seconds", elapsed.Seconds(), "phases", phaseAttrs(res.Phases))
	return ctrl.Result{}, r.succeeded(ctx, pi, in.digest, "", 0, elapsed.Seconds())
}

// succeeded records a good build of the sources digest whose image is in
// status (image, inputsDigest, baseDigest, signed): Ready, a build record
// (of the build Job and its attempt, in Job mode), the Event and the
// metrics.
func (r *Reconciler) succeeded(ctx context.Context, pi *v1alpha1.PoolImage, digest, job string, attempt int32, seconds float64) error {
	r.jobRetries.forget(client.ObjectKeyFromObject(pi))
	buildsTotal.WithLabelValues("succeeded").Inc()
	buildDuration.WithLabelValues("succeeded").Observe(seconds)
	now := metav1.Now()
	lastSuccess.WithLabelValues(pi.Namespace, pi.Name).Set(float64(now.Unix()))
	st := &pi.Status
	st.ObservedGeneration = pi.Generation
	st.SourcesDigest = digest
	st.FailedSourcesDigest = ""
	st.LastBuildTime = &now
	pushRecord(pi, v1alpha1.BuildRecord{Image: st.Image, InputsDigest: st.InputsDigest, BaseDigest: st.BaseDigest, Time: now, Result: "Succeeded",
		Seconds: fmt.Sprintf("%.3f", seconds), Job: job, Attempt: attempt})
	setCond(pi, v1alpha1.ConditionReady, metav1.ConditionTrue, ReasonBuilt, "built "+st.Image)
	setCond(pi, v1alpha1.ConditionBuilding, metav1.ConditionFalse, ReasonIdle, "")
	setCond(pi, v1alpha1.ConditionDegraded, metav1.ConditionFalse, ReasonBuilt, "")
	r.event(pi, corev1.EventTypeNormal, "Built", "build", "built %s", st.Image)
	r.decide(ctx, pi) // in the same write
	if err := r.Client.Status().Update(ctx, pi); err != nil {
		return err
	}
	if err := r.published(ctx, pi); err != nil {
		return err
	}
	return r.retain(ctx, pi) // spec.retention: retention.go
}

// recordFailure counts a failed build and records it in status.builds.
func (r *Reconciler) recordFailure(pi *v1alpha1.PoolImage, rec v1alpha1.BuildRecord, seconds float64) {
	buildsTotal.WithLabelValues("failed").Inc()
	buildDuration.WithLabelValues("failed").Observe(seconds)
	pushRecord(pi, rec)
}

// fail records a failed build: Degraded with the message, Ready false only
// when there is no good image, status.image untouched.
func (r *Reconciler) fail(ctx context.Context, pi *v1alpha1.PoolImage, digest, step string, err error, invalid bool) error {
	reason := ReasonBuildFailed
	if invalid {
		reason = ReasonInvalid
		pi.Status.FailedSourcesDigest = digest
	}
	msg := fmt.Sprintf("step %s: %s", step, specText(err))
	if strings.HasPrefix(err.Error(), step+":") {
		msg = specText(err)
	}
	now := metav1.Now()
	pi.Status.LastBuildTime = &now
	pi.Status.ObservedGeneration = pi.Generation
	setCond(pi, v1alpha1.ConditionDegraded, metav1.ConditionTrue, reason, msg)
	setCond(pi, v1alpha1.ConditionBuilding, metav1.ConditionFalse, ReasonIdle, "")
	if pi.Status.Image == "" {
		setCond(pi, v1alpha1.ConditionReady, metav1.ConditionFalse, reason, "no image built yet")
	} else {
		setCond(pi, v1alpha1.ConditionReady, metav1.ConditionFalse, reason, "inputs changed and their build failed; status.image is the last good image "+pi.Status.Image)
	}
	r.logger().Warn("build failed", "poolimage", pi.Namespace+"/"+pi.Name, "step", step, "error", msg)
	r.event(pi, corev1.EventTypeWarning, "BuildFailed", "build", "%s", msg)
	return r.Client.Status().Update(ctx, pi)
}

// run builds the PoolImage's inputs; step names where a failure happened.
func (r *Reconciler) run(ctx context.Context, pi *v1alpha1.PoolImage, in *inputs, log *slog.Logger) (*pipeline.Result, string, error) {
	if in.packageStage && !r.pod {
		// The controller process never runs buildah (Reconcile refuses
		// such a pool before it gets here).
		return nil, "packages", fmt.Errorf("%s need a package stage, which runs in the build pod only: set spec.builder: Job", in.packageReason)
	}
	dir, err := os.MkdirTemp("", "oslayer-controller-")
	if err != nil {
		return nil, "build", err
	}
	defer os.RemoveAll(dir)
	byKind, secretsDir, err := writeDocs(filepath.Join(dir, "in"), in.docs)
	if err != nil {
		return nil, "build", err
	}
	reg := r.Options.Registry
	kc, cred, err := r.keychain(ctx, pi, dir)
	if err != nil {
		return nil, "config", err
	}
	reg.Keychain = kc
	shared, _, conns := r.pushed.Options(cred)
	reg.Shared = conns
	rd := Read{OSCs: byKind["OSC"], MachineConfigs: byKind["MachineConfig"], MachineConfigPools: byKind["MachineConfigPool"],
		SecretsDir: secretsDir, Registry: &reg, IndexCacheDir: r.Options.IndexCacheDir}
	if rd.SigningKey, err = r.signingKey(ctx, pi); err != nil {
		return nil, "config", err
	}
	if r.pod {
		if rd.Packages, err = r.packageInputs(pi, in); err != nil {
			return nil, "config", err
		}
	}
	spec, err := SpecOf(pi, rd)
	if err != nil {
		return nil, "config", err
	}
	// Small images: a blob goes in one PUT after its POST.
	p, err := pipeline.New(spec, pipeline.Env{Version: r.Options.Version, Logger: log, PackageLog: r.buildLog,
		Publish: shared, SingleRequestUploads: true, Keys: &r.keys})
	if err != nil {
		return nil, "config", specError(err)
	}
	defer p.Close()
	res, err := p.Run(ctx)
	if res != nil && res.IsIndex() && len(res.Platforms) > 0 {
		// The status of a multi-platform image names the first
		// platform's inputs and base (each platform image's labels name
		// its own).
		res.InputsDigest, res.Base = res.Platforms[0].InputsDigest, res.Platforms[0].Base
	}
	if err != nil {
		r.pushed.Forget()
		step := "build"
		if res != nil && len(res.Phases) > 0 {
			step = res.Phases[len(res.Phases)-1].Name
		}
		// Messages name documents as the cluster does, not by the
		// temporary files they were written to.
		return res, step, errors.New(strings.ReplaceAll(err.Error(), filepath.Join(dir, "in")+string(filepath.Separator), ""))
	}
	return res, "", nil
}

// keychain builds the credentials of the PoolImage's pull and push
// Secrets (written as manifests under dir, removed after the build) and
// the digest of their content.
func (r *Reconciler) keychain(ctx context.Context, pi *v1alpha1.PoolImage, dir string) (authn.Keychain, [sha256.Size]byte, error) {
	refs := append([]v1alpha1.LocalObjectReference(nil), pi.Spec.PullSecrets...)
	if pi.Spec.PushSecret != nil {
		refs = append(refs, *pi.Spec.PushSecret)
	}
	var b []byte
	for i, ref := range refs {
		s, err := r.credential(ctx, pi.Namespace, ref.Name, fmt.Sprintf("spec.pullSecrets/pushSecret[%d]", i))
		if err != nil {
			return nil, [sha256.Size]byte{}, err
		}
		m, err := pipeline.SecretManifest(s)
		if err != nil {
			return nil, [sha256.Size]byte{}, err
		}
		b = append(append(b, "---\n"...), m...)
	}
	cred := sha256.Sum256(b)
	if len(b) == 0 {
		kc, err := registry.Keychain("", "")
		return kc, cred, err
	}
	p := filepath.Join(dir, "auth.yaml")
	if err := os.WriteFile(p, b, 0o600); err != nil {
		return nil, [sha256.Size]byte{}, err
	}
	kc, err := registry.Keychain("", p)
	return kc, cred, err
}

// signingKey reads spec.signing.keySecret (nil without signing).
func (r *Reconciler) signingKey(ctx context.Context, pi *v1alpha1.PoolImage) (*pipeline.KeyMaterial, error) {
	if pi.Spec.Signing == nil {
		return nil, nil
	}
	name := pi.Spec.Signing.KeySecret.Name
	s, err := r.credential(ctx, pi.Namespace, name, "spec.signing.keySecret")
	if err != nil {
		return nil, err
	}
	km := &pipeline.KeyMaterial{Source: "Secret " + pi.Namespace + "/" + name, PEM: s.Data[pipeline.SecretKeyField]}
	if len(km.PEM) == 0 {
		return nil, inputErrorf("spec.signing.keySecret: Secret %s/%s has no data key %s", pi.Namespace, name, pipeline.SecretKeyField)
	}
	if p, ok := s.Data[pipeline.SecretPasswordField]; ok {
		km.Password, km.HasPassword = p, true
	}
	return km, nil
}

// imagePresent reports whether the image is still in the registry (a
// deleted image is built again).
func (r *Reconciler) imagePresent(ctx context.Context, pi *v1alpha1.PoolImage, ref string) bool {
	reg, done, err := r.readRegistry(ctx, pi)
	if err != nil {
		return false
	}
	defer done()
	_, _, err = reg.Image(ctx, ref, nil)
	return err == nil
}

func (r *Reconciler) logger() *slog.Logger {
	if r.Options.Logger != nil {
		return r.Options.Logger
	}
	return slog.New(slog.DiscardHandler)
}

func (r *Reconciler) event(pi *v1alpha1.PoolImage, typ, reason, action, format string, a ...any) {
	if r.Recorder != nil {
		r.Recorder.Eventf(pi, nil, typ, reason, action, format, a...)
	}
}

// phaseAttrs are the build's phase times (seconds) as a log group.
func phaseAttrs(ps []pipeline.Phase) slog.Value {
	as := make([]slog.Attr, len(ps))
	for i, p := range ps {
		as[i] = slog.Float64(p.Name, p.Seconds)
	}
	return slog.GroupValue(as...)
}

func poolName(pi *v1alpha1.PoolImage) string {
	if pi.Spec.Pool != "" {
		return pi.Spec.Pool
	}
	if o := pi.Spec.Source.OpenShift; o != nil {
		return o.MachineConfigPool
	}
	return pi.Name
}

func setCond(pi *v1alpha1.PoolImage, typ string, status metav1.ConditionStatus, reason, msg string) {
	meta.SetStatusCondition(&pi.Status.Conditions, metav1.Condition{Type: typ, Status: status, Reason: reason,
		Message: msg, ObservedGeneration: pi.Generation})
}

func pushRecord(pi *v1alpha1.PoolImage, rec v1alpha1.BuildRecord) {
	b := append([]v1alpha1.BuildRecord{rec}, pi.Status.Builds...)
	if len(b) > keepBuilds {
		b = b[:keepBuilds]
	}
	pi.Status.Builds = b
}
