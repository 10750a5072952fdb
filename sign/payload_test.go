package sign

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
)

func TestPayloadFormat(t *testing.T) {
	h := "sha256:" + strings.Repeat("0a", 32)
	d, err := name.NewDigest("127.0.0.1:5000/pools/worker@" + h)
	if err != nil {
		t.Fatal(err)
	}
	got, err := Payload(d)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"critical":{"identity":{"docker-reference":"127.0.0.1:5000/pools/worker"},"image":{"docker-manifest-digest":"` + h +
		`"},"type":"cosign container image signature"},"optional":null}`
	if string(got) != want {
		t.Fatalf("payload\n got %s\nwant %s", got, want)
	}
}

func TestPasswordFile(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct{ content, want string }{
		{"pw", "pw"}, {"pw\n", "pw"}, {"pw\r\n", "pw"}, {"pw\n\n", "pw\n"}, {"", ""}, {" pw ", " pw "},
	} {
		p := filepath.Join(dir, "pw")
		if err := os.WriteFile(p, []byte(c.content), 0o600); err != nil {
			t.Fatal(err)
		}
		got, err := PasswordFile(p)()
		if err != nil || string(got) != c.want {
			t.Errorf("PasswordFile(%q) = %q, %v; want %q", c.content, got, err, c.want)
		}
	}
}

func TestGenerateAndLoadKey(t *testing.T) {
	for _, pw := range []string{"", "secret"} {
		kp, err := GenerateKeyPair([]byte(pw))
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(string(kp.Private), "-----BEGIN ENCRYPTED SIGSTORE PRIVATE KEY-----") ||
			!strings.HasPrefix(string(kp.Public), "-----BEGIN PUBLIC KEY-----") {
			t.Fatalf("key pair PEM types:\n%s\n%s", kp.Private, kp.Public)
		}
		p := filepath.Join(t.TempDir(), "cosign.key")
		if err := os.WriteFile(p, kp.Private, 0o600); err != nil {
			t.Fatal(err)
		}
		sv, err := LoadKey(p, Password([]byte(pw)))
		if err != nil {
			t.Fatalf("password %q: %v", pw, err)
		}
		pub, err := PublicKeyPEM(sv)
		if err != nil || string(pub) != string(kp.Public) {
			t.Fatalf("public key of the loaded key differs: %v\n%s\n%s", err, pub, kp.Public)
		}
		// The error names the key; where the password came from is the
		// caller's to say (no flag of a front-end).
		_, err = LoadKey(p, Password([]byte(pw+"x")))
		var pe *PasswordError
		if !errors.As(err, &pe) || pe.Source != p || err.Error() != "key "+p+": wrong or missing password: "+pe.Err.Error() {
			t.Fatalf("wrong password: %v", err)
		}
	}
}
