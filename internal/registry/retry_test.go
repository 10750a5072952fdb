package registry

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
)

func TestRetryable(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{nil, false},
		{&transport.Error{StatusCode: http.StatusServiceUnavailable}, true},
		{&transport.Error{StatusCode: http.StatusTooManyRequests}, true},
		{&transport.Error{StatusCode: http.StatusInternalServerError}, true},
		{&transport.Error{StatusCode: http.StatusUnauthorized}, false},
		{&transport.Error{StatusCode: http.StatusNotFound}, false},
		{fmt.Errorf("wrapped: %w", &transport.Error{StatusCode: http.StatusBadGateway}), true},
		{&url.Error{Op: "Patch", URL: "http://x", Err: syscall.ECONNRESET}, true},
		{&url.Error{Op: "Patch", URL: "http://x", Err: io.EOF}, true},
		{&url.Error{Op: "Get", URL: "http://x", Err: &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}}, true},
		{&url.Error{Op: "Put", URL: "http://x", Err: &StallError{Host: "x", Method: "PUT", Path: "/v2/", Deadline: time.Second, Err: context.Canceled}}, false},
		{&url.Error{Op: "Put", URL: "http://x", Err: syscall.EPIPE}, true},
		{fmt.Errorf("upload blobs: %w", &url.Error{Op: "Patch", URL: "http://x", Err: errors.New("http: server closed idle connection")}), true},
		{errors.New("upload: http: server closed idle connection, and more"), false},
		{context.Canceled, false},
		{fmt.Errorf("x: %w", context.DeadlineExceeded), false},
		{errors.New("manifest invalid"), false},
	} {
		if got := Retryable(tc.err); got != tc.want {
			t.Errorf("Retryable(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}

func TestRetryBackoff(t *testing.T) {
	b := Retry{}.Backoff()
	if b.Steps != 5 || b.Duration != 250*time.Millisecond || b.Factor != 2 {
		t.Errorf("default backoff = %+v", b)
	}
	// Max bounds the last wait: 10ms, ..., 40ms over 5 attempts.
	b = Retry{Attempts: 5, Initial: 10 * time.Millisecond, Max: 40 * time.Millisecond}.Backoff()
	if b.Steps != 5 || b.Cap != 0 {
		t.Errorf("backoff = %+v: attempts must not be cut", b)
	}
	var total time.Duration
	d := float64(b.Duration)
	for i := 0; i < b.Steps-1; i++ {
		total += time.Duration(d)
		d *= b.Factor
	}
	if last := time.Duration(d / b.Factor); last < 39*time.Millisecond || last > 41*time.Millisecond {
		t.Errorf("last wait %v, want 40ms", last)
	}
	if total > 100*time.Millisecond {
		t.Errorf("total wait %v", total)
	}
}

func TestParseRetryAfter(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for _, tc := range []struct {
		v    string
		want time.Duration
		ok   bool
	}{
		{"", 0, false},
		{"2", 2 * time.Second, true},
		{"0", 0, true},
		{"-1", 0, false},
		{"soon", 0, false},
		{now.Add(90 * time.Second).Format(http.TimeFormat), 90 * time.Second, true},
	} {
		got, ok := parseRetryAfter(tc.v, now)
		if got != tc.want || ok != tc.ok {
			t.Errorf("parseRetryAfter(%q) = %v %v, want %v %v", tc.v, got, ok, tc.want, tc.ok)
		}
	}
}
