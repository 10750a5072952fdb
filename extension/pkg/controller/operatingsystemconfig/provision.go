package operatingsystemconfig

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/go-logr/logr"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/sigstore/sigstore/pkg/cryptoutils"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1beta1constants "github.com/gardener/gardener/pkg/apis/core/v1beta1/constants"
	extensionsv1alpha1 "github.com/gardener/gardener/pkg/apis/extensions/v1alpha1"
	reconcilerutils "github.com/gardener/gardener/pkg/controllerutils/reconciler"

	"github.com/oslayer/oslayer/extension/pkg/nodeside"
	"github.com/oslayer/oslayer/pipeline"
)

// provision returns the user data of a provision OSC: its units and
// files and, once the pool's reconcile OSC has a pool image, the pivot
// onto it with its signature enforced. While the pool's reconcile OSC is
// still building, it returns a RequeueAfterError (poolImage).
func (a *Actuator) provision(ctx context.Context, log logr.Logger, osc *extensionsv1alpha1.OperatingSystemConfig) ([]byte, error) {
	cfg, err := a.configOf(osc)
	if err != nil {
		return nil, err
	}
	pool := osc.Labels[v1beta1constants.LabelWorkerPool]
	if pool == "" {
		return nil, invalidf(fieldPoolLabel, "missing: the OSC names no worker pool")
	}
	p := nodeside.Provision{OSC: osc}
	if p.Secrets, err = a.secretRefs(ctx, osc); err != nil {
		return nil, err
	}
	if p.Image, err = a.poolImage(ctx, log, osc, pool); err != nil {
		return nil, err
	}
	if p.Image != "" && cfg.Signing != nil {
		if err := a.trust(ctx, osc, cfg, &p); err != nil {
			return nil, err
		}
	}
	ud, err := nodeside.UserData(p)
	if err != nil {
		return nil, fieldErr("spec.units/spec.files (provision user data)", err)
	}
	return ud, nil
}

// poolWaitRetry is how soon a provision OSC that waits for its pool image
// is reconciled again; the watch on the pool's reconcile OSCs (package
// app) usually enqueues it earlier, as soon as the image is recorded.
const poolWaitRetry = 10 * time.Second

// poolImage is the pool image the pool's reconcile OSC of the same type
// recorded in status.providerStatus; of several, the last reconciled.
// While one of them has not finished reconciling its current spec (its
// status.observedGeneration lags its metadata.generation: new, changed,
// or held by gardenlet), it asks to be retried instead (a
// reconcilerutils.RequeueAfterError), so that new machines do not boot
// the plain base or an outdated image. It is "" (the plain base) when the
// pool has no reconcile OSC or none of them has built an image (they
// failed: the machines can still join).
func (a *Actuator) poolImage(ctx context.Context, log logr.Logger, osc *extensionsv1alpha1.OperatingSystemConfig, pool string) (string, error) {
	recs, err := a.poolReconcileOSCs(ctx, osc, pool)
	if err != nil {
		return "", err
	}
	var image string
	var newest *extensionsv1alpha1.OperatingSystemConfig
	for _, o := range recs {
		if o.Status.ObservedGeneration != o.Generation {
			return "", &reconcilerutils.RequeueAfterError{RequeueAfter: poolWaitRetry, Cause: fmt.Errorf(
				"status.providerStatus.image of the pool's reconcile OSC %s: waiting for the pool image of its metadata.generation %d (status.observedGeneration %d)",
				o.Name, o.Generation, o.Status.ObservedGeneration)}
		}
		st := providerStatus(o)
		if st == nil || st.Image == "" {
			continue
		}
		if newest == nil || lastUpdate(newest).Before(lastUpdate(o)) {
			newest, image = o, st.Image
		}
	}
	if image == "" {
		log.Info("Provision user data boots the plain base: " + plainBaseReason(recs))
	}
	return image, nil
}

// poolReconcileOSCs are the reconcile OSCs of the provision OSC's
// namespace, pool and type that are not being deleted.
func (a *Actuator) poolReconcileOSCs(ctx context.Context, osc *extensionsv1alpha1.OperatingSystemConfig, pool string) ([]*extensionsv1alpha1.OperatingSystemConfig, error) {
	var list extensionsv1alpha1.OperatingSystemConfigList
	if err := a.client.List(ctx, &list, client.InNamespace(osc.Namespace),
		client.MatchingLabels{v1beta1constants.LabelWorkerPool: pool}); err != nil {
		return nil, fieldErr(fieldPoolLabel+" (the pool's reconcile OSC)", err)
	}
	var recs []*extensionsv1alpha1.OperatingSystemConfig
	for i := range list.Items {
		o := &list.Items[i]
		if o.Spec.Purpose == extensionsv1alpha1.OperatingSystemConfigPurposeReconcile && o.Spec.Type == osc.Spec.Type && o.DeletionTimestamp == nil {
			recs = append(recs, o)
		}
	}
	return recs, nil
}

// plainBaseReason says why a provision OSC's user data has no pivot.
func plainBaseReason(recs []*extensionsv1alpha1.OperatingSystemConfig) string {
	if len(recs) == 0 {
		return "the pool has no reconcile OSC of this type"
	}
	var b strings.Builder
	b.WriteString("no reconcile OSC of the pool recorded a pool image")
	for _, o := range recs {
		if le := o.Status.LastError; le != nil {
			fmt.Fprintf(&b, "; %s failed: %s", o.Name, le.Description)
		}
	}
	return b.String()
}

func lastUpdate(o *extensionsv1alpha1.OperatingSystemConfig) *metav1.Time {
	if lo := o.Status.LastOperation; lo != nil {
		return &lo.LastUpdateTime
	}
	return &metav1.Time{}
}

// trust sets the containers policy, registries.d file and public key
// that make the pivot enforce the pool image's signature (as `oslayer
// trust` writes them).
func (a *Actuator) trust(ctx context.Context, osc *extensionsv1alpha1.OperatingSystemConfig, cfg *config, p *nodeside.Provision) error {
	field := cfg.field("signing.keySecretRef")
	km, s, err := a.signingKey(ctx, osc, cfg)
	if err != nil {
		return err
	}
	pub := s.Data[pipeline.SecretPublicField]
	if len(pub) == 0 {
		sv, err := a.keys.Signer(km, nil)
		if err != nil {
			return invalidf(field, "%v", err)
		}
		pk, err := sv.PublicKey()
		if err != nil {
			return invalidf(field, "%v", err)
		}
		if pub, err = cryptoutils.MarshalPublicKeyToPEM(pk); err != nil {
			return invalidf(field, "%v", err)
		}
	}
	d, err := name.NewDigest(p.Image)
	if err != nil {
		return fieldErr("status.providerStatus.image", err)
	}
	b, err := pipeline.Trust(d.Context().Name(), pub, pipeline.TrustOptions{Pool: osc.Labels[v1beta1constants.LabelWorkerPool], OSCType: osc.Spec.Type, AcceptImages: nodeside.NodeImages(osc)})
	if err != nil {
		return invalidf(field, "%v", err)
	}
	p.Policy, p.SigstoreConfig, p.PublicKey = b.Files[0].Content, b.Files[1].Content, b.Files[2].Content
	return nil
}
