package pipeline

import (
	"errors"
	"strings"
	"testing"

	"github.com/oslayer/oslayer/sign"
)

// TestSigningKeyError: a key New cannot decrypt is an Error of the sign
// step that names the field signing.key and quotes the key, with no step
// prefix a front-end would have to strip.
func TestSigningKeyError(t *testing.T) {
	kp, err := sign.GenerateKeyPair([]byte("right"))
	if err != nil {
		t.Fatal(err)
	}
	spec := Spec{Target: "oci:" + t.TempDir() + "/out", Signing: &Signing{
		Key: &sign.KeyMaterial{Source: "cosign.key", PEM: kp.Private}, Password: sign.Password([]byte("wrong")),
		Identity: "registry.example.com/os/worker"}}
	_, err = New(spec, Env{})
	var pe *Error
	if !errors.As(err, &pe) || pe.Step != StepSign || pe.Field != "signing.key" || !IsInput(err) {
		t.Fatalf("error %#v, want bad input (an Error of step sign, field signing.key)", err)
	}
	if msg := pe.Err.Error(); !strings.HasPrefix(msg, "key cosign.key: ") || strings.HasPrefix(err.Error(), "sign: ") {
		t.Errorf("error %q (cause %q)", err, msg)
	}
}
