package operatingsystemconfig

import (
	"context"
	"encoding/json"

	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	extensionsv1alpha1 "github.com/gardener/gardener/pkg/apis/extensions/v1alpha1"

	configv1alpha1 "github.com/oslayer/oslayer/extension/pkg/apis/config/v1alpha1"
)

// recordStatus writes st as the OSC's status.providerStatus (the
// extension library writes the rest of the status after Reconcile).
func (a *Actuator) recordStatus(ctx context.Context, osc *extensionsv1alpha1.OperatingSystemConfig, st *configv1alpha1.OperatingSystemConfigurationStatus) error {
	st.APIVersion, st.Kind = configv1alpha1.SchemeGroupVersion.String(), "OperatingSystemConfigurationStatus"
	b, err := json.Marshal(st)
	if err != nil {
		return err
	}
	patch := client.MergeFrom(osc.DeepCopy())
	osc.Status.ProviderStatus = &runtime.RawExtension{Raw: b}
	if err := a.client.Status().Patch(ctx, osc, patch); err != nil {
		return fieldErr("status.providerStatus", err)
	}
	return nil
}

// providerStatus decodes an OSC's status.providerStatus (nil: none or
// not the extension's).
func providerStatus(osc *extensionsv1alpha1.OperatingSystemConfig) *configv1alpha1.OperatingSystemConfigurationStatus {
	ps := osc.Status.ProviderStatus
	if ps == nil || len(ps.Raw) == 0 {
		return nil
	}
	st, err := configv1alpha1.DecodeStatus(ps.Raw)
	if err != nil {
		return nil
	}
	return st
}
