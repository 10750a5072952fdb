package registry

import (
	"errors"

	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
)

// IsStatus reports whether err is a registry answer with one of codes.
func IsStatus(err error, codes ...int) bool {
	var te *transport.Error
	if !errors.As(err, &te) {
		return false
	}
	for _, c := range codes {
		if te.StatusCode == c {
			return true
		}
	}
	return false
}
