// Package systemd computes unit enablement for an image exactly the way
// `systemctl --root=DIR enable UNIT` does it, without running systemctl:
// it parses a unit's [Install] section (ParseInstall) and returns the
// symlinks enabling creates (EnableLinks), following Also=, Alias=,
// WantedBy=, RequiredBy=, UpheldBy=, templates with DefaultInstance= and
// instances of templates. FindInFS reads units that a base OS tree ships.
// DisableLinks returns what `systemctl disable` removes from a tree, and
// PresetAll what `systemctl preset-all` changes (LoadPresets and
// Presets.Query read the preset files), so that enablement after the
// presets a first boot applies can be computed without running systemctl.
//
// The behaviour is checked against the real systemctl (systemd 252) by
// oracle tests: enable over every unit of the project's real-world
// fixtures, disable and preset-all (each preset mode) over hand-written
// trees. One
// deliberate difference: UpheldBy= (an [Install] key of systemd 254 and
// later, which systemctl 252 ignores with a warning) creates ".upholds"
// links, which systemd's PID 1 honours since 249.
package systemd

import (
	"fmt"
	"strings"

	"github.com/oslayer/oslayer/sources/model"
)

// SystemDir is where enablement links and configured units live.
const SystemDir = "/etc/systemd/system"

// NameKind classifies a unit name.
type NameKind int

const (
	// Invalid is not a unit name.
	Invalid NameKind = iota
	// Plain is "foo.service".
	Plain
	// Template is "foo@.service".
	Template
	// Instance is "foo@bar.service".
	Instance
)

func (k NameKind) String() string {
	switch k {
	case Plain:
		return "plain"
	case Template:
		return "template"
	case Instance:
		return "instance"
	}
	return "invalid"
}

// Classify returns the kind of a unit name with systemd's rules
// (unit_name_is_valid, as model.ValidateUnitName checks them).
func Classify(name string) NameKind {
	if model.ValidateUnitName(name) != nil {
		return Invalid
	}
	at := strings.IndexByte(name, '@')
	switch {
	case at < 0:
		return Plain
	case at+1 == strings.LastIndexByte(name, '.'):
		return Template
	default:
		return Instance
	}
}

// ValidName returns an error naming name and what is wrong with it when it
// is not a valid unit name.
func ValidName(name string) error {
	return model.ValidateUnitName(name)
}

// validChar reports whether c may appear in a unit name (besides '@').
func validChar(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' ||
		strings.IndexByte(":-_.\\", c) >= 0
}

// unitType returns the suffix after the last dot ("service").
func unitType(name string) string {
	return name[strings.LastIndexByte(name, '.')+1:]
}

// instanceOf returns the instance of an instance name ("bar" for
// "foo@bar.service"), "" otherwise.
func instanceOf(name string) string {
	at := strings.IndexByte(name, '@')
	dot := strings.LastIndexByte(name, '.')
	if at < 0 || dot < at {
		return ""
	}
	return name[at+1 : dot]
}

// prefixOf returns the part before '@' or before the type suffix.
func prefixOf(name string) string {
	if at := strings.IndexByte(name, '@'); at >= 0 {
		return name[:at]
	}
	return name[:strings.LastIndexByte(name, '.')]
}

// TemplateOf returns "foo@.service" for "foo@bar.service"; ok is false when
// name is not an instance.
func TemplateOf(name string) (string, bool) {
	if Classify(name) != Instance {
		return "", false
	}
	at := strings.IndexByte(name, '@')
	return name[:at+1] + name[strings.LastIndexByte(name, '.'):], true
}

// withInstance returns template name with inst filled in.
func withInstance(name, inst string) string {
	at := strings.IndexByte(name, '@')
	return name[:at+1] + inst + name[strings.LastIndexByte(name, '.'):]
}

// validInstance checks an instance string (unit_instance_is_valid).
func validInstance(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] != '@' && !validChar(s[i]) {
			return false
		}
	}
	return true
}

// unescape reverses systemd's unit name escaping: "-" is "/", "\xNN" a byte.
func unescape(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '-':
			b.WriteByte('/')
		case c == '\\' && i+3 < len(s) && s[i+1] == 'x' && isHex(s[i+2]) && isHex(s[i+3]):
			b.WriteByte(unhex(s[i+2])<<4 | unhex(s[i+3]))
			i += 3
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}

func isHex(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
}

func unhex(c byte) byte {
	switch {
	case c >= '0' && c <= '9':
		return c - '0'
	case c >= 'a' && c <= 'f':
		return c - 'a' + 10
	default:
		return c - 'A' + 10
	}
}

// expand resolves the unit-name specifiers systemctl expands in [Install]
// values (install_name_printf). Specifiers that depend on the host that
// enables the unit (%H, %m, %b, %u, ...) cannot be computed for an image and
// are an error, as is an unknown one.
func expand(s, name, defaultInstance string) (string, error) {
	if !strings.Contains(s, "%") {
		return s, nil
	}
	inst := instanceOf(name)
	if inst == "" {
		inst = defaultInstance
	}
	prefix := prefixOf(name)
	last := prefix
	if i := strings.LastIndexByte(prefix, '-'); i >= 0 {
		last = prefix[i+1:]
	}
	full := name[:strings.LastIndexByte(name, '.')]
	if strings.HasSuffix(full, "@") && defaultInstance != "" {
		full += defaultInstance
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '%' {
			b.WriteByte(s[i])
			continue
		}
		if i+1 >= len(s) {
			return "", fmt.Errorf("%q: trailing %%", s)
		}
		i++
		switch c := s[i]; c {
		case '%':
			b.WriteByte('%')
		case 'n':
			b.WriteString(name)
		case 'N':
			b.WriteString(full)
		case 'p':
			b.WriteString(prefix)
		case 'P':
			b.WriteString(unescape(prefix))
		case 'i':
			b.WriteString(inst)
		case 'I':
			b.WriteString(unescape(inst))
		case 'j':
			b.WriteString(last)
		case 'J':
			b.WriteString(unescape(last))
		case 'a', 'A', 'b', 'B', 'H', 'l', 'm', 'M', 'o', 'v', 'w', 'W', 'T', 'V', 'g', 'G', 'u', 'U', 'h', 's', 'E', 'C', 'L', 'S', 't', 'y', 'Y', 'q', 'd', 'f':
			return "", fmt.Errorf("%q: specifier %%%c depends on the host and cannot be resolved in an image", s, c)
		default:
			return "", fmt.Errorf("%q: unknown specifier %%%c", s, c)
		}
	}
	return b.String(), nil
}
