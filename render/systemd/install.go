package systemd

import (
	"fmt"
	"sort"
	"strings"
	"unicode/utf8"
)

// Install is a unit file's [Install] section. Values are kept as written
// (specifiers such as %i are resolved by EnableLinks).
type Install struct {
	WantedBy, RequiredBy, UpheldBy, Alias, Also []string
	// DefaultInstance is the last DefaultInstance= value.
	DefaultInstance string

	// defaults are all DefaultInstance= values in order: systemctl
	// resolves and checks each one, and one invalid value fails the unit.
	defaults []string
	// alsoAt[i] is how many DefaultInstance= values precede Also[i]:
	// systemctl expands Also= specifiers while it parses, so %i there is
	// the default instance known at that line.
	alsoAt []int
}

// Empty reports whether the section holds no installation config: then
// `systemctl enable` says there is nothing to do and creates no link.
// (systemctl 252 does not know UpheldBy=, but a section with only UpheldBy=
// is not empty here: see the package comment.)
func (in Install) Empty() bool {
	return len(in.WantedBy) == 0 && len(in.RequiredBy) == 0 && len(in.UpheldBy) == 0 &&
		len(in.Alias) == 0 && len(in.Also) == 0
}

// maxLine is systemd's LONG_LINE_MAX (1 MiB) for a logical line.
const maxLine = 1 << 20

// ParseInstall parses the [Install] section of unit file text with systemd's
// config syntax: comment lines start with '#' or ';' (also between
// continuation lines); a line ending in an odd number of backslashes
// continues on the next one; keys and values are trimmed; repeated sections
// and keys accumulate; WantedBy=, RequiredBy=, UpheldBy= and Alias= are
// whitespace-separated lists with "..." and '...' quoting, and an empty
// assignment resets the list; Also= accumulates (an empty Also= does
// nothing, as in systemd); the last DefaultInstance= wins. Unknown keys,
// unknown sections, assignments outside a section and lines without '='
// are ignored, as systemd does (with a warning). Errors, with the line
// number: an invalid section header, an unterminated quote, invalid UTF-8,
// a NUL byte, a logical line longer than 1 MiB.
func ParseInstall(text string) (Install, error) {
	var in Install
	if err := parseInto(&in, text); err != nil {
		return Install{}, err
	}
	return in, nil
}

// DropIn is a unit drop-in file: NAME.d/Name with its text.
type DropIn struct {
	Name, Text string
}

// ParseInstallDropIns parses a unit file and its drop-ins the way
// systemctl 252 reads [Install] for enabling: the unit file first, then the
// drop-ins whose name ends in ".conf", in lexical order of name, into the
// same section (so "WantedBy=" in a drop-in resets what the unit file
// said). Other drop-in names are ignored, as systemd does. Errors name the
// drop-in.
func ParseInstallDropIns(text string, dropins []DropIn) (Install, error) {
	var in Install
	if err := parseInto(&in, text); err != nil {
		return Install{}, err
	}
	ds := make([]DropIn, 0, len(dropins))
	for _, d := range dropins {
		if strings.HasSuffix(d.Name, ".conf") {
			ds = append(ds, d)
		}
	}
	sort.SliceStable(ds, func(i, j int) bool { return ds[i].Name < ds[j].Name })
	for _, d := range ds {
		if err := parseInto(&in, d.Text); err != nil {
			return Install{}, fmt.Errorf("drop-in %s: %w", d.Name, err)
		}
	}
	return in, nil
}

