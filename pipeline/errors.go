package pipeline

import (
	"errors"

	"github.com/oslayer/oslayer/sources/model"
)

// Error is a specification New refuses: Field names it (as the fleet
// plan and the PoolImage name it: "preflight.maxLayers"), Step is the
// build step it belongs to ("push", "sign", "preflight", "config").
//
// Input says the error is bad input, not a failure to run: a field New,
// Check or SetSettings refuses, a signing key that does not load or
// decrypt. A front-end exits 2 for it (IsInput) and nothing was built,
// pushed or tagged. An Error of Prepare (a base that cannot be resolved, a
// render that fails) is not Input.
type Error struct {
	Field string
	Step  string
	Err   error
	Input bool
}

func (e *Error) Error() string {
	if e.Field == "" {
		return e.Err.Error()
	}
	return e.Field + ": " + e.Err.Error()
}

func (e *Error) Unwrap() error { return e.Err }

func specErr(step, field string, err error) error {
	return &Error{Step: step, Field: field, Err: err}
}

// inputErr is bad input at field of step (Error.Input).
func inputErr(step, field string, err error) error {
	return &Error{Step: step, Field: field, Err: err, Input: true}
}

// IsInput reports whether err is bad input: every error it joins is (or
// wraps) an *Error with Input set, or input the sources and the renderer
// marked (model.IsInput: a file that does not parse, a field value they
// refuse; not imageRef content a registry failed to give). A front-end
// exits 2 for it, 1 for any other error.
func IsInput(err error) bool {
	if err == nil {
		return false
	}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		for _, e := range j.Unwrap() {
			if !IsInput(e) {
				return false
			}
		}
		return len(j.Unwrap()) > 0
	}
	var pe *Error
	if errors.As(err, &pe) && pe.Input {
		return true
	}
	return model.IsInput(err)
}
