package pipeline

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"hash"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"

	"github.com/oslayer/oslayer/internal/registry"
	"github.com/oslayer/oslayer/preflight"
	"github.com/oslayer/oslayer/publish"
)

// Identity is the identity of what the specification publishes, known
// before anything is fetched or rendered: every field that changes the
// published image, its checks or its signature (Spec.writeSettings),
// and the input documents by content, not by path. It leaves out the
// pool's name and the target's tag: specifications that differ only
// there may render alike and then share one image (under each tag).
// Reading the input files is all it costs. Two specifications that
// differ in the signing key or identity, the referrer mode, a preflight
// option, the platforms, the base, ... never have one identity.
func (s Spec) Identity() string {
	h := sha256.New()
	s.writeSettings(h)
	in := s.Inputs
	for _, list := range [][]string{in.OSCs, in.MachineConfigs, in.MachineConfigPools, {in.SecretsDir}} {
		h.Write([]byte("\n--"))
		for _, path := range list {
			hashTree(h, path)
		}
	}
	return hex.EncodeToString(h.Sum(nil))
}

// writeSettings adds to h every field of the specification that changes
// the published result besides the input documents: the target's
// repository, the base as given, the platforms, the base index mode, how
// the inputs are rendered (bakeSecrets, strict, allowTopLevel, the
// epoch), the package stage's inputs, every preflight option (with its
// defaults) and the signing key (by content), referrer mode and
// identity. Left out because they change no published byte: the pool's
// name (the render covers it), the target's tag, the registry options,
// the index cache, the imageRef bounds and the key's password.
func (s Spec) writeSettings(h hash.Hash) {
	pf := s.Preflight
	if pf.MaxAddedBytes == 0 {
		pf.MaxAddedBytes = preflight.DefaultMaxAddedBytes
	}
	in := s.Inputs
	b, _ := json.Marshal([]any{repository(s.Target), s.Base, s.Arch.Normalized(), mode(s.BaseIndex),
		in.BakeSecrets, in.Strict, in.AllowTopLevel, in.Epoch.Unix(), pf, signingIdentity(s.Signing)})
	h.Write(b)
	if pk := s.Packages; pk != nil {
		b, _ := json.Marshal([]any{pk.Containerfile, pk.BuildArgs, pk.Repos})
		h.Write(b)
		h.Write([]byte("\n--context"))
		hashTree(h, pk.ContextDir)
		ids := make([]string, 0, len(pk.Secrets))
		for id := range pk.Secrets {
			ids = append(ids, id)
		}
		sort.Strings(ids)
		for _, id := range ids {
			fmt.Fprintf(h, "\n--secret %s", id)
			hashTree(h, pk.Secrets[id])
		}
	}
}

// signingIdentity is what of Signing changes the published signature.
func signingIdentity(g *Signing) []any {
	if g == nil {
		return nil
	}
	key := ""
	if g.Key != nil {
		key = fmt.Sprintf("%x", sha256.Sum256(g.Key.PEM))
	}
	return []any{key, g.Referrers, g.Identity}
}

// repository is the target's repository (a layout's directory), as
// given when it does not parse (New refuses it).
func repository(target string) string {
	if registry.IsLayout(target) {
		dir, _, err := registry.SplitLayout(target)
		if err == nil {
			return registry.LayoutPrefix + dir
		}
		return target
	}
	if t, err := publish.ParseTarget(target); err == nil {
		return t.Context().Name()
	}
	return target
}

// hashTree adds the content of a file, or of every regular file (and
// symlink target) under a directory, by relative path in lexical order,
// to h; an unreadable path adds its error (the build reports it).
func hashTree(h io.Writer, root string) {
	if root == "" {
		return
	}
	add := func(rel, path string) {
		b, err := os.ReadFile(path)
		if err != nil {
			fmt.Fprintf(h, "\n%s error %v", rel, err)
			return
		}
		fmt.Fprintf(h, "\n%s %x", rel, sha256.Sum256(b))
	}
	st, err := os.Stat(root)
	if err != nil {
		fmt.Fprintf(h, "\nerror %v", err)
		return
	}
	if !st.IsDir() {
		add(".", root)
		return
	}
	_ = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			fmt.Fprintf(h, "\n%s error %v", path, err)
			return nil
		}
		if d.Type().IsRegular() || d.Type()&fs.ModeSymlink != 0 {
			rel, _ := filepath.Rel(root, path)
			add(rel, path)
		}
		return nil
	})
}
