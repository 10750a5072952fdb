package packagestage

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"hash"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/oslayer/oslayer/assemble"
)

// LabelKey is the label on a package base that records its key; a cached
// package base is used only when this label equals the key computed for the
// build.
const LabelKey = assemble.LabelPrefix + "package-key"

// keyVersion changes whenever the key's encoding or the generated steps'
// meaning change, so that no older package base is taken for a newer one.
const keyVersion = "oslayer package stage v1"

// Key identifies a package base by its inputs.
type Key struct {
	sum [sha256.Size]byte
}

// String is "sha256:HEX".
func (k Key) String() string { return "sha256:" + hex.EncodeToString(k.sum[:]) }

// Tag is the tag the package base is pushed under: "packages-HEX".
func (k Key) Tag() string { return "packages-" + hex.EncodeToString(k.sum[:]) }

// Plan is a planned package stage: the Containerfile to build and its key.
type Plan struct {
	Containerfile *Containerfile
	Key           Key
	// BaseDigest is the official base's manifest digest the key was
	// computed for; BuildArgs and Repos are passed to the build.
	BaseDigest v1.Hash
	BuildArgs  map[string]string
	Repos      map[string][]byte
	// ContextDir is the build context ("" for none).
	ContextDir string
}

// NewPlan generates the Containerfile for the inputs and computes the key
// over every package input: the base digest, the generated and the user
// Containerfile, the build arguments, every file of the context directory
// (path, type, mode and content or link target; contextDir "" for none) and
// the repository definitions. Secrets are not inputs here: they never
// change the key.
func NewPlan(baseDigest v1.Hash, in Inputs, contextDir string) (*Plan, error) {
	cf, err := Generate(in)
	if err != nil {
		return nil, err
	}
	h := sha256.New()
	field(h, "version", []byte(keyVersion))
	field(h, "base", []byte(baseDigest.String()))
	field(h, "generated", cf.Generated)
	field(h, "containerfile", cf.User)
	for _, k := range sortedKeys(in.BuildArgs) {
		field(h, "arg", []byte(k))
		field(h, "value", []byte(in.BuildArgs[k]))
	}
	for _, k := range sortedKeys(in.Repos) {
		field(h, "repo", []byte(k))
		field(h, "content", in.Repos[k])
	}
	if contextDir != "" {
		if err := hashContext(h, contextDir); err != nil {
			return nil, err
		}
	}
	p := &Plan{Containerfile: cf, BaseDigest: baseDigest, BuildArgs: in.BuildArgs, Repos: in.Repos, ContextDir: contextDir}
	h.Sum(p.Key.sum[:0])
	return p, nil
}

// field writes a named, length-prefixed field, so that no two different
// input sets encode to the same bytes.
func field(h hash.Hash, name string, data []byte) {
	var n [8]byte
	binary.BigEndian.PutUint64(n[:], uint64(len(name)))
	h.Write(n[:])
	h.Write([]byte(name))
	binary.BigEndian.PutUint64(n[:], uint64(len(data)))
	h.Write(n[:])
	h.Write(data)
}

// hashContext adds every entry below dir in lexical order: its slash path,
// type and permission bits, and its content (regular files) or target
// (symbolic links). Modification times and owners are left out: the build
// does not see them either (COPY sets its own).
func hashContext(h hash.Hash, dir string) error {
	return filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return fmt.Errorf("build context %s: %w", dir, err)
		}
		rel, err := filepath.Rel(dir, path)
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return fmt.Errorf("build context %s: %w", dir, err)
		}
		field(h, "path", []byte(filepath.ToSlash(rel)))
		field(h, "mode", []byte(info.Mode().String()))
		switch {
		case info.Mode().IsRegular():
			sum, err := fileSHA256(path)
			if err != nil {
				return fmt.Errorf("build context: %w", err)
			}
			field(h, "content", sum)
		case info.Mode()&fs.ModeSymlink != 0:
			target, err := os.Readlink(path)
			if err != nil {
				return fmt.Errorf("build context: %w", err)
			}
			field(h, "target", []byte(target))
		case info.IsDir():
		default:
			return fmt.Errorf("build context: %s: unsupported file type %s", path, strings.TrimSpace(info.Mode().Type().String()))
		}
		return nil
	})
}

func fileSHA256(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return h.Sum(nil), nil
}
