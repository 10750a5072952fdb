package controller

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/yaml"

	"github.com/oslayer/oslayer/api/v1alpha1"
)

// The build pod (spec.builder Job).
//
// The controller reads the PoolImage's inputs, and for a sources digest it
// has not built creates one Job named after the PoolImage and that digest
// (JobName): a re-reconcile finds the Job and creates no other. The Job's
// pod runs the project's image with
//
//	oslayer build --from-poolimage NS/NAME --job JOB --sources-digest D --secrets-dir /var/run/oslayer/secrets
//
// which reads the PoolImage and its sources from the API (the pod's
// ServiceAccount), refuses to build when they no longer have digest D (the
// controller then creates the Job of the new digest), runs the same build
// as the controller process (package stage, layers, preflight, push, sign)
// with the pull, push, signing and build Secrets mounted from volumes, and
// writes the outcome into a ConfigMap named after the Job and owned by it
// (data key result.json, a JobResult). The controller records it in the
// PoolImage's status once the Job is Complete or Failed; a Job that failed
// without writing a result is Degraded with the Job's own reason.
//
// A Job that failed to run (a result of a run failure: registry down,
// credentials; or no result at all: the pod failed, was evicted or
// OOM-killed, the deadline passed) is retried: once its failure is recorded
// (status, Event BuildFailed naming the attempt), it is deleted with its
// pod and result ConfigMap after the backoff of an in-process build
// (retryBase doubling up to retryMax, per PoolImage: the attempt counts the
// Jobs of the same digest in a row, in the Job's annotation
// oslayer.dev/attempt and status.builds[].attempt), and a Job of the same
// name is created for the next attempt; new inputs delete a failed Job
// waiting for its retry instead. A failure of the input is not retried
// until the input changes. Other finished Jobs and their result
// ConfigMaps go after ttlSecondsAfterFinished.
//
// Before the first Job of new inputs of an OpenShift PoolImage that
// publishes the pool's osImageURL MachineConfig, the pool is paused until
// the image is rendered (pause.go).

// Paths in the build pod.
const (
	// SecretsMount holds one directory per mounted Secret (its name), one
	// file per data key.
	SecretsMount = "/var/run/oslayer/secrets"
	// ScratchMount is the emptyDir for temporary files and the package
	// stage's storage (TMPDIR, HOME).
	ScratchMount = "/scratch"
	// DefaultBuildServiceAccount is the build pod's default ServiceAccount.
	DefaultBuildServiceAccount = "oslayer-build"
	// ResultKey is the result ConfigMap's data key.
	ResultKey = "result.json"
	// LabelPoolImage labels a build Job with its PoolImage's name.
	LabelPoolImage = "oslayer.dev/poolimage"
	// AnnotationSourcesDigest records the sources digest a Job builds.
	AnnotationSourcesDigest = "oslayer.dev/sources-digest"
	// AnnotationAttempt records which attempt at its sources digest a Job
	// is: 1, one more for each retry after a run failure.
	AnnotationAttempt = "oslayer.dev/attempt"
)

// defaultJobTTL is how long a finished build Job is kept by default.
const defaultJobTTL = 3600

// JobResult is what the build pod reports (the result ConfigMap's
// result.json). It holds no secret.
type JobResult struct {
	// SourcesDigest is the digest of the inputs the pod read.
	SourcesDigest string `json:"sourcesDigest"`
	// Succeeded reports the build's outcome.
	Succeeded bool `json:"succeeded"`
	// Image, InputsDigest, BaseDigest and Signed describe the image built.
	Image        string `json:"image,omitempty"`
	InputsDigest string `json:"inputsDigest,omitempty"`
	BaseDigest   string `json:"baseDigest,omitempty"`
	Signed       bool   `json:"signed,omitempty"`
	// Step and Message say where and why a build failed; Invalid reports
	// a failure of the input (not retried until it changes).
	Step    string `json:"step,omitempty"`
	Message string `json:"message,omitempty"`
	Invalid bool   `json:"invalid,omitempty"`
	// Seconds is the build's wall time in the pod.
	Seconds float64 `json:"seconds"`
	// Packages describes the package stage (nil without one).
	Packages json.RawMessage `json:"packages,omitempty"`
}

