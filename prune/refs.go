package prune

import (
	"fmt"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// Ref is one reference to an image found in a cluster or a file.
type Ref struct {
	// Image is the reference as written (transport prefixes removed):
	// REPO@sha256:..., REPO:TAG, or a bare sha256:... digest.
	Image string `json:"image"`
	// Digest is the digest it names; zero for a tag reference.
	Digest v1.Hash `json:"-"`
	// Repo is the repository it names ("" for a bare digest); Tag the tag
	// of a tag reference.
	Repo string `json:"-"`
	Tag  string `json:"-"`
	// Kind says what it is: "PoolImage", "MachineConfig", "Node",
	// "BootcNode", "BootcNodePool", "ConfigMap", "base".
	Kind string `json:"kind"`
	// From names the object and field: "PoolImage ns/x status.builds[1].image".
	From string `json:"from"`
	// Pool is the pool the object is for, when it says.
	Pool string `json:"pool,omitempty"`
	// Time is when the image's build ended, when the object records it.
	Time time.Time `json:"-"`
	// Failed is true for the image of a failed build record.
	Failed bool `json:"-"`
}

// Refs are the references of one collection, indexed by digest.
type Refs struct {
	List     []Ref
	byDigest map[v1.Hash][]int
}

// add appends r and indexes it.
func (rs *Refs) add(r Ref) {
	if rs.byDigest == nil {
		rs.byDigest = map[v1.Hash][]int{}
	}
	rs.List = append(rs.List, r)
	if r.Digest != (v1.Hash{}) {
		rs.byDigest[r.Digest] = append(rs.byDigest[r.Digest], len(rs.List)-1)
	}
}

// Of returns the references naming digest d.
func (rs *Refs) Of(d v1.Hash) []Ref {
	if rs == nil {
		return nil
	}
	out := make([]Ref, 0, len(rs.byDigest[d]))
	for _, i := range rs.byDigest[d] {
		out = append(out, rs.List[i])
	}
	return out
}

// Tagged returns the tag references (no digest).
func (rs *Refs) Tagged() []Ref {
	var out []Ref
	for _, r := range rs.List {
		if r.Digest == (v1.Hash{}) && r.Tag != "" {
			out = append(out, r)
		}
	}
	return out
}

// transports are the prefixes nodes write before a registry reference.
var transports = []string{
	"ostree-image-signed:docker://", "ostree-unverified-registry:", "ostree-unverified-image:docker://",
	"ostree-remote-image:", "docker://",
}

// stripTransport removes a node transport prefix ("ostree-unverified-registry:",
// "ostree-image-signed:docker://", "docker://") from s.
func stripTransport(s string) string {
	for _, p := range transports {
		if strings.HasPrefix(s, p) {
			s = strings.TrimPrefix(s, p)
			if i := strings.Index(s, "docker://"); p == "ostree-remote-image:" && i >= 0 {
				s = s[i+len("docker://"):]
			}
			return s
		}
	}
	return s
}

// parseRef reads an image reference value: a digested or tagged registry
// reference, or a bare "sha256:HEX" digest.
func parseRef(v string) (Ref, error) {
	s := strings.TrimSpace(stripTransport(v))
	if s == "" {
		return Ref{}, fmt.Errorf("empty image reference")
	}
	if strings.HasPrefix(s, "sha256:") {
		h, err := v1.NewHash(s)
		if err != nil {
			return Ref{}, fmt.Errorf("invalid digest %q: %v", v, err)
		}
		return Ref{Image: s, Digest: h}, nil
	}
	r, err := name.ParseReference(s, name.WeakValidation)
	if err != nil {
		return Ref{}, fmt.Errorf("invalid image reference %q: %v", v, err)
	}
	out := Ref{Image: s, Repo: r.Context().Name()}
	switch t := r.(type) {
	case name.Digest:
		if out.Digest, err = v1.NewHash(t.DigestStr()); err != nil {
			return Ref{}, fmt.Errorf("invalid digest in %q: %v", v, err)
		}
	case name.Tag:
		out.Tag = t.TagStr()
	}
	return out, nil
}
