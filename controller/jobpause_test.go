package controller_test

import (
	"context"
	"strings"
	"testing"
	"time"

	mcfgv1 "github.com/openshift/api/machineconfiguration/v1"
	batchv1 "k8s.io/api/batch/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/oslayer/oslayer/api/v1alpha1"
	"github.com/oslayer/oslayer/controller"
)

// pausePool is the test's OpenShift pool in Job mode: the PoolImage
// "pool" publishing the pool's osImageURL MachineConfig, the MCO played
// by renderStandIn (render and node moves).
type pausePool struct {
	e    *env
	mco  *renderStandIn
	name string
	jobs []batchv1.Job // every build Job seen
}

// mcp is the pool as the API server has it.
func (p *pausePool) mcp(t *testing.T) mcfgv1.MachineConfigPool {
	t.Helper()
	var mcp mcfgv1.MachineConfigPool
	if err := p.e.c.Get(context.Background(), client.ObjectKey{Name: p.name}, &mcp); err != nil {
		t.Fatal(err)
	}
	return mcp
}

// setPaused sets the pool's spec.paused as a user does.
func (p *pausePool) setPaused(t *testing.T, paused bool) {
	t.Helper()
	mcp := p.mcp(t)
	orig := mcp.DeepCopy()
	mcp.Spec.Paused = paused
	if err := p.e.c.Patch(context.Background(), &mcp, client.MergeFrom(orig)); err != nil {
		t.Fatal(err)
	}
}

// change edits the pool's MachineConfig (a file no node disruption
// policy names: the daemon reboots) and returns the new build Job.
func (p *pausePool) change(t *testing.T, content string) batchv1.Job {
	t.Helper()
	var mc mcfgv1.MachineConfig
	if err := p.e.c.Get(context.Background(), client.ObjectKey{Name: "00-" + p.name}, &mc); err != nil {
		t.Fatal(err)
	}
	mc.Spec.Config = ignitionFile("/etc/oslayer/pool.conf", content)
	if err := p.e.c.Update(context.Background(), &mc); err != nil {
		t.Fatal(err)
	}
	job := p.e.waitNewJob(t, "pool", p.jobs...)
	p.jobs = append(p.jobs, job)
	return job
}

// changeConfig edits the Ignition config of the pool's MachineConfig
// and returns the new build Job.
func (p *pausePool) changeConfig(t *testing.T, edit func(runtime.RawExtension) runtime.RawExtension) batchv1.Job {
	t.Helper()
	var mc mcfgv1.MachineConfig
	if err := p.e.c.Get(context.Background(), client.ObjectKey{Name: "00-" + p.name}, &mc); err != nil {
		t.Fatal(err)
	}
	mc.Spec.Config = edit(mc.Spec.Config)
	if err := p.e.c.Update(context.Background(), &mc); err != nil {
		t.Fatal(err)
	}
	job := p.e.waitNewJob(t, "pool", p.jobs...)
	p.jobs = append(p.jobs, job)
	return job
}

// build plays the Job's pod and completes the Job.
func (p *pausePool) build(t *testing.T, job batchv1.Job) {
	t.Helper()
	if out, err := p.e.playPod(t, &job); err != nil {
		t.Fatalf("the build pod failed: %v\n%s", err, out)
	}
	p.e.finishJob(t, &job, true)
}

// heldFor waits until the controller holds the pool paused for the Job.
func (p *pausePool) heldFor(t *testing.T, job batchv1.Job) {
	t.Helper()
	want := p.e.ns + "/pool " + job.Annotations[controller.AnnotationSourcesDigest]
	p.mco.settle(t, "the pool paused for Job "+job.Name, func() bool {
		mcp := p.mcp(t)
		return mcp.Spec.Paused && mcp.Annotations[controller.AnnotationPausedFor] == want
	})
}

// rendered waits until the MCO rendered the PoolImage's new image
// (status.image other than old) and the pool is paused as given; it
// returns the image.
func (p *pausePool) rendered(t *testing.T, old string, paused bool) string {
	t.Helper()
	image := ""
	p.mco.settle(t, "the new image rendered", func() bool {
		image = p.e.get(t, "pool").Status.Image
		return image != old && p.mco.current(t).Spec.OSImageURL == image && p.mcp(t).Spec.Paused == paused
	})
	return image
}

// moves checks that the nodes were moved n times since the first
// `since` moves, the last move to the image, and returns the count of
// all moves.
func (p *pausePool) moves(t *testing.T, what string, since, n int, image string) int {
	t.Helper()
	nodes, all := p.mco.nodesSince(since)
	renders, _ := p.mco.rendersSince(0)
	t.Logf("%s: the nodes moved %d time(s) %v (the pool's rendered configs so far %v)", what, len(nodes), nodes, renders)
	if len(nodes) != n {
		t.Errorf("%s: the nodes moved %d times %v, want %d", what, len(nodes), nodes, n)
	}
	if len(nodes) > 0 {
		var mc mcfgv1.MachineConfig
		if err := p.e.c.Get(context.Background(), client.ObjectKey{Name: nodes[len(nodes)-1]}, &mc); err != nil {
			t.Fatal(err)
		}
		if mc.Spec.OSImageURL != image {
			t.Errorf("%s: the nodes' rendered config %s has osImageURL %q, want %s", what, mc.Name, mc.Spec.OSImageURL, image)
		}
	}
	return all
}

