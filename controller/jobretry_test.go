package controller_test

import (
	"context"
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/oslayer/oslayer/api/v1alpha1"
	"github.com/oslayer/oslayer/controller"
	"github.com/oslayer/oslayer/test/synth"
)

// waitRetry waits (at most 20 s) until the failed Job old is replaced by
// a Job of the same name, and checks the replacement is the attempt
// given. It returns it and how long after since it was seen.
func (e *env) waitRetry(t *testing.T, old *batchv1.Job, attempt int, since time.Time) (*batchv1.Job, time.Duration) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		var j batchv1.Job
		err := e.c.Get(context.Background(), client.ObjectKeyFromObject(old), &j)
		if err == nil && j.UID != old.UID {
			waited := time.Since(since)
			if got := j.Annotations[controller.AnnotationAttempt]; got != strconv.Itoa(attempt) {
				t.Errorf("the retry of Job %s is attempt %q, want %d", j.Name, got, attempt)
			}
			return &j, waited
		}
		if client.IgnoreNotFound(err) != nil {
			t.Fatal(err)
		}
		if time.Now().After(deadline) {
			t.Fatalf("the failed Job %s (attempt %d) was not replaced within 20 s", old.Name, attempt-1)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// waitNewJob waits (at most 20 s) for a build Job of the PoolImage with
// a name none of the Jobs given has, and returns it.
func (e *env) waitNewJob(t *testing.T, pool string, old ...batchv1.Job) batchv1.Job {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		for _, j := range e.jobs(t, pool) {
			if !slices.ContainsFunc(old, func(o batchv1.Job) bool { return o.Name == j.Name }) {
				return j
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no new build Job of %s within 20 s", pool)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// waitEvent waits (at most 20 s) for an Event of the reason about the
// PoolImage whose note holds all of the strings given.
func (e *env) waitEvent(t *testing.T, pool, reason string, want ...string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		for _, ev := range e.events(t, pool)[reason] {
			ok := true
			for _, w := range want {
				ok = ok && strings.Contains(ev.Note, w)
			}
			if ok {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Errorf("no Event %s about %s saying %q", reason, pool, want)
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestBuildJobRetry: a build Job that failed to run is replaced by the
// next attempt after the backoff of an in-process build, without waiting
// for its TTL. With the registry stopped the pod (the real binary) fails
// to reach it and reports a run failure: the PoolImage is Degraded naming
// the registry and the attempt, the last good image stays, an Event
// BuildFailed names the attempt, and the Job is replaced by one of the
// same name (attempt 2; the failed Job's result ConfigMap gone) no sooner
// than 250 ms. The second attempt fails without a result (as when its pod
// is evicted): attempt 3 comes no sooner than 500 ms. With the registry
// back attempt 3 builds, and the PoolImage is Ready with the new signed
// image, status.builds[0].attempt 3. A failure of the input gets no second
// Job, and a new digest starts at attempt 1 again. New inputs delete a
// failed Job waiting for its retry, and its inputs built again later
// start at attempt 1.
func TestBuildJobRetry(t *testing.T) {
	e := newEnv(t)
	e.runJobManager(t)
	e.create(t, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "osc-worker", Namespace: e.ns}, Data: oscSecret("one")})
	pi := e.poolImage("worker", v1alpha1.Source{Gardener: &v1alpha1.GardenerSource{SecretName: "osc-worker"}})
	pi.Spec.Base = e.reg.Host + "/fcos/base:stable"
	pi.Spec.Target = e.reg.Host + "/os/worker:latest"
	pi.Spec.Builder = v1alpha1.BuilderJob
	e.create(t, pi)
	job := e.waitJobs(t, "worker", 1)[0]
	if out, err := e.playPod(t, &job); err != nil {
		t.Fatalf("the build pod failed: %v\n%s", err, out)
	}
	e.finishJob(t, &job, true)
	pi = e.wait(t, "worker", "Ready", ready)
	first := pi.Status.Image
	if b := pi.Status.Builds[0]; b.Attempt != 1 || b.Job != job.Name {
		t.Errorf("first build %+v: want attempt 1 of Job %s", b, job.Name)
	}

	// The registry goes: the pod reports a run failure.
	e.reg.Stop()
	e.updateSecret(t, "osc-worker", func(s *corev1.Secret) { s.Data = oscSecret("two") })
	job = e.waitJobs(t, "worker", 2)[1]
	if _, err := e.playPod(t, &job); err == nil {
		t.Fatal("the build pod succeeded with the registry stopped")
	}
	var cm corev1.ConfigMap
	if err := e.c.Get(context.Background(), client.ObjectKeyFromObject(&job), &cm); err != nil {
		t.Fatalf("no result ConfigMap: %v", err)
	}
	var res controller.JobResult
	if err := json.Unmarshal([]byte(cm.Data[controller.ResultKey]), &res); err != nil || res.Succeeded || res.Invalid {
		t.Fatalf("result %s (%v): want a failure to run", cm.Data[controller.ResultKey], err)
	}
	e.finishJob(t, &job, false)
	failedAt := time.Now()
	pi = e.wait(t, "worker", "Degraded", func(pi *v1alpha1.PoolImage) bool { return degraded(pi) && len(pi.Status.Builds) == 2 })
	c := meta.FindStatusCondition(pi.Status.Conditions, v1alpha1.ConditionDegraded)
	t.Logf("Degraded: %s: %s", c.Reason, c.Message)
	if c.Reason != controller.ReasonBuildFailed || !strings.Contains(c.Message, e.reg.Host) || !strings.Contains(c.Message, "attempt 1 of Job "+job.Name) {
		t.Errorf("Degraded %s %q: want %s naming the registry and the attempt", c.Reason, c.Message, controller.ReasonBuildFailed)
	}
	if b := pi.Status.Builds[0]; pi.Status.Image != first || b.Result != "Failed" || b.Attempt != 1 || b.Job != job.Name {
		t.Errorf("after the failed Job: image %q (want %q), build %+v", pi.Status.Image, first, b)
	}
	next, waited := e.waitRetry(t, &job, 2, failedAt)
	t.Logf("attempt 2 created %v after attempt 1 was marked Failed", waited)
	if waited < 250*time.Millisecond {
		t.Errorf("attempt 2 came %v after attempt 1 failed: before the backoff of 250 ms", waited)
	}
	if err := e.c.Get(context.Background(), client.ObjectKeyFromObject(&job), &cm); err == nil && cm.OwnerReferences[0].UID == job.UID {
		t.Errorf("the failed Job's result ConfigMap is still there for attempt 2")
	} else if err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
	e.waitEvent(t, "worker", "BuildFailed", "attempt 1 of Job "+job.Name, e.reg.Host)
	e.waitEvent(t, "worker", "BuildStarted", next.Name+" (attempt 2)")

	// Attempt 2 fails without a result (its pod evicted): attempt 3 after
	// twice the backoff.
	e.finishJob(t, next, false)
	failedAt = time.Now()
	pi = e.wait(t, "worker", "attempt 2 recorded", func(pi *v1alpha1.PoolImage) bool { return pi.Status.Builds[0].Attempt == 2 })
	c = meta.FindStatusCondition(pi.Status.Conditions, v1alpha1.ConditionDegraded)
	if c.Reason != controller.ReasonBuildFailed || !strings.Contains(c.Message, "without a result") || !strings.Contains(c.Message, "attempt 2 of Job") {
		t.Errorf("Degraded %s %q: want the Job's failure and attempt 2", c.Reason, c.Message)
	}
	third, waited := e.waitRetry(t, next, 3, failedAt)
	t.Logf("attempt 3 created %v after attempt 2 was marked Failed", waited)
	if waited < 500*time.Millisecond {
		t.Errorf("attempt 3 came %v after attempt 2 failed: before the backoff of 500 ms", waited)
	}

	// The registry is back: attempt 3 builds.
	e.reg.Restart(t)
	if out, err := e.playPod(t, third); err != nil {
		t.Fatalf("attempt 3's pod failed: %v\n%s", err, out)
	}
	e.finishJob(t, third, true)
	pi = e.wait(t, "worker", "Ready after the retries", func(pi *v1alpha1.PoolImage) bool {
		return ready(pi) && pi.Status.Image != first && !degraded(pi)
	})
	if b := pi.Status.Builds[0]; b.Result != "Succeeded" || b.Attempt != 3 || b.Job != third.Name || b.Image != pi.Status.Image {
		t.Errorf("build %+v: want attempt 3 of Job %s succeeded", b, third.Name)
	}
	e.verify(t, pi.Status.Image)
	if js := e.jobs(t, "worker"); len(js) != 2 {
		t.Errorf("%d Jobs, want 2 (one per digest)", len(js))
	}

	// A failure of the input: one Job, not retried, attempt 1 (a new
	// digest starts anew).
	bad := map[string][]byte{"osc.yaml": []byte(synth.OSCFiles("  - path: etc/relative\n    content:\n      inline:\n        data: x\n"))}
	before := e.jobs(t, "worker")
	e.updateSecret(t, "osc-worker", func(s *corev1.Secret) { s.Data = bad })
	job = e.waitNewJob(t, "worker", before...)
	if job.Annotations[controller.AnnotationAttempt] != "1" {
		t.Errorf("the Job of new inputs is attempt %q, want 1", job.Annotations[controller.AnnotationAttempt])
	}
	if _, err := e.playPod(t, &job); err == nil {
		t.Fatal("the build pod of an invalid OSC succeeded")
	}
	e.finishJob(t, &job, false)
	pi = e.wait(t, "worker", "Degraded (input)", degraded)
	if c := meta.FindStatusCondition(pi.Status.Conditions, v1alpha1.ConditionDegraded); c.Reason != controller.ReasonInvalid {
		t.Errorf("Degraded %s %q, want %s", c.Reason, c.Message, controller.ReasonInvalid)
	}
	// Longer than the first three backoffs (250 + 500 + 1000 ms).
	time.Sleep(3 * time.Second)
	var j batchv1.Job
	if err := e.c.Get(context.Background(), client.ObjectKeyFromObject(&job), &j); err != nil || j.UID != job.UID {
		t.Errorf("the Job of the invalid input was replaced (%v)", err)
	}
	if js := e.jobs(t, "worker"); len(js) != 3 {
		t.Errorf("%d Jobs after the input failure, want 3", len(js))
	}

	// New inputs supersede a failed Job waiting for its retry (attempt 3,
	// 1 s): it is deleted, and its inputs, built again, start at attempt
	// 1.
	before = e.jobs(t, "worker")
	e.updateSecret(t, "osc-worker", func(s *corev1.Secret) { s.Data = oscSecret("three") })
	job = e.waitNewJob(t, "worker", before...)
	for attempt := 1; attempt <= 3; attempt++ {
		e.finishJob(t, &job, false)
		if attempt < 3 {
			next, _ := e.waitRetry(t, &job, attempt+1, time.Now())
			job = *next
		}
	}
	e.wait(t, "worker", "attempt 3 recorded", func(pi *v1alpha1.PoolImage) bool { return pi.Status.Builds[0].Attempt == 3 })
	before = e.jobs(t, "worker")
	e.updateSecret(t, "osc-worker", func(s *corev1.Secret) { s.Data = oscSecret("four") })
	other := e.waitNewJob(t, "worker", before...)
	if other.Annotations[controller.AnnotationAttempt] != "1" {
		t.Errorf("the Job of new inputs is attempt %q, want 1", other.Annotations[controller.AnnotationAttempt])
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		names := map[string]bool{}
		for _, j := range e.jobs(t, "worker") {
			names[j.Name] = true
		}
		if !names[job.Name] && len(names) == 4 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("Jobs %v: want the failed %s deleted and one for the new inputs", names, job.Name)
		}
		time.Sleep(50 * time.Millisecond)
	}
	e.waitEvent(t, "worker", "BuildSuperseded", "deleted the failed Job "+job.Name)
	e.updateSecret(t, "osc-worker", func(s *corev1.Secret) { s.Data = oscSecret("three") })
	again, _ := e.waitRetry(t, &job, 1, time.Now())
	if again.CreationTimestamp.Before(&job.CreationTimestamp) {
		t.Errorf("Job %s of the inputs built again is older than the one deleted", again.Name)
	}
}
