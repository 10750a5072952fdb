package preflight

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"path"
	"strings"
	"unicode/utf8"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/oslayer/oslayer/internal/registry"
)

// ScanLimits bound the memory the added-layer scan uses. Zero values use
// the defaults in parentheses.
type ScanLimits struct {
	// SniffBytes is how much of each regular file is read to look for
	// secrets and kept for the files checks parse (64 KiB).
	SniffBytes int
	// MaxKeptBytes bounds the file contents kept over all layers (32 MiB).
	MaxKeptBytes int64
	// MaxEntries bounds the entries recorded over all layers (500000).
	MaxEntries int
}

func (l ScanLimits) withDefaults() ScanLimits {
	if l.SniffBytes <= 0 {
		l.SniffBytes = 64 << 10
	}
	if l.MaxKeptBytes <= 0 {
		l.MaxKeptBytes = 32 << 20
	}
	if l.MaxEntries <= 0 {
		l.MaxEntries = 500000
	}
	return l
}

// Entry is one tar entry of an added layer.
type Entry struct {
	// Path is the clean path without leading "/" (for a whiteout: the
	// path it removes).
	Path string
	// RawName is the name as stored in the tar when it (or the link
	// target) is not valid UTF-8; empty otherwise.
	RawName  string
	Type     byte
	Mode     int64
	UID, GID int
	Size     int64
	Linkname string
	// Whiteout marks an overlay whiteout (".wh.NAME"); Opaque an opaque
	// directory marker (".wh..wh..opq").
	Whiteout, Opaque bool
	// SELinux reports a security.selinux xattr.
	SELinux bool
	// LinkInLayer is true for a hard link whose target is an earlier entry
	// of the same layer.
	LinkInLayer bool
}

// IsDir, IsReg and IsSymlink classify the entry.
func (e *Entry) IsDir() bool     { return e.Type == tar.TypeDir }
func (e *Entry) IsReg() bool     { return e.Type == tar.TypeReg || e.Type == tar.TypeRegA }
func (e *Entry) IsSymlink() bool { return e.Type == tar.TypeSymlink }

// File is the kept (possibly truncated) content of a regular file.
type File struct {
	Data      []byte
	Truncated bool
}

// LayerContent is what the scan of one added layer yields.
type LayerContent struct {
	Index     int
	Digest    v1.Hash
	DiffID    v1.Hash
	Size      int64
	MediaType types.MediaType
	Entries   []Entry
	// Files holds the content of the files checks parse (units, kargs.d,
	// etc/hostname, etc/resolv.conf) and of files that look like secrets.
	Files map[string]File
	// Truncated is set when the entry or content limits were reached.
	Truncated bool
}

// Finding returns a finding about path in this layer.
func (l *LayerContent) Finding(c Check, sev Severity, p, msg string) Finding {
	return Finding{Check: c.Name(), Severity: sev, Layer: l.Digest.String(), Path: p, Message: msg}
}

// wantContent reports whether a check parses the file at p.
func wantContent(p string) bool {
	switch p {
	case "etc/hostname", "etc/resolv.conf":
		return true
	}
	if strings.HasPrefix(p, "usr/lib/bootc/kargs.d/") {
		return true
	}
	return isUnitPath(p)
}

// secretMarkers are substrings that make a file worth keeping for the
// secrets check.
var secretMarkers = [][]byte{
	[]byte("PRIVATE KEY-----"),
	[]byte("client-key-data"),
	[]byte("token:"),
	[]byte(`"auths"`),
	[]byte("aws_secret_access_key"),
	[]byte("service_account"),
}

func looksSecret(b []byte) bool {
	for _, m := range secretMarkers {
		if bytes.Contains(b, m) {
			return true
		}
	}
	return false
}

// Scan streams each added layer of t once (t.FirstAdded onwards) and
// records its entries and the small file contents the checks need. Its
// errors start with "preflight: ".
func Scan(ctx context.Context, t *Target, lim ScanLimits) ([]*LayerContent, error) {
	out, err := scanAdded(ctx, t, lim)
	if err != nil {
		return nil, fmt.Errorf("preflight: %w", err)
	}
	return out, nil
}

