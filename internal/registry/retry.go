package registry

import (
	"context"
	"errors"
	"io"
	"math"
	"net"
	"net/http"
	"syscall"
	"time"

	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
)

// Retry bounds how failed registry requests are retried: server errors
// (5xx), rate limits (429, honouring Retry-After up to MaxRetryAfter),
// request timeouts (408), refused connections (a registry restarting) and
// broken connections (reset, EOF, broken pipe). A request that stalls
// (Options.Timeout) is not retried. The wait doubles after every failed attempt,
// growing more slowly when doubling would make the last wait exceed Max.
// Blob uploads are retried as a whole (a new upload session
// each time), other requests one by one.
type Retry struct {
	// Attempts is the number of tries including the first (0: 5; 1: no retry).
	Attempts int
	// Initial is the wait after the first failure (0: 250ms).
	Initial time.Duration
	// Max bounds the longest wait, the one before the last attempt (0: 4s).
	Max time.Duration
	// MaxRetryAfter bounds how long a Retry-After header on a 429 or 503
	// answer makes a request wait before its retry (0:
	// DefaultMaxRetryAfter).
	MaxRetryAfter time.Duration
}

func (r Retry) maxRetryAfter() time.Duration {
	if r.MaxRetryAfter <= 0 {
		return DefaultMaxRetryAfter
	}
	return r.MaxRetryAfter
}

// DefaultRetry is what the zero Retry means: 5 tries, waiting 0.25s, 0.5s,
// 1s and 2s between them (under 4s in all).
var DefaultRetry = Retry{Attempts: 5, Initial: 250 * time.Millisecond, Max: 4 * time.Second}

// RetryStatusCodes are the HTTP statuses that are retried.
var RetryStatusCodes = []int{
	http.StatusRequestTimeout,
	http.StatusTooManyRequests,
	http.StatusInternalServerError,
	http.StatusBadGateway,
	http.StatusServiceUnavailable,
	http.StatusGatewayTimeout,
	499, 520, 521, 522, 523, 524,
}

func (r Retry) withDefaults() Retry {
	if r.Attempts <= 0 {
		r.Attempts = DefaultRetry.Attempts
	}
	if r.Initial <= 0 {
		r.Initial = DefaultRetry.Initial
	}
	if r.Max <= 0 {
		r.Max = DefaultRetry.Max
	}
	return r
}

// Backoff returns the go-containerregistry backoff for r.
func (r Retry) Backoff() remote.Backoff {
	r = r.withDefaults()
	factor := 2.0
	if r.Attempts > 2 {
		// The last of Attempts-1 waits is Initial*factor^(Attempts-2).
		if last := float64(r.Initial) * math.Pow(factor, float64(r.Attempts-2)); last > float64(r.Max) {
			factor = math.Pow(float64(r.Max)/float64(r.Initial), 1/float64(r.Attempts-2))
			if factor < 1 {
				factor = 1
			}
		}
	}
	return remote.Backoff{Duration: r.Initial, Factor: factor, Jitter: 0.1, Steps: r.Attempts}
}

// Retryable reports whether err is worth another attempt: a retryable
// status (RetryStatusCodes), a temporary registry error code, or a broken
// connection. Cancellation and deadlines are never retried.
func Retryable(err error) bool {
	if err == nil {
		return false
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	var stall *StallError
	if errors.As(err, &stall) {
		return false
	}
	var te *transport.Error
	if errors.As(err, &te) {
		for _, c := range RetryStatusCodes {
			if te.StatusCode == c {
				return true
			}
		}
		return te.Temporary()
	}
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) ||
		errors.Is(err, syscall.ECONNABORTED) || errors.Is(err, syscall.ECONNREFUSED) ||
		errors.Is(err, net.ErrClosed) || serverClosedIdle(err) {
		return true
	}
	var t interface{ Temporary() bool }
	if errors.As(err, &t) && t.Temporary() {
		return true
	}
	return false
}

// errServerClosedIdle is net/http's (unexported) error for a request
// sent on a kept-alive connection the server closed meanwhile (a registry
// restarting): net/http itself retries it only for idempotent methods, so
// an upload's PATCH or PUT surfaces it.
const errServerClosedIdle = "http: server closed idle connection"

// serverClosedIdle reports whether err is, or wraps, errServerClosedIdle.
func serverClosedIdle(err error) bool {
	for ; err != nil; err = errors.Unwrap(err) {
		if err.Error() == errServerClosedIdle {
			return true
		}
	}
	return false
}

func (r Retry) remoteOptions(ctx context.Context) []remote.Option {
	return []remote.Option{
		remote.WithRetryBackoff(r.Backoff()),
		remote.WithRetryStatusCodes(RetryStatusCodes...),
		remote.WithRetryPredicate(func(err error) bool {
			return ctx.Err() == nil && Retryable(err)
		}),
	}
}
