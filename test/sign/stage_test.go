package sign_test

import (
	"context"
	"encoding/base64"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"

	"github.com/oslayer/oslayer/assemble"
	"github.com/oslayer/oslayer/internal/registry"
	"github.com/oslayer/oslayer/sign"
	"github.com/oslayer/oslayer/test/regtest"
)

// runStages runs the stages in order and returns the first error, as the
// builder does.
func runStages(ctx context.Context, stages []assemble.Stage, b *assemble.Built, d name.Digest) ([]any, error) {
	p := &assemble.Published{Ref: d.String(), Digest: &d}
	var out []any
	for _, s := range stages {
		r, err := s.Run(ctx, b, p)
		if err != nil {
			return out, err
		}
		out = append(out, r)
	}
	return out, nil
}

// tagMissing reports whether tag does not exist in the registry.
func tagMissing(t *testing.T, tag string) bool {
	t.Helper()
	ref, err := name.ParseReference(tag)
	if err != nil {
		t.Fatal(err)
	}
	_, err = remote.Head(ref)
	if err == nil {
		return false
	}
	if te, ok := err.(*transport.Error); ok && te.StatusCode == http.StatusNotFound {
		return true
	}
	t.Fatalf("HEAD %s: %v", tag, err)
	return false
}

func TestStageNames(t *testing.T) {
	st := sign.Stages(nil)
	if len(st) != 2 || st[0].Name() != "sign" || st[1].Name() != "attest" {
		t.Fatalf("stages = %v, want sign then attest", st)
	}
}

