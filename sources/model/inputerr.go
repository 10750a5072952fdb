package model

import (
	"context"
	"errors"
)

// InputError marks Err as the user's input at fault: a file that is
// missing or does not parse, a document of the wrong kind, a field value
// the source or the renderer refuses. A front-end exits 2 for it (bad
// input) and has changed nothing.
type InputError struct{ Err error }

func (e *InputError) Error() string { return e.Err.Error() }

func (e *InputError) Unwrap() error { return e.Err }

// InputError reports that the error is bad input.
func (e *InputError) InputError() bool { return true }

// InputError reports that a problem with one input item is bad input.
func (e *Error) InputError() bool { return true }

// Failure marks Err as a failure to read an input that is not the input's
// fault (a registry that is down or answers 500, a read that times out):
// an error that holds one is never bad input, wherever it is wrapped.
type Failure struct{ Err error }

func (e *Failure) Error() string { return e.Err.Error() }

func (e *Failure) Unwrap() error { return e.Err }

// MarkInput marks err as bad input (InputError) unless it is nil, already
// marked, a context's end, or holds a Failure.
func MarkInput(err error) error {
	if err == nil || IsInput(err) || isFailure(err) {
		return err
	}
	return &InputError{Err: err}
}

// IsInput reports whether err is bad input: it holds an InputError (or an
// *Error) and no Failure, and is not a context's end.
func IsInput(err error) bool {
	var in interface{ InputError() bool }
	return err != nil && !isFailure(err) && errors.As(err, &in) && in.InputError()
}

// isFailure reports whether err holds a Failure or a context's end.
func isFailure(err error) bool {
	var f *Failure
	return errors.As(err, &f) || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
}
