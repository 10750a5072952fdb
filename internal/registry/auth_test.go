package registry

import (
	"context"
	"encoding/base64"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
)

func b64(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }

func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// isolate keeps the host's docker and podman configuration out of a test.
func isolate(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HOME", home)
	t.Setenv("DOCKER_CONFIG", filepath.Join(home, "docker"))
	t.Setenv("REGISTRY_AUTH_FILE", "")
	t.Setenv("XDG_RUNTIME_DIR", "")
	t.Setenv("XDG_CONFIG_HOME", filepath.Join(home, "config"))
}

func resolve(t *testing.T, kc authn.Keychain, ref string) authn.AuthConfig {
	t.Helper()
	r, err := name.ParseReference(ref)
	if err != nil {
		t.Fatal(err)
	}
	a, err := authn.Resolve(context.Background(), kc, r.Context())
	if err != nil {
		t.Fatalf("resolve %s: %v", ref, err)
	}
	if a == authn.Anonymous {
		return authn.AuthConfig{}
	}
	c, err := a.Authorization()
	if err != nil {
		t.Fatal(err)
	}
	return *c
}

func TestAuthFileMatching(t *testing.T) {
	isolate(t)
	f := writeFile(t, "auth.json", `{
  "auths": {
    "https://index.docker.io/v1/": {"auth": "`+b64("hub:hubpw")+`"},
    "quay.io": {"username": "q", "password": "qpw"},
    "quay.io/team": {"auth": "`+b64("team:teampw")+`"},
    "quay.io/team/special": {"identitytoken": "tok"},
    "http://127.0.0.1:5000": {"auth": "`+b64("local:localpw:with:colons")+`"},
    "registry.example.com/v2/": {"auth": "`+b64("ex:expw")+`"},
    "empty.example.com": {}
  }
}`)
	kc, err := Keychain(f, "")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		ref        string
		user, pass string
		token      string
	}{
		{ref: "docker.io/library/fedora:40", user: "hub", pass: "hubpw"},
		{ref: "fedora", user: "hub", pass: "hubpw"},
		{ref: "registry-1.docker.io/x/y", user: "hub", pass: "hubpw"},
		{ref: "quay.io/fedora/fedora-coreos:stable", user: "q", pass: "qpw"},
		{ref: "quay.io/team/pool:v1", user: "team", pass: "teampw"},
		{ref: "quay.io/team/special/img:v1", token: "tok"},
		{ref: "quay.io/teamx/img:v1", user: "q", pass: "qpw"},
		{ref: "127.0.0.1:5000/pools/worker:v1", user: "local", pass: "localpw:with:colons"},
		{ref: "registry.example.com/a:b", user: "ex", pass: "expw"},
		{ref: "empty.example.com/a:b"},
		{ref: "ghcr.io/x/y:z"},
	} {
		got := resolve(t, kc, tc.ref)
		if got.Username != tc.user || got.Password != tc.pass || got.IdentityToken != tc.token {
			t.Errorf("%s: got user %q token %q, want user %q token %q", tc.ref, got.Username, got.IdentityToken, tc.user, tc.token)
		}
	}
}

