package controller

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/oslayer/oslayer/api/v1alpha1"
	"github.com/oslayer/oslayer/pipeline"
)

// PodOptions configure a build in the build pod (oslayer build
// --from-poolimage).
type PodOptions struct {
	Options
	// Namespace and Name are the PoolImage's.
	Namespace, Name string
	// Job is the build Job; its result ConfigMap has the same name ("":
	// build and report on stdout only).
	Job string
	// SourcesDigest is the digest the Job was created for ("": any); the
	// pod builds nothing when the inputs no longer have it.
	SourcesDigest string
	// BuildLog receives buildah's output of the package stage (nil:
	// discarded).
	BuildLog io.Writer
}

// ErrInputsChanged is the build pod's failure when the PoolImage's inputs
// changed after its Job was created: the controller builds them in the
// Job of their new digest.
var ErrInputsChanged = errors.New("inputs changed since the Job was created")

// BuildPod runs the build of the PoolImage as the build Job's pod does: it
// reads the PoolImage and its sources through c, builds, pushes and signs
// exactly as the controller process would, and writes the JobResult into
// the Job's result ConfigMap. It returns the result and the build's error.
func BuildPod(ctx context.Context, c client.Client, o PodOptions) (*JobResult, error) {
	start := time.Now()
	var pi v1alpha1.PoolImage
	if err := c.Get(ctx, client.ObjectKey{Namespace: o.Namespace, Name: o.Name}, &pi); err != nil {
		return nil, fmt.Errorf("PoolImage %s/%s: %w", o.Namespace, o.Name, err)
	}
	r := &Reconciler{Client: c, Options: o.Options, pod: true, buildLog: o.BuildLog}
	log := r.logger().With("poolimage", o.Namespace+"/"+o.Name, "job", o.Job)
	res := &JobResult{SourcesDigest: o.SourcesDigest}
	berr := func() error {
		in, err := readInputs(ctx, c, &pi)
		if err != nil {
			var ie *inputError
			res.Step, res.Invalid = "source", errors.As(err, &ie)
			return err
		}
		if res.SourcesDigest == "" {
			res.SourcesDigest = in.digest
		}
		if in.digest != res.SourcesDigest {
			res.Step = "source"
			return fmt.Errorf("%w (digest %s, the Job builds %s); the controller builds them in a new Job", ErrInputsChanged, in.digest, res.SourcesDigest)
		}
		br, step, err := r.run(ctx, &pi, in, log)
		if err != nil {
			res.Step, res.Invalid = step, invalidStep(step)
			if br != nil {
				res.InputsDigest = br.InputsDigest
			}
			return err
		}
		if br.PackageStage != nil {
			if res.Packages, err = json.Marshal(br.PackageStage); err != nil {
				return err
			}
		}
		res.Succeeded = true
		res.Image, res.InputsDigest, res.BaseDigest = br.Image, br.InputsDigest, br.Base.Digest.String()
		_, res.Signed = br.Stages[pipeline.StepSign]
		return nil
	}()
	if berr != nil {
		res.Message = specText(berr)
	}
	res.Seconds = time.Since(start).Seconds()
	if o.Job == "" {
		return res, berr
	}
	if err := writeResult(ctx, c, o.Namespace, o.Job, res); err != nil {
		return res, errors.Join(berr, err)
	}
	return res, berr
}

// writeResult writes the result ConfigMap of the Job, owned by it (so it
// goes with the Job).
func writeResult(ctx context.Context, c client.Client, ns, jobName string, res *JobResult) error {
	var job batchv1.Job
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: jobName}, &job); err != nil {
		return fmt.Errorf("build Job %s/%s: %w", ns, jobName, err)
	}
	b, err := json.Marshal(res)
	if err != nil {
		return err
	}
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: jobName, Namespace: ns,
			Labels: map[string]string{LabelPoolImage: job.Labels[LabelPoolImage]},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "Job", Name: job.Name, UID: job.UID,
				Controller: ptr.To(true)}}},
		Data: map[string]string{ResultKey: string(b)},
	}
	err = c.Create(ctx, cm)
	if apierrors.IsAlreadyExists(err) {
		// A pod of the same Job ran before (a disruption): replace its result.
		var old corev1.ConfigMap
		if err := c.Get(ctx, client.ObjectKeyFromObject(cm), &old); err != nil {
			return err
		}
		old.Data, old.OwnerReferences = cm.Data, cm.OwnerReferences
		err = c.Update(ctx, &old)
	}
	if err != nil {
		return fmt.Errorf("result ConfigMap %s/%s: %w", ns, jobName, err)
	}
	return nil
}

// ParseObjectKey parses NAMESPACE/NAME.
func ParseObjectKey(s string) (ns, name string, err error) {
	ns, name, ok := strings.Cut(s, "/")
	if !ok || ns == "" || name == "" || strings.Contains(name, "/") {
		return "", "", fmt.Errorf("%q: want NAMESPACE/NAME", s)
	}
	return ns, name, nil
}

// packageInputs are the build pod's package stage inputs for the
// PoolImage: the user Containerfile and repository definitions read with
// the inputs (so they are what the sources digest covers), the build
// arguments of the spec, the build secrets from their mounted volumes
// (the package base goes into the target's repository). A pool without
// package inputs runs none (builder asks the stage, which finds nothing
// to do).
func (r *Reconciler) packageInputs(pi *v1alpha1.PoolImage, in *inputs) (*pipeline.Packages, error) {
	c := &pipeline.Packages{}
	for _, d := range in.docs {
		switch d.Kind {
		case kindContainerfile:
			c.Containerfile, c.ContainerfileName = d.Content, d.Name
		case kindRepo:
			if c.Repos == nil {
				c.Repos = map[string][]byte{}
			}
			c.Repos[path.Base(d.Name)] = d.Content
		}
	}
	if p := pi.Spec.Packages; p != nil {
		c.BuildArgs = p.BuildArgs
		for i, s := range p.BuildSecrets {
			field := fmt.Sprintf("spec.packages.buildSecrets[%d]", i)
			if r.Options.SecretsDir == "" {
				return nil, fmt.Errorf("%s: build secrets are read from their mounted volumes: give --secrets-dir", field)
			}
			f := filepath.Join(r.Options.SecretsDir, s.SecretName, s.Key)
			if fi, err := os.Stat(f); err != nil || !fi.Mode().IsRegular() {
				return nil, inputErrorf("%s: Secret %s/%s has no data key %q (not mounted at %s)", field, pi.Namespace, s.SecretName, s.Key, f)
			}
			if c.Secrets == nil {
				c.Secrets = map[string]string{}
			}
			c.Secrets[s.ID] = f
		}
	}
	return c, nil
}
