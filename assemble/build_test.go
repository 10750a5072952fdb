package assemble

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/oslayer/oslayer/render"
)

type fakePub struct {
	calls   []string
	failOn  string
	written *Built
}

func (f *fakePub) Write(ctx context.Context, b *Built) (*Published, error) {
	f.calls = append(f.calls, "write")
	if f.failOn == "write" {
		return nil, errors.New("registry said 500")
	}
	f.written = b
	return &Published{Ref: "oci:out@" + b.Digest.String(), Uploaded: 10, Skipped: 20, Mounted: 5}, nil
}

func (f *fakePub) Commit(ctx context.Context, b *Built, p *Published) error {
	f.calls = append(f.calls, "commit")
	return nil
}

type fakeStage struct {
	name string
	pub  *fakePub
	err  error
}

func (s *fakeStage) Name() string { return s.name }
func (s *fakeStage) Run(ctx context.Context, b *Built, p *Published) (any, error) {
	s.pub.calls = append(s.pub.calls, s.name)
	if s.err != nil {
		return nil, s.err
	}
	return map[string]string{"checked": b.Digest.String()}, nil
}

// preStage is a fakeStage that runs before the write.
type preStage struct{ fakeStage }

func (*preStage) PreWrite() bool { return true }

func (s *preStage) Run(ctx context.Context, b *Built, p *Published) (any, error) {
	if p != nil {
		return nil, errors.New("a pre-write stage got a written image")
	}
	return s.fakeStage.Run(ctx, b, p)
}

// TestPreWriteStages: stages that need only the content run before the
// image is written, so one that fails leaves the publisher untouched.
func TestPreWriteStages(t *testing.T) {
	ctx := context.Background()
	ref := layoutBase(t, synthBase(t))
	for _, tc := range []struct {
		name      string
		err       error
		wantCalls string
	}{
		{name: "pass", wantCalls: "content,write,written,sign,commit"},
		{name: "fail", err: errors.New("secret in layer"), wantCalls: "content"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pub := &fakePub{}
			res, err := Build(ctx, Request{Render: render.Request{Pool: "worker"}, render: fixedRenderer(rendered(t), nil), Base: ref}, pub,
				&fakeStage{name: "written", pub: pub}, &preStage{fakeStage{name: "content", pub: pub, err: tc.err}}, &fakeStage{name: "sign", pub: pub})
			if got := strings.Join(pub.calls, ","); got != tc.wantCalls {
				t.Errorf("calls %q, want %q", got, tc.wantCalls)
			}
			if tc.err != nil {
				if err == nil || !strings.HasPrefix(err.Error(), "content: secret in layer") || res.Tagged || pub.written != nil {
					t.Fatalf("err %v, result %+v", err, res)
				}
				return
			}
			if err != nil || !res.Tagged || res.Stages["content"] == nil || res.Stages["written"] == nil {
				t.Fatalf("err %v, result %+v", err, res)
			}
		})
	}
}

func fixedRenderer(r *render.Result, err error) renderFunc {
	return func(ctx context.Context, req render.Request) (*render.Result, error) { return r, err }
}

func TestBuildOrderAndResult(t *testing.T) {
	ctx := context.Background()
	ref := layoutBase(t, synthBase(t))
	pub := &fakePub{}
	r := rendered(t)
	res, err := Build(ctx, Request{Render: render.Request{Pool: "worker"}, render: fixedRenderer(r, nil), Base: ref},
		pub, &fakeStage{name: "preflight", pub: pub}, nil, &fakeStage{name: "sign", pub: pub})
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(pub.calls, ","); got != "write,preflight,sign,commit" {
		t.Errorf("calls %s", got)
	}
	if !res.Tagged || res.Image != "oci:out@"+res.Digest.String() || res.Digest != pub.written.Digest {
		t.Errorf("result %+v", res)
	}
	if res.BytesUploaded != 10 || res.BytesSkipped != 20 || res.BytesMounted != 5 || len(res.Layers) != 2 || res.Base.Ref != ref {
		t.Errorf("result %+v", res)
	}
	var names []string
	for _, p := range res.Phases {
		names = append(names, p.Name)
	}
	if strings.Join(names, ",") != "base,base-index,render,assemble,push,preflight,sign,tag" {
		t.Errorf("phases %v", names)
	}
	if res.Stages["preflight"] == nil || res.Stages["sign"] == nil {
		t.Errorf("stages %v", res.Stages)
	}
}

