package prune_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/sigstore/sigstore/pkg/signature"

	"github.com/oslayer/oslayer/assemble"
	"github.com/oslayer/oslayer/internal/registry"
	"github.com/oslayer/oslayer/prune"
	"github.com/oslayer/oslayer/publish/record"
	"github.com/oslayer/oslayer/sign"
)

// pushRecorded pushes a signed pool image with its build record dated at,
// signed with it, as a build does (record, then sign and attest).
func (e *env) pushRecorded(pool string, at time.Time) name.Digest {
	e.t.Helper()
	d := e.push(pool, false)
	h, _ := v1.NewHash(d.DigestStr())
	b := &assemble.Built{Digest: h, Pool: pool, Base: assemble.Base{Ref: "quay.io/fedora/fedora-coreos:stable", Digest: h}}
	p := &assemble.Published{Ref: d.String(), Digest: &d}
	rs := &record.Stage{Registry: &registry.Options{}, Now: func() time.Time { return at }}
	sv := key(e.t)
	stages := append([]assemble.Stage{rs}, sign.Stages(func(context.Context) (signature.SignerVerifier, error) { return sv, nil })...)
	for _, s := range stages {
		if _, err := s.Run(e.ctx, b, p); err != nil {
			e.t.Fatalf("stage %s on %s: %v", s.Name(), d, err)
		}
	}
	return d
}

// Build records date the images, whatever their digests' order: the
// newest by record are kept, the older ones deleted with their
// signature, attestation, SBOM, record and the record's signature; the
// record manifests are not listed as images.
func TestRecordsDateImages(t *testing.T) {
	e := newEnv(t, false)
	now := time.Now()
	var ds []name.Digest
	for i := 4; i >= 1; i-- {
		ds = append(ds, e.pushRecorded("worker", now.Add(-time.Duration(i)*time.Hour)))
	}
	res := e.prune(true, func(o *prune.Options) {
		o.Policy = prune.Policy{Keep: 2, Grace: 30 * time.Minute, Now: now}
	})
	if len(res.Images) != 4 {
		t.Fatalf("listed %v, want the 4 images only", digests(res))
	}
	for i, d := range ds {
		im := find(t, res, d)
		if !strings.HasPrefix(im.TimeFrom, "build record sha256-") {
			t.Errorf("image %d dated by %q", i, im.TimeFrom)
		}
		if i < 2 {
			e.wantDeleted(res, d)
		} else {
			e.wantKept(res, d, "one of the last 2 good images")
		}
	}
	tags := e.tags()
	if len(tags) != 2*4 {
		t.Errorf("tags left %v, want the 4 tags (.sig, .att, .rec and the record's .sig) of each kept image", tags)
	}
	for _, d := range ds[:2] {
		if tags["sha256-"+hex(d)+".rec"] {
			t.Errorf("record of deleted %s left", d)
		}
	}
}

// A build that publishes an image again after prune listed it (its record
// rewritten: the image is new again) keeps it, although prune decided to
// delete it: the record is read again right before the delete.
func TestRecordRewrittenBeforeDelete(t *testing.T) {
	e := newEnv(t, false)
	now := time.Now()
	old := e.pushRecorded("worker", now.Add(-3*time.Hour))
	e.pushRecorded("worker", now.Add(-2*time.Hour))
	res := e.prune(true, func(o *prune.Options) {
		o.Policy = prune.Policy{Keep: 1, Grace: time.Hour, Now: now}
		o.BeforeCheck = func(ctx context.Context, im *prune.Image) {
			if im.Digest.String() == old.DigestStr() {
				e.pushRecordOnly(old, time.Now())
			}
		}
	})
	e.wantKept(res, old, "a build published it again since it was listed")
	if s := e.status(old.DigestStr()); s != 200 {
		t.Errorf("image answers %d", s)
	}
}

// pushRecordOnly writes a new record of d dated at (a rebuild).
func (e *env) pushRecordOnly(d name.Digest, at time.Time) {
	e.t.Helper()
	h, _ := v1.NewHash(d.DigestStr())
	if _, err := record.Write(e.ctx, &registry.Options{}, d.Context(), record.Record{Image: h, Time: at, Pool: "worker"}, v1.Descriptor{}); err != nil {
		e.t.Fatal(err)
	}
}

