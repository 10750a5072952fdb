package publish

import (
	"context"
	"errors"
	"net/http"
	"strconv"

	"github.com/google/go-containerregistry/pkg/authn"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/oslayer/oslayer/internal/registry"
)

// lookFirst looks at the tag without credentials before the session is
// opened, in place of the registry's ping (registry.Options.FirstLook),
// when oslayer has no credentials for the target and the registry was not
// pinged yet in this run: the session's ping is then answered from what
// the look learnt, and when the registry answered the look itself (200 or
// 404; not 401, which asks for a token first) that answer is the look at
// the tag. It reports whether st holds the look's answer. Across a WAN
// this saves the ping's request and round trip. A registry that did not
// answer the look within the deadline is the error (the ping would cost the
// deadline again); after any other failure the session is opened as
// without the look (its ping and look are retried).
func (p *Publisher) lookFirst(ctx context.Context, st *started) (bool, error) {
	if !p.anonymous(ctx) {
		return false, nil
	}
	req, err := registry.NewFirstLook(ctx, p.tag.RegistryStr(), p.tag.RepositoryStr(), p.tag.TagStr())
	if err != nil {
		return false, nil
	}
	if p.reg.UserAgent != "" {
		req.Header.Set("User-Agent", p.reg.UserAgent)
	}
	resp, err := p.reg.FirstLook(req)
	if stall := new(registry.StallError); errors.As(err, &stall) {
		return false, err
	}
	if err != nil {
		return false, nil
	}
	defer resp.Body.Close()
	switch resp.StatusCode {
	case http.StatusOK:
		desc, err := headDescriptor(resp)
		if err != nil {
			return false, nil
		}
		st.tag = desc
	case http.StatusNotFound:
		st.tagErr = transport.CheckError(resp, http.StatusOK)
	default:
		return false, nil
	}
	return true, nil
}

// anonymous reports whether oslayer has no credentials for the target
// repository.
func (p *Publisher) anonymous(ctx context.Context) bool {
	kc := p.reg.Keychain
	if kc == nil {
		kc = authn.DefaultKeychain
	}
	auth, err := authn.Resolve(ctx, kc, p.tag.Context())
	if err != nil {
		return false
	}
	cfg, err := auth.Authorization()
	return err == nil && *cfg == authn.AuthConfig{}
}

// headDescriptor is the manifest a HEAD's answer describes, as
// go-containerregistry's remote.Head reads it from the headers.
func headDescriptor(resp *http.Response) (*v1.Descriptor, error) {
	d, err := v1.NewHash(resp.Header.Get("Docker-Content-Digest"))
	if err != nil {
		return nil, err
	}
	size, err := strconv.ParseInt(resp.Header.Get("Content-Length"), 10, 64)
	if err != nil {
		return nil, err
	}
	mt := resp.Header.Get("Content-Type")
	if mt == "" {
		return nil, errors.New("no Content-Type")
	}
	return &v1.Descriptor{Digest: d, Size: size, MediaType: types.MediaType(mt)}, nil
}
