package prune_test

import (
	"fmt"
	"testing"
	"time"
)

// Each kind of reference keeps the image it names; an image of the same
// pool that nothing names is deleted with its .sig and .att tags, and a
// second run deletes nothing.

func TestPoolImageStatusKeeps(t *testing.T) {
	e := newEnv(t, false)
	current, history, unused, pinned := e.push("worker", true), e.push("worker", true), e.push("worker", true), e.push("worker", true)
	now := time.Now().UTC().Format(time.RFC3339)
	e.apply(fmt.Sprintf(`apiVersion: oslayer.dev/v1alpha1
kind: PoolImage
metadata: {name: worker, namespace: %s}
spec: {source: {documents: {objects: [{kind: ConfigMap, name: osc}]}}, base: quay.io/fedora/fedora-coreos:stable, target: %s:worker}
status:
  image: %s
  lastBuildTime: %s
  published: {image: %s, decision: Pinned}
  builds:
  - {image: %s, time: %s, result: Succeeded}
  - {image: %s, time: %s, result: Succeeded}
`, e.ns, e.repo, current, now, pinned, current, now, history, now))
	res := e.prune(true)
	e.wantKept(res, current, "PoolImage "+e.ns+"/worker status.image")
	e.wantKept(res, history, "PoolImage "+e.ns+"/worker status.builds[1].image")
	e.wantKept(res, pinned, "PoolImage "+e.ns+"/worker status.published.image")
	e.wantDeleted(res, unused)
	e.wantNothingDeleted()
}

func TestPublishedConfigMapKeeps(t *testing.T) {
	e := newEnv(t, false)
	published, unused := e.push("worker", true), e.push("worker", true)
	e.apply(fmt.Sprintf(`apiVersion: oslayer.dev/v1alpha1
kind: PoolImage
metadata: {name: worker, namespace: %s}
spec: {source: {documents: {objects: [{kind: ConfigMap, name: osc}]}}, base: b, target: %s:worker, publish: {configMap: pool-image}}
`, e.ns, e.repo))
	e.apply(fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: pool-image, namespace: %s}\ndata: {image: %q, pool: worker}\n", e.ns, published.String()))
	res := e.prune(true)
	e.wantKept(res, published, "ConfigMap "+e.ns+"/pool-image data.image")
	e.wantDeleted(res, unused)
	e.wantNothingDeleted()
}

// A rendered MachineConfig counts while its pool names it; one no pool
// or node names any more does not keep its osImageURL. A MachineConfig
// that is not rendered (a PoolImage's published one) always counts.
func TestMachineConfigPoolKeeps(t *testing.T) {
	e := newEnv(t, false)
	inUse, stale, next := e.push("worker", true), e.push("worker", true), e.push("worker", true)
	rendered, old := e.name("rendered-worker-1"), e.name("rendered-worker-0")
	e.apply(machineConfig(rendered, inUse.String(), true))
	e.apply(machineConfig(old, stale.String(), true))
	// The PoolImage's published MachineConfig: not rendered yet, it is
	// what the pool's next rendered config will carry.
	published := e.name("99-worker-oslayer-os-image")
	e.apply(machineConfig(published, next.String(), false))
	e.apply(fmt.Sprintf(`apiVersion: machineconfiguration.openshift.io/v1
kind: MachineConfigPool
metadata: {name: %s}
spec: {configuration: {name: %s}}
status: {configuration: {name: %s}}
`, e.name("worker"), rendered, rendered))
	res := e.prune(true)
	e.wantKept(res, inUse, "MachineConfig "+rendered+" spec.osImageURL")
	e.wantKept(res, next, "MachineConfig "+published+" spec.osImageURL")
	e.wantDeleted(res, stale)
	e.wantNothingDeleted()
}

