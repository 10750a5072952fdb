package sign

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// FuzzReadKey: any file content gives a key or an error naming the file,
// never a panic.
func FuzzReadKey(f *testing.F) {
	f.Add([]byte("-----BEGIN ENCRYPTED SIGSTORE PRIVATE KEY-----\nAAAA\n-----END ENCRYPTED SIGSTORE PRIVATE KEY-----\n"))
	f.Add([]byte("apiVersion: v1\nkind: Secret\nmetadata: {name: k, namespace: n}\ndata: {cosign.key: QUJD, cosign.password: eA==}\n"))
	f.Add([]byte("kind: Secret\nstringData:\n  cosign.key: |\n    -----BEGIN X-----\n"))
	f.Add([]byte("kind: ConfigMap\n"))
	f.Add([]byte("{"))
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, data []byte) {
		p := filepath.Join(dir, "key")
		if err := os.WriteFile(p, data, 0o600); err != nil {
			t.Fatal(err)
		}
		km, err := ReadKey(p)
		if err != nil {
			if !strings.Contains(err.Error(), p) {
				t.Fatalf("error does not name the file: %v", err)
			}
			return
		}
		if len(km.PEM) == 0 {
			t.Fatalf("key without PEM from %q", data)
		}
	})
}

// FuzzTrust: any repository string gives trust files or an error, never a
// panic; accepted repositories round-trip into the policy.
func FuzzTrust(f *testing.F) {
	kp, err := GenerateKeyPair(nil)
	if err != nil {
		f.Fatal(err)
	}
	for _, s := range []string{"reg.example/pool", "127.0.0.1:5000/a/b", "docker.io/x", "x", "", "a@b", "A/B", "reg:99999/p"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, repo string) {
		b, err := Trust(repo, kp.Public, TrustOptions{})
		if err != nil {
			return
		}
		if len(b.Files) != 6 || !strings.Contains(string(b.Files[0].Content), b.Repository) {
			t.Fatalf("Trust(%q): %d files, repository %q", repo, len(b.Files), b.Repository)
		}
	})
}