// JobName is the build Job of a PoolImage's sources digest: the
// PoolImage's name (shortened) and the digest's first 12 hex digits; at
// most 63 characters, as the job-name label of its pods needs.
func JobName(pool, sourcesDigest string) string {
	n := strings.ReplaceAll(pool, ".", "-")
	if len(n) > 40 {
		n = n[:40]
	}
	n = strings.TrimRight(n, "-")
	h := strings.TrimPrefix(sourcesDigest, "sha256:")
	if len(h) > 12 {
		h = h[:12]
	}
	return "oslayer-" + n + "-" + h
}

// buildInJob runs the build of the inputs as a Job: it creates the Job of
// the sources digest if there is none, records its result once it
// finished, and replaces a Job that failed to run after the backoff.
func (r *Reconciler) buildInJob(ctx context.Context, pi *v1alpha1.PoolImage, in *inputs) (ctrl.Result, error) {
	name := JobName(pi.Name, in.digest)
	var job batchv1.Job
	err := r.Client.Get(ctx, client.ObjectKey{Namespace: pi.Namespace, Name: name}, &job)
	if err != nil && !apierrors.IsNotFound(err) {
		return ctrl.Result{}, err
	}
	found := err == nil
	if found && job.DeletionTimestamp != nil {
		// A failed Job on its way out; its replacement comes once it is
		// gone.
		return ctrl.Result{RequeueAfter: retryBase}, nil
	}
	if found && !jobRecorded(pi, &job) {
		return r.jobOutcome(ctx, pi, in, &job)
	}
	rec := lastRecord(pi, name)
	if rec == nil || rec.Result != "Failed" {
		if found {
			return ctrl.Result{}, nil // its success is recorded
		}
		return ctrl.Result{}, r.createJob(ctx, pi, in, name, 1)
	}
	// The Job of these inputs failed to run (a failure of the input
	// stops in Reconcile): the next attempt, after the backoff. A Job
	// that is gone continues the count only while this process waits to
	// retry it (not when newer inputs superseded it, nor after a restart).
	pending, waiting := r.jobRetries.of(client.ObjectKeyFromObject(pi), rec)
	at := rec.Time.Add(time.Second + jobBackoff(max(rec.Attempt, 1))) // status keeps whole seconds
	if waiting {
		at = pending.at
	}
	if wait := time.Until(at); wait > 0 {
		return ctrl.Result{RequeueAfter: wait}, nil
	}
	attempt := int32(1)
	if found || waiting {
		attempt = max(rec.Attempt, 1) + 1
	}
	if found {
		if gone, err := r.removeJob(ctx, &job); err != nil || !gone {
			return ctrl.Result{RequeueAfter: retryBase}, err
		}
	}
	return ctrl.Result{}, r.createJob(ctx, pi, in, name, attempt)
}

// jobOutcome records the outcome of the Job once it finished: a success,
// or a failure, retried after the backoff when it was not the input's.
func (r *Reconciler) jobOutcome(ctx context.Context, pi *v1alpha1.PoolImage, in *inputs, job *batchv1.Job) (ctrl.Result, error) {
	done, failed := jobFinished(job)
	if !done {
		return ctrl.Result{}, nil // the Job's status change reconciles again
	}
	name, attempt := job.Name, jobAttempt(job)
	res, rerr := r.jobResult(ctx, job, in.digest)
	elapsed := jobSeconds(job, res)
	if !failed && rerr == nil && res.Succeeded {
		pi.Status.Image, pi.Status.InputsDigest, pi.Status.BaseDigest = res.Image, res.InputsDigest, res.BaseDigest
		pi.Status.Signed = res.Signed
		return ctrl.Result{}, r.succeeded(ctx, pi, in.digest, name, attempt, elapsed)
	}
	step, msg, invalid := "job", "", false
	switch {
	case rerr == nil && !res.Succeeded:
		step, msg, invalid = res.Step, res.Message, res.Invalid
	case rerr != nil && failed:
		msg = fmt.Sprintf("Job %s/%s failed (%s) without a result: %v", job.Namespace, job.Name, jobFailure(job), rerr)
	case rerr != nil:
		msg = fmt.Sprintf("Job %s/%s completed without a usable result: %v", job.Namespace, job.Name, rerr)
	default:
		msg = fmt.Sprintf("Job %s/%s failed (%s) after its pod reported success", job.Namespace, job.Name, jobFailure(job))
	}
	rec := v1alpha1.BuildRecord{Time: metav1.Now(), Result: "Failed", Seconds: fmt.Sprintf("%.3f", elapsed), Message: msg, Job: name, Attempt: attempt}
	if rerr == nil {
		rec.InputsDigest = res.InputsDigest
	}
	r.recordFailure(pi, rec, elapsed)
	if invalid {
		return ctrl.Result{}, r.fail(ctx, pi, in.digest, step, errors.New(msg), true)
	}
	backoff := jobBackoff(attempt)
	r.jobRetries.set(client.ObjectKeyFromObject(pi), jobRetry{job: name, attempt: attempt, at: time.Now().Add(backoff)})
	err := fmt.Errorf("%s (attempt %d of Job %s; retried in %s)", msg, attempt, name, backoff)
	if ferr := r.fail(ctx, pi, in.digest, step, err, false); ferr != nil {
		return ctrl.Result{}, ferr
	}
	return ctrl.Result{RequeueAfter: backoff}, nil
}

