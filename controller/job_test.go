package controller_test

import (
	"archive/tar"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/oslayer/oslayer/api/v1alpha1"
	"github.com/oslayer/oslayer/assemble"
	"github.com/oslayer/oslayer/controller"
	"github.com/oslayer/oslayer/test/pkgbase"
	"github.com/oslayer/oslayer/test/regtest"
	"github.com/oslayer/oslayer/test/synth"
)

// buildImage is the build pod's image in these tests (no kubelet pulls it).
const buildImage = "registry.example/oslayer/oslayer@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

// runJobManager runs the manager with the build pod's image and a
// registry timeout for the pods the tests play.
func (e *env) runJobManager(t *testing.T) {
	t.Helper()
	e.runManager(t, func(o *controller.ManagerOptions) {
		o.BuildImage = buildImage
		o.JobArgs = []string{"--timeout", "30s"}
	})
}

// jobs are the build Jobs of the PoolImage.
func (e *env) jobs(t *testing.T, pool string) []batchv1.Job {
	t.Helper()
	var l batchv1.JobList
	if err := e.c.List(context.Background(), &l, client.InNamespace(e.ns), client.MatchingLabels{controller.LabelPoolImage: pool}); err != nil {
		t.Fatal(err)
	}
	return l.Items
}

// waitJobs waits until the PoolImage has n build Jobs (at most
// waitBound; more fail at once) and returns them, newest last.
func (e *env) waitJobs(t *testing.T, pool string, n int) []batchv1.Job {
	t.Helper()
	var js []batchv1.Job
	e.until(t, &batchv1.JobList{}, []client.ListOption{client.InNamespace(e.ns), client.MatchingLabels{controller.LabelPoolImage: pool}},
		func() bool {
			if js = e.jobs(t, pool); len(js) > n {
				t.Fatalf("PoolImage %s: %d build Jobs, want %d", pool, len(js), n)
			}
			return len(js) == n
		},
		func() string { return fmt.Sprintf("PoolImage %s: %d build Jobs, want %d", pool, len(js), n) })
	slices.SortFunc(js, func(a, b batchv1.Job) int { return a.CreationTimestamp.Compare(b.CreationTimestamp.Time) })
	return js
}

