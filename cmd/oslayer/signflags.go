package main

import (
	"context"
	"fmt"
	"os"

	"github.com/sigstore/sigstore/pkg/signature"
	"github.com/spf13/pflag"

	"github.com/oslayer/oslayer/builder"
	"github.com/oslayer/oslayer/registry"
	"github.com/oslayer/oslayer/registry/sign"
)

// signFlags are build's signing options.
type signFlags struct {
	key          string
	passwordFile string
	referrers    bool
}

func (f *signFlags) register(fs *pflag.FlagSet) {
	fs.StringVar(&f.key, "sign-key", "", "cosign private key (cosign.key) or Kubernetes Secret manifest with cosign.key and cosign.password; signs and attests the pushed image")
	fs.StringVar(&f.passwordFile, "sign-key-password-file", "", "file holding the --sign-key password (default: $COSIGN_PASSWORD, else empty)")
	fs.BoolVar(&f.referrers, "sign-referrers", false, "also attach the signature as an OCI 1.1 referrer (the .sig tag nodes read is always written)")
}

// passFunc is where the key password comes from: the file, else
// $COSIGN_PASSWORD, else empty.
func passFunc(file string) sign.PassFunc {
	if file != "" {
		return sign.PasswordFile(file)
	}
	return sign.Password([]byte(os.Getenv("COSIGN_PASSWORD")))
}

// stages returns the sign and attest stages, or none without --sign-key.
// The key is loaded here, before anything is built or pushed, so a wrong
// password fails fast; the error names the step like the stage's would.
func (f *signFlags) stages(g *globals, reg *registry.Options) ([]builder.Stage, error) {
	if f.key == "" {
		if f.passwordFile != "" || f.referrers {
			return nil, fmt.Errorf("%s: --sign-key-password-file and --sign-referrers need --sign-key", sign.StageSign)
		}
		return nil, nil
	}
	sv, err := sign.LoadKey(f.key, passFunc(f.passwordFile))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", sign.StageSign, err)
	}
	opts := []sign.Option{sign.WithRegistry(reg), sign.WithReferrers(f.referrers), sign.WithVersion(version)}
	if g != nil && g.log != nil {
		opts = append(opts, sign.WithLogger(g.log))
	}
	key := func(context.Context) (signature.SignerVerifier, error) { return sv, nil }
	return sign.Stages(key, opts...), nil
}
