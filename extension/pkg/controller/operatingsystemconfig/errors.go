package operatingsystemconfig

import (
	"fmt"

	gardencorev1beta1 "github.com/gardener/gardener/pkg/apis/core/v1beta1"
)

// configError is an error of the OSC's content. It carries Gardener's
// configuration problem code (status.lastError.codes: the library reads
// it through the Codes method), so that operators see it is theirs to
// fix.
type configError struct{ err error }

func (e *configError) Error() string { return e.err.Error() }
func (e *configError) Unwrap() error { return e.err }

// Codes are the Gardener error codes of the error.
func (e *configError) Codes() []gardencorev1beta1.ErrorCode {
	return []gardencorev1beta1.ErrorCode{gardencorev1beta1.ErrorConfigurationProblem}
}

// invalidf is a configError whose message starts with the OSC field.
func invalidf(field, format string, a ...any) error {
	return &configError{fmt.Errorf("%s: %s", field, fmt.Sprintf(format, a...))}
}

// invalid is a configError of an error that names its fields itself (a
// field.ErrorList's aggregate).
func invalid(err error) error { return &configError{err} }

// fieldErr names the OSC field of a failure that is not (or not only)
// the OSC's content: a registry or API server failure.
func fieldErr(field string, err error) error {
	return fmt.Errorf("%s: %w", field, err)
}
