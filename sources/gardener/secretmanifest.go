package gardener

import (
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

// SecretManifest writes a Secret read from a cluster as the manifest the
// readers take (an OSC Secret with data key osc.yaml, a secretRef Secret,
// a signing-key Secret): apiVersion, kind, name, namespace, type and data,
// nothing of the object's server-side metadata.
func SecretManifest(s *corev1.Secret) ([]byte, error) {
	m := map[string]any{
		"apiVersion": "v1", "kind": "Secret",
		"metadata": map[string]any{"name": s.Name, "namespace": s.Namespace},
		"data":     s.Data,
	}
	if s.Type != "" {
		m["type"] = string(s.Type)
	}
	return yaml.Marshal(m)
}
