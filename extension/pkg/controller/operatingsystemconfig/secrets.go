package operatingsystemconfig

import (
	"context"
	"crypto/sha256"
	"fmt"
	"os"
	"path/filepath"

	"github.com/google/go-containerregistry/pkg/authn"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"

	extensionsv1alpha1 "github.com/gardener/gardener/pkg/apis/extensions/v1alpha1"

	"github.com/oslayer/oslayer/pipeline"
	"github.com/oslayer/oslayer/sign"
	"github.com/oslayer/oslayer/sources/gardener"

	configv1alpha1 "github.com/oslayer/oslayer/extension/pkg/apis/config/v1alpha1"
)

// secret reads a Secret a configuration field names (its namespace
// defaults to the OSC's; the default configuration's references carry
// the extension's).
func (a *Actuator) secret(ctx context.Context, ns string, ref configv1alpha1.SecretReference, field string) (*corev1.Secret, error) {
	if ref.Namespace != "" {
		ns = ref.Namespace
	}
	var s corev1.Secret
	if err := a.client.Get(ctx, types.NamespacedName{Namespace: ns, Name: ref.Name}, &s); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, invalidf(field, "Secret %s/%s not found", ns, ref.Name)
		}
		return nil, fieldErr(field, err)
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
	s, err := a.secret(ctx, osc.Namespace, *ref, field)
	if err != nil {
		return nil, cred, err
	}
	b, err := gardener.SecretManifest(s)
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
func (a *Actuator) signingKey(ctx context.Context, osc *extensionsv1alpha1.OperatingSystemConfig, cfg *config) (*sign.KeyMaterial, *corev1.Secret, error) {
	if cfg.Signing == nil {
		return nil, nil, nil
	}
	field := cfg.field("signing.keySecretRef")
	s, err := a.secret(ctx, osc.Namespace, cfg.Signing.KeySecretRef, field)
	if err != nil {
		return nil, nil, err
	}
	km := &sign.KeyMaterial{Source: "Secret " + s.Namespace + "/" + s.Name, PEM: s.Data[sign.SecretKeyField]}
	if len(km.PEM) == 0 {
		return nil, nil, invalidf(field, "Secret %s/%s has no data key %s", s.Namespace, s.Name, sign.SecretKeyField)
	}
	if p, ok := s.Data[sign.SecretPasswordField]; ok {
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