// jobRecorded reports whether status.builds[0] is the outcome of the Job
// (of its name and attempt: a Job of the same name made again after the
// TTL removed the first is younger than the record).
func jobRecorded(pi *v1alpha1.PoolImage, job *batchv1.Job) bool {
	b := lastRecord(pi, job.Name)
	return b != nil && max(b.Attempt, 1) == jobAttempt(job) && !b.Time.Before(&job.CreationTimestamp)
}

// lastRecord is status.builds[0] when it is of the Job name, else nil.
func lastRecord(pi *v1alpha1.PoolImage, name string) *v1alpha1.BuildRecord {
	if b := pi.Status.Builds; len(b) > 0 && b[0].Job == name {
		return &b[0]
	}
	return nil
}

// jobAttempt is the Job's attempt (its annotation; 1 without one).
func jobAttempt(job *batchv1.Job) int32 {
	n, err := strconv.ParseInt(job.Annotations[AnnotationAttempt], 10, 32)
	if err != nil || n < 1 {
		return 1
	}
	return int32(n)
}

// jobBackoff is the wait after the given attempt failed to run: the work
// queue's backoff of an in-process build, retryBase doubling up to
// retryMax.
func jobBackoff(attempt int32) time.Duration {
	d := retryBase
	for i := int32(1); i < attempt && d < retryMax; i++ {
		d *= 2
	}
	return min(d, retryMax)
}

// removeJob deletes the failed Job (this one, by UID: a newer Job of the
// same name stays), its pod (propagation) and its result ConfigMap, so
// that neither answers for the next attempt. It reports false when the
// name is another Job's already.
func (r *Reconciler) removeJob(ctx context.Context, job *batchv1.Job) (bool, error) {
	err := r.Client.Delete(ctx, job, client.Preconditions{UID: &job.UID}, client.PropagationPolicy(metav1.DeletePropagationBackground))
	if apierrors.IsConflict(err) {
		return false, nil
	}
	if client.IgnoreNotFound(err) != nil {
		return false, fmt.Errorf("deleting the failed build Job %s/%s: %w", job.Namespace, job.Name, err)
	}
	var cm corev1.ConfigMap
	err = r.Client.Get(ctx, client.ObjectKeyFromObject(job), &cm)
	if err == nil && metav1.IsControlledBy(&cm, job) {
		err = r.Client.Delete(ctx, &cm, client.Preconditions{UID: &cm.UID})
	}
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return false, fmt.Errorf("deleting the result ConfigMap %s/%s of the failed build Job: %w", job.Namespace, job.Name, err)
	}
	return true, nil
}

// jobRetries are when the failed build Jobs of the PoolImages may be
// retried (one entry per PoolImage: its last failed Job).
type jobRetries struct {
	mu sync.Mutex
	m  map[types.NamespacedName]jobRetry
}

type jobRetry struct {
	job     string
	attempt int32
	at      time.Time
}

func (j *jobRetries) set(k types.NamespacedName, r jobRetry) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.m == nil {
		j.m = map[types.NamespacedName]jobRetry{}
	}
	j.m[k] = r
}

// of is the PoolImage's pending retry of the Job failure rec, if this
// process recorded it.
func (j *jobRetries) of(k types.NamespacedName, rec *v1alpha1.BuildRecord) (jobRetry, bool) {
	j.mu.Lock()
	defer j.mu.Unlock()
	r, ok := j.m[k]
	return r, ok && r.job == rec.Job && r.attempt == max(rec.Attempt, 1)
}

func (j *jobRetries) forget(k types.NamespacedName) {
	j.mu.Lock()
	defer j.mu.Unlock()
	delete(j.m, k)
}

