package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/oslayer/oslayer/extension/test/exttest"
)

// checkAdmissionOnly runs the binary as the admission chart runs it:
// without --webhook-port it exits 2 naming the flag; with it and a
// certificate, and no kubeconfig anywhere (no KUBECONFIG, an empty
// HOME, not in a cluster), it becomes ready and stops cleanly on SIGTERM.
func checkAdmissionOnly(t *testing.T, bin string) {
	t.Helper()
	env := []string{"HOME=" + t.TempDir(), "PATH=" + os.Getenv("PATH")}
	cmd := exec.Command(bin, "--admission-only")
	cmd.Env = env
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 2 || !strings.Contains(string(out), "--webhook-port") {
		t.Errorf("--admission-only without --webhook-port: %v\n%s", err, out)
	}
	dir, port, health := t.TempDir(), exttest.FreePort(t), exttest.FreePort(t)
	writeCert(t, dir)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd = exec.CommandContext(ctx, bin, "--admission-only", fmt.Sprintf("--webhook-port=%d", port), "--webhook-cert-dir="+dir,
		fmt.Sprintf("--health-bind-address=127.0.0.1:%d", health))
	cmd.Env = env
	var logs strings.Builder
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	ready := false
	for end := time.Now().Add(30 * time.Second); !ready && time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		if resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/readyz", health)); err == nil {
			resp.Body.Close()
			ready = resp.StatusCode == http.StatusOK
		}
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	if err := cmd.Wait(); !ready || err != nil {
		t.Errorf("--admission-only without a kubeconfig: ready %v, exit %v\n%s", ready, err, logs.String())
	}
}

// writeCert writes a self-signed serving certificate for 127.0.0.1 as
// tls.crt and tls.key into dir.
func writeCert(t *testing.T, dir string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "admission"}, NotBefore: time.Now().Add(-time.Hour),
		NotAfter: time.Now().Add(time.Hour), IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kb, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	for name, b := range map[string][]byte{"tls.crt": pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		"tls.key": pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb})} {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
}
