package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
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
	exttest.ServingCert(t, dir)
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