// condition checks the PoolImage's PoolPaused condition.
func (p *pausePool) condition(t *testing.T, status metav1.ConditionStatus, reason string) {
	t.Helper()
	p.e.wait(t, "pool", "PoolPaused "+string(status)+" "+reason, func(pi *v1alpha1.PoolImage) bool {
		c := meta.FindStatusCondition(pi.Status.Conditions, v1alpha1.ConditionPoolPaused)
		return c != nil && c.Status == status && c.Reason == reason
	})
}

// TestJobPausePool: a Job-mode OpenShift pool rolls once per
// reboot-class change. The build Job outlasts the MCO's render delay, so
// the controller pauses the pool before it creates the Job; the MCO
// (renderStandIn: its render delay, its renders while paused, nodes that
// follow spec.configuration only while the pool is not paused) renders
// the user's change, the nodes stay; the Job's image is published and
// rendered, the controller unpauses, and the nodes move once, to the
// config with the new image. With the pause off (as before) the same
// change moves them twice. A pool the user paused stays paused (the
// controller neither marks nor unpauses it); a failed build lifts the
// pause (its retry does not pause again); the pause ends at its bound
// with a Warning Event; and a pause set by one controller process is
// lifted by the next when the PoolImage is deleted.
func TestJobPausePool(t *testing.T) {
	e := newEnv(t)
	stop := e.runManager(t, jobManager(nil))
	p := &pausePool{e: e, name: e.ns}
	p.mco = startRenderStandIn(t, e, p.name)
	e.openShiftPool(t, p.name, mcfgv1.MachineConfigSpec{Config: ignitionFile("/etc/oslayer/pool.conf", "one")})
	pi := e.poolImage("pool", v1alpha1.Source{OpenShift: &v1alpha1.OpenShiftSource{MachineConfigPool: p.name}})
	pi.Spec.Builder = v1alpha1.BuilderJob
	pi.Spec.Publish = &v1alpha1.Publish{MachineConfig: &v1alpha1.PublishMachineConfig{}}
	e.create(t, pi)
	p.jobs = e.waitJobs(t, "pool", 1)
	p.heldFor(t, p.jobs[0])
	p.build(t, p.jobs[0])
	image := p.rendered(t, "", false)
	// The nodes moved to the pool's first render unless the pause came
	// before it; the last move is to the image.
	nodes, moved := p.mco.nodesSince(0)
	p.moves(t, "the first image", 0, len(nodes), image)

	// A reboot-class change: the MCO renders it while the pool is
	// paused; the nodes move once the image is rendered too.
	_, before := p.mco.rendersSince(0)
	job := p.change(t, "two")
	p.heldFor(t, job)
	p.condition(t, metav1.ConditionTrue, controller.ReasonHeldForBuild)
	p.mco.settle(t, "the MCO rendered the change", func() bool { r, _ := p.mco.rendersSince(before); return len(r) > 0 })
	p.moves(t, "the change rendered while the Job runs", moved, 0, "")
	p.build(t, job)
	image = p.rendered(t, image, false)
	moved = p.moves(t, "a change in Job mode", moved, 1, image)
	p.condition(t, metav1.ConditionFalse, controller.ReasonRendered)
	if mcp := p.mcp(t); mcp.Annotations[controller.AnnotationPausedFor] != "" || mcp.Annotations[controller.AnnotationPausedSince] != "" {
		t.Errorf("the controller's mark stayed on the unpaused pool: %v", mcp.Annotations)
	}

	// A live change (an SSH key, applied in place by the daemon): the
	// change is analysed before the Job starts and the pool is not
	// paused; the MCO renders it and the nodes take it while the Job
	// runs (its pod is played only afterwards); the build is held (no
	// node content changed).
	_, before = p.mco.rendersSince(0)
	job = p.changeConfig(t, func(c runtime.RawExtension) runtime.RawExtension {
		return withSSHKey(t, c, "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOslayerJobLive core@job")
	})
	p.condition(t, metav1.ConditionFalse, controller.ReasonLiveChange)
	p.mco.settle(t, "the nodes took the SSH key while the Job runs", func() bool { _, n := p.mco.nodesSince(0); return n > moved })
	if mcp := p.mcp(t); mcp.Spec.Paused || mcp.Annotations[controller.AnnotationPausedFor] != "" {
		t.Errorf("a live change paused the pool (marked %q)", mcp.Annotations[controller.AnnotationPausedFor])
	}
	moved = p.moves(t, "an SSH key in Job mode, before its build", moved, 1, image)
	p.build(t, job)
	e.wait(t, "pool", "the SSH key build held", func(pi *v1alpha1.PoolImage) bool {
		return pi.Status.Image != image && pi.Status.Published != nil && pi.Status.Published.Decision == v1alpha1.DecisionNoNodeChange
	})
	moved = p.moves(t, "an SSH key in Job mode, after its build", moved, 0, "")

	// A pool the user paused: no mark, and it stays paused.
	p.setPaused(t, true)
	job = p.change(t, "three")
	p.condition(t, metav1.ConditionFalse, controller.ReasonPausedElsewhere)
	p.build(t, job)
	image = p.rendered(t, image, true)
	if mcp := p.mcp(t); mcp.Annotations[controller.AnnotationPausedFor] != "" {
		t.Errorf("the controller marked the pool the user paused: %v", mcp.Annotations)
	}
	p.moves(t, "a pool the user paused", moved, 0, "")
	p.setPaused(t, false)
	p.mco.settle(t, "the nodes follow the user's unpause", func() bool { _, n := p.mco.nodesSince(0); return n > moved })
	moved = p.moves(t, "the user's unpause", moved, 1, image)

	// A failed build lifts the pause; its retry does not pause again.
	_, before = p.mco.rendersSince(0)
	job = p.change(t, "four")
	p.heldFor(t, job)
	e.finishJob(t, &job, false)
	p.condition(t, metav1.ConditionFalse, controller.ReasonBuildFailed)
	retry, _ := e.waitRetry(t, &job, 2, time.Now())
	if mcp := p.mcp(t); mcp.Spec.Paused {
		t.Errorf("the pool is paused after the failed build (marked %q)", mcp.Annotations[controller.AnnotationPausedFor])
	}
	p.mco.settle(t, "the MCO rendered the change", func() bool { r, _ := p.mco.rendersSince(before); return len(r) > 0 })
	p.build(t, *retry)
	image = p.rendered(t, image, false)
	moved = p.moves(t, "the failed build and its retry", moved, 2, image)

	// Without the pause, a change moves the nodes twice.
	stop()
	stop = e.runManager(t, jobManager(func(o *controller.ManagerOptions) { o.NoPoolPause = true }))
	_, before = p.mco.rendersSince(0)
	job = p.change(t, "five")
	p.mco.settle(t, "the MCO rendered the change", func() bool { r, _ := p.mco.rendersSince(before); return len(r) > 0 })
	p.build(t, job)
	image = p.rendered(t, image, false)
	p.moves(t, "without the pause", moved, 2, image)

	// The bound: the pause ends with a Warning Event.
	stop()
	stop = e.runManager(t, jobManager(func(o *controller.ManagerOptions) { o.MaxPoolPause = 3 * time.Second }))
	paused := len(e.events(t, "pool")["PoolPaused"])
	p.change(t, "six")
	p.condition(t, metav1.ConditionFalse, controller.ReasonPauseTimedOut)
	if n := len(e.events(t, "pool")["PoolPaused"]); n != paused+1 {
		t.Errorf("%d PoolPaused Events for the Job, want 1", n-paused)
	}
	if ev := e.events(t, "pool")["PoolUnpaused"]; len(ev) == 0 || ev[len(ev)-1].Type != "Warning" {
		t.Errorf("no Warning Event PoolUnpaused at the bound: %+v", ev)
	}
	if mcp := p.mcp(t); mcp.Spec.Paused || mcp.Annotations[controller.AnnotationPausedFor] != "" {
		t.Errorf("the pool after the bound: paused %t, marked %q", mcp.Spec.Paused, mcp.Annotations[controller.AnnotationPausedFor])
	}

	// A pause held across a restart ends when the PoolImage is deleted.
	stop()
	stop = e.runManager(t, jobManager(nil))
	job = p.change(t, "seven")
	p.heldFor(t, job)
	stop()
	e.runManager(t, jobManager(nil))
	if err := e.c.Delete(context.Background(), e.get(t, "pool")); err != nil {
		t.Fatal(err)
	}
	p.mco.settle(t, "the deleted PoolImage's pause lifted", func() bool {
		mcp := p.mcp(t)
		return !mcp.Spec.Paused && mcp.Annotations[controller.AnnotationPausedFor] == ""
	})
	if logs := e.logs.String(); !strings.Contains(logs, "its PoolImage was deleted") {
		t.Error("the controller did not log the deleted PoolImage's unpause")
	}
}

// jobManager is runJobManager's options, then mutate's.
func jobManager(mutate func(*controller.ManagerOptions)) func(*controller.ManagerOptions) {
	return func(o *controller.ManagerOptions) {
		o.BuildImage = buildImage
		o.JobArgs = []string{"--timeout", "30s"}
		if mutate != nil {
			mutate(o)
		}
	}
}
