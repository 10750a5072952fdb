package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/oslayer/oslayer/sign"
)

// A key that does not decrypt: the sign package's error names the key
// only (pipeline adds the specification's field, signing.key); the CLI
// names its flag and where it takes the password from, and nothing is
// written.
func TestBuildWrongKeyPassword(t *testing.T) {
	dir := t.TempDir()
	kp, err := sign.GenerateKeyPair([]byte("right"))
	if err != nil {
		t.Fatal(err)
	}
	key, pw := filepath.Join(dir, "cosign.key"), filepath.Join(dir, "pw")
	if err := os.WriteFile(key, kp.Private, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(pw, []byte("wrong"), 0o600); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "out")
	code, _, stderr := oslayerRun(t, "build", "--base", "oci:"+example(t, "base"), "--pool", "worker",
		"--osc", example(t, "gardener", "worker-osc.yaml"), "--push", "oci:"+out,
		"--sign-key", key, "--sign-key-password-file", pw, "--sign-identity", "registry.example.com/os/worker")
	want := "--sign-key: key " + key + ": wrong or missing password (COSIGN_PASSWORD, --sign-key-password-file or the Secret's cosign.password): "
	// The hint once (not the library's as well as the CLI's).
	if code == 0 || !strings.Contains(stderr, want) || strings.Count(stderr, "password") != 3 {
		t.Errorf("exit %d, stderr %q; want a failure and %q", code, stderr, want)
	}
	if _, err := os.Stat(out); !os.IsNotExist(err) {
		t.Errorf("the output %s was written: %v", out, err)
	}
}
