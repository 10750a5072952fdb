package registry

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
)

// errnoENOSPC is ENOSPC on Linux, as a registry's error detail carries it
// ({"Op":"write","Path":...,"Err":28}).
const errnoENOSPC = 28

// storageFullTransport explains a registry whose storage is full. A
// registry on distribution answers a write it could not store 500
// "UNKNOWN: unknown error" with the operating system's error as the
// detail ("write ...: no space left on device", or the error's fields
// with "Err":28); go-containerregistry prints that as it is, and a HEAD
// answered 500 has no body at all. The transport rewrites such an answer's
// message to say that the registry's storage is full, naming the
// registry, and answers a HEAD that failed with 5xx the same way when the
// registry said so before or a GET of the same URL says so now.
type storageFullTransport struct {
	inner http.RoundTripper
	full  *fullHosts
}

// fullHosts are the registries that answered ENOSPC.
type fullHosts struct {
	mu sync.Mutex
	m  map[string]bool
}

func (f *fullHosts) set(host string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.m == nil {
		f.m = map[string]bool{}
	}
	f.m[host] = true
}

func (f *fullHosts) has(host string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.m[host]
}

// StorageFullMessage is the message of an answer of registry host whose
// storage is full.
func StorageFullMessage(host string) string {
	return fmt.Sprintf("the disk of registry %s is full: its storage has no space left (ENOSPC, errno 28); free space on the registry (or run its garbage collection) and try again", host)
}

func (t *storageFullTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.inner.RoundTrip(req)
	if err != nil || resp.StatusCode < 500 {
		return resp, err
	}
	host := req.URL.Host
	if req.Method == http.MethodHead {
		if t.full.has(host) || t.probe(req) {
			t.full.set(host)
			return explained(resp, host, nil), nil
		}
		return resp, nil
	}
	body, rerr := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	if rerr != nil {
		return nil, rerr
	}
	if detail, ok := storageFull(body); ok {
		t.full.set(host)
		return explained(resp, host, detail), nil
	}
	resp.Body = io.NopCloser(bytes.NewReader(body))
	return resp, nil
}

// probe asks for the body a HEAD answered with 5xx lacks: a GET of the
// same URL (read at most 64 KiB) says whether the storage is full.
func (t *storageFullTransport) probe(head *http.Request) bool {
	req, err := http.NewRequestWithContext(head.Context(), http.MethodGet, head.URL.String(), nil)
	if err != nil {
		return false
	}
	req.Header = head.Header.Clone()
	resp, err := t.inner.RoundTrip(req)
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	if resp.StatusCode < 500 {
		return false
	}
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	_, ok := storageFull(body)
	return ok
}

// storageFull reports whether a registry's error body says its storage
// is full, and returns the detail that says so.
func storageFull(body []byte) (any, bool) {
	var doc struct {
		Errors []struct {
			Detail any `json:"detail"`
		} `json:"errors"`
	}
	if json.Unmarshal(body, &doc) == nil {
		for _, e := range doc.Errors {
			switch d := e.Detail.(type) {
			case string:
				if strings.Contains(strings.ToLower(d), "no space left on device") {
					return d, true
				}
			case map[string]any:
				if enospc(d, 0) {
					return d, true
				}
			}
		}
	}
	if strings.Contains(strings.ToLower(string(body)), "no space left on device") {
		return nil, true
	}
	return nil, false
}

// enospc looks for "Err": 28 in an error detail and the errors it
// encloses: distribution's storage drivers wrap the operating system's
// error ({"DriverName":"filesystem","Enclosed":{"Op":"write",...,"Err":28}},
// storagedriver.Error), so it is rarely at the top.
func enospc(d map[string]any, depth int) bool {
	if n, ok := d["Err"].(float64); ok && n == errnoENOSPC {
		return true
	}
	if depth >= 8 {
		return false
	}
	for _, v := range d {
		if m, ok := v.(map[string]any); ok && enospc(m, depth+1) {
			return true
		}
	}
	return false
}

// explained is resp with a registry error document saying that the
// storage of host is full (with detail, the registry's own, when known).
func explained(resp *http.Response, host string, detail any) *http.Response {
	if resp.Body != nil {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
		resp.Body.Close()
	}
	e := map[string]any{"code": "UNKNOWN", "message": StorageFullMessage(host)}
	if detail != nil {
		e["detail"] = detail
	}
	b, _ := json.Marshal(map[string]any{"errors": []any{e}})
	resp.Body = io.NopCloser(bytes.NewReader(b))
	resp.ContentLength = int64(len(b))
	resp.Header = resp.Header.Clone()
	resp.Header.Set("Content-Type", "application/json")
	resp.Header.Set("Content-Length", fmt.Sprint(len(b)))
	return resp
}