// mountSecrets lays the Job's Secret volumes out as the kubelet would
// (one directory per Secret, one file per key, the ..data indirection)
// and returns the directory.
func (e *env) mountSecrets(t *testing.T, job *batchv1.Job) string {
	t.Helper()
	dir := t.TempDir()
	c := job.Spec.Template.Spec.Containers[0]
	for _, v := range job.Spec.Template.Spec.Volumes {
		if v.Secret == nil {
			continue
		}
		var mount string
		for _, m := range c.VolumeMounts {
			if m.Name == v.Name {
				mount = m.MountPath
			}
		}
		if !strings.HasPrefix(mount, controller.SecretsMount+"/") {
			t.Fatalf("Secret volume %s mounted at %q, not under %s", v.Name, mount, controller.SecretsMount)
		}
		var s corev1.Secret
		if err := e.c.Get(context.Background(), client.ObjectKey{Namespace: e.ns, Name: v.Secret.SecretName}, &s); err != nil {
			t.Fatal(err)
		}
		d := filepath.Join(dir, strings.TrimPrefix(mount, controller.SecretsMount+"/"))
		data := filepath.Join(d, "..2026_01_01_00_00_00.1")
		if err := os.MkdirAll(data, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(filepath.Base(data), filepath.Join(d, "..data")); err != nil {
			t.Fatal(err)
		}
		for k, b := range s.Data {
			if err := os.WriteFile(filepath.Join(data, k), b, 0o400); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(filepath.Join("..data", k), filepath.Join(d, k)); err != nil {
				t.Fatal(err)
			}
		}
	}
	return dir
}

// playPod runs the Job's container command as its pod would: the real
// oslayer binary with the Job's arguments (the Secrets directory moved to
// where mountSecrets put them), a kubeconfig for the API server in place
// of the in-cluster service account, the Job's environment with the
// scratch directory a temporary one. It returns the exit error and the
// output.
func (e *env) playPod(t *testing.T, job *batchv1.Job) (string, error) {
	t.Helper()
	return e.playPodAs(t, job, e.kubeconfig(t))
}

// playPodAs is playPod with the kubeconfig given (another user).
func (e *env) playPodAs(t *testing.T, job *batchv1.Job, kubeconfig string) (string, error) {
	t.Helper()
	return e.runPod(t, job, oslayerCmd(t), kubeconfig)
}

// runPod is playPod with the binary given: imageBin for a package stage,
// whose buildah RUN steps need the binary as the image has it.
func (e *env) runPod(t *testing.T, job *batchv1.Job, bin, kubeconfig string) (string, error) {
	t.Helper()
	c := job.Spec.Template.Spec.Containers[0]
	args := slices.Clone(c.Args)
	i := slices.Index(args, "--secrets-dir")
	if i < 0 || args[i+1] != controller.SecretsMount {
		t.Fatalf("the Job's arguments have no --secrets-dir %s: %q", controller.SecretsMount, args)
	}
	args[i+1] = e.mountSecrets(t, job)
	ctx, cancel := context.WithTimeout(e.ctx, 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	scratch := t.TempDir()
	cmd.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig)
	for _, v := range c.Env {
		val := v.Value
		if val == controller.ScratchMount {
			val = scratch
		}
		cmd.Env = append(cmd.Env, v.Name+"="+val)
	}
	out, err := cmd.CombinedOutput()
	t.Logf("build pod %s: %s %s: %v\n%s", job.Name, filepath.Base(cmd.Path), strings.Join(c.Args, " "), err, out)
	return string(out), err
}

// finishJob sets the Job's status as the Job controller does when its pod
// ended: Complete (with SuccessCriteriaMet) or Failed (with FailureTarget).
func (e *env) finishJob(t *testing.T, job *batchv1.Job, ok bool) {
	t.Helper()
	var j batchv1.Job
	if err := e.c.Get(context.Background(), client.ObjectKeyFromObject(job), &j); err != nil {
		t.Fatal(err)
	}
	now := metav1.Now()
	start := metav1.NewTime(now.Add(-time.Second))
	j.Status.StartTime = &start
	cond := func(typ batchv1.JobConditionType, reason, msg string) batchv1.JobCondition {
		return batchv1.JobCondition{Type: typ, Status: corev1.ConditionTrue, LastProbeTime: now, LastTransitionTime: now, Reason: reason, Message: msg}
	}
	if ok {
		j.Status.Succeeded = 1
		j.Status.CompletionTime = &now
		j.Status.Conditions = []batchv1.JobCondition{cond(batchv1.JobSuccessCriteriaMet, "CompletionsReached", ""), cond(batchv1.JobComplete, "CompletionsReached", "")}
	} else {
		j.Status.Failed = 1
		j.Status.Conditions = []batchv1.JobCondition{cond(batchv1.JobFailureTarget, "BackoffLimitExceeded", "Job has reached the specified backoff limit"),
			cond(batchv1.JobFailed, "BackoffLimitExceeded", "Job has reached the specified backoff limit")}
	}
	if err := e.c.Status().Update(context.Background(), &j); err != nil {
		t.Fatalf("Job %s status: %v", j.Name, err)
	}
}

// TestBuildJob: a PoolImage with spec.builder Job gets one build Job (the
// project's image running oslayer build --from-poolimage, no privileges,
// non-root, the push and signing Secrets mounted, a scratch emptyDir, owned
// by the PoolImage, a TTL), and only one however often it is reconciled.
// The test then plays the pod: the real oslayer binary runs the Job's
// arguments against the API server and a real registry, writes the result
// ConfigMap, the Job is marked Complete, and the controller records Ready
// with the signed digest. Changed inputs get a Job of their own; an invalid
// OSC fails in the pod, the failed Job is Degraded naming the step,
// document and field, the last good image stays, and no Job is made for the
// same input again. A Job that failed without a result is Degraded naming
// the Job and is retried. A Job still running when the inputs change again
// is deleted; finished Jobs stay.
func TestBuildJob(t *testing.T) {
	e := newEnv(t)
	e.runJobManager(t)
	e.create(t, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "osc-worker", Namespace: e.ns}, Data: oscSecret("one")})
	e.create(t, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "push", Namespace: e.ns}, Type: corev1.SecretTypeDockerConfigJson,
		Data: map[string][]byte{corev1.DockerConfigJsonKey: []byte(`{"auths":{"` + e.host + `":{"auth":"dXNlcjpwYXNz"}}}`)}})
	pi := e.poolImage("worker", v1alpha1.Source{Gardener: &v1alpha1.GardenerSource{SecretName: "osc-worker"}})
	pi.Spec.Builder = v1alpha1.BuilderJob
	pi.Spec.PushSecret = &v1alpha1.LocalObjectReference{Name: "push"}
	e.create(t, pi)

	job := e.waitJobs(t, "worker", 1)[0]
	pi = e.wait(t, "worker", "Building", func(pi *v1alpha1.PoolImage) bool {
		return meta.IsStatusConditionTrue(pi.Status.Conditions, v1alpha1.ConditionBuilding)
	})
	checkJob(t, &job, pi, false)

	// Reconciles of the same inputs create no other Job.
	e.updateSecret(t, "osc-worker", func(s *corev1.Secret) { s.Labels = map[string]string{"touched": "yes"} })
	time.Sleep(2 * time.Second)
	if js := e.jobs(t, "worker"); len(js) != 1 {
		t.Fatalf("%d Jobs after re-reconciles of the same inputs", len(js))
	}

	// The pod builds, pushes, signs and reports.
	if out, err := e.playPod(t, &job); err != nil {
		t.Fatalf("the build pod failed: %v\n%s", err, out)
	}
	var cm corev1.ConfigMap
	if err := e.c.Get(context.Background(), client.ObjectKeyFromObject(&job), &cm); err != nil {
		t.Fatalf("no result ConfigMap: %v", err)
	}
	if len(cm.OwnerReferences) != 1 || cm.OwnerReferences[0].UID != job.UID {
		t.Errorf("result ConfigMap owners %+v, want the Job %s", cm.OwnerReferences, job.UID)
	}
	if strings.Contains(cm.Data[controller.ResultKey], "PRIVATE") {
		t.Errorf("the result holds key material: %s", cm.Data[controller.ResultKey])
	}
	if p := e.get(t, "worker"); p.Status.Image != "" {
		t.Fatalf("status.image %q before the Job completed", p.Status.Image)
	}
	e.finishJob(t, &job, true)
	pi = e.wait(t, "worker", "Ready", ready)
	first := pi.Status.Image
	if !strings.HasPrefix(first, e.host+"/os/worker@sha256:") || !pi.Status.Signed || pi.Status.InputsDigest == "" || pi.Status.BaseDigest == "" {
		t.Fatalf("status after the Job: %+v", pi.Status)
	}
	if len(pi.Status.Builds) != 1 || pi.Status.Builds[0].Job != job.Name || pi.Status.Builds[0].Result != "Succeeded" {
		t.Errorf("builds %+v", pi.Status.Builds)
	}
	if pi.Status.SourcesDigest != job.Annotations[controller.AnnotationSourcesDigest] {
		t.Errorf("sources digest %s, the Job's %s", pi.Status.SourcesDigest, job.Annotations[controller.AnnotationSourcesDigest])
	}
	e.verify(t, first)

	// An invalid OSC: a new Job; its pod fails at render naming the
	// Secret and the field; Degraded, the last good image kept, and no
	// new Job for the same input.
	bad := map[string][]byte{"osc.yaml": []byte(synth.OSCFiles("  - path: etc/relative\n    content:\n      inline:\n        data: x\n"))}
	e.updateSecret(t, "osc-worker", func(s *corev1.Secret) { s.Data = bad })
	job = e.waitJobs(t, "worker", 2)[1]
	if _, err := e.playPod(t, &job); err == nil {
		t.Fatal("the build pod of an invalid OSC succeeded")
	}
	e.finishJob(t, &job, false)
	pi = e.wait(t, "worker", "Degraded", degraded)
	c := meta.FindStatusCondition(pi.Status.Conditions, v1alpha1.ConditionDegraded)
	t.Logf("Degraded: %s: %s", c.Reason, c.Message)
	if c.Reason != controller.ReasonInvalid || !strings.Contains(c.Message, "render") ||
		!strings.Contains(c.Message, "Secret/"+e.ns+"/osc-worker") || !strings.Contains(c.Message, "files[0]") {
		t.Errorf("Degraded %s: %q does not name the step, document and field", c.Reason, c.Message)
	}
	if pi.Status.Image != first || pi.Status.Builds[0].Job != job.Name || pi.Status.Builds[0].Result != "Failed" {
		t.Errorf("after the failed Job: image %q (want %q), builds %+v", pi.Status.Image, first, pi.Status.Builds)
	}
	builds := len(pi.Status.Builds)
	e.updateSecret(t, "osc-worker", func(s *corev1.Secret) { s.Labels = map[string]string{"touched": "again"} })
	time.Sleep(2 * time.Second)
	if js := e.jobs(t, "worker"); len(js) != 2 {
		t.Errorf("%d Jobs: the same invalid input got another", len(js))
	}
	if p := e.get(t, "worker"); len(p.Status.Builds) != builds {
		t.Errorf("the failed Job was recorded again: %+v", p.Status.Builds)
	}

	// A Job that failed without a result (the pod was never scheduled,
	// its deadline passed): Degraded naming the Job and the attempt, not
	// an input failure: the Job is replaced by attempt 2 (TestBuildJobRetry).
	e.updateSecret(t, "osc-worker", func(s *corev1.Secret) { s.Data = oscSecret("three") })
	job = e.waitJobs(t, "worker", 3)[2]
	e.finishJob(t, &job, false)
	failedAt := time.Now()
	pi = e.wait(t, "worker", "Degraded by the Job", func(pi *v1alpha1.PoolImage) bool {
		return degraded(pi) && len(pi.Status.Builds) > builds
	})
	c = meta.FindStatusCondition(pi.Status.Conditions, v1alpha1.ConditionDegraded)
	t.Logf("Degraded: %s: %s", c.Reason, c.Message)
	if c.Reason != controller.ReasonBuildFailed || !strings.Contains(c.Message, "step job") || !strings.Contains(c.Message, job.Name) ||
		!strings.Contains(c.Message, "BackoffLimitExceeded") || !strings.Contains(c.Message, "attempt 1") {
		t.Errorf("Degraded %s: %q does not name the Job, its failure and the attempt", c.Reason, c.Message)
	}
	if pi.Status.Image != first {
		t.Errorf("status.image %q, want the last good %q", pi.Status.Image, first)
	}
	retry, _ := e.waitRetry(t, &job, 2, failedAt)

	// Inputs that change while a Job runs (the retry): the running Job
	// is deleted (its pod stops before it moves the tag), the finished
	// ones stay.
	finished := map[string]bool{}
	for _, j := range e.jobs(t, "worker") {
		if j.UID != retry.UID {
			finished[j.Name] = true
		}
	}
	running := retry.Name
	for _, inputs := range []string{"four", "five"} {
		e.updateSecret(t, "osc-worker", func(s *corev1.Secret) { s.Data = oscSecret(inputs) })
		deadline := time.Now().Add(time.Minute)
		for {
			names := map[string]bool{}
			var other string
			for _, j := range e.jobs(t, "worker") {
				names[j.Name] = true
				if !finished[j.Name] {
					other = j.Name
				}
			}
			if !names[running] && len(names) == len(finished)+1 && other != "" {
				running = other
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("Jobs %v: want the finished %v and a new one, without the superseded %s", names, finished, running)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
}

// checkJob checks the build Job's spec.
func checkJob(t *testing.T, job *batchv1.Job, pi *v1alpha1.PoolImage, packages bool) {
	t.Helper()
	digest := job.Annotations[controller.AnnotationSourcesDigest]
	if !strings.HasPrefix(digest, "sha256:") || job.Name != controller.JobName(pi.Name, digest) || len(job.Name) > 63 {
		t.Errorf("Job %s for sources digest %q", job.Name, digest)
	}
	if o := metav1.GetControllerOf(job); o == nil || o.UID != pi.UID || o.Kind != "PoolImage" {
		t.Errorf("Job controller %+v, want the PoolImage", o)
	}
	s := job.Spec
	if s.BackoffLimit == nil || *s.BackoffLimit != 0 || s.TTLSecondsAfterFinished == nil || *s.TTLSecondsAfterFinished <= 0 {
		t.Errorf("backoffLimit %v ttl %v", s.BackoffLimit, s.TTLSecondsAfterFinished)
	}
	ps := s.Template.Spec
	if ps.RestartPolicy != corev1.RestartPolicyNever || ps.ServiceAccountName != controller.DefaultBuildServiceAccount || len(ps.Containers) != 1 {
		t.Fatalf("pod spec %+v", ps)
	}
	c := ps.Containers[0]
	want := []string{"build", "--from-poolimage", pi.Namespace + "/" + pi.Name, "--job", job.Name, "--sources-digest", digest,
		"--secrets-dir", controller.SecretsMount, "--log-level", "info", "--timeout", "30s"}
	if c.Image != buildImage || !slices.Equal(c.Args, want) {
		t.Errorf("container %s %q, want %s %q", c.Image, c.Args, buildImage, want)
	}
	sc := c.SecurityContext
	if sc == nil || sc.Privileged == nil || *sc.Privileged || sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation ||
		sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem || sc.Capabilities == nil || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) {
		t.Errorf("container security context %+v", sc)
	}
	psc := ps.SecurityContext
	if psc == nil || psc.SeccompProfile == nil || psc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Errorf("pod security context %+v", psc)
	}
	if packages {
		if ps.HostUsers == nil || *ps.HostUsers || !slices.Contains(sc.Capabilities.Add, "SYS_ADMIN") || !slices.Contains(sc.Capabilities.Add, "SETUID") {
			t.Errorf("package stage pod: hostUsers %v, capabilities %+v", ps.HostUsers, sc.Capabilities)
		}
	} else if psc.RunAsNonRoot == nil || !*psc.RunAsNonRoot || psc.RunAsUser == nil || *psc.RunAsUser == 0 || len(sc.Capabilities.Add) != 0 || ps.HostUsers != nil {
		t.Errorf("config-only pod: not the restricted profile: %+v %+v", psc, sc)
	}
	mounts := map[string]string{}
	for _, m := range c.VolumeMounts {
		mounts[m.Name] = m.MountPath
	}
	secrets := map[string]bool{}
	scratch := false
	for _, v := range ps.Volumes {
		switch {
		case v.EmptyDir != nil:
			scratch = mounts[v.Name] == controller.ScratchMount
		case v.Secret != nil:
			secrets[v.Secret.SecretName] = mounts[v.Name] == controller.SecretsMount+"/"+v.Secret.SecretName
		}
	}
	if !scratch || !secrets["cosign"] || (pi.Spec.PushSecret != nil && !secrets[pi.Spec.PushSecret.Name]) {
		t.Errorf("volumes %+v mounts %+v: want the scratch emptyDir and the push and signing Secrets", ps.Volumes, c.VolumeMounts)
	}
	if !slices.ContainsFunc(c.Env, func(v corev1.EnvVar) bool { return v.Name == "TMPDIR" && v.Value == controller.ScratchMount }) {
		t.Errorf("env %+v: TMPDIR is not the scratch volume", c.Env)
	}
	for _, v := range c.Env {
		if strings.Contains(strings.ToLower(v.Name), "pass") || v.ValueFrom != nil {
			t.Errorf("env %s carries a secret", v.Name)
		}
	}
}

