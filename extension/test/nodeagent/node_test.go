package nodeagent

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path"

	"github.com/spf13/afero"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	nodeagentconfigv1alpha1 "github.com/gardener/gardener/pkg/apis/config/nodeagent/v1alpha1"
	filespkg "github.com/gardener/gardener/pkg/nodeagent/files"
)

// oscSecretName is the name of the Secret the node agent watches.
const oscSecretName = "gardener-node-agent-oracle"

// extractor stands in for gardener-node-agent's containerd extractor: the
// real one mounts the image and copies filePathInImage with files.Copy;
// this one places a small script in the node agent's temporary directory
// and calls the same files.Copy.
type extractor struct{ fs afero.Afero }

func (e extractor) CopyFromImage(_ context.Context, image, filePathInImage, destination string, permissions os.FileMode) error {
	dir, err := e.fs.TempDir(nodeagentconfigv1alpha1.TempDir, "oracle-image-")
	if err != nil {
		return err
	}
	defer e.fs.RemoveAll(dir)
	src := path.Join(dir, path.Base(filePathInImage))
	if err := e.fs.WriteFile(src, []byte("#!/bin/sh\n# "+filePathInImage+" from "+image+"\n"), 0o755); err != nil {
		return err
	}
	return filespkg.Copy(e.fs, src, destination, permissions)
}

// wrapSecret returns the Secret gardenlet writes for an OSC document: data
// key osc.yaml and the checksum annotation the node agent compares.
func wrapSecret(oscYAML []byte) *corev1.Secret {
	sum := sha256.Sum256(oscYAML)
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: oscSecretName, Namespace: metav1.NamespaceSystem,
			Annotations: map[string]string{nodeagentconfigv1alpha1.AnnotationKeyChecksumDownloadedOperatingSystemConfig: hex.EncodeToString(sum[:])}},
		Data: map[string][]byte{nodeagentconfigv1alpha1.DataKeyOperatingSystemConfig: oscYAML},
	}
}
