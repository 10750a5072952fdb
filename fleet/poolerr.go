package fleet

import (
	"errors"
	"fmt"

	"github.com/oslayer/oslayer/pipeline"
)

// planFields are the plan's fields (a pool's) of the specification fields
// pipeline.New refuses; the settings' fields (preflight.*, baseIndex)
// have the same names in the plan.
var planFields = map[string]string{"signing.key": "signKey", "signing.identity": "signIdentity"}

// poolError names the plan's field of the pool in an error of its
// pipeline ("clusters[0].pools[1].signKey: ..."), and, for a key that did
// not decrypt, where the run takes its password from: the Secret manifest
// signKey names, else the pool's signKeyPasswordFile, else the run's
// (COSIGN_PASSWORD for oslayer fleet build). The error stays in the
// chain (pipeline.IsInput).
func poolError(p *Pool, err error) error {
	var pe *pipeline.Error
	if !errors.As(err, &pe) || pe.Field == "" {
		return err
	}
	field := pe.Field
	if f, ok := planFields[field]; ok {
		field = f
	}
	msg := pe.Err.Error()
	var pw *pipeline.PasswordError
	if errors.As(pe.Err, &pw) {
		msg = fmt.Sprintf("key %s: wrong or missing password (the pool's signKeyPasswordFile, else COSIGN_PASSWORD, or the Secret's %s): %v",
			pw.Source, pipeline.SecretPasswordField, pw.Err)
	}
	return &planError{msg: p.Path + "." + field + ": " + msg, err: err}
}

// planError is err with the plan's field named; err stays in the chain.
type planError struct {
	msg string
	err error
}

func (e *planError) Error() string { return e.msg }
func (e *planError) Unwrap() error { return e.err }