// scanAdded is Scan without its errors' prefix (Run adds it once).
func scanAdded(ctx context.Context, t *Target, lim ScanLimits) ([]*LayerContent, error) {
	lim = lim.withDefaults()
	if t.FirstAdded < 0 {
		return nil, nil
	}
	var kept int64
	entries := 0
	var out []*LayerContent
	buf := make([]byte, lim.SniffBytes)
	// Layers are looked up by digest, one at a time: base layers are never
	// even opened.
	for i := t.FirstAdded; i < len(t.Manifest.Layers); i++ {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		lc := &LayerContent{Index: i, Files: map[string]File{}}
		d := t.Manifest.Layers[i]
		lc.Digest, lc.Size, lc.MediaType = d.Digest, d.Size, d.MediaType
		if i < len(t.Config.RootFS.DiffIDs) {
			lc.DiffID = t.Config.RootFS.DiffIDs[i]
		}
		where := fmt.Sprintf("%s layer %d (%s)", orDefault(t.Ref, "candidate image"), i, lc.Digest)
		layer, err := t.Image.LayerByDigest(lc.Digest)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", where, err)
		}
		// Verified whole against its digest before it is scanned (a layout
		// blob is not checked otherwise, a registry blob only at its end).
		rc, err := registry.ReadLayer(layer, maxScanLayer)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", where, err)
		}
		err = scanTar(ctx, rc, lc, buf, &kept, &entries, lim)
		if err == nil {
			// Drain so that digest verification of remote blobs completes.
			_, err = io.Copy(io.Discard, rc)
		}
		cerr := rc.Close()
		if err == nil {
			err = cerr
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", where, err)
		}
		out = append(out, lc)
	}
	return out, nil
}

// maxScanLayer bounds an added layer preflight reads.
const maxScanLayer = 16 << 30

func scanTar(ctx context.Context, r io.Reader, lc *LayerContent, buf []byte, kept *int64, entries *int, lim ScanLimits) error {
	tr := tar.NewReader(r)
	seen := map[string]bool{}
	for n := 0; ; n++ {
		if n%1024 == 0 {
			if err := ctx.Err(); err != nil {
				return err
			}
		}
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("reading tar: %w", err)
		}
		p := cleanPath(h.Name)
		e := Entry{Path: p, Type: h.Typeflag, Mode: h.Mode, UID: h.Uid, GID: h.Gid, Size: h.Size, Linkname: h.Linkname}
		if !utf8.ValidString(h.Name) || !utf8.ValidString(h.Linkname) {
			e.RawName = h.Name
		}
		base := path.Base(p)
		switch {
		case base == ".wh..wh..opq":
			e.Opaque, e.Path = true, path.Dir(p)
		case strings.HasPrefix(base, ".wh."):
			e.Whiteout, e.Path = true, path.Join(path.Dir(p), strings.TrimPrefix(base, ".wh."))
		}
		if _, ok := h.PAXRecords["SCHILY.xattr.security.selinux"]; ok {
			e.SELinux = true
		}
		if h.Typeflag == tar.TypeLink {
			e.LinkInLayer = seen[cleanPath(h.Linkname)]
		}
		seen[p] = true
		if *entries < lim.MaxEntries {
			lc.Entries = append(lc.Entries, e)
			*entries++
		} else {
			lc.Truncated = true
		}
		if !e.IsReg() || e.Whiteout {
			continue
		}
		nr, err := io.ReadFull(tr, buf)
		if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, io.EOF) {
			return fmt.Errorf("reading %s: %w", h.Name, err)
		}
		head := buf[:nr]
		if wantContent(p) || looksSecret(head) {
			if *kept+int64(nr) > lim.MaxKeptBytes {
				lc.Truncated = true
				continue
			}
			*kept += int64(nr)
			lc.Files[p] = File{Data: bytes.Clone(head), Truncated: h.Size > int64(nr)}
		}
	}
}
