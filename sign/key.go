// Package sign signs, attests and verifies pool images the way nodes check
// them: a cosign v2 "classic" signature (the ".sig" tag holding a simple
// signing payload over the single-arch manifest digest, which
// containers/image reads with use-sigstore-attachments) and a DSSE-signed
// in-toto statement carrying a SLSA provenance v1 predicate (the ".att" tag).
//
// Everything is offline: no transparency log, no Fulcio. Keys are cosign's
// encrypted private key format, read from a file or from a Kubernetes Secret
// manifest holding cosign.key and cosign.password.
//
// Stages returns the "sign" and "attest" builder stages; Verify checks an
// image the way `cosign verify --insecure-ignore-tlog` and a node's
// sigstoreSigned policy do; Trust writes the files a node needs to enforce
// the signature.
package sign

import (
	"bytes"
	"context"
	"crypto"
	"fmt"
	"strings"

	"github.com/sigstore/cosign/v2/pkg/cosign"
	"github.com/sigstore/sigstore/pkg/cryptoutils"
	"github.com/sigstore/sigstore/pkg/signature"
	"sigs.k8s.io/yaml"

	"github.com/oslayer/oslayer/internal/inputfile"
)

// Secret keys holding the private key and its password in a Kubernetes
// Secret manifest (the names `cosign generate-key-pair k8s://` uses).
const (
	SecretKeyField      = "cosign.key"
	SecretPasswordField = "cosign.password"
	SecretPublicField   = "cosign.pub"
)

// PassFunc returns the password of an encrypted private key. It is only
// called when the key source does not carry its own password.
type PassFunc func() ([]byte, error)

// Password returns a PassFunc for a fixed password.
func Password(p []byte) PassFunc { return func() ([]byte, error) { return p, nil } }

// PasswordFile returns a PassFunc reading path; one trailing newline is
// dropped.
func PasswordFile(path string) PassFunc {
	return func() ([]byte, error) {
		b, err := inputfile.Read(path)
		if err != nil {
			return nil, fmt.Errorf("key password file: %w", err)
		}
		b = bytes.TrimSuffix(b, []byte("\n"))
		b = bytes.TrimSuffix(b, []byte("\r"))
		return b, nil
	}
}

// secretManifest is the part of a Kubernetes Secret manifest we read. Data
// values are base64 in the manifest; encoding/json decodes them into []byte.
type secretManifest struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct {
		Name      string `json:"name"`
		Namespace string `json:"namespace"`
	} `json:"metadata"`
	Data       map[string][]byte `json:"data"`
	StringData map[string]string `json:"stringData"`
}

func (s *secretManifest) field(k string) ([]byte, bool) {
	if v, ok := s.StringData[k]; ok {
		return []byte(v), true
	}
	v, ok := s.Data[k]
	return v, ok
}

// KeyMaterial is an encrypted private key and where it came from.
type KeyMaterial struct {
	// Source names the key for errors: the file, or "Secret NS/NAME (file)".
	Source string
	// PEM is the encrypted cosign private key.
	PEM []byte
	// Password is set when the source carried it (a Secret's cosign.password).
	Password []byte
	// HasPassword reports whether Password came with the key.
	HasPassword bool
}

// ReadKey reads an encrypted cosign private key from path: either the PEM
// file itself or a Kubernetes Secret manifest with cosign.key (and
// optionally cosign.password) in data (base64) or stringData.
func ReadKey(path string) (*KeyMaterial, error) {
	b, err := inputfile.Read(path)
	if err != nil {
		return nil, fmt.Errorf("key %s: %w", path, err)
	}
	if bytes.HasPrefix(bytes.TrimSpace(b), []byte("-----BEGIN ")) {
		return &KeyMaterial{Source: path, PEM: b}, nil
	}
	var s secretManifest
	if err := yaml.Unmarshal(b, &s); err != nil {
		return nil, fmt.Errorf("key %s: neither a PEM private key nor a Secret manifest: %v", path, err)
	}
	if s.Kind != "Secret" {
		return nil, fmt.Errorf("key %s: neither a PEM private key nor a Secret manifest (kind %q)", path, s.Kind)
	}
	src := fmt.Sprintf("%s (Secret %s)", path, strings.TrimPrefix(s.Metadata.Namespace+"/"+s.Metadata.Name, "/"))
	k, ok := s.field(SecretKeyField)
	if !ok || len(k) == 0 {
		return nil, fmt.Errorf("key %s: no %s in data or stringData", src, SecretKeyField)
	}
	km := &KeyMaterial{Source: src, PEM: k}
	if p, ok := s.field(SecretPasswordField); ok {
		km.Password, km.HasPassword = p, true
	}
	return km, nil
}

