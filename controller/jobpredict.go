package controller

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/oslayer/oslayer/api/v1alpha1"
	"github.com/oslayer/oslayer/diff"
	"github.com/oslayer/oslayer/internal/registry"
	"github.com/oslayer/oslayer/pipeline"
)

// A build Job, and an in-process build on a cold base index or a busy
// controller, is slower than the MCO's render delay, so a Job-mode pool
// used to be paused for every build — holding an SSH key or a rotated
// pull secret back until the Job was done — and an in-process build
// relied on the delay. Now the change is analysed before the build
// starts (holdForBuild, pause.go): the new inputs are rendered in the controller
// process (render only: no base layer is read, no image built) and
// compared with the published image as oslayer diff compares them, under
// the cluster's node disruption policies; the publish decision (Decide)
// then says whether the build will be published at once (a change the
// machine-config daemon reboots for: pause) or held (applied in place,
// or no node change: no pause, the MCO rolls the change at its pace).
//
// Rendering takes what it needs from the base (unit enablement, presets,
// owners) from the base index of the published image's base: the
// controller's disk cache, else the index artifact the build published
// next to the image in the target repository. Without either it renders
// without a base, which can only make the change look larger (links the
// base would decide), never smaller: the pool is then paused.

// jobPrediction is the analysed change of a build Job's inputs.
type jobPrediction struct {
	// pause is set when the build will be published at once.
	pause bool
	// why is the decision's message (or why it could not be analysed).
	why string
}

// predictJob analyses the change from the published image to the
// inputs in before their build Job starts.
func (r *Reconciler) predictJob(ctx context.Context, pi *v1alpha1.PoolImage, in *inputs) jobPrediction {
	pub := pi.Status.Published
	if pub == nil || pub.Image == "" {
		return jobPrediction{pause: true, why: "the first image (a new osImageURL: the nodes reboot)"}
	}
	to := "inputs " + in.digest
	ch, err := r.compareInputs(ctx, pi, in, pub.Image, to)
	if err != nil {
		return jobPrediction{pause: true, why: "the change could not be analysed before the build: " + err.Error()}
	}
	headline(pi, ch)
	d := Decide(PublishInput{Built: Candidate{Image: to}, Published: pub, LiveApply: true, Change: ch})
	switch d.Decision {
	case v1alpha1.DecisionLiveApplied, v1alpha1.DecisionNoNodeChange:
		return jobPrediction{why: fmt.Sprintf("the change to %s is applied in place (action %s): %s", to, ch.Action, d.Message)}
	}
	return jobPrediction{pause: true, why: d.Message}
}

// compareInputs renders the inputs (without building) and diffs them
// against the published image.
func (r *Reconciler) compareInputs(ctx context.Context, pi *v1alpha1.PoolImage, in *inputs, from, to string) (*v1alpha1.ImageChange, error) {
	opts, err := r.policies(ctx, pi)
	if err != nil {
		return nil, err
	}
	reg, done, err := r.readRegistry(ctx, pi)
	if err != nil {
		return nil, err
	}
	defer done()
	arch, err := platformsOf(pi)
	if err != nil {
		return nil, err
	}
	old, err := diff.LoadImage(ctx, reg, from, changePlatform(arch))
	if err != nil {
		return nil, fmt.Errorf("reading the published image: %w", err)
	}
	dir, err := os.MkdirTemp("", "oslayer-predict-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	req, err := renderRequest(pi, in, filepath.Join(dir, "in"))
	if err != nil {
		return nil, err
	}
	if ix := r.publishedIndex(ctx, pi, reg, old.BaseDigest); ix != nil {
		req.Base, req.BaseName = ix.FS(), "base "+old.BaseDigest
	}
	new, err := diff.LoadInputs(ctx, to, req, old.BaseDigest)
	if err != nil {
		return nil, fmt.Errorf("rendering the new inputs: %w", err)
	}
	// The package stage's key needs the build; the MCO never sees it (a
	// Containerfile change renders nothing). MachineConfig extensions and
	// kernel types are compared (an image records none: they count as
	// changed, and the pool is paused).
	new.PackageKey = old.PackageKey
	res, err := diff.Compare(old, new, opts)
	if err != nil {
		return nil, err
	}
	return Summarize(from, to, res), nil
}

// renderRequest writes the documents under dir and is the render request
// of the PoolImage's build (as the build specification maps it).
func renderRequest(pi *v1alpha1.PoolImage, in *inputs, dir string) (pipeline.RenderRequest, error) {
	byKind, secretsDir, err := writeDocs(dir, in.docs)
	if err != nil {
		return pipeline.RenderRequest{}, err
	}
	s := pipeline.Spec{Inputs: pipeline.Inputs{OSCs: byKind["OSC"], MachineConfigs: byKind["MachineConfig"],
		MachineConfigPools: byKind["MachineConfigPool"], Pool: poolName(pi), SecretsDir: secretsDir}}
	if err := s.SetSettings(pi.Spec.Settings); err != nil {
		return pipeline.RenderRequest{}, specError(err)
	}
	return s.RenderRequest(), nil
}

// publishedIndex is the base index of base: the controller's cache, else
// the artifact in the target's repository (nil: neither).
func (r *Reconciler) publishedIndex(ctx context.Context, pi *v1alpha1.PoolImage, reg *registry.Options, base string) *pipeline.BaseIndex {
	h, err := v1.NewHash(base)
	if err != nil {
		return nil
	}
	t, err := reg.ParseReference(pi.Spec.Target)
	if err != nil {
		return nil
	}
	ix, err := pipeline.PublishedBaseIndex(ctx, r.Options.IndexCacheDir, t.Context(), h, reg.RemoteOptions(ctx)...)
	if err != nil {
		r.logger().Info("no base index for the change analysis", "poolimage", pi.Namespace+"/"+pi.Name, "error", err)
		return nil
	}
	return ix
}
