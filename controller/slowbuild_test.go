package controller_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	mcfgv1 "github.com/openshift/api/machineconfiguration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/oslayer/oslayer/api/v1alpha1"
	"github.com/oslayer/oslayer/controller"
)

// slowTag delays every move of the tag latest (the build's last step)
// by d: the in-process build then publishes after the MCO's render
// window, as a cold base index or a busy controller makes it.
func (e *env) slowTag(d time.Duration) {
	e.proxy.SetFail(func(r *http.Request) int {
		if r.Method == http.MethodPut && strings.HasSuffix(r.URL.Path, "/manifests/latest") {
			time.Sleep(d)
		}
		return 0
	})
}

// editPool edits the Ignition config of the pool's MachineConfig.
func (p *pausePool) editPool(t *testing.T, edit func(runtime.RawExtension) runtime.RawExtension) {
	t.Helper()
	var mc mcfgv1.MachineConfig
	if err := p.e.c.Get(context.Background(), client.ObjectKey{Name: "00-" + p.name}, &mc); err != nil {
		t.Fatal(err)
	}
	mc.Spec.Config = edit(mc.Spec.Config)
	if err := p.e.c.Update(context.Background(), &mc); err != nil {
		t.Fatal(err)
	}
}

// TestSlowBuildOneReboot: one reboot per change does not rest on the
// MCO's 5 s render window. The in-process build's tag is held 7 s (past
// the window); a reboot-class change still moves the pool's nodes once,
// to a rendered config with the new image, because the controller
// paused the pool before the build (PoolPaused HeldForBuild) and lifts
// the pause once the image is rendered. A live change (an SSH key) does
// not pause it: the nodes take it at the MCO's pace while the build
// runs. With --pause-pools=false the same slow build moves the nodes
// twice (the test can fail).
func TestSlowBuildOneReboot(t *testing.T) {
	e := newEnv(t)
	stop := e.runManager(t, nil)
	p := &pausePool{e: e, name: e.ns}
	p.mco = startRenderStandIn(t, e, p.name)
	e.openShiftPool(t, p.name, mcfgv1.MachineConfigSpec{Config: ignitionFile("/etc/oslayer/pool.conf", "one")})
	pi := e.poolImage("pool", v1alpha1.Source{OpenShift: &v1alpha1.OpenShiftSource{MachineConfigPool: p.name}})
	pi.Spec.Publish = &v1alpha1.Publish{MachineConfig: &v1alpha1.PublishMachineConfig{}}
	e.create(t, pi)
	image := p.rendered(t, "", false)
	_, moved := p.mco.nodesSince(0)
	e.slowTag(7 * time.Second)

	p.editPool(t, func(runtime.RawExtension) runtime.RawExtension { return ignitionFile("/etc/oslayer/pool.conf", "two") })
	p.condition(t, metav1.ConditionTrue, controller.ReasonHeldForBuild)
	image = p.rendered(t, image, false)
	moved = p.moves(t, "a slow reboot-class build", moved, 1, image)
	p.condition(t, metav1.ConditionFalse, controller.ReasonRendered)

	p.editPool(t, func(c runtime.RawExtension) runtime.RawExtension {
		return withSSHKey(t, c, "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOslayerSlowBuild core@slow")
	})
	p.condition(t, metav1.ConditionFalse, controller.ReasonLiveChange)
	p.mco.settle(t, "the nodes took the SSH key", func() bool { _, n := p.mco.nodesSince(0); return n > moved })
	moved = p.moves(t, "an SSH key with a slow build", moved, 1, image)
	e.wait(t, "pool", "the SSH key build held", func(pi *v1alpha1.PoolImage) bool {
		return pi.Status.Published != nil && pi.Status.Published.Decision == v1alpha1.DecisionNoNodeChange
	})

	stop()
	e.runManager(t, func(o *controller.ManagerOptions) { o.NoPoolPause = true })
	p.editPool(t, func(runtime.RawExtension) runtime.RawExtension {
		return ignitionFile("/etc/oslayer/pool.conf", "three")
	})
	image = p.rendered(t, image, false)
	p.moves(t, "a slow build without the pause", moved, 2, image)
}
