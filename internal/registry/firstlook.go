package registry

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/url"
)

// ErrNoFirstLook is FirstLook's answer when the registry's ping costs
// nothing already (answered in this run) or cannot be remembered (the
// calls share no Connections): nothing was sent.
var ErrNoFirstLook = errors.New("no first look: the ping is answered already or not shared")

// FirstLook sends req, an anonymous read of a registry (a HEAD or a GET of
// a repository's manifest), in place of that registry's ping: the first
// request of a run to a registry is otherwise a ping (an anonymous GET
// /v2/, which go-containerregistry sends before anything else to learn the
// authentication scheme), a round trip of its own across a WAN. The look's
// answer stands for the ping's in this run's Connections:
//
//   - 401 carries the challenge the ping would have (the realm and service
//     where tokens come from; go-containerregistry asks for its own scopes),
//     and is remembered as the ping's answer;
//   - 200 or 404 shows that the registry answers reads without
//     authentication, as a ping answered 200 would; that is remembered.
//     Only a caller with no credentials for the registry may ask: with
//     credentials, a registry that serves anonymous reads may still want
//     them for writes, which only the ping's challenge says;
//   - any other answer is not remembered (the ping is sent as before).
//
// The scheme follows go-containerregistry's rule: HTTPS, and for a host it
// may reach over plain HTTP (loopback, private, Options.Insecure) HTTP at
// the same time, the first registry answer taken (a port speaks one of
// them); a failed HTTPS try is then remembered as the ping's would be.
// req's URL names the host; its scheme is set here. The answer's body is
// the caller's to close. ErrNoFirstLook: nothing sent.
func (o *Options) FirstLook(req *http.Request) (*http.Response, error) {
	if o.Shared == nil {
		return nil, ErrNoFirstLook
	}
	p := &o.Shared.pings
	host := req.URL.Host
	if p.known("https://"+host) || p.known("http://"+host) {
		return nil, ErrNoFirstLook
	}
	rt := o.RoundTripper(nil)
	if !fallsBack(host, o.IsInsecure) {
		resp, err := sendAs(rt, req, "https")
		if err == nil {
			p.learn("https://"+host, resp)
		}
		return resp, err
	}
	return firstLookEither(rt, p, req)
}

// firstLookEither sends req over HTTPS and plain HTTP at once and returns
// the first answer a registry gives (200, 401, 404; a port that speaks
// one scheme cannot give one over the other), remembered as the ping's
// answer, and the HTTPS failure too when HTTP answered. Without such an
// answer it returns the HTTP one (or its error) once both are in.
func firstLookEither(rt http.RoundTripper, p *pings, req *http.Request) (*http.Response, error) {
	answers := make(chan lookAnswer, 2)
	for _, scheme := range []string{"https", "http"} {
		go func() {
			resp, err := sendAs(rt, req, scheme)
			answers <- lookAnswer{scheme, resp, err}
		}()
	}
	host := req.URL.Host
	first := <-answers
	if first.registry() {
		p.learn(first.scheme+"://"+host, first.resp)
		go func() {
			other := <-answers
			drain(other.resp)
			if first.scheme == "http" && other.err != nil {
				p.refuse(host, other.err)
			}
		}()
		return first.resp, nil
	}
	second := <-answers
	if second.registry() {
		p.learn(second.scheme+"://"+host, second.resp)
		if second.scheme == "http" && first.err != nil {
			p.refuse(host, first.err)
		}
		drain(first.resp)
		return second.resp, nil
	}
	secure, plain := first, second
	if plain.scheme == "https" {
		secure, plain = plain, secure
	}
	drain(secure.resp)
	return plain.resp, plain.err
}

// lookAnswer is a first look's answer over one scheme.
type lookAnswer struct {
	scheme string
	resp   *http.Response
	err    error
}

// registry reports whether the answer is one a registry gives to a read
// (200, 401, 404), which FirstLook remembers.
func (a lookAnswer) registry() bool {
	return a.err == nil && registryAnswer(a.resp.StatusCode)
}

// registryAnswer reports whether a read's answer is one FirstLook
// remembers.
func registryAnswer(code int) bool {
	return code == http.StatusOK || code == http.StatusUnauthorized || code == http.StatusNotFound
}

// sendAs sends a copy of req over scheme.
func sendAs(rt http.RoundTripper, req *http.Request, scheme string) (*http.Response, error) {
	u := *req.URL
	u.Scheme = scheme
	r := req.Clone(req.Context())
	r.URL = &u
	r.Host = ""
	return rt.RoundTrip(r)
}

// drain closes an unused answer.
func drain(resp *http.Response) {
	if resp != nil {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxPingBody))
		resp.Body.Close()
	}
}

// known reports whether the registry at key ("scheme://host") answered a
// ping in this run.
func (p *pings) known(key string) bool {
	a := p.answer(key)
	if !a.mu.TryLock() {
		return true // a ping is under way
	}
	defer a.mu.Unlock()
	return a.known || a.refused
}

// learn remembers resp, an anonymous read's answer (FirstLook), as the ping
// answer of key ("scheme://host"): 401 with its challenge, 200 for 200 or
// 404; other answers are not remembered.
func (p *pings) learn(key string, resp *http.Response) {
	status := resp.StatusCode
	switch status {
	case http.StatusNotFound:
		status = http.StatusOK
	case http.StatusOK, http.StatusUnauthorized:
	default:
		return
	}
	a := p.answer(key)
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.known {
		return
	}
	header := http.Header{}
	if status == http.StatusUnauthorized {
		for _, v := range resp.Header.Values("WWW-Authenticate") {
			header.Add("WWW-Authenticate", v)
		}
	}
	a.known, a.status, a.header, a.body = true, status, header, nil
}

// refuse remembers err, the failure of a read sent over HTTPS to host,
// whose HTTP read was answered: go-containerregistry's HTTPS ping fails
// with it at once and its HTTP ping is answered from memory.
func (p *pings) refuse(host string, err error) {
	a := p.answer("https://" + host)
	a.mu.Lock()
	defer a.mu.Unlock()
	if !a.known {
		a.failed, a.refused = err, true
	}
}

// NewFirstLook is an anonymous HEAD of repo's manifest ref at host
// accepting every manifest type go-containerregistry reads, for FirstLook.
func NewFirstLook(ctx context.Context, host, repo, ref string) (*http.Request, error) {
	u := url.URL{Scheme: "https", Host: host, Path: "/v2/" + repo + "/manifests/" + ref}
	req, err := http.NewRequestWithContext(ctx, http.MethodHead, u.String(), nil)
	if err != nil {
		return nil, err
	}
	for _, mt := range manifestTypes {
		req.Header.Add("Accept", mt)
	}
	return req, nil
}

// manifestTypes are the manifest media types go-containerregistry's
// remote.Head accepts: a registry answers a look at a tag with another
// type's manifest as unknown.
var manifestTypes = []string{
	"application/vnd.oci.image.manifest.v1+json",
	"application/vnd.docker.distribution.manifest.v2+json",
	"application/vnd.oci.image.index.v1+json",
	"application/vnd.docker.distribution.manifest.list.v2+json",
	"application/vnd.docker.distribution.manifest.v1+json",
	"application/vnd.docker.distribution.manifest.v1+prettyjws",
}