// createJob creates the build Job (its attempt at the inputs) and marks
// the PoolImage Building.
func (r *Reconciler) createJob(ctx context.Context, pi *v1alpha1.PoolImage, in *inputs, name string, attempt int32) error {
	if r.Options.BuildImage == "" {
		return r.fail(ctx, pi, in.digest, "job", fmt.Errorf("spec.builder: Job needs the controller's --build-image (the image the build pod runs)"), true)
	}
	if err := r.stopSuperseded(ctx, pi, name); err != nil {
		return err
	}
	if attempt == 1 && r.pauseWanted(pi) {
		// Before the Job: the MCO's render of the change waits for no
		// build; the pause keeps the nodes until the image is rendered,
		// for a change that reboots them anyway (jobpredict.go).
		r.holdForBuild(ctx, pi, in, "Job "+name) // pause.go
	}
	job := r.newJob(pi, in, name, attempt)
	if err := controllerutil.SetControllerReference(pi, job, r.Client.Scheme()); err != nil {
		return err
	}
	if err := r.Client.Create(ctx, job); err != nil {
		if apierrors.IsAlreadyExists(err) {
			return nil // created by an earlier reconcile whose cache had not seen it
		}
		return fmt.Errorf("creating build Job %s/%s: %w", pi.Namespace, name, err)
	}
	r.logger().Info("build job created", "poolimage", pi.Namespace+"/"+pi.Name, "job", name, "attempt", attempt, "sourcesDigest", in.digest)
	what := "Job " + name
	if attempt > 1 {
		what += fmt.Sprintf(" (attempt %d)", attempt)
	}
	r.event(pi, corev1.EventTypeNormal, "BuildStarted", "build", "building pool %s onto %s in %s", poolName(pi), pi.Spec.Base, what)
	setCond(pi, v1alpha1.ConditionBuilding, metav1.ConditionTrue, ReasonBuilding, "building inputs "+in.digest+" in "+what)
	return r.Client.Status().Update(ctx, pi)
}

// stopSuperseded deletes the PoolImage's build Jobs that build other
// inputs than the Job name and have not finished: their pods stop, so an
// older build cannot move the tag after the newer one (a stopped build
// leaves the tag where it was: it moves last); or that failed to run and
// wait for their retry (status.builds[0], not an input failure): inputs
// built again later start anew, at attempt 1. Other finished Jobs stay
// until their TTL.
func (r *Reconciler) stopSuperseded(ctx context.Context, pi *v1alpha1.PoolImage, name string) error {
	var jobs batchv1.JobList
	if err := r.Client.List(ctx, &jobs, client.InNamespace(pi.Namespace), client.MatchingLabels{LabelPoolImage: pi.Name}); err != nil {
		return fmt.Errorf("listing the build Jobs of %s/%s: %w", pi.Namespace, pi.Name, err)
	}
	retrying := ""
	if b := pi.Status.Builds; len(b) > 0 && b[0].Job != "" && b[0].Result == "Failed" && failedDigest(pi) == "" {
		retrying = b[0].Job
	}
	for i := range jobs.Items {
		j := &jobs.Items[i]
		done, failed := jobFinished(j)
		if (done && !(failed && j.Name == retrying)) || j.Name == name || !metav1.IsControlledBy(j, pi) || j.DeletionTimestamp != nil {
			continue
		}
		err := r.Client.Delete(ctx, j, client.PropagationPolicy(metav1.DeletePropagationBackground))
		if client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("deleting the superseded build Job %s/%s: %w", j.Namespace, j.Name, err)
		}
		what := "stopped Job " + j.Name
		if done {
			what = "deleted the failed Job " + j.Name + " instead of retrying it"
			r.jobRetries.forget(client.ObjectKeyFromObject(pi))
		}
		r.logger().Info("build job superseded", "poolimage", pi.Namespace+"/"+pi.Name, "job", j.Name, "finished", done, "by", name)
		r.event(pi, corev1.EventTypeNormal, "BuildSuperseded", "build", "%s: the inputs changed (Job %s builds them)", what, name)
	}
	return nil
}

