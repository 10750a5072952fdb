package main

import (
	"context"
	"fmt"
	"os"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/sigstore/sigstore/pkg/signature"
	"github.com/spf13/pflag"

	"github.com/oslayer/oslayer/build"
	"github.com/oslayer/oslayer/internal/registry"
	"github.com/oslayer/oslayer/sign"
)

// signFlags are build's signing options.
type signFlags struct {
	key          string
	passwordFile string
	referrers    bool
	identity     string
}

func (f *signFlags) register(fs *pflag.FlagSet) {
	fs.StringVar(&f.key, "sign-key", "", "cosign private key (cosign.key) or Kubernetes Secret manifest with cosign.key and cosign.password; signs and attests the pushed image")
	fs.StringVar(&f.passwordFile, "sign-key-password-file", "", "file holding the --sign-key password (default: $COSIGN_PASSWORD, else empty)")
	fs.StringVar(&f.identity, "sign-identity", "", "with an OCI layout target: the repository (REG/REPO) nodes will pull the image from, named by its signature and provenance; the layout then holds them as cosign save writes them")
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
func (f *signFlags) stages(g *globals, reg *registry.Options, target string) ([]build.Stage, error) {
	if f.key == "" {
		if f.passwordFile != "" || f.referrers || f.identity != "" {
			return nil, fmt.Errorf("%s: --sign-key-password-file, --sign-referrers and --sign-identity need --sign-key", sign.StageSign)
		}
		return nil, nil
	}
	layout := registry.IsLayout(target)
	switch {
	case layout && f.identity == "":
		return nil, fmt.Errorf("%s: signing the OCI layout %s needs --sign-identity REG/REPO, the repository nodes will pull the image from (its signature names it)", sign.StageSign, target)
	case layout && f.referrers:
		return nil, fmt.Errorf("%s: --sign-referrers needs a registry target, not the OCI layout %s", sign.StageSign, target)
	case !layout && f.identity != "":
		return nil, fmt.Errorf("%s: --sign-identity is for OCI layout targets; a signature of %s names its own repository", sign.StageSign, target)
	}
	if layout {
		if _, err := name.NewRepository(f.identity); err != nil {
			return nil, fmt.Errorf("%s: --sign-identity %q: %v", sign.StageSign, f.identity, err)
		}
	}
	sv, err := sign.LoadKey(f.key, passFunc(f.passwordFile))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", sign.StageSign, err)
	}
	opts := []sign.Option{sign.WithRegistry(reg), sign.WithReferrers(f.referrers), sign.WithVersion(version), sign.WithIdentity(f.identity)}
	if g != nil && g.log != nil {
		opts = append(opts, sign.WithLogger(g.log))
	}
	key := func(context.Context) (signature.SignerVerifier, error) { return sv, nil }
	return sign.Stages(key, opts...), nil
}
