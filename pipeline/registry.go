package pipeline

import (
	"github.com/google/go-containerregistry/pkg/authn"

	"github.com/oslayer/oslayer/internal/registry"
)

// RegistryOptions are the registry options of Spec.Registry (mirrors,
// insecure hosts, timeout, credentials), named here for front-ends that
// live outside this module's tree (the Gardener extension's module), which
// must not import its internal packages.
type RegistryOptions = registry.Options

// Keychain is the credentials of a containers auth file and a Kubernetes
// Secret manifest (dockerconfigjson or dockercfg), either "" for none,
// before the default keychain.
func Keychain(authFile, secretFile string) (authn.Keychain, error) {
	return registry.Keychain(authFile, secretFile)
}
