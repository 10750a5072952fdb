package app

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	"github.com/oslayer/oslayer/extension/pkg/admission"
)

// ErrUsage marks an error of the flags (the command exits 2).
var ErrUsage = errors.New("usage")

// RunAdmission serves the Shoot admission webhook alone
// (--admission-only, the admission chart's mode) until ctx is done: no
// controller, no leader election, no connection to any API server (the
// validator reads only the AdmissionReview the API server posts), with
// /healthz and /readyz (the webhook server answers TLS) on
// o.HealthAddr.
func RunAdmission(ctx context.Context, o Options) error {
	if o.WebhookPort <= 0 {
		return fmt.Errorf("%w: --admission-only needs --webhook-port", ErrUsage)
	}
	srv := webhookServer(o)
	srv.Register(admission.Path, &webhook.Admission{Handler: &admission.ShootValidator{Type: o.Type}})
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errc := make(chan error, 2)
	go func() { errc <- srv.Start(ctx) }()
	health, err := healthServer(o.HealthAddr, srv.StartedChecker())
	if err != nil {
		return err
	}
	if health != nil {
		go func() { errc <- serveUntil(ctx, health) }()
	}
	err = <-errc
	cancel()
	if health != nil {
		if err2 := <-errc; err == nil {
			err = err2
		}
	}
	return err
}

// healthServer serves /healthz (the process runs) and /readyz (ready)
// on addr ("" or "0": none).
func healthServer(addr string, ready healthz.Checker) (*http.Server, error) {
	if addr == "" || addr == "0" {
		return nil, nil
	}
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("--health-bind-address %s: %w", addr, err)
	}
	mux := http.NewServeMux()
	mux.Handle("/healthz", http.StripPrefix("/healthz", &healthz.Handler{Checks: map[string]healthz.Checker{"ping": healthz.Ping}}))
	mux.Handle("/readyz", http.StripPrefix("/readyz", &healthz.Handler{Checks: map[string]healthz.Checker{"webhook": ready}}))
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(l) }()
	return srv, nil
}

// serveUntil shuts srv down when ctx is done.
func serveUntil(ctx context.Context, srv *http.Server) error {
	<-ctx.Done()
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return srv.Shutdown(sctx)
}
