package publish

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// counter counts one Write's transfers. It sits below go-containerregistry's
// retry and auth transports (counting, for the requests whose context
// carries it): it sees every attempt that reaches the target repository
// and counts what was really transferred.
type counter struct {
	// prefix is "/v2/REPOSITORY/" of the target.
	prefix   string
	host     string
	manifest v1.Hash
	sizes    map[v1.Hash]int64
	log      *slog.Logger

	mu sync.Mutex
	// uploaded: request body bytes of PATCH and PUT (and POST to the
	// target repository) that were answered with 2xx; failed attempts are
	// not counted.
	uploaded int64
	// skipped: blobs the target had (HEAD 200).
	skipped int64
	// mounted: blobs mounted from another repository (POST ?mount 201).
	mounted int64
	// blobPuts counts completed blob uploads; manifestExists is set when a
	// HEAD of the manifest by digest found it.
	blobPuts       int
	manifestExists bool
	seen           map[v1.Hash]bool
}

func newCounter(host, repo string, manifest v1.Hash, sizes map[v1.Hash]int64, log *slog.Logger) *counter {
	return &counter{host: host, prefix: "/v2/" + repo + "/", manifest: manifest, sizes: sizes, log: log, seen: map[v1.Hash]bool{}}
}

type countingBody struct {
	rc io.ReadCloser
	n  int64
	mu sync.Mutex
}

func (c *countingBody) Read(b []byte) (int, error) {
	n, err := c.rc.Read(b)
	c.mu.Lock()
	c.n += int64(n)
	c.mu.Unlock()
	return n, err
}

func (c *countingBody) Close() error { return c.rc.Close() }

func (c *countingBody) count() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n
}

type counterKey struct{}

type resendKey struct{}

// resendable marks a request whose body the session's innermost transport
// takes anew from its GetBody when the retry transport sends it again.
func resendable(ctx context.Context) context.Context {
	return context.WithValue(ctx, resendKey{}, new(atomic.Int32))
}

// withCounter makes the requests sent under ctx counted by c.
func withCounter(ctx context.Context, c *counter) context.Context {
	return context.WithValue(ctx, counterKey{}, c)
}

// counting is a session's innermost transport: a request whose context
// carries a counter (withCounter) goes through it, the others straight to
// the inner transport.
type counting struct{ inner http.RoundTripper }

func (t counting) RoundTrip(req *http.Request) (*http.Response, error) {
	if rw, ok := req.Context().Value(resendKey{}).(*atomic.Int32); ok && req.GetBody != nil && rw.Add(1) > 1 {
		// The retry transport above sends the same request again: its
		// body must start over.
		body, err := req.GetBody()
		if err != nil {
			return nil, err
		}
		req = req.Clone(req.Context())
		req.Body = body
	}
	if c, ok := req.Context().Value(counterKey{}).(*counter); ok && c != nil {
		return c.roundTrip(t.inner, req)
	}
	return t.inner.RoundTrip(req)
}

// roundTrip sends req through inner and counts it.
func (c *counter) roundTrip(inner http.RoundTripper, req *http.Request) (*http.Response, error) {
	ours := req.URL.Host == c.host && strings.HasPrefix(req.URL.Path, c.prefix)
	req, sent := countedRequest(req, ours)
	resp, err := inner.RoundTrip(req)
	if err != nil {
		return resp, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		c.uploaded += sent()
	}
	if ours {
		c.record(req, strings.TrimPrefix(req.URL.Path, c.prefix), resp.StatusCode)
	}
	return resp, nil
}

// countedRequest returns req with its body counted when it uploads, and
// the function that says how many bytes the last attempt sent. Blob data
// goes in PATCH and PUT bodies, possibly to a storage host the registry
// redirects uploads to; token requests (GET/POST to the auth realm) are
// not uploads.
func countedRequest(req *http.Request, ours bool) (*http.Request, func() int64) {
	sends := req.Method == http.MethodPatch || req.Method == http.MethodPut || (ours && req.Method == http.MethodPost)
	if !sends || req.Body == nil || req.Body == http.NoBody {
		return req, func() int64 { return 0 }
	}
	r2 := req.Clone(req.Context())
	body := &countingBody{rc: req.Body}
	r2.Body = body
	if req.GetBody != nil {
		get := req.GetBody
		r2.GetBody = func() (io.ReadCloser, error) {
			rc, err := get()
			if err != nil {
				return nil, err
			}
			body = &countingBody{rc: rc}
			return body, nil
		}
	}
	return r2, func() int64 { return body.count() }
}

// record counts a request to the target repository (rest is its path
// under /v2/REPOSITORY/) that was answered with status; c.mu is held.
func (c *counter) record(req *http.Request, rest string, status int) {
	switch {
	case req.Method == http.MethodHead && strings.HasPrefix(rest, "blobs/") && status == http.StatusOK:
		c.blobThere(strings.TrimPrefix(rest, "blobs/"))
	case req.Method == http.MethodHead && rest == "manifests/"+c.manifest.String() && status == http.StatusOK:
		c.manifestExists = true
	case req.Method == http.MethodPost && strings.HasPrefix(rest, "blobs/uploads") && status == http.StatusCreated:
		c.blobMounted(req.URL.RawQuery)
	case req.Method == http.MethodPut && strings.HasPrefix(rest, "blobs/uploads/") && status == http.StatusCreated:
		c.blobUploaded(req.URL.RawQuery)
	}
}

// blobThere counts the blob digest a HEAD found in the target.
func (c *counter) blobThere(digest string) {
	if h, err := v1.NewHash(digest); err == nil && !c.seen[h] {
		c.seen[h] = true
		c.skipped += c.sizes[h]
		c.log.Debug("blob already in the target", "digest", h.String(), "bytes", c.sizes[h])
	}
}

// blobMounted counts the blob a POST ?mount=...&from=... mounted.
func (c *counter) blobMounted(rawQuery string) {
	q, _ := url.ParseQuery(rawQuery)
	if h, err := v1.NewHash(q.Get("mount")); err == nil && !c.seen[h] {
		c.seen[h] = true
		c.mounted += c.sizes[h]
		c.log.Debug("blob mounted", "digest", h.String(), "from", q.Get("from"), "bytes", c.sizes[h])
	}
}

// blobUploaded counts the upload a PUT ?digest=... completed.
func (c *counter) blobUploaded(rawQuery string) {
	c.blobPuts++
	q, _ := url.ParseQuery(rawQuery)
	if h, err := v1.NewHash(q.Get("digest")); err == nil {
		c.seen[h] = true
		c.log.Debug("blob uploaded", "digest", h.String(), "bytes", c.sizes[h])
	}
}

// stats returns uploaded, skipped (including mounted) and mounted bytes.
func (c *counter) stats() (uploaded, skipped, mounted int64, blobPuts int, manifestExisted bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.uploaded, c.skipped + c.mounted, c.mounted, c.blobPuts, c.manifestExists
}

// skip counts blob h as found in the target without a request (it is
// known to be there).
func (c *counter) skip(h v1.Hash) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.seen[h] {
		c.seen[h] = true
		c.skipped += c.sizes[h]
	}
}
