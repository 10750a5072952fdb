package nodeside

import (
	"fmt"

	"github.com/google/go-containerregistry/pkg/name"
)

// checkDigestRef refuses an image reference that is not by digest: a node
// switches only to the exact image that was built, pushed and signed.
func checkDigestRef(field, image string) error {
	if _, err := name.NewDigest(image, name.StrictValidation); err != nil {
		return fmt.Errorf("%s: image %q is not a reference by digest (NAME@sha256:HEX): %v", field, image, err)
	}
	return nil
}