func TestAuthPrecedence(t *testing.T) {
	isolate(t)
	af := writeFile(t, "auth.json", `{"auths": {"quay.io": {"auth": "`+b64("fromfile:pw1")+`"}}}`)
	sf := writeFile(t, "secret.yaml", `apiVersion: v1
kind: Secret
metadata: {name: pull}
type: kubernetes.io/dockerconfigjson
stringData:
  .dockerconfigjson: '{"auths": {"quay.io": {"auth": "`+b64("fromsecret:pw2")+`"}, "ghcr.io": {"auth": "`+b64("gh:pw3")+`"}}}'
`)
	dc := os.Getenv("DOCKER_CONFIG")
	if err := os.MkdirAll(dc, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dc, "config.json"), []byte(`{"auths": {"quay.io": {"auth": "`+b64("fromdocker:pw4")+`"}, "ghcr.io": {"auth": "`+b64("dgh:pw5")+`"}, "registry.example.com": {"auth": "`+b64("dex:pw6")+`"}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	kc, err := Keychain(af, sf)
	if err != nil {
		t.Fatal(err)
	}
	for ref, user := range map[string]string{
		"quay.io/a/b":              "fromfile",
		"ghcr.io/a/b":              "gh",
		"registry.example.com/a/b": "dex",
		"other.example.com/a/b":    "",
	} {
		if got := resolve(t, kc, ref).Username; got != user {
			t.Errorf("%s: user %q, want %q", ref, got, user)
		}
	}
}

func TestAuthSecretForms(t *testing.T) {
	isolate(t)
	cfg := `{"auths":{"quay.io":{"auth":"` + b64("u:p") + `"}}}`
	for name, content := range map[string]string{
		"yaml data": `apiVersion: v1
kind: Secret
metadata:
  name: pull
type: kubernetes.io/dockerconfigjson
data:
  .dockerconfigjson: ` + b64(cfg) + `
`,
		"json data": `{"apiVersion":"v1","kind":"Secret","metadata":{"name":"pull"},"type":"kubernetes.io/dockerconfigjson","data":{".dockerconfigjson":"` + b64(cfg) + `"}}`,
		"stringData wins": `kind: Secret
type: kubernetes.io/dockerconfigjson
data:
  .dockerconfigjson: ` + b64(`{"auths":{"quay.io":{"auth":"`+b64("old:old")+`"}}}`) + `
stringData:
  .dockerconfigjson: '` + cfg + `'
`,
		"legacy dockercfg": `kind: Secret
type: kubernetes.io/dockercfg
data:
  .dockercfg: ` + b64(`{"https://quay.io":{"auth":"`+b64("u:p")+`","email":"x@example.com"}}`) + `
`,
		"multi document": `apiVersion: v1
kind: ConfigMap
metadata: {name: other}
---
kind: Secret
type: kubernetes.io/dockerconfigjson
stringData:
  .dockerconfigjson: '` + cfg + `'
`,
	} {
		f := writeFile(t, "s.yaml", content)
		kc, err := Keychain("", f)
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if got := resolve(t, kc, "quay.io/x/y"); got.Username != "u" || got.Password != "p" {
			t.Errorf("%s: got %q", name, got.Username)
		}
	}
}

// Bad files fail when the keychain is made, naming the file and the
// field, and never quoting a credential.
func TestAuthErrorsNameFieldNotSecret(t *testing.T) {
	isolate(t)
	const secret = "hunter2-TopSecret"
	for _, tc := range []struct {
		name, authfile, secretFile string
		want                       []string
	}{
		{name: "bad base64", authfile: `{"auths":{"quay.io":{"auth":"` + secret + `!!"}}}`, want: []string{`auths["quay.io"].auth`, "base64"}},
		{name: "no colon", authfile: `{"auths":{"quay.io":{"auth":"` + b64(secret) + `"}}}`, want: []string{`auths["quay.io"].auth`, "user:password"}},
		{name: "password without user", authfile: `{"auths":{"quay.io":{"password":"` + secret + `"}}}`, want: []string{`auths["quay.io"].username`}},
		{name: "wrong type", authfile: `{"auths":{"quay.io":{"auth":42}}}`, want: []string{"auths.auth", "string"}},
		{name: "syntax", authfile: `{"auths":{"quay.io":{"auth":"` + secret + `" "x"}}}`, want: []string{"invalid JSON at byte"}},
		{name: "secret wrong type", secretFile: "kind: Secret\ntype: Opaque\nstringData:\n  password: " + secret + "\n", want: []string{"no Secret of type kubernetes.io/dockerconfigjson", `"Opaque"`}},
		{name: "secret missing key", secretFile: "kind: Secret\ntype: kubernetes.io/dockerconfigjson\ndata:\n  other: " + b64(secret) + "\n", want: []string{"data..dockerconfigjson"}},
		{name: "secret bad base64", secretFile: "kind: Secret\ntype: kubernetes.io/dockerconfigjson\ndata:\n  .dockerconfigjson: " + secret + "%%\n", want: []string{"data..dockerconfigjson is not valid base64"}},
		{name: "secret inner bad", secretFile: "kind: Secret\ntype: kubernetes.io/dockerconfigjson\nstringData:\n  .dockerconfigjson: '{\"auths\":{\"q.io\":{\"auth\":\"" + secret + "\"}}}'\n", want: []string{`stringData..dockerconfigjson: auths["q.io"].auth`}},
		{name: "secret not yaml", secretFile: "kind: Secret\n  type: [" + secret + "\n", want: []string{"not a YAML or JSON manifest"}},
	} {
		var af, sf string
		if tc.authfile != "" {
			af = writeFile(t, "auth.json", tc.authfile)
		}
		if tc.secretFile != "" {
			sf = writeFile(t, "secret.yaml", tc.secretFile)
		}
		_, err := Keychain(af, sf)
		if err == nil {
			t.Errorf("%s: no error", tc.name)
			continue
		}
		msg := err.Error()
		if strings.Contains(msg, secret) || strings.Contains(msg, b64(secret)) {
			t.Errorf("%s: error quotes the secret: %s", tc.name, msg)
		}
		file := af + sf
		if !strings.Contains(msg, file) {
			t.Errorf("%s: error does not name the file %s: %s", tc.name, file, msg)
		}
		for _, w := range tc.want {
			if !strings.Contains(msg, w) {
				t.Errorf("%s: error %q does not mention %q", tc.name, msg, w)
			}
		}
	}
	if _, err := Keychain(filepath.Join(t.TempDir(), "missing.json"), ""); err == nil || !strings.Contains(err.Error(), "registry.authfile") {
		t.Errorf("missing authfile: %v", err)
	}
}

// A credential helper named in the authfile runs with the registry host on
// stdin; "credentials not found" means anonymous.
func TestAuthFileCredentialHelper(t *testing.T) {
	isolate(t)
	bin := t.TempDir()
	script := `#!/bin/sh
read server
case "$server" in
  quay.io) printf '{"ServerURL":"%s","Username":"helperuser","Secret":"helperpw"}\n' "$server" ;;
  https://index.docker.io/v1/) printf '{"Username":"<token>","Secret":"idtok"}\n' ;;
  *) echo "credentials not found in native keychain"; exit 1 ;;
