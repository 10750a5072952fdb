package publish_test

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/oslayer/oslayer/internal/registry"
	"github.com/oslayer/oslayer/publish"
	"github.com/oslayer/oslayer/test/regtest"
)

func b64(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }

func write(t *testing.T, path, content string, mode os.FileMode) string {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), mode); err != nil {
		t.Fatal(err)
	}
	return path
}

// Each credential source pushes to an htpasswd registry; a wrong password
// fails clearly, pushes nothing and is never printed.
func TestAuthSourcesAgainstHtpasswdRegistry(t *testing.T) {
	const user, pass = "oslayer", "Corr3ct-Horse-Battery"
	r := regtest.Start(t, regtest.Config{User: user, Password: pass})
	px := regtest.NewProxy(t, r.Host)
	host := px.Host
	basic := remote.WithAuth(&authn.Basic{Username: user, Password: pass})
	img := mkImage(t, nil, mkLayers(t, "auth", 2, 1500)...)
	var logs bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	t.Cleanup(func() {
		if strings.Contains(logs.String(), pass) || strings.Contains(logs.String(), b64(user+":"+pass)) {
			t.Errorf("the logs contain the password")
		}
		if !strings.Contains(logs.String(), "tag moved") {
			t.Errorf("nothing logged")
		}
	})
	b := built(t, img)

	// isolate: no credentials from the host; DOCKER_CONFIG is an empty dir.
	home := t.TempDir()
	t.Setenv("HOME", home)
	t.Setenv("DOCKER_CONFIG", filepath.Join(home, "docker"))
	t.Setenv("REGISTRY_AUTH_FILE", "")
	t.Setenv("XDG_RUNTIME_DIR", "")
	t.Setenv("XDG_CONFIG_HOME", filepath.Join(home, "config"))
	dockerConfig := filepath.Join(home, "docker", "config.json")
	bin := filepath.Join(home, "bin")
	write(t, filepath.Join(bin, "docker-credential-oslayertest"), fmt.Sprintf(`#!/bin/sh
test "$1" = get || exit 1
read server
test "$server" = %q || { echo "credentials not found in native keychain"; exit 1; }
printf '{"ServerURL":"%%s","Username":%q,"Secret":%q}\n' "$server"
`, host, user, pass), 0o755)
	t.Setenv("PATH", bin+string(os.PathListSeparator)+os.Getenv("PATH"))

	secretYAML := fmt.Sprintf(`apiVersion: v1
kind: Secret
metadata:
  name: pull-secret
  namespace: kube-system
type: kubernetes.io/dockerconfigjson
data:
  .dockerconfigjson: %s
`, b64(fmt.Sprintf(`{"auths":{%q:{"auth":%q}}}`, host, b64(user+":"+pass))))

	for _, tc := range []struct {
		name string
		// setup returns --authfile and --auth-secret; it may write the docker config.
		setup func(t *testing.T) (string, string)
	}{
		{"authfile", func(t *testing.T) (string, string) {
			return write(t, filepath.Join(t.TempDir(), "auth.json"), fmt.Sprintf(`{"auths":{%q:{"auth":%q}}}`, host, b64(user+":"+pass)), 0o600), ""
		}},
		{"authfile-username-password-url-key", func(t *testing.T) (string, string) {
			return write(t, filepath.Join(t.TempDir(), "auth.json"), fmt.Sprintf(`{"auths":{"http://%s/v1/":{"username":%q,"password":%q}}}`, host, user, pass), 0o600), ""
		}},
		{"secret-manifest", func(t *testing.T) (string, string) {
			return "", write(t, filepath.Join(t.TempDir(), "secret.yaml"), secretYAML, 0o600)
		}},
		{"docker-config", func(t *testing.T) (string, string) {
			write(t, dockerConfig, fmt.Sprintf(`{"auths":{%q:{"auth":%q}}}`, host, b64(user+":"+pass)), 0o600)
			t.Cleanup(func() { os.Remove(dockerConfig) })
			return "", ""
		}},
		{"credential-helper", func(t *testing.T) (string, string) {
			write(t, dockerConfig, fmt.Sprintf(`{"credHelpers":{%q:"oslayertest"}}`, host), 0o600)
			t.Cleanup(func() { os.Remove(dockerConfig) })
			return "", ""
		}},
		{"authfile-credential-helper", func(t *testing.T) (string, string) {
			return write(t, filepath.Join(t.TempDir(), "auth.json"), fmt.Sprintf(`{"credHelpers":{%q:"oslayertest"}}`, host), 0o600), ""
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			af, sf := tc.setup(t)
			kc, err := registry.Keychain(af, sf)
			if err != nil {
				t.Fatal(err)
			}
			target := host + "/auth/" + tc.name + ":v1"
			p := newPublisher(t, target, &registry.Options{Keychain: kc, Retry: fastRetry}, publish.WithLogger(logger))
			writeCommit(t, p, b)
			wantTag(t, target, b, basic)
		})
	}

	// The registry wants credentials for the mount requests too: base layers
	// of another repository are mounted with the one authenticated
	// transport of the push.
	t.Run("mount-from-base", func(t *testing.T) {
		const nBase = 4
		baseLayers := mkLayers(t, "authbase", nBase, 2500)
		pushPlain(t, host+"/fcos/base:stable", mkImage(t, nil, baseLayers...), basic)
		af := write(t, filepath.Join(t.TempDir(), "auth.json"), fmt.Sprintf(`{"auths":{%q:{"auth":%q}}}`, host, b64(user+":"+pass)), 0o600)
		kc, err := registry.Keychain(af, "")
		if err != nil {
			t.Fatal(err)
		}
		reg := &registry.Options{Keychain: kc, Retry: fastRetry}
		base, _, err := reg.Image(ctx, host+"/fcos/base:stable", nil)
		if err != nil {
			t.Fatal(err)
		}
		img := mkImage(t, base, mkLayers(t, "authpool", 1, 1200)...)
		b := built(t, img)
		target := host + "/auth/mounted:v1"
		p := newPublisher(t, target, reg, publish.WithLogger(logger))
		px.Reset()
		pub := writeCommit(t, p, b)
		reqs := px.Requests()
		if got := px.Mounts(); got != nBase {
			t.Errorf("mounts = %d, want %d:\n%s", got, nBase, px.Dump())
		}
		if got := px.BlobGets(); got != 0 {
			t.Errorf("base blob downloads = %d, want 0:\n%s", got, px.Dump())
		}
		if got := kinds(reqs, "v1")["GET /v2/"]; got != 1 {
			t.Errorf("%d pings, want 1:\n%s", got, px.Dump())
		}
		for _, r := range reqs {
			if r.Status == http.StatusUnauthorized && r.Path != "/v2/" {
				t.Errorf("refused request: %s %s?%s", r.Method, r.Path, r.Query)
			}
		}
		if want := layersSize(t, baseLayers); pub.Mounted != want {
			t.Errorf("Mounted = %d, want %d", pub.Mounted, want)
		}
		wantTag(t, target, b, basic)
	})

	wrong := func(t *testing.T, kc authn.Keychain, leak string) {
		t.Helper()
		target := host + "/auth/denied:v1"
		p := newPublisher(t, target, &registry.Options{Keychain: kc, Retry: fastRetry}, publish.WithLogger(logger))
		px.Reset()
		_, err := p.Write(ctx, b)
		if err == nil {
			t.Fatal("push with wrong credentials succeeded")
		}
		msg := err.Error()
		if leak != "" && (strings.Contains(msg, leak) || strings.Contains(msg, b64(user+":"+leak))) {
			t.Errorf("error prints the password: %s", msg)
		}
		if strings.Contains(msg, pass) {
			t.Errorf("error prints the real password: %s", msg)
		}
		if !strings.Contains(msg, "refused the credentials") || !strings.Contains(msg, "401") && !strings.Contains(msg, "UNAUTHORIZED") {
			t.Errorf("error does not say the credentials were refused: %s", msg)
		}
		reqs := px.Requests()
		for _, m := range []string{http.MethodPut, http.MethodPatch} {
			if n := count(reqs, m, "/v2/"); n != 0 {
				t.Errorf("%d %s requests with wrong credentials:\n%s", n, m, px.Dump())
			}
		}
		if got := tagDigest(t, target, basic); got != "" {
			t.Errorf("tag exists after a refused push: %s", got)
		}
	}
	t.Run("wrong-password", func(t *testing.T) {
		const bad = "Wr0ng-Pa55word-XYZ"
		af := write(t, filepath.Join(t.TempDir(), "auth.json"), fmt.Sprintf(`{"auths":{%q:{"auth":%q}}}`, host, b64(user+":"+bad)), 0o600)
		kc, err := registry.Keychain(af, "")
		if err != nil {
			t.Fatal(err)
		}
		wrong(t, kc, bad)
	})
	t.Run("no-credentials", func(t *testing.T) {
		kc, err := registry.Keychain("", "")
		if err != nil {
			t.Fatal(err)
		}
		wrong(t, kc, "")
	})
}
