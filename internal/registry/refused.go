package registry

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
)

// ExplainRefused says what an authentication failure (401 or 403) of a
// request for repo means: the registry refused the credentials oslayer has
// for it, and where they come from. Other errors are returned as they are.
// The underlying error text never contains credentials (go-containerregistry
// redacts them).
func ExplainRefused(err error, repo name.Repository) error {
	var te *transport.Error
	if errors.As(err, &te) && (te.StatusCode == http.StatusUnauthorized || te.StatusCode == http.StatusForbidden) {
		return RefusedError(err, repo)
	}
	return err
}

// RefusedError is err explained as repo's registry refusing the
// credentials.
func RefusedError(err error, repo name.Repository) error {
	return fmt.Errorf("registry %s refused the credentials for %s (check registry.authfile, registry.authSecret or the docker config): %w",
		repo.RegistryStr(), repo.RepositoryStr(), err)
}

// TornManifestPut reports whether err is a manifest PUT the registry
// refused because a blob the manifest names looked unknown or corrupt
// (MANIFEST_BLOB_UNKNOWN, BLOB_UNKNOWN, DIGEST_INVALID). A registry on
// distribution's filesystem storage answers so while another client
// rewrites the link of one of those blobs (uploading or tagging the same
// content): the blobs are there, and the PUT succeeds when tried again.
func TornManifestPut(err error) bool {
	var te *transport.Error
	if !errors.As(err, &te) {
		return false
	}
	for _, d := range te.Errors {
		switch d.Code {
		case transport.ManifestBlobUnknownErrorCode, transport.BlobUnknownErrorCode, transport.DigestInvalidErrorCode:
			return true
		}
	}
	return false
}