// newJob is the build Job of the PoolImage's inputs.
func (r *Reconciler) newJob(pi *v1alpha1.PoolImage, in *inputs, name string, attempt int32) *batchv1.Job {
	jo := pi.Spec.Job
	if jo == nil {
		jo = &v1alpha1.JobOptions{}
	}
	sa := jo.ServiceAccountName
	if sa == "" {
		sa = DefaultBuildServiceAccount
	}
	ttl := ptr.To[int32](defaultJobTTL)
	if jo.TTLSecondsAfterFinished != nil {
		ttl = jo.TTLSecondsAfterFinished
	}
	res := corev1.ResourceRequirements{Requests: corev1.ResourceList{
		corev1.ResourceCPU: resource.MustParse("500m"), corev1.ResourceMemory: resource.MustParse("1Gi")}}
	if jo.Resources != nil {
		res = *jo.Resources
	}
	args := []string{"build", "--from-poolimage", pi.Namespace + "/" + pi.Name, "--job", name,
		"--sources-digest", in.digest, "--secrets-dir", SecretsMount, "--log-level", "info"}
	args = append(args, r.Options.JobArgs...)
	mounts := []corev1.VolumeMount{{Name: "scratch", MountPath: ScratchMount}}
	vols := []corev1.Volume{{Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
	for i, s := range credentialSecrets(pi) {
		v := fmt.Sprintf("secret-%d", i)
		mounts = append(mounts, corev1.VolumeMount{Name: v, MountPath: SecretsMount + "/" + s, ReadOnly: true})
		vols = append(vols, corev1.Volume{Name: v, VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
			SecretName: s, DefaultMode: ptr.To[int32](0o400)}}})
	}
	labels := map[string]string{LabelPoolImage: pi.Name, "app.kubernetes.io/name": "oslayer-build"}
	return &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: pi.Namespace, Labels: labels,
			Annotations: map[string]string{AnnotationSourcesDigest: in.digest, AnnotationAttempt: strconv.Itoa(int(attempt))}},
		Spec: batchv1.JobSpec{
			// One pod: a failed build is the controller's to judge
			// (input or not); a node going away is not a failure.
			BackoffLimit:            ptr.To[int32](0),
			TTLSecondsAfterFinished: ttl,
			ActiveDeadlineSeconds:   ptr.To[int64](2 * 3600),
			PodFailurePolicy: &batchv1.PodFailurePolicy{Rules: []batchv1.PodFailurePolicyRule{{
				Action:          batchv1.PodFailurePolicyActionIgnore,
				OnPodConditions: []batchv1.PodFailurePolicyOnPodConditionsPattern{{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue}},
			}}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					RestartPolicy:      corev1.RestartPolicyNever,
					ServiceAccountName: sa,
					HostUsers:          hostUsers(in.packageStage),
					SecurityContext:    podSecurity(in.packageStage),
					Containers: []corev1.Container{{
						Name:  "build",
						Image: r.Options.BuildImage,
						Args:  args,
						Env: []corev1.EnvVar{
							{Name: "TMPDIR", Value: ScratchMount},
							{Name: "HOME", Value: ScratchMount},
						},
						Resources:                res,
						SecurityContext:          containerSecurity(in.packageStage),
						VolumeMounts:             mounts,
						TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
					}},
					Volumes: vols,
				},
			},
		},
	}
}

// buildahCapabilities are the capabilities the package stage needs in the
// build pod: buildah gives a RUN step the default capability set of
// containers (CHOWN ... SYS_CHROOT) and fails when one is outside its own
// bounding set; SYS_ADMIN is for the mounts of chroot isolation (the
// step's /proc, /sys, /dev and the build context's overlay). Measured by
// running the package stage's tests as root with exactly this bounding set
// and no_new_privs (docs/controller.md: the build pod).
var buildahCapabilities = []corev1.Capability{"CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID", "KILL",
	"NET_BIND_SERVICE", "SETFCAP", "SETGID", "SETPCAP", "SETUID", "SYS_CHROOT", "SYS_ADMIN"}

// buildUID is the build pod's user without a package stage (the image's
// nonroot user).
const buildUID = 65532

// podSecurity is the build pod's security context: without a package
// stage the restricted profile (non-root, RuntimeDefault seccomp); with
// one, root inside the pod's own user namespace (hostUsers false: UID 0
// and the capabilities are mapped to an unprivileged host range).
func podSecurity(packages bool) *corev1.PodSecurityContext {
	sc := &corev1.PodSecurityContext{SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}}
	if !packages {
		sc.RunAsNonRoot = ptr.To(true)
		sc.RunAsUser, sc.RunAsGroup, sc.FSGroup = ptr.To[int64](buildUID), ptr.To[int64](buildUID), ptr.To[int64](buildUID)
		return sc
	}
	sc.RunAsUser, sc.RunAsGroup = ptr.To[int64](0), ptr.To[int64](0)
	return sc
}

