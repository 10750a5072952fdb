package model

import (
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"
)

// Size limits for one file's content. Sources refuse anything larger with an
// error naming the item, so that a hostile or broken input cannot make the
// renderer allocate without bound.
const (
	// MaxContentSize bounds one file's decoded content when it is carried
	// inside a document: Gardener inline content (plain or b64), secretRef
	// data, Ignition data URLs (after gzip decompression).
	MaxContentSize = 64 << 20 // 64 MiB
	// MaxImageFileSize bounds one file read out of a container image
	// (Gardener imageRef), where real payloads are binaries such as the
	// kubelet (~100 MB).
	MaxImageFileSize = 1 << 30 // 1 GiB
)

// unitTypes are the systemd unit type suffixes (systemd.unit(5)).
var unitTypes = map[string]bool{
	"service": true, "socket": true, "device": true, "mount": true,
	"automount": true, "swap": true, "target": true, "path": true,
	"timer": true, "slice": true, "scope": true,
}

// unitNameMax is systemd's UNIT_NAME_MAX (256, including the NUL byte).
const unitNameMax = 255

func unitNameChar(c byte) bool {
	switch {
	case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		return true
	}
	return c == ':' || c == '-' || c == '_' || c == '.' || c == '\\'
}

// ValidateUnitName checks name against systemd's unit naming rules
// (systemd.unit(5), unit_name_is_valid): a non-empty prefix of
// [A-Za-z0-9:_.\-], optionally followed by "@" and an instance (which may
// itself contain "@"; empty for a template such as "getty@.service"), then "."
// and a known unit type; at most 255 bytes.
func ValidateUnitName(name string) error {
	if name == "" {
		return errors.New("invalid unit name: empty")
	}
	if len(name) > unitNameMax {
		return fmt.Errorf("invalid unit name %q: longer than %d bytes", name, unitNameMax)
	}
	dot := strings.LastIndexByte(name, '.')
	if dot < 0 {
		return fmt.Errorf("invalid unit name %q: no unit type suffix (e.g. .service)", name)
	}
	typ := name[dot+1:]
	if !unitTypes[typ] {
		return fmt.Errorf("invalid unit name %q: unknown unit type %q", name, typ)
	}
	stem := name[:dot]
	prefix, instance, isInstance := strings.Cut(stem, "@")
	if prefix == "" {
		return fmt.Errorf("invalid unit name %q: empty name before the type suffix or '@'", name)
	}
	for i := 0; i < len(prefix); i++ {
		if !unitNameChar(prefix[i]) {
			return fmt.Errorf("invalid unit name %q: character %q not allowed", name, prefix[i])
		}
	}
	if isInstance {
		for i := 0; i < len(instance); i++ {
			if c := instance[i]; !unitNameChar(c) && c != '@' {
				return fmt.Errorf("invalid unit name %q: character %q not allowed in the instance", name, c)
			}
		}
	}
	return nil
}

// ValidateDropInName checks the file name of a systemd drop-in: a single
// path element ending in ".conf" (systemd ignores anything else).
func ValidateDropInName(name string) error {
	switch {
	case name == "":
		return errors.New("invalid drop-in name: empty")
	case !utf8.ValidString(name):
		return fmt.Errorf("invalid drop-in name %q: not valid UTF-8", name)
	case strings.ContainsAny(name, "/\x00"):
		return fmt.Errorf("invalid drop-in name %q: must be a file name without '/' or NUL", name)
	case !strings.HasSuffix(name, ".conf") || name == ".conf":
		return fmt.Errorf("invalid drop-in name %q: must end in .conf", name)
	}
	return nil
}

// ValidatePath checks a node path as a source wrote it: non-empty, absolute,
// valid UTF-8, no NUL byte and no ".." element. It does not clean the path
// or apply placement rules; the renderer does that.
func ValidatePath(p string) error {
	switch {
	case p == "":
		return errors.New("empty path")
	case !utf8.ValidString(p):
		return fmt.Errorf("path %q is not valid UTF-8", p)
	case strings.IndexByte(p, 0) >= 0:
		return fmt.Errorf("path %q contains a NUL byte", p)
	case !strings.HasPrefix(p, "/"):
		return fmt.Errorf("relative path %q: paths must be absolute", p)
	}
	for _, el := range strings.Split(p, "/") {
		if el == ".." {
			return fmt.Errorf("path %q contains a \"..\" element", p)
		}
	}
	return nil
}
