package main

import (
	"fmt"
	"os"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/spf13/pflag"

	"github.com/oslayer/oslayer/internal/registry"
	"github.com/oslayer/oslayer/pipeline"
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

// spec maps the flags onto the build specification's signing (nil
// without --sign-key). The key is read here; New decrypts it before
// anything is built or pushed, so a wrong password fails fast. Errors
// name the step like the stage's would.
func (f *signFlags) spec(target string) (*pipeline.Signing, error) {
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
	km, err := sign.ReadKey(f.key)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", sign.StageSign, err)
	}
	return &pipeline.Signing{Key: km, Password: passFunc(f.passwordFile), Referrers: f.referrers, Identity: f.identity}, nil
}