// A Node's currentConfig and desiredConfig name rendered MachineConfigs
// whose osImageURLs stay (a node mid-update).
func TestNodeMachineConfigKeeps(t *testing.T) {
	e := newEnv(t, false)
	current, desired, unused := e.push("worker", true), e.push("worker", true), e.push("worker", true)
	cur, des := e.name("rendered-a"), e.name("rendered-b")
	e.apply(machineConfig(cur, current.String(), true))
	e.apply(machineConfig(des, desired.String(), true))
	e.apply(fmt.Sprintf(`apiVersion: v1
kind: Node
metadata:
  name: %s
  annotations: {machineconfiguration.openshift.io/currentConfig: %s, machineconfiguration.openshift.io/desiredConfig: %s}
`, e.name("node"), cur, des))
	res := e.prune(true)
	e.wantKept(res, current, "MachineConfig "+cur+" spec.osImageURL")
	e.wantKept(res, desired, "MachineConfig "+des+" spec.osImageURL")
	e.wantDeleted(res, unused)
	e.wantNothingDeleted()
}

// OpenShift's layered nodes name their images in annotations.
func TestLayeredNodeKeeps(t *testing.T) {
	e := newEnv(t, false)
	current, desired, unused := e.push("worker", true), e.push("worker", true), e.push("worker", true)
	e.apply(fmt.Sprintf(`apiVersion: v1
kind: Node
metadata:
  name: %s
  annotations: {machineconfiguration.openshift.io/currentImage: %q, machineconfiguration.openshift.io/desiredImage: %q}
`, e.name("node"), current.String(), desired.String()))
	res := e.prune(true)
	e.wantKept(res, current, "machineconfiguration.openshift.io/currentImage")
	e.wantKept(res, desired, "machineconfiguration.openshift.io/desiredImage")
	e.wantDeleted(res, unused)
	e.wantNothingDeleted()
}

// A BootcNode keeps its booted, staged and rollback images (the rollback
// one by its bare imageDigest) and its desired image.
func TestBootcNodeKeeps(t *testing.T) {
	e := newEnv(t, false)
	booted, staged, rollback, desired, unused := e.push("bootc", true), e.push("bootc", true), e.push("bootc", true), e.push("bootc", true), e.push("bootc", true)
	e.apply(fmt.Sprintf(`apiVersion: node.bootc.dev/v1alpha1
kind: BootcNode
metadata: {name: %s}
spec: {desiredImage: %q, desiredImageState: Staged}
status:
  booted: {image: %q, imageDigest: %q}
  staged: {image: %q, imageDigest: %q}
  rollback: {image: "other.example.com/os/pools@%s", imageDigest: %q}
`, e.name("node"), desired.String(), booted.String(), booted.DigestStr(), staged.String(), staged.DigestStr(), rollback.DigestStr(), rollback.DigestStr()))
	res := e.prune(true)
	e.wantKept(res, booted, "status.booted.image")
	e.wantKept(res, staged, "status.staged.image")
	e.wantKept(res, rollback, "status.rollback.imageDigest")
	e.wantKept(res, desired, "spec.desiredImage")
	e.wantDeleted(res, unused)
	e.wantNothingDeleted()
}

// A BootcNodePool (bootc-operator's real CRD) keeps its spec.image.ref,
// status.targetDigest and status.deployedDigest.
func TestBootcNodePoolKeeps(t *testing.T) {
	e := newEnv(t, false)
	ref, target, deployed, unused := e.push("bootc", true), e.push("bootc", true), e.push("bootc", true), e.push("bootc", true)
	e.apply(fmt.Sprintf(`apiVersion: node.bootc.dev/v1alpha1
kind: BootcNodePool
metadata: {name: %s}
spec:
  nodeSelector: {matchLabels: {pool: bootc}}
  image: {ref: %q}
status: {targetDigest: %q, deployedDigest: %q, updateAvailable: true}
`, e.name("pool"), ref.String(), target.DigestStr(), deployed.DigestStr()))
	res := e.prune(true)
	e.wantKept(res, ref, "spec.image.ref")
	e.wantKept(res, target, "status.targetDigest")
	e.wantKept(res, deployed, "status.deployedDigest")
	e.wantDeleted(res, unused)
	e.wantNothingDeleted()
}

func machineConfig(name, url string, rendered bool) string {
	owner := ""
	if rendered {
		owner = "\n  ownerReferences: [{apiVersion: machineconfiguration.openshift.io/v1, kind: MachineConfigPool, name: worker, uid: 5f1c2a56-0000-4000-8000-000000000001}]"
	}
	return fmt.Sprintf(`apiVersion: machineconfiguration.openshift.io/v1
kind: MachineConfig
metadata:
  name: %s%s
spec: {osImageURL: %q}
`, name, owner, url)
}