// hostUsers is false (a user namespace of its own) for a pod with a
// package stage, unset otherwise.
func hostUsers(packages bool) *bool {
	if packages {
		return ptr.To(false)
	}
	return nil
}

func containerSecurity(packages bool) *corev1.SecurityContext {
	sc := &corev1.SecurityContext{
		Privileged:               ptr.To(false),
		AllowPrivilegeEscalation: ptr.To(false),
		ReadOnlyRootFilesystem:   ptr.To(true),
		Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
	}
	if packages {
		sc.Capabilities.Add = buildahCapabilities
	}
	return sc
}

// credentialSecrets are the Secrets the build pod mounts: pull, push,
// signing and build secrets, each once, in a stable order.
func credentialSecrets(pi *v1alpha1.PoolImage) []string {
	seen := map[string]bool{}
	var out []string
	add := func(n string) {
		if n != "" && !seen[n] {
			seen[n] = true
			out = append(out, n)
		}
	}
	for _, s := range pi.Spec.PullSecrets {
		add(s.Name)
	}
	if pi.Spec.PushSecret != nil {
		add(pi.Spec.PushSecret.Name)
	}
	if pi.Spec.Signing != nil {
		add(pi.Spec.Signing.KeySecret.Name)
	}
	if p := pi.Spec.Packages; p != nil {
		var bs []string
		for _, s := range p.BuildSecrets {
			bs = append(bs, s.SecretName)
		}
		sort.Strings(bs)
		for _, s := range bs {
			add(s)
		}
	}
	return out
}

// jobFinished reports whether the Job ended, and whether it failed.
func jobFinished(job *batchv1.Job) (done, failed bool) {
	for _, c := range job.Status.Conditions {
		if c.Status != corev1.ConditionTrue {
			continue
		}
		switch c.Type {
		case batchv1.JobComplete:
			return true, false
		case batchv1.JobFailed:
			return true, true
		}
	}
	return false, false
}

// jobFailure is the Failed condition's reason and message.
func jobFailure(job *batchv1.Job) string {
	for _, c := range job.Status.Conditions {
		if c.Type == batchv1.JobFailed && c.Status == corev1.ConditionTrue {
			if c.Message != "" {
				return c.Reason + ": " + c.Message
			}
			return c.Reason
		}
	}
	return "no Failed condition"
}

// jobResult reads the result ConfigMap the Job's pod wrote. It must be
// owned by the Job (by UID) and be for the digest the Job was made for.
func (r *Reconciler) jobResult(ctx context.Context, job *batchv1.Job, digest string) (*JobResult, error) {
	var cm corev1.ConfigMap
	if err := r.Client.Get(ctx, client.ObjectKeyFromObject(job), &cm); err != nil {
		return nil, fmt.Errorf("result ConfigMap %s/%s: %w", job.Namespace, job.Name, err)
	}
	owned := false
	for _, o := range cm.OwnerReferences {
		owned = owned || o.UID == job.UID
	}
	if !owned {
		return nil, fmt.Errorf("result ConfigMap %s/%s is not owned by the Job", cm.Namespace, cm.Name)
	}
	var res JobResult
	if err := yaml.UnmarshalStrict([]byte(cm.Data[ResultKey]), &res); err != nil {
		return nil, fmt.Errorf("result ConfigMap %s/%s: %s: %w", cm.Namespace, cm.Name, ResultKey, err)
	}
	if res.SourcesDigest != digest {
		return nil, fmt.Errorf("result ConfigMap %s/%s: sources digest %q, the Job builds %q", cm.Namespace, cm.Name, res.SourcesDigest, digest)
	}
	return &res, nil
}

// jobSeconds is the build's wall time: the pod's own measure, else the
// Job's start to completion.
func jobSeconds(job *batchv1.Job, res *JobResult) float64 {
	if res != nil && res.Seconds > 0 {
		return res.Seconds
	}
	if s, c := job.Status.StartTime, job.Status.CompletionTime; s != nil && c != nil {
		return c.Sub(s.Time).Seconds()
	}
	if s := job.Status.StartTime; s != nil {
		return time.Since(s.Time).Seconds()
	}
	return 0
}
