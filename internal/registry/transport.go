package registry

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// DefaultTimeout is what a zero Options.Timeout means: a registry that
// sends or accepts no byte of a request or its answer for this long fails
// the request.
const DefaultTimeout = 60 * time.Second

// DefaultMaxRetryAfter is what a zero Retry.MaxRetryAfter means.
const DefaultMaxRetryAfter = 30 * time.Second

// StallError is a registry request that made no progress within the
// deadline: no connection, no byte of the request body taken, or no byte
// of the answer. It is not retried: a registry that stalls once usually
// stalls again, and every retry would cost the whole deadline.
type StallError struct {
	// Host is the registry host, Method and Path the request.
	Host, Method, Path string
	// Deadline is the deadline (registry.timeout; the CLI's --timeout).
	Deadline time.Duration
	// Err is what the HTTP client reported when the request was abandoned.
	Err error
}

func (e *StallError) Error() string {
	return fmt.Sprintf("registry %s did not answer %s %s within %s (registry.timeout)", e.Host, e.Method, e.Path, e.Deadline)
}

func (e *StallError) Unwrap() error { return e.Err }

// Timeout reports true: the error is a deadline.
func (e *StallError) Timeout() bool { return true }

// timeout returns the effective deadline (0: none).
func (o *Options) timeout() time.Duration {
	switch {
	case o.Timeout < 0:
		return 0
	case o.Timeout == 0:
		return DefaultTimeout
	}
	return o.Timeout
}

// DefaultTransport is go-containerregistry's default transport keeping up
// to 256 idle connections per registry instead of 50: a build sends up to
// Options.Requests blob requests at once, a fleet as many per pool it
// builds at once, and across a WAN a connection closed for want of room
// in the pool costs a new handshake (a round trip, more with TLS).
var DefaultTransport http.RoundTripper = func() http.RoundTripper {
	t, ok := remote.DefaultTransport.(*http.Transport)
	if !ok {
		return remote.DefaultTransport
	}
	t = t.Clone()
	t.MaxIdleConns, t.MaxIdleConnsPerHost = 1024, 256
	return t
}()

// RoundTripper returns inner (nil: o.Transport, else DefaultTransport) with oslayer's request deadline and Retry-After
// handling:
//
//   - every request fails with a *StallError when no byte moves (dialing,
//     sending the body, waiting for or reading the answer) for the
//     deadline (Options.Timeout, default DefaultTimeout);
//   - an answer 429 or 503 with a Retry-After header is held back until
//     the registry's wait is over (at most Retry.MaxRetryAfter), so the
//     retry that follows honours it.
//
// The retries themselves are go-containerregistry's, with Options.Retry.
func (o *Options) RoundTripper(inner http.RoundTripper) http.RoundTripper {
	if inner == nil {
		inner = o.Transport
	}
	if inner == nil {
		inner = DefaultTransport
	}
	var rt http.RoundTripper = inner
	if d := o.timeout(); d > 0 {
		rt = &deadlineTransport{inner: rt, timeout: d}
	}
	rt = &retryAfterTransport{inner: rt, max: o.Retry.maxRetryAfter()}
	full := &fullHosts{}
	if o.Shared != nil {
		full = &o.Shared.full
	}
	rt = &storageFullTransport{inner: rt, full: full}
	if o.Shared != nil {
		rt = &pingTransport{inner: rt, p: &o.Shared.pings, insecure: o.IsInsecure}
	}
	return rt
}

// deadlineTransport abandons a request when no byte moves for timeout.
type deadlineTransport struct {
	inner   http.RoundTripper
	timeout time.Duration
}

// errStalled is the cancellation cause of a stalled request.
var errStalled = errors.New("no progress")

func (t *deadlineTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	ctx, cancel := context.WithCancelCause(req.Context())
	w := &watchdog{timeout: t.timeout}
	w.timer = time.AfterFunc(t.timeout, func() { cancel(errStalled) })
	r2 := req.WithContext(ctx)
	if req.Body != nil && req.Body != http.NoBody {
		r2.Body = &progressBody{rc: req.Body, w: w}
	}
	resp, err := t.inner.RoundTrip(r2)
	stalled := func(err error) error {
		if errors.Is(context.Cause(ctx), errStalled) {
			return &StallError{Host: req.URL.Host, Method: req.Method, Path: req.URL.Path, Deadline: t.timeout, Err: err}
		}
		return err
	}
	if err != nil {
		w.stop()
		cancel(nil)
		return nil, stalled(err)
	}
	w.kick()
	resp.Body = &progressBody{rc: resp.Body, w: w, done: func() { w.stop(); cancel(nil) }, wrap: stalled}
	return resp, nil
}

// watchdog is a timer that every byte moved resets.
type watchdog struct {
	timeout time.Duration
	mu      sync.Mutex
	timer   *time.Timer
	stopped bool
}

func (w *watchdog) kick() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.stopped {
		w.timer.Reset(w.timeout)
	}
}

func (w *watchdog) stop() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.stopped = true
	w.timer.Stop()
}

// progressBody resets the watchdog on every read; for an answer it names a
// stall and ends the watch on Close.
type progressBody struct {
	rc   io.ReadCloser
	w    *watchdog
	done func()
	wrap func(error) error
	once sync.Once
}

func (b *progressBody) Read(p []byte) (int, error) {
	n, err := b.rc.Read(p)
	if n > 0 {
		b.w.kick()
	}
	if err != nil && err != io.EOF && b.wrap != nil {
		err = b.wrap(err)
	}
	return n, err
}

func (b *progressBody) Close() error {
	err := b.rc.Close()
	if b.done != nil {
		b.once.Do(b.done)
	}
	return err
}

// retryAfterTransport holds back a 429 or 503 answer with a Retry-After
// header until the wait it asks for (at most max) is over.
type retryAfterTransport struct {
	inner http.RoundTripper
	max   time.Duration
}

func (t *retryAfterTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.inner.RoundTrip(req)
	if err != nil || (resp.StatusCode != http.StatusTooManyRequests && resp.StatusCode != http.StatusServiceUnavailable) {
		return resp, err
	}
	wait, ok := parseRetryAfter(resp.Header.Get("Retry-After"), time.Now())
	if !ok || wait <= 0 {
		return resp, nil
	}
	wait = min(wait, t.max)
	// Keep the (small) error body: the caller reads it after the wait.
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	resp.Body = io.NopCloser(bytes.NewReader(body))
	timer := time.NewTimer(wait)
	defer timer.Stop()
	select {
	case <-req.Context().Done():
		return nil, req.Context().Err()
	case <-timer.C:
	}
	return resp, nil
}

// parseRetryAfter reads a Retry-After value: seconds, or an HTTP date.
func parseRetryAfter(v string, now time.Time) (time.Duration, bool) {
	if v == "" {
		return 0, false
	}
	if s, err := strconv.Atoi(v); err == nil {
		if s < 0 {
			return 0, false
		}
		return time.Duration(s) * time.Second, true
	}
	if t, err := http.ParseTime(v); err == nil {
		return t.Sub(now), true
	}
	return 0, false
}