esac
`
	if err := os.WriteFile(filepath.Join(bin, "docker-credential-oslayerunit"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	f := writeFile(t, "auth.json", `{"credHelpers": {"quay.io": "oslayerunit", "docker.io": "oslayerunit", "ghcr.io": "oslayerunit"}}`)
	kc, err := Keychain(f, "")
	if err != nil {
		t.Fatal(err)
	}
	if got := resolve(t, kc, "quay.io/a/b"); got.Username != "helperuser" || got.Password != "helperpw" {
		t.Errorf("quay.io: %q", got.Username)
	}
	if got := resolve(t, kc, "fedora:40"); got.IdentityToken != "idtok" {
		t.Errorf("docker.io: identity token %q", got.IdentityToken)
	}
	if got := resolve(t, kc, "ghcr.io/a/b"); got != (authn.AuthConfig{}) {
		t.Errorf("ghcr.io: want anonymous, got user %q", got.Username)
	}
}

func TestNormalizeAuthKey(t *testing.T) {
	for in, want := range map[string]string{
		"https://index.docker.io/v1/": "index.docker.io",
		"docker.io":                   "index.docker.io",
		"registry-1.docker.io":        "index.docker.io",
		"Quay.IO":                     "quay.io",
		"http://127.0.0.1:5000/":      "127.0.0.1:5000",
		"https://quay.io/v2":          "quay.io",
		"quay.io/org/repo":            "quay.io/org/repo",
	} {
		got, err := normalizeAuthKey(in)
		if err != nil || got != want {
			t.Errorf("normalizeAuthKey(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	if _, err := normalizeAuthKey("https:///x"); err == nil {
		t.Error("a key without host was accepted")
	}
}
