package actuator

import (
	"fmt"

	v1beta1helper "github.com/gardener/gardener/pkg/api/core/v1beta1/helper"
	gardencorev1beta1 "github.com/gardener/gardener/pkg/apis/core/v1beta1"
)

// invalidf is an error of the OSC's content: the message starts with the
// OSC field, and the error carries Gardener's configuration problem code
// (status.lastError.codes), so that operators see it is theirs to fix.
func invalidf(field, format string, a ...any) error {
	return v1beta1helper.NewErrorWithCodes(fmt.Errorf("%s: %s", field, fmt.Sprintf(format, a...)), gardencorev1beta1.ErrorConfigurationProblem)
}

// invalid is invalidf of an error that names its fields itself (a
// field.ErrorList's aggregate).
func invalid(err error) error {
	return v1beta1helper.NewErrorWithCodes(err, gardencorev1beta1.ErrorConfigurationProblem)
}

// fieldErr names the OSC field of a failure that is not (or not only)
// the OSC's content: a registry or API server failure.
func fieldErr(field string, err error) error {
	return fmt.Errorf("%s: %w", field, err)
}
