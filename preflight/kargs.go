package preflight

import (
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
)

// ParseKargs parses a bootc kernel arguments file
// (usr/lib/bootc/kargs.d/*.toml): `kargs` (an array of strings, required)
// and optional `match-architectures` (an array of strings). Any other key
// is an error, as in bootc. It understands the TOML subset these files are
// written in: comments, bare or quoted keys, basic and literal strings, and
// (multi-line) arrays of strings; other TOML values are reported as wrong types.
func ParseKargs(data []byte) (kargs, arches []string, err error) {
	if !utf8.Valid(data) {
		return nil, nil, fmt.Errorf("not valid UTF-8")
	}
	p := &tomlParser{s: string(data), line: 1}
	seen := map[string]bool{}
	for {
		p.skipSpaceComments(true)
		if p.eof() {
			break
		}
		if p.peek() == '[' {
			return nil, nil, fmt.Errorf("line %d: tables are not allowed (only the keys kargs and match-architectures)", p.line)
		}
		key, err := p.key()
		if err != nil {
			return nil, nil, err
		}
		line := p.line
		p.skipSpaceComments(false)
		if p.eof() || p.peek() != '=' {
			return nil, nil, fmt.Errorf("line %d: want '=' after key %q", line, key)
		}
		p.pos++
		p.skipSpaceComments(false)
		if seen[key] {
			return nil, nil, fmt.Errorf("line %d: duplicate key %q", line, key)
		}
		seen[key] = true
		switch key {
		case "kargs", "match-architectures":
		default:
			return nil, nil, fmt.Errorf("line %d: unknown key %q (only kargs and match-architectures)", line, key)
		}
		arr, err := p.stringArray(key)
		if err != nil {
			return nil, nil, err
		}
		if key == "kargs" {
			kargs = arr
		} else {
			arches = arr
		}
		p.skipSpaceComments(false)
		if !p.eof() && p.peek() != '\n' && p.peek() != '\r' {
			return nil, nil, fmt.Errorf("line %d: unexpected %q after the value of %q", p.line, p.peek(), key)
		}
	}
	if !seen["kargs"] {
		return nil, nil, fmt.Errorf("missing key \"kargs\"")
	}
	return kargs, arches, nil
}

type tomlParser struct {
	s    string
	pos  int
	line int
}

func (p *tomlParser) eof() bool  { return p.pos >= len(p.s) }
func (p *tomlParser) peek() byte { return p.s[p.pos] }

// skipSpaceComments skips blanks and comments, and newlines when nl is set.
func (p *tomlParser) skipSpaceComments(nl bool) {
	for !p.eof() {
		switch c := p.peek(); {
		case c == ' ' || c == '\t':
			p.pos++
		case c == '#':
			for !p.eof() && p.peek() != '\n' {
				p.pos++
			}
		case nl && (c == '\n' || c == '\r'):
			if c == '\n' {
				p.line++
			}
			p.pos++
		default:
			return
		}
	}
}

func isBareKey(c byte) bool {
	return c == '-' || c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')
}

func (p *tomlParser) key() (string, error) {
	if c := p.peek(); c == '"' || c == '\'' {
		return p.str()
	}
	start := p.pos
	for !p.eof() && isBareKey(p.peek()) {
		p.pos++
	}
	if p.pos == start {
		return "", fmt.Errorf("line %d: unexpected %q, want a key", p.line, p.peek())
	}
	if !p.eof() && p.peek() == '.' {
		return "", fmt.Errorf("line %d: dotted keys are not allowed", p.line)
	}
	return p.s[start:p.pos], nil
}

func (p *tomlParser) str() (string, error) {
	q := p.peek()
	if strings.HasPrefix(p.s[p.pos:], string([]byte{q, q, q})) {
		return "", fmt.Errorf("line %d: multi-line strings are not supported in kargs files", p.line)
	}
	p.pos++
	var b strings.Builder
	for {
		if p.eof() || p.peek() == '\n' {
			return "", fmt.Errorf("line %d: unterminated string", p.line)
		}
		c := p.peek()
		p.pos++
		if c == q {
			return b.String(), nil
		}
		if c != '\\' || q == '\'' {
			b.WriteByte(c)
			continue
		}
		if p.eof() {
			return "", fmt.Errorf("line %d: unterminated string", p.line)
		}
		e := p.peek()
		p.pos++
		switch e {
		case 'b':
			b.WriteByte('\b')
		case 't':
			b.WriteByte('\t')
		case 'n':
			b.WriteByte('\n')
		case 'f':
			b.WriteByte('\f')
		case 'r':
			b.WriteByte('\r')
		case '"':
			b.WriteByte('"')
		case '\\':
			b.WriteByte('\\')
		case 'u', 'U':
			n := 4
			if e == 'U' {
				n = 8
			}
			if p.pos+n > len(p.s) {
				return "", fmt.Errorf("line %d: short \\%c escape", p.line, e)
			}
			v, err := strconv.ParseUint(p.s[p.pos:p.pos+n], 16, 32)
			if err != nil || !utf8.ValidRune(rune(v)) {
				return "", fmt.Errorf("line %d: invalid \\%c escape", p.line, e)
			}
			b.WriteRune(rune(v))
			p.pos += n
		default:
			return "", fmt.Errorf("line %d: invalid escape \\%c", p.line, e)
		}
	}
}

func (p *tomlParser) stringArray(key string) ([]string, error) {
	if p.eof() || p.peek() != '[' {
		return nil, fmt.Errorf("line %d: %s must be an array of strings", p.line, key)
	}
	p.pos++
	out := []string{}
	for {
		p.skipSpaceComments(true)
		if p.eof() {
			return nil, fmt.Errorf("line %d: unterminated array %s", p.line, key)
		}
		if p.peek() == ']' {
			p.pos++
			return out, nil
		}
		if c := p.peek(); c != '"' && c != '\'' {
			return nil, fmt.Errorf("line %d: %s must be an array of strings", p.line, key)
		}
		s, err := p.str()
		if err != nil {
			return nil, err
		}
		out = append(out, s)
		p.skipSpaceComments(true)
		if p.eof() {
			return nil, fmt.Errorf("line %d: unterminated array %s", p.line, key)
		}
		switch p.peek() {
		case ',':
			p.pos++
		case ']':
		default:
			return nil, fmt.Errorf("line %d: want ',' or ']' in array %s", p.line, key)
		}
	}
}
