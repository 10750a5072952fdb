package osextension

import (
	extensionsv1alpha1 "github.com/gardener/gardener/pkg/apis/extensions/v1alpha1"
)

// Modes of the files a reconcile adds.
const (
	poolImageMode     = 0o644
	updateCommandMode = 0o755
)

func extensionFiles(r Reconcile) []extensionsv1alpha1.File {
	return []extensionsv1alpha1.File{
		inlineFile(PoolImageFile, poolImageMode, r.Image+"\n"),
		inlineFile(UpdateCommand, updateCommandMode, updateScript),
	}
}

// extensionUnits is empty: the update command runs from
// gardener-node-agent (status.inPlaceUpdates.osUpdate), not from a unit.
func extensionUnits(Reconcile) []extensionsv1alpha1.Unit { return nil }

// inlineFile is an OSC file with plain inline content.
func inlineFile(path string, mode uint32, content string) extensionsv1alpha1.File {
	return extensionsv1alpha1.File{
		Path:        path,
		Permissions: &mode,
		Content:     extensionsv1alpha1.FileContent{Inline: &extensionsv1alpha1.FileContentInline{Data: content}},
	}
}
