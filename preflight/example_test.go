package preflight_test

import (
	"archive/tar"
	"bytes"
	"context"
	"fmt"
	"io"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/oslayer/oslayer/preflight"
)

// motdCheck is the check from the package documentation: one type, and one
// line in the list of checks.
type motdCheck struct{}

func (motdCheck) Name() string                 { return "motd" }
func (motdCheck) Severity() preflight.Severity { return preflight.Warning }
func (motdCheck) Needs() preflight.Needs       { return preflight.NeedAdded }
func (c motdCheck) Run(_ context.Context, t *preflight.Target) ([]preflight.Finding, error) {
	var out []preflight.Finding
	for _, l := range t.Added {
		for _, e := range l.Entries {
			if e.Path == "etc/motd" {
				out = append(out, l.Finding(c, c.Severity(), e.Path, "etc/motd is replaced on every boot; use etc/motd.d/"))
			}
		}
	}
	return out, nil
}

func layerOf(files map[string]string) v1.Layer {
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	for n, c := range files {
		tw.WriteHeader(&tar.Header{Name: n, Mode: 0o644, Size: int64(len(c)), Typeflag: tar.TypeReg})
		tw.Write([]byte(c))
	}
	tw.Close()
	l, _ := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b.Bytes())), nil })
	return l
}

func Example_customCheck() {
	base, _ := mutate.Append(empty.Image, mutate.Addendum{Layer: layerOf(map[string]string{"usr/lib/os-release": "ID=fedora\n"})})
	cf, _ := base.ConfigFile()
	cf.Architecture, cf.OS = "amd64", "linux"
	cf.Config.Labels = map[string]string{"containers.bootc": "1"}
	base, _ = mutate.ConfigFile(base, cf)
	img, _ := mutate.Append(base, mutate.Addendum{Layer: layerOf(map[string]string{"etc/motd": "hello\n"})})

	rep, err := preflight.Run(context.Background(),
		preflight.Target{Image: img, Ref: "example", Base: base, BaseRef: "base"},
		preflight.Options{Checks: append(preflight.Default(), motdCheck{})})
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, f := range rep.Findings {
		fmt.Println(f.Check, f.Severity, f.Path, "-", f.Message)
	}
	fmt.Println(rep.Result)
	// Output:
	// motd warning etc/motd - etc/motd is replaced on every boot; use etc/motd.d/
	// passed
}
