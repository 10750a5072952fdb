package e2e

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/oslayer/oslayer/test/pkgbase"
	"github.com/oslayer/oslayer/test/regtest"
	"github.com/oslayer/oslayer/test/synth"
)

// TestPackageStageLogin runs oslayer build with a package stage whose base
// and target are on two registries (127.0.0.1, two ports) that need two
// different logins, given in an --authfile as a user gives them: buildah
// pulls the base and pushes the package base, the build finishes and a
// second build hits the cache. A wrong password for either registry fails
// the build with an error naming that registry and saying it refused the
// credentials, and moves no tag. The users, passwords and their base64 are
// in no layer, config, manifest, output line or error, and the package
// stage leaves no file with them behind (its scratch auth file is gone on
// success and on failure).
func TestPackageStageLogin(t *testing.T) {
	regtest.RequireRoot(t, "buildah's chroot isolation")
	bin := oslayerBud(t)
	baseLogin := authn.Basic{Username: "base-user-4e1d", Password: "base-pass-a93c0f"}
	targetLogin := authn.Basic{Username: "target-user-77b2", Password: "target-pass-1c5e9d"}
	baseReg := regtest.Start(t, regtest.Config{User: baseLogin.Username, Password: baseLogin.Password})
	targetReg := regtest.Start(t, regtest.Config{User: targetLogin.Username, Password: targetLogin.Password})
	base, _ := pkgbase.PushAuth(t, baseReg.Host, &baseLogin)

	dir := t.TempDir()
	mc := filepath.Join(dir, "mc.yaml")
	cf := filepath.Join(dir, "login.Containerfile")
	for p, data := range map[string]string{
		mc: agentMC("1"),
		cf: "FROM packages\nRUN mkdir -p /etc/agent && printf 'login=1\\n' > /etc/agent/login.conf\n",
	} {
		if err := os.WriteFile(p, []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	// authFile writes a podman auth.json with the given password for each
	// registry.
	authFile := func(name, basePass, targetPass string) string {
		b64 := func(u, p string) string { return base64.StdEncoding.EncodeToString([]byte(u + ":" + p)) }
		b, _ := json.Marshal(map[string]any{"auths": map[string]any{
			baseReg.Host:   map[string]string{"auth": b64(baseLogin.Username, basePass)},
			targetReg.Host: map[string]string{"auth": b64(targetLogin.Username, targetPass)},
		}})
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	good := authFile("auth.json", baseLogin.Password, targetLogin.Password)
	secrets := []string{baseLogin.Username, baseLogin.Password, targetLogin.Username, targetLogin.Password}
	for _, l := range []authn.Basic{baseLogin, targetLogin} {
		u, p := l.Username, l.Password
		secrets = append(secrets, base64.StdEncoding.EncodeToString([]byte(u+":"+p)),
			base64.StdEncoding.EncodeToString([]byte(u)), base64.StdEncoding.EncodeToString([]byte(p)))
	}
	// leaks names the credentials in b.
	leaks := func(b []byte) []string {
		var found []string
		for _, s := range secrets {
			if bytes.Contains(b, []byte(s)) {
				found = append(found, s)
			}
		}
		return found
	}

	// The package stage's scratch directory is under TMPDIR: after each
	// command no file there holds a credential.
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	noneLeft := func(t *testing.T, what string) {
		t.Helper()
		filepath.WalkDir(tmp, func(p string, d fs.DirEntry, err error) error {
			if err != nil || !d.Type().IsRegular() {
				return nil
			}
			if b, err := os.ReadFile(p); err == nil && len(leaks(b)) != 0 {
				t.Errorf("%s: %s holds credentials %q", what, p, leaks(b))
			}
			return nil
		})
	}

	repo := targetReg.Host + "/os/worker"
	target := repo + ":latest"
	buildLogin := func(t *testing.T, authfile string) (packageBuild, string, string, int) {
		t.Helper()
		stdout, stderr, code := cliBin(t, bin, "build", "--base", base, "--pool", "worker", "--machineconfig", mc,
			"--push", target, "--containerfile", cf, "--authfile", authfile, "--log-level", "debug", "-o", "json")
		if l := leaks([]byte(stdout + stderr)); len(l) != 0 {
			t.Errorf("the output has credentials %q:\n%s\n%s", l, stdout, stderr)
		}
		noneLeft(t, "after the command")
		var res packageBuild
		if code == 0 {
			if err := json.Unmarshal([]byte(stdout), &res); err != nil {
				t.Fatalf("-o json: %v\n%s", err, stdout)
			}
		}
		return res, stdout, stderr, code
	}

	// 1. Cold: buildah pulls the base from one registry and pushes the
	// package base to the other, each with its login.
	first, stdout, stderr, code := buildLogin(t, good)
	if code != 0 || !first.Tagged || first.PackageStage == nil || first.PackageStage.Hit || !strings.Contains(stderr, "STEP ") {
		t.Fatalf("first build: exit %d\n%s\n%s", code, stdout, stderr)
	}
	ps := first.PackageStage
	if !strings.HasPrefix(ps.Ref, repo+"@sha256:") {
		t.Fatalf("package base %s, want it in %s", ps.Ref, repo)
	}

	// 2. The same inputs: the tagged package base is used, no buildah.
	second, stdout, stderr, code := buildLogin(t, good)
	if code != 0 || second.PackageStage == nil || !second.PackageStage.Hit || second.PackageStage.Ref != ps.Ref || second.Digest != first.Digest || strings.Contains(stderr, "STEP ") {
		t.Fatalf("second build: exit %d\n%s\n%s", code, stdout, stderr)
	}

	// No credential in the package base or the image: manifests,
	// configs, layers.
	ctx := context.Background()
	targetAuth := remote.WithAuth(&targetLogin)
	for _, ref := range []string{ps.Ref, first.Image} {
		img, err := remote.Image(mustRef(t, ref), remote.WithContext(ctx), targetAuth)
		if err != nil {
			t.Fatal(err)
		}
		raw, _ := img.RawConfigFile()
		rawM, _ := img.RawManifest()
		if l := leaks(append(raw, rawM...)); len(l) != 0 {
			t.Errorf("%s: config or manifest has credentials %q", ref, l)
		}
		for i, b := range synth.LayerContents(t, img) {
			if l := leaks(b); len(l) != 0 {
				t.Errorf("%s: layer %d has credentials %q", ref, i, l)
			}
		}
	}

	// 3. A wrong password, for the target's registry and for the base's,
	// with new package inputs (so that buildah would run): the error names
	// the registry and says it refused the credentials. A failing step
	// with the right ones fails after buildah had the credentials. No tag
	// moves.
	tags := func() []string {
		tags, err := remote.List(mustRepo(t, repo), remote.WithContext(ctx), targetAuth)
		if err != nil {
			t.Fatal(err)
		}
		return tags
	}
	tagsBefore := tags()
	for _, tc := range []struct {
		name, authfile, step, want string
	}{
		{"wrong target password", authFile("wrong-target.json", baseLogin.Password, "not-"+targetLogin.Password), "true",
			"registry " + targetReg.Host + " refused the credentials"},
		{"wrong base password", authFile("wrong-base.json", "not-"+baseLogin.Password, targetLogin.Password), "true",
			"registry " + baseReg.Host + " refused the credentials"},
		{"failing step", good, "echo login-step-failed >&2; exit 3", "login.Containerfile line 2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := os.WriteFile(cf, []byte("FROM packages\nRUN "+tc.step+"\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			_, stdout, stderr, code := buildLogin(t, tc.authfile)
			if code == 0 {
				t.Fatalf("exit 0\n%s\n%s", stdout, stderr)
			}
			// The error: the last line starting "oslayer: " and what follows.
			msg := ""
			if i := strings.LastIndex("\n"+stderr, "\noslayer: "); i >= 0 {
				msg = stderr[i:]
			}
			if !strings.Contains(msg, tc.want) {
				t.Errorf("the error does not say %q:\n%s", tc.want, stderr)
			}
			if got := tags(); !slices.Equal(got, tagsBefore) {
				t.Errorf("tags %v, before %v", got, tagsBefore)
			}
			if d := headDigest(t, target, targetAuth); d != second.Digest {
				t.Errorf("%s moved to %s (was %s)", target, d, second.Digest)
			}
		})
	}
}
