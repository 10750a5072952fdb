//go:build containers_image_openpgp && exclude_graphdriver_btrfs && exclude_graphdriver_devicemapper

package bud

import (
	"bytes"
	"context"
	"encoding/base64"
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/authn"
	"go.podman.io/image/v5/pkg/docker/config"
	"go.podman.io/image/v5/types"

	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/oslayer/oslayer/internal/registry"
	"github.com/oslayer/oslayer/packagestage"
	"github.com/oslayer/oslayer/test/pkgbase"
	"github.com/oslayer/oslayer/test/regtest"
)

// staticKeychain gives each registry (host and port) its AuthConfig.
type staticKeychain map[string]authn.AuthConfig

func (k staticKeychain) Resolve(r authn.Resource) (authn.Authenticator, error) {
	if c, ok := k[r.RegistryStr()]; ok {
		return authn.FromConfig(c), nil
	}
	return authn.Anonymous, nil
}

// The auth file handed to buildah gives containers/image (which reads it
// for buildah) what the keychain has for each registry of the base and the
// target: a user and password, a base64 "auth", an identity token, each
// on its own host and port; a registry without credentials gets none.
func TestWriteAuthFile(t *testing.T) {
	kc := staticKeychain{
		"127.0.0.1:5000":   {Username: "base-user", Password: "base:pass"},
		"127.0.0.1:5001":   {Auth: "dGFyZ2V0LXVzZXI6dGFyZ2V0LXBhc3M="}, // target-user:target-pass
		"quay.example:443": {Username: "<token>", IdentityToken: "refresh-token-1"},
		"index.docker.io":  {Username: "hub-user", Password: "hub-pass"},
	}
	dir := t.TempDir()
	p, err := writeAuthFile(dir, &registry.Options{Keychain: kc},
		"127.0.0.1:5000/os/base@sha256:0123456789012345678901234567890123456789012345678901234567890123",
		"127.0.0.1:5001/os/worker", "quay.example:443/org/packages", "docker.io/library/base", "open.example/os/base")
	if err != nil {
		t.Fatal(err)
	}
	// No registries.conf (no credential helpers from the host's).
	conf := filepath.Join(dir, "registries.conf")
	os.WriteFile(conf, nil, 0o600)
	sys := &types.SystemContext{AuthFilePath: p, SystemRegistriesConfPath: conf, SystemRegistriesConfDirPath: dir}
	for host, want := range map[string]types.DockerAuthConfig{
		"127.0.0.1:5000":   {Username: "base-user", Password: "base:pass"},
		"127.0.0.1:5001":   {Username: "target-user", Password: "target-pass"},
		"quay.example:443": {Username: "<token>", IdentityToken: "refresh-token-1"},
		"docker.io":        {Username: "hub-user", Password: "hub-pass"},
		"open.example":     {},
		"127.0.0.1":        {},
	} {
		got, err := config.GetCredentials(sys, host)
		if err != nil {
			t.Fatalf("%s: %v", host, err)
		}
		if got != want {
			t.Errorf("%s: containers/image reads %+v, want %+v", host, got, want)
		}
	}
}

