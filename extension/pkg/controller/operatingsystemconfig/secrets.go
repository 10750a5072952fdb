package operatingsystemconfig

import (
	"context"
	"crypto/sha256"
	"fmt"
	"os"
	"path/filepath"

	"github.com/google/go-containerregistry/pkg/authn"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"

	extensionscontroller "github.com/gardener/gardener/extensions/pkg/controller"
	v1beta1constants "github.com/gardener/gardener/pkg/apis/core/v1beta1/constants"
	extensionsv1alpha1 "github.com/gardener/gardener/pkg/apis/extensions/v1alpha1"
	"github.com/gardener/gardener/pkg/extensions"

	"github.com/oslayer/oslayer/pipeline"

	configv1alpha1 "github.com/oslayer/oslayer/extension/pkg/apis/config/v1alpha1"
)

// secret reads the Secret a configuration field names. A reference of
// the extension's default configuration is literal (a Secret of the
// extension's namespace); a providerConfig's names a resource of the
// shoot (Shoot.spec.resources[].name), which gardenlet copies into the
// OSC's namespace under a prefixed name (referencedSecret).
func (a *Actuator) secret(ctx context.Context, osc *extensionsv1alpha1.OperatingSystemConfig, cfg *config, ref configv1alpha1.SecretReference, name string) (*corev1.Secret, error) {
	field := cfg.field(name)
	if !cfg.isDefault(name) {
		return a.referencedSecret(ctx, osc, ref.Name, field)
	}
	var s corev1.Secret
	if err := a.client.Get(ctx, types.NamespacedName{Namespace: ref.Namespace, Name: ref.Name}, &s); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, invalidf(field, "Secret %s/%s not found", ref.Namespace, ref.Name)
		}
		return nil, fieldErr(field, err)
	}
	return &s, nil
}

// referencedSecret reads the Secret of the shoot's resource name
// (Shoot.spec.resources, from the namespace's Cluster) as Gardener's
// extension library resolves references (GetObjectByReference: the copy
// gardenlet keeps in the shoot's namespace, prefixed "ref-"); the
// reference is checked as the admission webhook checks it
// (configv1alpha1.ValidateShootReference). Errors name field (a
// providerConfig path) and say which resource is missing.
func (a *Actuator) referencedSecret(ctx context.Context, osc *extensionsv1alpha1.OperatingSystemConfig, name, fld string) (*corev1.Secret, error) {
	cluster, err := extensions.GetCluster(ctx, a.client, osc.Namespace)
	if err != nil {
		return nil, fieldErr(fld, err)
	}
	resources := map[string]*autoscalingv1.CrossVersionObjectReference{}
	kinds := map[string]string{}
	if cluster != nil && cluster.Shoot != nil {
		for i, r := range cluster.Shoot.Spec.Resources {
			resources[r.Name], kinds[r.Name] = &cluster.Shoot.Spec.Resources[i].ResourceRef, r.ResourceRef.APIVersion+"/"+r.ResourceRef.Kind
		}
	}
	if errs := configv1alpha1.ValidateShootReference(&configv1alpha1.SecretReference{Name: name}, kinds, field.NewPath(fld)); len(errs) > 0 {
		return nil, invalid(errs.ToAggregate())
	}
	ref := resources[name]
	var s corev1.Secret
	if err := extensionscontroller.GetObjectByReference(ctx, a.client, ref, osc.Namespace, &s); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, invalidf(fld+".name", "the shoot's resource %q (Secret %s): its copy %s/%s%s not found", name, ref.Name, osc.Namespace, v1beta1constants.ReferencedResourcesPrefix, ref.Name)
		}
		return nil, fieldErr(fld, err)
	}
	return &s, nil
}

// keychain is the credentials of registrySecretRef (the default keychain
// without one), written as a manifest under dir for registry.Keychain.
// cred is the digest of the credentials (connections are shared only
// between builds with the same).
func (a *Actuator) keychain(ctx context.Context, osc *extensionsv1alpha1.OperatingSystemConfig, cfg *config, dir string) (kc authn.Keychain, cred [sha256.Size]byte, err error) {
	ref := cfg.RegistrySecretRef
	if ref == nil {
		kc, err = pipeline.Keychain("", "")
		return kc, cred, err
	}
	field := cfg.field("registrySecretRef")
	s, err := a.secret(ctx, osc, cfg, *ref, "registrySecretRef")
	if err != nil {
		return nil, cred, err
	}
	b, err := pipeline.SecretManifest(s)
	if err != nil {
		return nil, cred, err
	}
	p := filepath.Join(dir, "auth.yaml")
	if err := os.WriteFile(p, b, 0o600); err != nil {
		return nil, cred, err
	}
	if kc, err = pipeline.Keychain("", p); err != nil {
		return nil, cred, invalidf(field, "%v", err)
	}
	return kc, sha256.Sum256(b), nil
}

// signingKey reads signing.keySecretRef (nil without signing).
func (a *Actuator) signingKey(ctx context.Context, osc *extensionsv1alpha1.OperatingSystemConfig, cfg *config) (*pipeline.KeyMaterial, *corev1.Secret, error) {
	if cfg.Signing == nil {
		return nil, nil, nil
	}
	field := cfg.field("signing.keySecretRef")
	s, err := a.secret(ctx, osc, cfg, cfg.Signing.KeySecretRef, "signing.keySecretRef")
	if err != nil {
		return nil, nil, err
	}
	km := &pipeline.KeyMaterial{Source: "Secret " + s.Namespace + "/" + s.Name, PEM: s.Data[pipeline.SecretKeyField]}
	if len(km.PEM) == 0 {
		return nil, nil, invalidf(field, "Secret %s/%s has no data key %s", s.Namespace, s.Name, pipeline.SecretKeyField)
	}
	if p, ok := s.Data[pipeline.SecretPasswordField]; ok {
		km.Password, km.HasPassword = p, true
	}
	return km, s, nil
}

// secretRefs reads the Secrets the OSC's secretRef files name: name →
// data.
func (a *Actuator) secretRefs(ctx context.Context, osc *extensionsv1alpha1.OperatingSystemConfig) (map[string]map[string][]byte, error) {
	out := map[string]map[string][]byte{}
	for i, f := range osc.Spec.Files {
		ref := f.Content.SecretRef
		if ref == nil || out[ref.Name] != nil {
			continue
		}
		var s corev1.Secret
		field := fmt.Sprintf("spec.files[%d].content.secretRef.name", i)
		if err := a.client.Get(ctx, types.NamespacedName{Namespace: osc.Namespace, Name: ref.Name}, &s); err != nil {
			if apierrors.IsNotFound(err) {
				return nil, invalidf(field, "Secret %s/%s not found", osc.Namespace, ref.Name)
			}
			return nil, fieldErr(field, err)
		}
		out[ref.Name] = s.Data
	}
	return out, nil
}