func parseInto(in *Install, text string) error {
	text = strings.TrimPrefix(text, "\uFEFF")
	if strings.IndexByte(text, 0) >= 0 {
		return fmt.Errorf("unit file contains a NUL byte")
	}
	lines := strings.Split(text, "\n")
	section := ""
	var cont strings.Builder
	inCont := false
	contStart := 0
	for i, raw := range lines {
		lineNo := i + 1
		raw = strings.TrimSuffix(raw, "\r")
		line := raw
		if inCont {
			// Like systemd, skip comment lines inside a continuation (an
			// empty line ends it).
			if t := strings.TrimLeft(raw, " \t\r\n"); t != "" && (t[0] == '#' || t[0] == ';') {
				continue
			}
			cont.WriteString(raw)
			if cont.Len() > maxLine {
				return fmt.Errorf("line %d: line too long", contStart)
			}
			line = cont.String()
		} else {
			contStart = lineNo
			if len(raw) > maxLine {
				return fmt.Errorf("line %d: line too long", lineNo)
			}
		}
		if endsEscaped(line) {
			if !inCont {
				cont.Reset()
				cont.WriteString(raw)
				inCont = true
			}
			// Replace the trailing backslash with a space.
			s := cont.String()
			cont.Reset()
			cont.WriteString(s[:len(s)-1] + " ")
			continue
		}
		inCont = false
		if err := parseLine(in, &section, line); err != nil {
			return fmt.Errorf("line %d: %w", contStart, err)
		}
	}
	if inCont {
		if err := parseLine(in, &section, cont.String()); err != nil {
			return fmt.Errorf("line %d: %w", contStart, err)
		}
	}
	return nil
}

// endsEscaped reports whether s ends in an unescaped backslash.
func endsEscaped(s string) bool {
	escaped := false
	for i := 0; i < len(s); i++ {
		if escaped {
			escaped = false
		} else if s[i] == '\\' {
			escaped = true
		}
	}
	return escaped
}

func parseLine(in *Install, section *string, line string) error {
	line = strings.Trim(line, " \t\r\n")
	if line == "" || line[0] == '#' || line[0] == ';' {
		return nil
	}
	if !utf8.ValidString(line) {
		return fmt.Errorf("invalid UTF-8 in %q", line)
	}
	if line[0] == '[' {
		if line[len(line)-1] != ']' {
			return fmt.Errorf("invalid section header %q", line)
		}
		*section = line[1 : len(line)-1]
		return nil
	}
	if *section != "Install" {
		return nil
	}
	eq := strings.IndexByte(line, '=')
	if eq <= 0 {
		return nil // systemd: "Missing '=', ignoring line."
	}
	key := strings.Trim(line[:eq], " \t\r\n")
	value := strings.Trim(line[eq+1:], " \t\r\n")
	var list *[]string
	switch key {
	case "WantedBy":
		list = &in.WantedBy
	case "RequiredBy":
		list = &in.RequiredBy
	case "UpheldBy":
		list = &in.UpheldBy
	case "Alias":
		list = &in.Alias
	case "Also":
		words, err := splitWords(value, false)
		if err != nil {
			return fmt.Errorf("%s=: %w", key, err)
		}
		in.Also = append(in.Also, words...)
		for range words {
			in.alsoAt = append(in.alsoAt, len(in.defaults))
		}
		return nil
	case "DefaultInstance":
		in.DefaultInstance = value
		in.defaults = append(in.defaults, value)
		return nil
	default:
		return nil // unknown key: systemd warns and ignores it
	}
	if value == "" {
		*list = nil
		return nil
	}
	words, err := splitWords(value, true)
	if err != nil {
		return fmt.Errorf("%s=: %w", key, err)
	}
	*list = append(*list, words...)
	return nil
}

// splitWords splits a value into whitespace-separated words like systemd's
// extract_first_word: with unquote, "..." and '...' group and are removed;
// backslash escapes are kept as written.
func splitWords(s string, unquote bool) ([]string, error) {
	var words []string
	var w strings.Builder
	inWord := false
	var quote byte
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case quote != 0:
			if c == '\\' && i+1 < len(s) {
				w.WriteByte(c)
				i++
				w.WriteByte(s[i])
			} else if c == quote {
				quote = 0
			} else {
				w.WriteByte(c)
			}
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			if inWord {
				words = append(words, w.String())
				w.Reset()
				inWord = false
			}
		case c == '\\':
			inWord = true
			w.WriteByte(c)
			if i+1 < len(s) {
				i++
				w.WriteByte(s[i])
			}
		case unquote && (c == '"' || c == '\''):
			inWord = true
			quote = c
		default:
			inWord = true
			w.WriteByte(c)
		}
	}
	if quote != 0 {
		return nil, fmt.Errorf("unterminated quote in %q", s)
	}
	if inWord {
		words = append(words, w.String())
	}
	return words, nil
}
