package operatingsystemconfig

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"

	"github.com/google/go-containerregistry/pkg/v1/remote/transport"

	gardencorev1beta1 "github.com/gardener/gardener/pkg/apis/core/v1beta1"
)

// codedError is an error with Gardener error codes (status.lastError.codes:
// the library reads them through the Codes method), so that operators see
// whose it is to fix: a configuration problem is the OSC's content, an
// infrastructure dependency the registry's.
type codedError struct {
	err   error
	codes []gardencorev1beta1.ErrorCode
}

func (e *codedError) Error() string { return e.err.Error() }
func (e *codedError) Unwrap() error { return e.err }

// Codes are the Gardener error codes of the error.
func (e *codedError) Codes() []gardencorev1beta1.ErrorCode { return e.codes }

// invalidf is a configuration problem whose message starts with the OSC
// field.
func invalidf(field, format string, a ...any) error {
	return invalid(fmt.Errorf("%s: %s", field, fmt.Sprintf(format, a...)))
}

// invalid is a configuration problem of an error that names its fields
// itself (a field.ErrorList's aggregate).
func invalid(err error) error {
	return &codedError{err, []gardencorev1beta1.ErrorCode{gardencorev1beta1.ErrorConfigurationProblem}}
}

// fieldErr names the OSC field of a failure that is not (or not only)
// the OSC's content: a registry or API server failure.
func fieldErr(field string, err error) error {
	return fmt.Errorf("%s: %w", field, err)
}

// registryFault is a registry failure of a build step that is not the
// OSC's configuration: the registry unreachable, timing out or failing
// (5xx, 429), with Gardener's retryable infrastructure code, or refusing
// the credentials (401, 403), with the unauthorized code and the field
// of the credentials. It is nil for any other error (a missing image, a
// bad reference: the caller names the configuration field).
func registryFault(what, credentials string, err error) error {
	var te *transport.Error
	if errors.As(err, &te) {
		switch {
		case te.StatusCode == http.StatusUnauthorized || te.StatusCode == http.StatusForbidden:
			return &codedError{fmt.Errorf("%s: the registry refused the credentials (%s): %w", what, credentials, err),
				[]gardencorev1beta1.ErrorCode{gardencorev1beta1.ErrorInfraUnauthorized}}
		case te.StatusCode >= 500 || te.StatusCode == http.StatusTooManyRequests:
			return unavailable(what, err)
		}
		return nil
	}
	var ne net.Error
	var ue *url.Error
	if errors.As(err, &ne) || errors.As(err, &ue) || errors.Is(err, context.DeadlineExceeded) {
		return unavailable(what, err)
	}
	return nil
}

// unavailable is a registry outage: retried, nothing to fix in the OSC.
func unavailable(what string, err error) error {
	return &codedError{fmt.Errorf("%s: registry unavailable (not a configuration problem; retried): %w", what, err),
		[]gardencorev1beta1.ErrorCode{gardencorev1beta1.ErrorRetryableInfraDependencies}}
}
