package operatingsystemconfig

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	extensionsv1alpha1 "github.com/gardener/gardener/pkg/apis/extensions/v1alpha1"

	"github.com/oslayer/oslayer/extension/pkg/nodeside"
	"github.com/oslayer/oslayer/pipeline"
)

// oscDocument is the OSC as the build reads it: its spec, with the
// extension's own units and files as status.extensionUnits/Files (the
// node agent merges them so), but for the pool-image record, which names
// the image being built (and the units' filePaths naming it: the restart
// it triggers is the node agent's). The OSC's status from earlier
// reconciles is left out: it holds the record of the previous image.
func oscDocument(osc *extensionsv1alpha1.OperatingSystemConfig) ([]byte, error) {
	r := nodeside.Reconcile{}
	var files []extensionsv1alpha1.File
	for _, f := range nodeside.ExtensionFiles(r) {
		if f.Path != nodeside.PoolImageFile {
			files = append(files, f)
		}
	}
	units := nodeside.ExtensionUnits(r)
	for i := range units {
		units[i].FilePaths = slices.DeleteFunc(units[i].FilePaths, func(p string) bool { return p == nodeside.PoolImageFile })
	}
	doc := &extensionsv1alpha1.OperatingSystemConfig{
		TypeMeta:   metav1.TypeMeta{APIVersion: extensionsv1alpha1.SchemeGroupVersion.String(), Kind: "OperatingSystemConfig"},
		ObjectMeta: metav1.ObjectMeta{Name: osc.Name, Namespace: osc.Namespace, Labels: osc.Labels},
		Spec:       *osc.Spec.DeepCopy(),
		Status:     extensionsv1alpha1.OperatingSystemConfigStatus{ExtensionUnits: units, ExtensionFiles: files},
	}
	// The providerConfig is the extension's, not the node's.
	doc.Spec.ProviderConfig = nil
	return yaml.Marshal(doc)
}

// writeSecretRefs writes the Secrets of the OSC's secretRef files as
// manifests into dir (for a build that bakes them).
func (a *Actuator) writeSecretRefs(ctx context.Context, osc *extensionsv1alpha1.OperatingSystemConfig, dir string) (string, error) {
	secrets, err := a.secretRefs(ctx, osc)
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", err
	}
	i := 0
	for name, data := range secrets {
		b, err := pipeline.SecretManifest(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: osc.Namespace}, Data: data})
		if err != nil {
			return "", err
		}
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("%03d.yaml", i)), b, 0o600); err != nil {
			return "", err
		}
		i++
	}
	return dir, nil
}