// TestPackagesNeedJob: the API server refuses spec.packages without
// spec.builder Job (the CRD's CEL rule); a MachineConfig with extensions
// built in process is Degraded naming the document and saying to use Job;
// in Job mode the same pool with a user Containerfile gets a build Job with
// the package stage's security context (its own user namespace, buildah's
// capabilities, not privileged); a missing Containerfile ConfigMap is
// Degraded naming the field.
func TestPackagesNeedJob(t *testing.T) {
	e := newEnv(t)
	e.runJobManager(t)
	mc := `apiVersion: machineconfiguration.openshift.io/v1
kind: MachineConfig
metadata:
  name: 50-worker-usbguard
  labels:
    machineconfiguration.openshift.io/role: worker
spec:
  extensions: [usbguard]
`
	e.create(t, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "mcs", Namespace: e.ns}, Data: map[string]string{"usbguard.yaml": mc}})
	src := v1alpha1.Source{Documents: &v1alpha1.DocumentsSource{Objects: []v1alpha1.DocumentObject{{Kind: "ConfigMap", Name: "mcs"}}}}
	pkgs := &v1alpha1.Packages{Containerfile: &v1alpha1.ConfigMapKeyReference{Name: "containerfile"}, BuildArgs: map[string]string{"A": "b"},
		BuildSecrets: []v1alpha1.BuildSecret{{ID: "entitlement", SecretName: "entitlement", Key: "cert.pem"}}}

	pi := e.poolImage("worker", src)
	pi.Spec.Packages = pkgs
	err := e.c.Create(context.Background(), pi)
	if err == nil || !strings.Contains(err.Error(), "spec.packages needs spec.builder: Job") {
		t.Fatalf("spec.packages without Job: %v", err)
	}

	e.create(t, e.poolImage("inprocess", src))
	pi = e.wait(t, "inprocess", "Degraded", degraded)
	c := meta.FindStatusCondition(pi.Status.Conditions, v1alpha1.ConditionDegraded)
	t.Logf("Degraded: %s: %s", c.Reason, c.Message)
	if c.Reason != controller.ReasonInvalid || !strings.Contains(c.Message, "ConfigMap/"+e.ns+"/mcs/usbguard.yaml: spec.extensions/kernelType") ||
		!strings.Contains(c.Message, "spec.builder: Job") {
		t.Errorf("Degraded %s: %q", c.Reason, c.Message)
	}
	if js := e.jobs(t, "inprocess"); len(js) != 0 {
		t.Errorf("%d Jobs for an in-process PoolImage", len(js))
	}

	pi = e.poolImage("worker", src)
	pi.Spec.Builder = v1alpha1.BuilderJob
	pi.Spec.Packages = pkgs
	e.create(t, pi)
	pi = e.wait(t, "worker", "Degraded", degraded)
	c = meta.FindStatusCondition(pi.Status.Conditions, v1alpha1.ConditionDegraded)
	if !strings.Contains(c.Message, "spec.packages.containerfile") || !strings.Contains(c.Message, "not found") {
		t.Errorf("missing Containerfile ConfigMap: Degraded %q", c.Message)
	}
	e.create(t, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "containerfile", Namespace: e.ns},
		Data: map[string]string{"Containerfile": "FROM packages\nRUN true\n"}})
	job := e.waitJobs(t, "worker", 1)[0]
	checkJob(t, &job, e.get(t, "worker"), true)
	var mounted []string
	for _, v := range job.Spec.Template.Spec.Volumes {
		if v.Secret != nil {
			mounted = append(mounted, v.Secret.SecretName)
		}
	}
	if !slices.Equal(mounted, []string{"cosign", "entitlement"}) {
		t.Errorf("mounted Secrets %q, want the signing key and the build secret", mounted)
	}
}

