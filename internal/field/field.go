// Package field names the fields of the build specification in library
// messages (base, pool, arch, preflight.maxLayers: the JSON names of the
// fleet plan and the PoolImage), so that each front-end spells a field its
// own way: the CLI as its flag (--base), the controller as spec.base, the
// Gardener extension as its providerConfig field. A library message never
// names a command-line flag itself.
package field

import (
	"errors"
	"fmt"
	"strings"
)

// Name is a field a message names. Formatted with %v or %s it is the
// field's name; Error.Spell formats it as a front-end spells it.
type Name string

// Error is a message that names fields (the Name arguments of its
// format). Error() spells each by its name.
type Error struct {
	format string
	args   []any
	input  bool
}

// Errorf is the error of format and args; Name arguments are fields, a
// %w argument is wrapped.
func Errorf(format string, args ...any) *Error {
	return &Error{format: format, args: args}
}

// Inputf is Errorf marking the error as bad input: the user gave a
// specification that cannot be built (a front-end exits 2 for it and has
// changed nothing).
func Inputf(format string, args ...any) *Error {
	return &Error{format: format, args: args, input: true}
}

func (e *Error) Error() string { return e.Spell(nil) }

// Spell is the message with each field spelled by spell (nil: its name),
// those of Speller arguments (an error formatted into it) too.
func (e *Error) Spell(spell func(Name) string) string {
	args := make([]any, len(e.args))
	for i, a := range e.args {
		switch v := a.(type) {
		case Name:
			if spell != nil {
				a = spell(v)
			}
		case Speller:
			a = spelled{msg: v.Spell(spell), err: v}
		}
		args[i] = a
	}
	return fmt.Errorf(e.format, args...).Error()
}

// spelled is a Speller argument's message spelled (an error still, for %w).
type spelled struct {
	msg string
	err error
}

func (s spelled) Error() string { return s.msg }
func (s spelled) Unwrap() error { return s.err }

// Fields are the fields the message names, in order (not those of
// Speller arguments).
func (e *Error) Fields() []Name {
	var out []Name
	for _, a := range e.args {
		if n, ok := a.(Name); ok {
			out = append(out, n)
		}
	}
	return out
}

// Names reports whether the message names a field, itself or through a
// Speller argument.
func (e *Error) Names() bool {
	for _, a := range e.args {
		switch a.(type) {
		case Name, Speller:
			return true
		}
	}
	return false
}

// Unwrap is the error the format wraps (%w), if any.
func (e *Error) Unwrap() error {
	return errors.Unwrap(fmt.Errorf(e.format, e.args...))
}

// InputError reports whether the error is bad input (Inputf), as
// sources/model and pipeline.IsInput read it.
func (e *Error) InputError() bool { return e.input }

// Speller is an error whose message names fields: Spell is the message
// with each spelled by spell, Error() with each spelled by its name. An
// Error is one; so is a refusal that lists findings naming fields.
type Speller interface {
	error
	Spell(spell func(Name) string) string
}

// Spell is err's message with each field of every Speller in its chain
// spelled by spell: the text of the Speller within the message is
// replaced. Errors that join several are spelled one by one.
func Spell(err error, spell func(Name) string) string {
	msg := err.Error()
	for _, fe := range chain(err) {
		msg = strings.Replace(msg, fe.Error(), fe.Spell(spell), 1)
	}
	return msg
}

// chain lists the Spellers in err's tree, outermost first.
func chain(err error) []Speller {
	var out []Speller
	for err != nil {
		if fe, ok := err.(Speller); ok {
			out = append(out, fe)
		}
		if j, ok := err.(interface{ Unwrap() []error }); ok {
			for _, e := range j.Unwrap() {
				out = append(out, chain(e)...)
			}
			return out
		}
		err = errors.Unwrap(err)
	}
	return out
}