// LoadKey reads and decrypts the private key at path (see ReadKey). pass is
// consulted only when the source has no password of its own; nil means an
// empty password.
func LoadKey(path string, pass PassFunc) (signature.SignerVerifier, error) {
	km, err := ReadKey(path)
	if err != nil {
		return nil, err
	}
	return km.Decrypt(pass)
}

// Decrypt decrypts the key with its own password or, if it has none, pass.
func (km *KeyMaterial) Decrypt(pass PassFunc) (signature.SignerVerifier, error) {
	pw := km.Password
	if !km.HasPassword && pass != nil {
		p, err := pass()
		if err != nil {
			return nil, fmt.Errorf("key %s: %w", km.Source, err)
		}
		pw = p
	}
	sv, err := cosign.LoadPrivateKey(km.PEM, pw, nil)
	if err != nil {
		if strings.Contains(err.Error(), "decrypt") {
			return nil, &PasswordError{Source: km.Source, Err: err}
		}
		return nil, fmt.Errorf("key %s: %w", km.Source, err)
	}
	return sv, nil
}

// PasswordError is a key that did not decrypt with the password it
// carried or was given: a wrong password, or none where one is needed.
// It names the key, not where the password came from: the caller knows
// (a flag, an environment variable, a Secret's cosign.password) and says
// so.
type PasswordError struct {
	// Source names the key (KeyMaterial.Source).
	Source string
	Err    error
}

func (e *PasswordError) Error() string {
	return fmt.Sprintf("key %s: wrong or missing password: %v", e.Source, e.Err)
}

func (e *PasswordError) Unwrap() error { return e.Err }

// KeyPair is a freshly generated cosign key pair.
type KeyPair struct {
	// Private is the encrypted private key (PEM, "ENCRYPTED SIGSTORE PRIVATE KEY").
	Private []byte
	// Public is the PEM public key.
	Public []byte
}

// GenerateKeyPair returns a new ECDSA P-256 key pair in cosign's format,
// the private key encrypted with password (which may be empty).
func GenerateKeyPair(password []byte) (*KeyPair, error) {
	kb, err := cosign.GenerateKeyPair(func(bool) ([]byte, error) { return password, nil })
	if err != nil {
		return nil, fmt.Errorf("generate key pair: %w", err)
	}
	return &KeyPair{Private: kb.PrivateBytes, Public: kb.PublicBytes}, nil
}

// LoadPublicKey reads a PEM public key (cosign.pub) for verification.
func LoadPublicKey(ctx context.Context, path string) (signature.Verifier, error) {
	b, err := inputfile.Read(path)
	if err != nil {
		return nil, fmt.Errorf("public key %s: %w", path, err)
	}
	return ParsePublicKey(path, b)
}

// ParsePublicKey parses PEM public key bytes; src names them in errors.
func ParsePublicKey(src string, pem []byte) (signature.Verifier, error) {
	if len(bytes.TrimSpace(pem)) == 0 {
		return nil, fmt.Errorf("public key %s: empty", src)
	}
	pk, err := cryptoutils.UnmarshalPEMToPublicKey(pem)
	if err != nil {
		return nil, fmt.Errorf("public key %s: %w", src, err)
	}
	v, err := signature.LoadVerifier(pk, crypto.SHA256)
	if err != nil {
		return nil, fmt.Errorf("public key %s: %w", src, err)
	}
	return v, nil
}

// PublicKeyPEM returns the PEM encoding of sv's public key.
func PublicKeyPEM(sv signature.PublicKeyProvider) ([]byte, error) {
	pk, err := sv.PublicKey()
	if err != nil {
		return nil, err
	}
	return marshalPublicKey(pk)
}