// An image without a record is kept and takes no place among the newest:
// it is never deleted ahead of a dated one, nor ordered by its digest.
func TestUndatedNeverAheadOfDated(t *testing.T) {
	e := newEnv(t, false)
	now := time.Now()
	dated := e.pushRecorded("worker", now.Add(-3*time.Hour))
	newer := e.pushRecorded("worker", now.Add(-2*time.Hour))
	undated := e.push("worker", true)
	res := e.prune(true, func(o *prune.Options) {
		o.Policy = prune.Policy{Keep: 1, Grace: time.Hour, Now: now}
	})
	e.wantKept(res, undated, "age unknown")
	e.wantKept(res, newer, "one of the last 1 good images")
	e.wantDeleted(res, dated)
}

// An image a PoolImage's build history dates is not read for its record
// (one GET less per image), and its record, listed through the record's
// own signature tag, is still not an image of the repository.
func TestRecordOfPoolImageBuild(t *testing.T) {
	e := newEnv(t, false)
	d := e.pushRecorded("worker", time.Now().Add(-3*time.Hour))
	e.applyPoolImageBuild(d.String(), time.Now().Add(-2*time.Hour))
	e.proxy.Reset()
	res := e.prune(false, func(o *prune.Options) { o.Policy = prune.Policy{Keep: 1, Grace: time.Hour, Now: time.Now()} })
	if len(res.Images) != 1 || !strings.HasPrefix(res.Images[0].TimeFrom, "build record PoolImage") {
		t.Fatalf("listed %v, dated by %q: want the image only, dated by the PoolImage", digests(res), res.Images[0].TimeFrom)
	}
	for _, r := range e.proxy.Requests() {
		if strings.HasSuffix(r.Path, ".rec") {
			t.Errorf("record read: %s %s", r.Method, r.Path)
		}
	}
	if n := len(res.Images[0].Attached); n != 4 {
		t.Errorf("attached %v, want .att, .rec, .sig and the record's .sig", res.Images[0].Attached)
	}
}

// TestRecordOrdersWithinASecond: a PoolImage dates its build to the
// second (a Kubernetes time), a build record to the nanosecond. An
// image no longer in use, recorded 0.1 s into the second the PoolImage's
// build was made in 0.9 s into, is the older one: with keep 1 it goes.
// Read to the second, the PoolImage's build would rank below it.
func TestRecordOrdersWithinASecond(t *testing.T) {
	e := newEnv(t, false)
	s := time.Now().Add(-2 * time.Hour).Truncate(time.Second)
	older := e.pushRecorded("worker", s.Add(100*time.Millisecond))
	newer := e.pushRecorded("worker", s.Add(900*time.Millisecond))
	e.applyPoolImageBuild(newer.String(), s)
	res := e.prune(false, func(o *prune.Options) { o.Policy = prune.Policy{Keep: 1, Grace: time.Hour, Now: time.Now()} })
	want := map[string]string{older.DigestStr(): prune.ActionDelete, newer.DigestStr(): prune.ActionKeep}
	for _, im := range res.Images {
		if w, ok := want[im.Digest.String()]; ok && im.Action != w {
			t.Errorf("%s (dated %s by %s): %s, want %s: %v", im.Digest, im.Time, im.TimeFrom, im.Action, w, im.Reasons)
		}
	}
	if len(res.Images) != 2 {
		t.Errorf("listed %v, want the two images", digests(res))
	}
}

// applyPoolImageBuild applies a PoolImage of pool worker whose build
// history has one build of image, made at t (Kubernetes keeps the second).
func (e *env) applyPoolImageBuild(image string, t time.Time) {
	e.apply(fmt.Sprintf(`apiVersion: oslayer.dev/v1alpha1
kind: PoolImage
metadata: {name: %s, namespace: %s}
spec: {pool: worker, base: "quay.io/fedora/fedora-coreos:stable", target: "%s:worker", source: {gardener: {secretName: osc}}}
status:
  builds: [{image: %q, time: %q, result: Succeeded}]
`, e.name("pi"), e.ns, e.repo, image, t.UTC().Format(time.RFC3339)))
}
