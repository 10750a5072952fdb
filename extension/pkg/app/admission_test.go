package app

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"time"
)

// TestRunAdmissionRefuses: --admission-only without --webhook-port is a
// usage error; without a certificate in --webhook-cert-dir the webhook
// does not start, naming the file.
func TestRunAdmissionRefuses(t *testing.T) {
	if err := RunAdmission(context.Background(), Options{AdmissionOnly: true}); !errors.Is(err, ErrUsage) || !strings.Contains(err.Error(), "--webhook-port") {
		t.Errorf("no --webhook-port: %v; want a usage error naming it", err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	o := Options{AdmissionOnly: true, WebhookHost: "127.0.0.1", WebhookPort: port, WebhookCertDir: t.TempDir(), HealthAddr: "127.0.0.1:0"}
	if err := RunAdmission(ctx, o); err == nil || ctx.Err() != nil || !strings.Contains(err.Error(), "tls.crt") {
		t.Errorf("no certificate: %v; want an error naming tls.crt", err)
	}
}