func TestBuildStopsBeforeTag(t *testing.T) {
	ctx := context.Background()
	ref := layoutBase(t, synthBase(t))
	for _, tc := range []struct {
		name, failOn, wantErr, wantCalls string
		renderErr                        error
		stageErr                         error
		base                             string
		exact                            bool
	}{
		{name: "render", renderErr: errors.New("bad OSC"), wantErr: "render: bad OSC", wantCalls: ""},
		{name: "base", base: "oci:/nonexistent/base", wantErr: "base oci:/nonexistent/base", wantCalls: ""},
		{name: "push", failOn: "write", wantErr: "push: registry said 500", wantCalls: "write"},
		{name: "preflight", stageErr: errors.New("no kernel"), wantErr: "preflight: no kernel", wantCalls: "write,preflight"},
		// A stage that already names itself is not named twice.
		{name: "self-named", stageErr: errors.New("preflight: 2 errors"), wantErr: "preflight: 2 errors", wantCalls: "write,preflight", exact: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pub := &fakePub{failOn: tc.failOn}
			base := ref
			if tc.base != "" {
				base = tc.base
			}
			res, err := Build(ctx, Request{Render: render.Request{Pool: "worker"}, render: fixedRenderer(rendered(t), tc.renderErr), Base: base},
				pub, &fakeStage{name: "preflight", pub: pub, err: tc.stageErr}, &fakeStage{name: "sign", pub: pub})
			if err == nil || !strings.HasPrefix(err.Error(), tc.wantErr) {
				t.Fatalf("error %v, want prefix %q", err, tc.wantErr)
			}
			if tc.exact && err.Error() != tc.wantErr {
				t.Fatalf("error %q, want exactly %q", err, tc.wantErr)
			}
			if got := strings.Join(pub.calls, ","); got != tc.wantCalls {
				t.Errorf("calls %q, want %q", got, tc.wantCalls)
			}
			if res == nil || res.Tagged || res.Error != err.Error() {
				t.Errorf("result %+v", res)
			}
		})
	}
}

func TestBuildBaseFromOSImageURL(t *testing.T) {
	ctx := context.Background()
	ref := layoutBase(t, synthBase(t))
	r := rendered(t)
	r.OSImageURL = ref
	pub := &fakePub{}
	res, err := Build(ctx, Request{Render: render.Request{Pool: "worker"}, render: fixedRenderer(r, nil)}, pub)
	if err != nil {
		t.Fatal(err)
	}
	if res.Base.Ref != ref {
		t.Errorf("base %s, want %s", res.Base.Ref, ref)
	}
	r.OSImageURL = ""
	_, err = Build(ctx, Request{Render: render.Request{Pool: "worker"}, render: fixedRenderer(r, nil)}, &fakePub{})
	if err == nil || !strings.Contains(err.Error(), "no base image") {
		t.Errorf("no base: %v", err)
	}
}

// A controller builds many pools in one process on one resolved base.
func TestBuildManyPoolsConcurrently(t *testing.T) {
	ctx := context.Background()
	base, err := ResolveBase(ctx, layoutBase(t, synthBase(t)), nil, "")
	if err != nil {
		t.Fatal(err)
	}
	r := rendered(t) // shared, read-only
	const n = 8
	digests := make([]string, n)
	errs := make(chan error, n)
	for i := range n {
		go func() {
			pub := &fakePub{}
			pool := "pool-" + string(rune('a'+i%4))
			res, err := Build(ctx, Request{Render: render.Request{Pool: pool}, render: fixedRenderer(r, nil), Prepared: []Input{{Base: base}}}, pub)
			if err == nil {
				digests[i] = res.Digest.String()
			}
			errs <- err
		}()
	}
	for range n {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	for i := range n {
		if digests[i] != digests[i%4] {
			t.Errorf("pool %d: %s, same pool built %s", i, digests[i], digests[i%4])
		}
		if i > 0 && i < 4 && digests[i] == digests[0] {
			t.Errorf("pools a and %c share digest %s", 'a'+i, digests[i])
		}
	}
}