// Run with base and target on two registries that need two logins: the
// package base is pushed with the official base's layers first (buildah
// would compress them anew for another registry), the scratch directory
// handed to RemoveScratch no longer has the auth file, and a wrong
// password fails naming the registry that refused it, leaving nothing.
func TestRunWithLogins(t *testing.T) {
	regtest.RequireRoot(t, "buildah's chroot isolation")
	baseLogin := authn.Basic{Username: "base-user-2f", Password: "base-pass-9d"}
	targetLogin := authn.Basic{Username: "target-user-6a", Password: "target-pass-c4"}
	baseReg := regtest.Start(t, regtest.Config{User: baseLogin.Username, Password: baseLogin.Password})
	targetReg := regtest.Start(t, regtest.Config{User: targetLogin.Username, Password: targetLogin.Password})
	base, digest := pkgbase.PushAuth(t, baseReg.Host, &baseLogin)
	login := func(targetPass string) *registry.Options {
		return &registry.Options{Keychain: staticKeychain{
			baseReg.Host:   {Username: baseLogin.Username, Password: baseLogin.Password},
			targetReg.Host: {Username: targetLogin.Username, Password: targetPass},
		}}
	}
	run2 := func(reg *registry.Options, repository, step string) (*Result, []string, error) {
		plan, err := packagestage.NewPlan(digest, packagestage.Inputs{Containerfile: []byte("FROM packages\nRUN " + step + "\n")}, "")
		if err != nil {
			t.Fatal(err)
		}
		var left []string
		scratch := t.TempDir()
		res, err := Run(context.Background(), Options{Plan: plan, Base: base, Repository: repository,
			Registry: reg, ScratchDir: scratch, RemoveScratch: func(dir string) {
				filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
					if err == nil && d.Type().IsRegular() {
						if b, _ := os.ReadFile(p); bytes.Contains(b, []byte(base64.StdEncoding.EncodeToString([]byte(targetLogin.Username+":")))) {
							left = append(left, p)
						}
					}
					return nil
				})
				os.RemoveAll(dir)
			}})
		if e, _ := os.ReadDir(scratch); len(e) != 0 {
			t.Errorf("scratch directory left: %v", e)
		}
		return res, left, err
	}
	run := func(reg *registry.Options, step string) (*Result, []string, error) {
		return run2(reg, targetReg.Host+"/os/packages", step)
	}
	res, left, err := run(login(targetLogin.Password), "mkdir -p /etc/agent")
	if err != nil {
		t.Fatal(err)
	}
	if len(left) != 0 {
		t.Errorf("credentials in the scratch directory after the stage: %q", left)
	}
	img, err := remote.Image(mustRef(res.Ref), remote.WithAuth(&targetLogin))
	if err != nil {
		t.Fatal(err)
	}
	bimg, err := remote.Image(mustRef(base), remote.WithAuth(&baseLogin))
	if err != nil {
		t.Fatal(err)
	}
	m, _ := img.Manifest()
	bm, _ := bimg.Manifest()
	for i, l := range bm.Layers {
		if m.Layers[i].Digest != l.Digest {
			t.Errorf("package base layer %d is %s, the base's is %s", i, m.Layers[i].Digest, l.Digest)
		}
	}
	_, _, err = run(login("wrong"), "mkdir -p /etc/other")
	if err == nil || !strings.Contains(err.Error(), "registry "+targetReg.Host+" refused the credentials") {
		t.Errorf("wrong password: %v", err)
	}

	// Credentials that may read but not write manifests (a proxy answers
	// PUT of a manifest with a registry's 403 DENIED): buildah's push
	// fails, naming the registry; no tag is added.
	up, _ := url.Parse("http://" + targetReg.Host)
	rp := httputil.NewSingleHostReverseProxy(up)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPut && strings.Contains(r.URL.Path, "/manifests/") {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusForbidden)
			io.WriteString(w, `{"errors":[{"code":"DENIED","message":"requested access to the resource is denied"}]}`)
			return
		}
		rp.ServeHTTP(w, r)
	}))
	defer srv.Close()
	proxy := struct{ Host string }{strings.TrimPrefix(srv.URL, "http://")}
	readOnly := &registry.Options{Keychain: staticKeychain{
		baseReg.Host: {Username: baseLogin.Username, Password: baseLogin.Password},
		proxy.Host:   {Username: targetLogin.Username, Password: targetLogin.Password},
	}}
	repo := mustRef(targetReg.Host + "/os/packages:x").Context()
	before, err := remote.List(repo, remote.WithAuth(&targetLogin))
	if err != nil {
		t.Fatal(err)
	}
	_, left, err = run2(readOnly, proxy.Host+"/os/packages", "mkdir -p /etc/third")
	if err == nil || !strings.Contains(err.Error(), "registry "+proxy.Host+" refused the credentials") {
		t.Errorf("manifest PUT refused: %v", err)
	}
	if len(left) != 0 {
		t.Errorf("credentials in the scratch directory after the stage: %q", left)
	}
	if after, err := remote.List(repo, remote.WithAuth(&targetLogin)); err != nil || !slices.Equal(after, before) {
		t.Errorf("tags %v %v, before %v", after, err, before)
	}
}