// TestStageErrors: a wrong or missing password, an unreadable key and a
// registry refusing the signature upload fail the "sign" stage with an
// error naming the step and the cause, and nothing is attached.
func TestStageErrors(t *testing.T) {
	ctx := context.Background()
	r := regtest.Start(t, regtest.Config{})
	proxy := regtest.NewProxy(t, r.Host)
	key := sharedKey(t, 0)
	dir := t.TempDir()
	garbage := filepath.Join(dir, "garbage.key")
	if err := os.WriteFile(garbage, []byte("not a key\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	notSecret := filepath.Join(dir, "cm.yaml")
	if err := os.WriteFile(notSecret, []byte("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	emptySecret := filepath.Join(dir, "secret.yaml")
	if err := os.WriteFile(emptySecret, []byte("apiVersion: v1\nkind: Secret\nmetadata: {name: cosign, namespace: ns}\nstringData: {}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	pwFile := filepath.Join(dir, "pw")
	if err := os.WriteFile(pwFile, []byte("wrong\n"), 0o600); err != nil {
		t.Fatal(err)
	}

	for _, c := range []struct {
		name string
		key  sign.KeyFunc
		via  string // registry host the stage talks to
		fail func(*http.Request) int
		want []string
	}{
		{"wrong-password", sign.KeyFile(key.priv, sign.Password([]byte("wrong"))), r.Host, nil,
			[]string{"sign: key " + key.priv + ": wrong or missing password"}},
		{"wrong-password-file", sign.KeyFile(key.priv, sign.PasswordFile(pwFile)), r.Host, nil,
			[]string{"sign: key " + key.priv + ": wrong or missing password"}},
		{"missing-password", sign.KeyFile(key.priv, nil), r.Host, nil,
			[]string{"sign: key " + key.priv + ": wrong or missing password"}},
		{"missing-password-file", sign.KeyFile(key.priv, sign.PasswordFile(filepath.Join(dir, "nope"))), r.Host, nil,
			[]string{"sign: key " + key.priv + ": key password file:", "no such file"}},
		{"missing-key", sign.KeyFile(filepath.Join(dir, "absent.key"), sign.Password([]byte(testPassword))), r.Host, nil,
			[]string{"sign: key " + filepath.Join(dir, "absent.key") + ":", "no such file"}},
		{"key-is-directory", keyFile(dir), r.Host, nil,
			[]string{"sign: key " + dir + ":", "is a directory"}},
		{"garbage-key", keyFile(garbage), r.Host, nil,
			[]string{"sign: key " + garbage + ": neither a PEM private key nor a Secret manifest"}},
		{"not-a-secret", keyFile(notSecret), r.Host, nil,
			[]string{"sign: key " + notSecret + `: neither a PEM private key nor a Secret manifest (kind "ConfigMap")`}},
		{"secret-without-key", keyFile(emptySecret), r.Host, nil,
			[]string{"sign: key " + emptySecret + " (Secret ns/cosign): no cosign.key in data or stringData"}},
		{"registry-refuses-signature", keyFile(key.priv), proxy.Host,
			func(r *http.Request) int {
				if r.Method == http.MethodPut && strings.Contains(r.URL.Path, "/manifests/sha256-") && strings.HasSuffix(r.URL.Path, ".sig") {
					return http.StatusForbidden
				}
				return 0
			},
			[]string{"sign: writing signature " + proxy.Host + "/pool:sha256-", ".sig", "403"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			d := pushRandom(t, c.via, "pool")
			proxy.SetFail(c.fail)
			defer proxy.SetFail(nil)
			stages := sign.Stages(c.key, sign.WithRegistry(&registry.Options{}))
			out, err := runStages(ctx, stages, fakeBuild(t, d), d)
			if err == nil {
				t.Fatalf("stages succeeded: %v", out)
			}
			t.Logf("error: %v", err)
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Fatalf("error %q does not contain %q", err, w)
				}
			}
			if !strings.HasPrefix(err.Error(), "sign: ") {
				t.Fatalf("error %q does not start with the step", err)
			}
			if len(out) != 0 {
				t.Fatalf("a stage before the failure returned %v", out)
			}
			proxy.SetFail(nil)
			for _, suffix := range []string{".sig", ".att"} {
				if !tagMissing(t, r.Host+"/pool:"+tagOf(d)+suffix) {
					t.Fatalf("%s%s exists after a failed sign stage", tagOf(d), suffix)
				}
			}
		})
	}
}

// TestLayoutRefused: an image written to an OCI layout has no registry
// digest to sign; the stage says so.
func TestLayoutRefused(t *testing.T) {
	key := sharedKey(t, 0)
	st := sign.Stages(keyFile(key.priv))
	_, err := st[0].Run(context.Background(), &assemble.Built{}, &assemble.Published{Ref: "oci:/tmp/x@sha256:" + strings.Repeat("0", 64)})
	if err == nil || !strings.HasPrefix(err.Error(), "sign: oci:/tmp/x@") {
		t.Fatalf("err = %v", err)
	}
}

// TestSecretKey: the key may come from a Kubernetes Secret manifest holding
// cosign.key and cosign.password (base64 data or stringData); the Secret's
// password wins over the one given.
func TestSecretKey(t *testing.T) {
	ctx := context.Background()
	r := regtest.Start(t, regtest.Config{})
	key := sharedKey(t, 0)
	privPEM, err := os.ReadFile(key.priv)
	if err != nil {
		t.Fatal(err)
	}
	pub, err := sign.LoadPublicKey(ctx, key.pub)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	data := filepath.Join(dir, "data.yaml")
	os.WriteFile(data, []byte(fmt.Sprintf("apiVersion: v1\nkind: Secret\nmetadata:\n  name: cosign\n  namespace: garden\ntype: Opaque\ndata:\n  cosign.key: %s\n  cosign.password: %s\n",
		base64.StdEncoding.EncodeToString(privPEM), base64.StdEncoding.EncodeToString([]byte(testPassword)))), 0o600)
	indented := "    " + strings.ReplaceAll(strings.TrimSpace(string(privPEM)), "\n", "\n    ")
	str := filepath.Join(dir, "stringdata.yaml")
	os.WriteFile(str, []byte("apiVersion: v1\nkind: Secret\nmetadata:\n  name: cosign\nstringData:\n  cosign.password: \""+testPassword+"\"\n  cosign.key: |\n"+indented+"\n"), 0o600)
	noPW := filepath.Join(dir, "nopw.yaml")
	os.WriteFile(noPW, []byte(fmt.Sprintf("apiVersion: v1\nkind: Secret\nmetadata:\n  name: cosign\ndata:\n  cosign.key: %s\n", base64.StdEncoding.EncodeToString(privPEM))), 0o600)

	for _, c := range []struct {
		name string
		path string
		pass sign.PassFunc
	}{
		{"data", data, sign.Password([]byte("ignored: the Secret has one"))},
		{"stringData", str, nil},
		{"no-password-in-secret", noPW, sign.Password([]byte(testPassword))},
	} {
		t.Run(c.name, func(t *testing.T) {
			d := pushRandom(t, r.Host, "pool")
			if _, err := runStages(ctx, sign.Stages(sign.KeyFile(c.path, c.pass)), fakeBuild(t, d), d); err != nil {
				t.Fatal(err)
			}
			if _, err := sign.Verify(ctx, d.String(), pub); err != nil {
				t.Fatal(err)
			}
		})
	}
}