// agentContainerfile writes the agent's config from a build argument in a
// step that needs a build secret.
const agentContainerfile = `FROM packages
ARG LEVEL=0
RUN --mount=type=secret,id=token test -s /run/secrets/token && \
    mkdir -p /etc/agent && printf 'level=%s\n' "$LEVEL" > /etc/agent/agent.conf
`

const agentToken = "s3cr3t-build-token-9c1e"

// TestBuildJobPackageStage plays the build pod of a PoolImage with a
// package stage: the user Containerfile from a ConfigMap, a build argument
// and a build secret from the spec run with real buildah (the oslayer
// binary built as the image has it) onto a base assembled from Debian's
// busybox-static, the MachineConfig's file is appended, and the controller
// records the signed image. The image has the file the RUN step wrote with
// the build argument and the config file; the secret is in no layer and
// not in the config.
func TestBuildJobPackageStage(t *testing.T) {
	regtest.RequireRoot(t, "buildah's chroot isolation")
	e := newEnv(t)
	e.runJobManager(t)
	base, _ := pkgbase.Push(t, e.host)
	mc := `apiVersion: machineconfiguration.openshift.io/v1
kind: MachineConfig
metadata:
  name: 99-worker-agent-site
  labels:
    machineconfiguration.openshift.io/role: worker
spec:
  config:
    ignition:
      version: 3.4.0
    storage:
      files:
      - path: /etc/agent/site.conf
        mode: 420
        contents:
          source: data:,site%3Dlab%0A
`
	e.create(t, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "mcs", Namespace: e.ns}, Data: map[string]string{"site.yaml": mc}})
	e.create(t, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "agent", Namespace: e.ns}, Data: map[string]string{"Containerfile": agentContainerfile}})
	e.create(t, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "agent-token", Namespace: e.ns}, Data: map[string][]byte{"token": []byte(agentToken)}})
	pi := e.poolImage("worker", v1alpha1.Source{Documents: &v1alpha1.DocumentsSource{Objects: []v1alpha1.DocumentObject{{Kind: "ConfigMap", Name: "mcs"}}}})
	pi.Spec.Base = base
	pi.Spec.Builder = v1alpha1.BuilderJob
	pi.Spec.Packages = &v1alpha1.Packages{
		Containerfile: &v1alpha1.ConfigMapKeyReference{Name: "agent"},
		BuildArgs:     map[string]string{"LEVEL": "3"},
		BuildSecrets:  []v1alpha1.BuildSecret{{ID: "token", SecretName: "agent-token", Key: "token"}},
	}
	e.create(t, pi)

	job := e.waitJobs(t, "worker", 1)[0]
	checkJob(t, &job, e.get(t, "worker"), true)
	if out, err := e.runPod(t, &job, imageBin(t), e.kubeconfig(t)); err != nil {
		t.Fatalf("the build pod failed: %v\n%s", err, out)
	}
	var cm corev1.ConfigMap
	if err := e.c.Get(context.Background(), client.ObjectKeyFromObject(&job), &cm); err != nil {
		t.Fatal(err)
	}
	var res controller.JobResult
	if err := json.Unmarshal([]byte(cm.Data[controller.ResultKey]), &res); err != nil {
		t.Fatal(err)
	}
	var ps assemble.PackageResult
	if err := json.Unmarshal(res.Packages, &ps); err != nil || ps.Hit || len(ps.Commands) == 0 || !strings.HasPrefix(ps.Ref, e.host+"/os/worker@sha256:") {
		t.Fatalf("result's package stage %s: %v", res.Packages, err)
	}
	if strings.Contains(cm.Data[controller.ResultKey], agentToken) {
		t.Error("the result holds the build secret")
	}
	e.finishJob(t, &job, true)
	pi = e.wait(t, "worker", "Ready", ready)
	if !pi.Status.Signed || !strings.HasPrefix(pi.Status.Image, e.host+"/os/worker@sha256:") {
		t.Fatalf("status %+v", pi.Status)
	}
	e.verify(t, pi.Status.Image)

	files, blobs := imageFiles(t, pi.Status.Image)
	if got := files["etc/agent/agent.conf"]; got != "level=3\n" {
		t.Errorf("/etc/agent/agent.conf %q, want the RUN step's with LEVEL=3", got)
	}
	if got := files["etc/agent/site.conf"]; got != "site=lab\n" {
		t.Errorf("/etc/agent/site.conf %q, want the MachineConfig's", got)
	}
	if strings.Contains(blobs, agentToken) {
		t.Error("the build secret is in a layer or the config of the image")
	}
}

// imageFiles reads every layer of the image (in order, later layers
// winning) into path → content of regular files, and returns all layer
// and config bytes as one string for searching.
func imageFiles(t *testing.T, ref string) (map[string]string, string) {
	t.Helper()
	img := remoteImage(t, ref)
	var all strings.Builder
	cfg, err := img.RawConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	all.Write(cfg)
	files := map[string]string{}
	synth.WalkLayers(t, img, func(h *tar.Header, b []byte) {
		all.Write(b)
		if h.Typeflag == tar.TypeReg {
			files[strings.TrimPrefix(h.Name, "./")] = string(b)
		}
	})
	return files, all.String()
}
