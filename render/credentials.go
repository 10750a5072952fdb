package render

import (
	"path"
	"strings"

	"github.com/oslayer/oslayer/render/varmech"
)

// bakeCredential is machineconfig.Options.BakeCredential for req: a
// credential the platform delivers itself (the OpenShift pull secret, the
// kubelet's bootstrap kubeconfig) is baked only when req.BakeSecrets is
// set or req.AllowSecrets names it, as preflight's secrets check reads an
// allowSecrets entry: the node path, the path where the image stores it
// (varmech.StoreDir + node path), or a path.Match pattern of either; an
// entry may name the path as configured (/opt/x for /var/opt/x). The
// same rule holds for every front-end: they all reach here through
// pipeline.Spec (Inputs.BakeSecrets, Preflight.AllowSecrets).
func (req Request) bakeCredential(nodePath string) bool {
	if req.BakeSecrets {
		return true
	}
	match := func(pattern, name string) bool {
		m, _ := path.Match(pattern, name)
		return pattern == name || m
	}
	for _, a := range req.AllowSecrets {
		a = "/" + strings.TrimPrefix(a, "/")
		if match(a, nodePath) || match(a, varmech.StoreDir+nodePath) {
			return true
		}
		if c, ok := varmech.Canonical(a); ok && match(c, nodePath) {
			return true
		}
	}
	return false
}
