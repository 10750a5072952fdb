package publish_test

import (
	"net/http"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/oslayer/oslayer/internal/registry"
	"github.com/oslayer/oslayer/publish"
)

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// Hostile or malformed targets are refused by New, before any traffic.
func TestNewRejectsBadTargets(t *testing.T) {
	var calls atomic.Int32
	reg := &registry.Options{Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
		calls.Add(1)
		return nil, http.ErrNotSupported
	})}
	for target, want := range map[string]string{
		"":                                   "empty",
		"UPPER/case":                         "UPPER/case",
		"127.0.0.1:5000/Pools/worker":        "127.0.0.1:5000/Pools/worker",
		"a b":                                "whitespace",
		"quay.io/a\tb":                       "whitespace",
		"../x":                               "relative path component ..",
		"quay.io/./x":                        "relative path component .",
		"http://127.0.0.1:5000/pools/worker": "not a URL",
		"https://quay.io/x":                  "not a URL",
		"127.0.0.1:5000/pools/worker@sha256:0123456789012345678901234567890123456789012345678901234567890123": "not a digest",
		"quay.io//x":                            "empty path component",
		"/abs/path":                             "empty path component",
		"quay.io/x:bad:tag":                     "quay.io/x:bad:tag",
		"quay.io/x:" + strings.Repeat("t", 200): "quay.io/x",
		"oci:":                                  "missing directory",
		"oci::tag":                              "missing directory",
		"oci:dir:bad tag":                       "invalid tag",
		`quay.io\x`:                             "backslash",
	} {
		p, err := publish.New(target, reg)
		if err == nil {
			t.Errorf("New(%q) accepted (tag %v)", target, p)
			continue
		}
		if !strings.Contains(err.Error(), want) {
			t.Errorf("New(%q) = %v, want it to mention %q", target, err, want)
		}
	}
	if n := calls.Load(); n != 0 {
		t.Errorf("%d network requests while checking targets", n)
	}
}

func TestNewAcceptsTargets(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "out")
	for target, want := range map[string]string{
		"127.0.0.1:5000/pools/worker":    "127.0.0.1:5000/pools/worker:latest",
		"127.0.0.1:5000/pools/worker:v1": "127.0.0.1:5000/pools/worker:v1",
		"quay.io/org/pool-a_b.c:1.2-x":   "quay.io/org/pool-a_b.c:1.2-x",
		"localhost/x:y":                  "localhost/x:y",
	} {
		tag, err := publish.ParseTarget(target)
		if err != nil {
			t.Errorf("ParseTarget(%q): %v", target, err)
			continue
		}
		if tag.Name() != want {
			t.Errorf("ParseTarget(%q) = %s, want %s", target, tag.Name(), want)
		}
		if p, err := publish.New(target, nil); err != nil {
			t.Errorf("New(%q): %v", target, err)
		} else if p.Target() != want {
			t.Errorf("New(%q).Target() = %q, want %q", target, p.Target(), want)
		}
	}
	// Target names the tag it moves, also when the target left it implicit.
	for target, want := range map[string]string{
		"oci:" + dir:             "oci:" + dir + ":latest",
		"oci:" + dir + ":pool-1": "oci:" + dir + ":pool-1",
		"oci:relative/dir:x":     "oci:relative/dir:x",
	} {
		p, err := publish.New(target, nil)
		if err != nil {
			t.Errorf("New(%q): %v", target, err)
			continue
		}
		if p.Target() != want {
			t.Errorf("New(%q).Target() = %q, want %q", target, p.Target(), want)
		}
	}
}
