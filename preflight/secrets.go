package preflight

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"path"
	"regexp"
	"strings"

	"github.com/oslayer/oslayer/render/varmech"
)

// secretsCheck: private keys, kubeconfig credentials, registry auths and
// cloud credentials must not ship in an image (everyone who can pull it can
// read them), unless the path is allowed (preflight.allowSecrets).
type secretsCheck struct{}

func (secretsCheck) Name() string       { return "secrets" }
func (secretsCheck) Severity() Severity { return Error }
func (secretsCheck) Needs() Needs       { return NeedAdded }

var (
	pemPrivateKey  = regexp.MustCompile(`-----BEGIN ((RSA|EC|DSA|ENCRYPTED|OPENSSH) )?PRIVATE KEY-----`)
	kubeconfigKey  = regexp.MustCompile(`(?m)^\s*(token|client-key-data):\s*\S`)
	kubeconfigKind = regexp.MustCompile(`(?m)^\s*(kind:\s*Config|users:|clusters:)`)
	awsSecret      = regexp.MustCompile(`(?mi)^\s*aws_secret_access_key\s*=\s*\S`)
)

// DetectSecret returns what kind of secret data holds, or "".
func DetectSecret(data []byte) string {
	if bytes.Contains(data, []byte("service_account")) && bytes.Contains(data, []byte("private_key")) {
		var g struct {
			Type       string `json:"type"`
			PrivateKey string `json:"private_key"`
		}
		if json.Unmarshal(data, &g) == nil && g.Type == "service_account" && g.PrivateKey != "" {
			return "a GCP service account key"
		}
	}
	if m := pemPrivateKey.Find(data); m != nil {
		if bytes.Contains(m, []byte("OPENSSH")) {
			return "an OpenSSH private key"
		}
		return "a PEM private key"
	}
	if kubeconfigKey.Match(data) && kubeconfigKind.Match(data) {
		return "a kubeconfig with credentials (token or client-key-data)"
	}
	if bytes.Contains(data, []byte(`"auths"`)) {
		var d struct {
			Auths map[string]struct {
				Auth          string `json:"auth"`
				IdentityToken string `json:"identitytoken"`
			} `json:"auths"`
		}
		if json.Unmarshal(data, &d) == nil {
			for reg, a := range d.Auths {
				if a.Auth != "" || a.IdentityToken != "" {
					return fmt.Sprintf("registry credentials (auths for %s)", reg)
				}
			}
		}
	}
	if awsSecret.Match(data) {
		return "AWS credentials (aws_secret_access_key)"
	}
	return ""
}

// nodePath is where the image path p (without a leading "/") is on the
// node when oslayer relocated it under varmech.StoreDir (a file the
// configuration puts under /var, /opt, ...: materialised there at boot),
// else "".
func nodePath(p string) string {
	if rest, ok := strings.CutPrefix("/"+p, varmech.StoreDir+"/"); ok {
		return "/" + rest
	}
	return ""
}

// secretAllowed reports whether the image path p matches a preflight.allowSecrets
// entry (a path, with or without leading "/", or a path.Match pattern),
// and which path matched: p itself, or for a relocated file its node path
// (/var/lib/kubelet/config.json for
// usr/lib/oslayer/var/var/lib/kubelet/config.json), which the entry may
// also name as configured (/opt/x for /var/opt/x).
func secretAllowed(p string, allow []string) (entry, matched string, ok bool) {
	match := func(pattern, name string) bool {
		m, _ := path.Match(pattern, name)
		return pattern == name || m
	}
	node := nodePath(p)
	for _, a := range allow {
		a2 := "/" + strings.TrimPrefix(a, "/")
		if match(a2[1:], p) {
			return a, "/" + p, true
		}
		if node == "" {
			continue
		}
		if match(a2, node) {
			return a, node, true
		}
		if c, ok := varmech.Canonical(a2); ok && match(c, node) {
			return a, node, true
		}
	}
	return "", "", false
}

func (c secretsCheck) Run(ctx context.Context, t *Target) ([]Finding, error) {
	var out []Finding
	for _, l := range t.Added {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		// Later entries of a layer win; iterate entries for a stable order.
		for i := range l.Entries {
			e := &l.Entries[i]
			f, ok := l.Files[e.Path]
			if !ok || !e.IsReg() {
				continue
			}
			kind := DetectSecret(f.Data)
			if kind == "" {
				continue
			}
			if a, matched, ok := secretAllowed(e.Path, t.Options.AllowSecrets); ok {
				msg := fmt.Sprintf("holds %s, allowed by preflight.allowSecrets %s", kind, a)
				if matched != "/"+e.Path {
					msg += fmt.Sprintf(" (its node path %s)", matched)
				}
				out = append(out, l.Finding(c, Info, e.Path, msg).naming("preflight.allowSecrets"))
				continue
			}
			allow := "/" + e.Path
			if node := nodePath(e.Path); node != "" {
				allow = node + " (its node path)"
			}
			out = append(out, l.Finding(c, Error, e.Path, fmt.Sprintf("holds %s: everyone who can pull the image can read it; deliver it at runtime (a Secret, ignition) or allow it with preflight.allowSecrets %s", kind, allow)).naming("preflight.allowSecrets"))
		}
	}
	return out, nil
}
