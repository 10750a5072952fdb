package prune

import (
	"fmt"
	"strings"
	"time"
)

// poolImage reads a PoolImage (oslayer.dev/v1alpha1): status.image (dated
// by status.lastBuildTime), every status.builds[].image (dated by its
// time), and status.baseDigest (and a digested spec.base) as a base.
func (c *collector) poolImage(o obj) error {
	pool, err := o.str("spec", "pool")
	if err != nil {
		return err
	}
	if pool == "" {
		pool, _ = o.str("metadata", "name")
	}
	last, err := o.timeField("status", "lastBuildTime")
	if err != nil {
		return err
	}
	current, err := o.str("status", "image")
	if err != nil {
		return err
	}
	built, err := c.poolBuilds(o, pool, current)
	if err != nil {
		return err
	}
	if last.IsZero() {
		last = built
	}
	if err := c.ref(o, "PoolImage", pool, last, "status", "image"); err != nil {
		return err
	}
	// The image spec.publish hands on (pinned, or held while the change
	// since it is applied in place) may have left the build history.
	if err := c.ref(o, "PoolImage", pool, last, "status", "published", "image"); err != nil {
		return err
	}
	if err := c.ref(o, "base", pool, time.Time{}, "status", "baseDigest"); err != nil {
		return err
	}
	if base, _ := o.str("spec", "base"); strings.Contains(base, "@") {
		return c.ref(o, "base", pool, time.Time{}, "spec", "base")
	}
	return nil
}

// poolBuilds reads status.builds: each image, dated by its time, marked
// Failed by its result; it returns the time of current's record.
func (c *collector) poolBuilds(o obj, pool, current string) (time.Time, error) {
	var at time.Time
	v := field(o.m, "status", "builds")
	builds, ok := v.([]any)
	if v != nil && !ok {
		return at, o.fail("status.builds", "not a list")
	}
	for i, b := range builds {
		f := fmt.Sprintf("status.builds[%d]", i)
		bm, ok := b.(map[string]any)
		if !ok {
			return at, o.fail(f, "not an object")
		}
		bo := obj{m: bm, input: o.input, doc: o.doc, id: o.id}
		img, err := bo.str("image")
		if err != nil {
			return at, o.fail(f+".image", "not a string")
		}
		t, err := bo.timeField("time")
		if err != nil {
			return at, o.fail(f+".time", "%v", err.(*InputError).Err)
		}
		if img == "" {
			continue
		}
		result, _ := bo.str("result")
		if err := c.refValue(o, "PoolImage", pool, t, f+".image", img); err != nil {
			return at, err
		}
		c.refs.List[len(c.refs.List)-1].Failed = result == "Failed"
		if img == current && at.IsZero() {
			at = t
		}
	}
	return at, nil
}

// configMap reads a PoolImage's published ConfigMap (data.image).
func (c *collector) configMap(o obj) error {
	img, err := o.str("data", "image")
	if err != nil {
		return err
	}
	if img == "" {
		return o.fail("data.image", "missing (a PoolImage's published ConfigMap has it)")
	}
	pool, _ := o.str("data", "pool")
	return c.refValue(o, "ConfigMap", pool, time.Time{}, "data.image", img)
}

// machineConfig keeps a MachineConfig's osImageURL for finish; a config
// the MCO rendered (owned by a pool, or named rendered-*) counts only
// while a pool or node names it.
func (c *collector) machineConfig(o obj) error {
	n, _ := o.str("metadata", "name")
	if n == "" {
		return o.fail("metadata.name", "missing")
	}
	url, err := o.str("spec", "osImageURL")
	if err != nil || url == "" {
		return err
	}
	r, err := parseRef(url)
	if err != nil {
		return o.fail("spec.osImageURL", "%v", err)
	}
	r.Kind, r.From = "MachineConfig", o.id+" spec.osImageURL"
	c.mcs[n] = r
	c.rendered[n] = strings.HasPrefix(n, "rendered-") || ownedByPool(o.m)
	return nil
}

// ownedByPool reports whether an owner reference is a MachineConfigPool.
func ownedByPool(m map[string]any) bool {
	owners, _ := field(m, "metadata", "ownerReferences").([]any)
	for _, ow := range owners {
		if om, ok := ow.(map[string]any); ok && om["kind"] == "MachineConfigPool" {
			return true
		}
	}
	return false
}

// machineConfigPool names its current and next rendered configs.
func (c *collector) machineConfigPool(o obj) error {
	for _, p := range [][]string{{"status", "configuration", "name"}, {"spec", "configuration", "name"}} {
		s, err := o.str(p...)
		if err != nil {
			return err
		}
		if s != "" {
			c.named[s] = true
		}
	}
	return nil
}

// node names its current and desired configs and, on a layered pool, its
// current and desired images.
func (c *collector) node(o obj) error {
	ann, _ := field(o.m, "metadata", "annotations").(map[string]any)
	for _, k := range []string{annCurrentConfig, annDesiredConfig} {
		if s, _ := ann[k].(string); s != "" {
			c.named[s] = true
		}
	}
	for _, k := range []string{annCurrentImage, annDesiredImage} {
		if s, _ := ann[k].(string); s != "" {
			if err := c.refValue(o, "Node", "", time.Time{}, "metadata.annotations["+k+"]", s); err != nil {
				return err
			}
		}
	}
	return nil
}

// bootcNode reads a bootc-operator BootcNode (node.bootc.dev/v1alpha1):
// spec.desiredImage and status.booted, .staged and .rollback (each image
// and imageDigest).
func (c *collector) bootcNode(o obj) error {
	if err := c.ref(o, "BootcNode", "", time.Time{}, "spec", "desiredImage"); err != nil {
		return err
	}
	for _, slot := range []string{"booted", "staged", "rollback"} {
		for _, f := range []string{"image", "imageDigest"} {
			if err := c.ref(o, "BootcNode", "", time.Time{}, "status", slot, f); err != nil {
				return err
			}
		}
	}
	return nil
}

// bootcNodePool reads a BootcNodePool's spec.image.ref and its
// status.targetDigest and deployedDigest.
func (c *collector) bootcNodePool(o obj) error {
	for _, p := range [][]string{{"spec", "image", "ref"}, {"status", "targetDigest"}, {"status", "deployedDigest"}} {
		if err := c.ref(o, "BootcNodePool", "", time.Time{}, p...); err != nil {
			return err
		}
	}
	return nil
}
