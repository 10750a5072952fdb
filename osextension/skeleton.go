package osextension

import (
	"errors"

	extensionsv1alpha1 "github.com/gardener/gardener/pkg/apis/extensions/v1alpha1"
)

// The bodies below are placeholders of the agreed API; the real ones
// replace this file.

func userData(Provision) ([]byte, error) {
	return nil, errors.New("osextension: user data not implemented yet")
}

func extensionFiles(r Reconcile) []extensionsv1alpha1.File {
	perm := uint32(0o644)
	return []extensionsv1alpha1.File{{
		Path:        PoolImageFile,
		Permissions: &perm,
		Content:     extensionsv1alpha1.FileContent{Inline: &extensionsv1alpha1.FileContentInline{Data: r.Image + "\n"}},
	}}
}

func extensionUnits(Reconcile) []extensionsv1alpha1.Unit { return nil }
