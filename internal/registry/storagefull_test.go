package registry_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/oslayer/oslayer/internal/registry"
	"github.com/oslayer/oslayer/test/regtest"
)

// What docker-registry 2.8 answers when its filesystem storage is full: a
// blob upload (the detail a string, as captured from a registry on a full
// tmpfs) and a write whose error keeps its fields, enclosed in the storage
// driver's error (Err 28 is ENOSPC; captured from TestStorageFullTmpfs's
// registry).
const (
	enospcUpload = `{"errors":[{"code":"UNKNOWN","message":"unknown error","detail":"write /var/lib/registry/docker/registry/v2/repositories/x/_uploads/1/data: no space left on device"}]}`
	enospcFields = `{"errors":[{"code":"UNKNOWN","message":"unknown error","detail":{"DriverName":"filesystem","Enclosed":{"Op":"write","Path":"/var/lib/registry/docker/registry/v2/repositories/x/_manifests/tags/v1/current/link","Err":28}}}]}`
)

// TestStorageFull: a registry (real, behind a fault proxy answering as a
// full one does) whose storage is full is named as such, whatever request
// found it: a blob upload, a manifest put, and a HEAD whose 500 has no
// body. Other server errors are left as they are. Before, the errors read
// "UNKNOWN: unknown error; map[... Err:28 ...]" and "unexpected status
// code 500".
func TestStorageFull(t *testing.T) {
	r := regtest.Start(t, regtest.Config{})
	fp := regtest.NewFaultProxy(t, r.Host)
	img, err := random.Image(512, 1)
	if err != nil {
		t.Fatal(err)
	}
	ref, err := name.ParseReference(fp.Host + "/full/pool:v1")
	if err != nil {
		t.Fatal(err)
	}
	want := registry.StorageFullMessage(fp.Host)
	opts := func() []remote.Option {
		o := &registry.Options{Retry: registry.Retry{Attempts: 1}}
		return o.RemoteOptions(context.Background())
	}
	json500 := func(body string) regtest.Fault {
		return regtest.Fault{Status: http.StatusInternalServerError, Body: body, Header: http.Header{"Content-Type": {"application/json"}}}
	}
	for _, c := range []struct {
		name  string
		fault func(q *http.Request) regtest.Fault
		op    func() error
		full  bool
	}{
		{"blob upload", func(q *http.Request) regtest.Fault {
			if q.Method == http.MethodPut && strings.Contains(q.URL.Path, "/blobs/uploads/") {
				return json500(enospcUpload)
			}
			return regtest.Fault{}
		}, func() error { return remote.Write(ref, img, opts()...) }, true},
		{"manifest put", func(q *http.Request) regtest.Fault {
			if q.Method == http.MethodPut && strings.Contains(q.URL.Path, "/manifests/") {
				return json500(enospcFields)
			}
			return regtest.Fault{}
		}, func() error { return remote.Write(ref, img, opts()...) }, true},
		{"HEAD without a body", func(q *http.Request) regtest.Fault {
			if strings.Contains(q.URL.Path, "/manifests/") {
				if q.Method == http.MethodHead {
					return regtest.Fault{Status: http.StatusInternalServerError}
				}
				return json500(enospcFields)
			}
			return regtest.Fault{}
		}, func() error { _, err := remote.Head(ref, opts()...); return err }, true},
		{"another server error", func(q *http.Request) regtest.Fault {
			if q.Method == http.MethodPut {
				return regtest.Fault{Status: http.StatusInternalServerError}
			}
			return regtest.Fault{}
		}, func() error { return remote.Write(ref, img, opts()...) }, false},
	} {
		fp.SetFault(c.fault)
		err := c.op()
		fp.SetFault(nil)
		switch {
		case err == nil:
			t.Errorf("%s: no error", c.name)
		case c.full && !strings.Contains(err.Error(), want):
			t.Errorf("%s: %v\nwant it to say %q", c.name, err, want)
		case !c.full && strings.Contains(err.Error(), "is full"):
			t.Errorf("%s: %v, says the storage is full", c.name, err)
		}
	}
	if _, err := remote.Head(ref); err == nil {
		t.Errorf("%s exists after every write failed", ref)
	}
}
