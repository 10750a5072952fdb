package preflight

// OptionError is an option the checks refuse or cannot use. Field names
// it as a build specification, a fleet plan and a PoolImage do
// ("preflight.skip[1]", "preflight.requireBase"); a command-line front-end
// names its flag instead (--skip, --require-base).
type OptionError struct {
	Field string
	Err   error
}

func (e *OptionError) Error() string { return e.Field + ": " + e.Err.Error() }
func (e *OptionError) Unwrap() error { return e.Err }
