// Package admission is the extension's validating admission webhook for
// Shoots: the machine.image.providerConfig of every worker pool whose
// machine image is the extension's OS type is decoded strictly and
// validated with the code the actuator runs at reconcile
// (configv1alpha1.Decode, ValidateFields, ValidateShootReferences), so
// that a bad providerConfig is refused when the Shoot is applied instead
// of at the pool's first reconcile in the seed.
package admission

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"

	admissionv1 "k8s.io/api/admission/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	gardencorev1beta1 "github.com/gardener/gardener/pkg/apis/core/v1beta1"

	configv1alpha1 "github.com/oslayer/oslayer/extension/pkg/apis/config/v1alpha1"
)

// Path is where the webhook is served.
const Path = "/webhooks/validate-shoot-oslayer"

// ShootValidator validates the providerConfigs of a Shoot's worker pools
// of machine image Type.
type ShootValidator struct {
	// Type is the OS type (the machine image name) served.
	Type string
}

var _ admission.Handler = (*ShootValidator)(nil)

// Handle admits a Shoot whose worker pools of the OS type have valid
// providerConfigs; it denies one naming every invalid field
// (spec.provider.workers[i].machine.image.providerConfig.FIELD).
// Deletions, other objects and updates that change neither those
// providerConfigs nor spec.resources are allowed.
func (v *ShootValidator) Handle(_ context.Context, req admission.Request) admission.Response {
	if req.Operation != admissionv1.Create && req.Operation != admissionv1.Update {
		return admission.Allowed("")
	}
	if req.Kind.Group != gardencorev1beta1.GroupName || req.Kind.Kind != "Shoot" {
		return admission.Allowed("not a Shoot")
	}
	var shoot gardencorev1beta1.Shoot
	if err := json.Unmarshal(req.Object.Raw, &shoot); err != nil {
		return admission.Errored(http.StatusBadRequest, fmt.Errorf("decoding the Shoot: %w", err))
	}
	if req.Operation == admissionv1.Update && len(req.OldObject.Raw) > 0 {
		var old gardencorev1beta1.Shoot
		if err := json.Unmarshal(req.OldObject.Raw, &old); err != nil {
			return admission.Errored(http.StatusBadRequest, fmt.Errorf("decoding the old Shoot: %w", err))
		}
		if reflect.DeepEqual(v.inputs(&old), v.inputs(&shoot)) {
			return admission.Allowed("the providerConfigs of " + v.Type + " and spec.resources are unchanged")
		}
	}
	if errs := v.validate(&shoot); len(errs) > 0 {
		return admission.Denied(errs.ToAggregate().Error())
	}
	return admission.Allowed("")
}

// inputs is what the validation reads: the pools of the type (name and
// providerConfig, decoded as JSON so that its formatting does not count)
// and the shoot's resources. An update that changes none of it is
// admitted unchecked, so that a Shoot created before the webhook (or
// before a stricter version of it) can still be updated by Gardener and
// its owner (labels, annotations, deletion confirmation, other pools)
// without fixing it first; its seed's reconcile reports the fault.
func (v *ShootValidator) inputs(shoot *gardencorev1beta1.Shoot) []any {
	in := []any{shoot.Spec.Resources}
	for _, w := range shoot.Spec.Provider.Workers {
		if im := w.Machine.Image; im != nil && im.Name == v.Type {
			var pc any
			if im.ProviderConfig != nil && len(im.ProviderConfig.Raw) > 0 {
				if err := json.Unmarshal(im.ProviderConfig.Raw, &pc); err != nil {
					pc = string(im.ProviderConfig.Raw)
				}
			}
			in = append(in, w.Name, pc)
		}
	}
	return in
}

// validate checks the providerConfigs of the shoot's pools of the type.
func (v *ShootValidator) validate(shoot *gardencorev1beta1.Shoot) field.ErrorList {
	var errs field.ErrorList
	resources := map[string]string{}
	for _, r := range shoot.Spec.Resources {
		resources[r.Name] = r.ResourceRef.APIVersion + "/" + r.ResourceRef.Kind
	}
	for i, w := range shoot.Spec.Provider.Workers {
		im := w.Machine.Image
		if im == nil || im.Name != v.Type || im.ProviderConfig == nil || len(im.ProviderConfig.Raw) == 0 {
			continue
		}
		fld := field.NewPath("spec", "provider", "workers").Index(i).Child("machine", "image", "providerConfig")
		c, err := configv1alpha1.Decode(im.ProviderConfig.Raw)
		if err != nil {
			errs = append(errs, field.Invalid(fld, "", err.Error()))
			continue
		}
		errs = append(errs, configv1alpha1.ValidateFields(c, fld)...)
		errs = append(errs, configv1alpha1.ValidateShootReferences(c, resources, fld)...)
	}
	return errs
}
