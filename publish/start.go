package publish

import (
	"context"
	"slices"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// started is what Start began for the next Write: the session to the
// target (its ping and token) and the look at the tag.
type started struct {
	done  chan struct{}
	pulls []name.Repository
	s     *session
	err   error
	// tag and tagErr are the answer to the look at the tag.
	tag    *v1.Descriptor
	tagErr error
}

// Start implements assemble.Starter: it connects to the target registry
// and looks at the tag in the background, while the image is built, so
// that the Write that follows begins with both done (across a WAN, the
// ping, the token and the look are round trips a build would otherwise
// wait for; an unchanged rebuild's two requests then overlap the
// build). Only reads are sent; the first may stand for the ping
// (lookFirst). base is the base's reference, whence the
// Write mounts (the token's scopes). A layout target starts nothing.
func (p *Publisher) Start(ctx context.Context, base string) {
	if p.tag == nil {
		return
	}
	st := &started{done: make(chan struct{}), pulls: p.mountHintOf(p.tag.Context(), base)}
	p.mu.Lock()
	p.started = st
	p.mu.Unlock()
	go func() {
		defer close(st.done)
		looked, err := p.lookFirst(ctx, st)
		if err != nil {
			st.err = err
			return
		}
		st.s, st.err = p.connect(ctx, st.pulls)
		if st.err != nil || looked {
			return
		}
		st.tag, st.tagErr = remote.Head(*p.tag, st.s.remoteOptions(ctx)...)
	}()
}

// takeStarted returns what Start began, once it ended, for a Write that
// mounts from pulls; nil when nothing was started, or when it was for
// other repositories (the Write then connects itself).
func (p *Publisher) takeStarted(pulls []name.Repository) *started {
	p.mu.Lock()
	st := p.started
	p.started = nil
	p.mu.Unlock()
	if st == nil {
		return nil
	}
	<-st.done
	if !slices.EqualFunc(st.pulls, pulls, func(a, b name.Repository) bool { return a.Name() == b.Name() }) {
		return nil
	}
	return st
}
