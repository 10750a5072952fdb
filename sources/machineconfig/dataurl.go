package machineconfig

import (
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
)

// DecodeDataURL decodes an RFC 2397 "data:" URL:
//
//	data:[<mediatype>][;base64],<data>
//
// The media type and its parameters are ignored. The data part is
// percent-decoded (invalid escapes are an error); with ";base64" the result
// is then base64-decoded (standard alphabet, padded or unpadded, whitespace
// ignored). Output larger than limit bytes is an error. DecodeDataURL never
// panics, whatever its input.
func DecodeDataURL(s string, limit int) ([]byte, error) {
	rest, ok := strings.CutPrefix(s, "data:")
	if !ok {
		// The scheme is case-insensitive.
		if len(s) >= 5 && strings.EqualFold(s[:5], "data:") {
			rest = s[5:]
		} else {
			return nil, errors.New("not a data URL")
		}
	}
	header, data, ok := strings.Cut(rest, ",")
	if !ok {
		return nil, errors.New("invalid data URL: missing ','")
	}
	isB64 := false
	params := strings.Split(header, ";")
	for i, p := range params {
		if i > 0 && strings.EqualFold(strings.TrimSpace(p), "base64") {
			if i != len(params)-1 {
				return nil, errors.New("invalid data URL: ;base64 must be the last parameter")
			}
			isB64 = true
		}
	}
	// Percent-decoding can only shrink the data, base64 shrinks it further.
	if !isB64 && len(data) > 3*limit+3 {
		return nil, fmt.Errorf("data URL content exceeds the limit of %d bytes", limit)
	}
	if isB64 && len(data) > 3*(limit/3*4+8) {
		return nil, fmt.Errorf("data URL content exceeds the limit of %d bytes", limit)
	}
	raw, err := percentDecode(data)
	if err != nil {
		return nil, fmt.Errorf("invalid data URL: %v", err)
	}
	if !isB64 {
		if len(raw) > limit {
			return nil, fmt.Errorf("data URL content of %d bytes exceeds the limit of %d bytes", len(raw), limit)
		}
		return raw, nil
	}
	b64 := strings.Map(func(r rune) rune {
		switch r {
		case ' ', '\t', '\r', '\n':
			return -1
		}
		return r
	}, string(raw))
	var out []byte
	if strings.HasSuffix(b64, "=") || len(b64)%4 == 0 {
		out, err = base64.StdEncoding.DecodeString(b64)
	} else {
		out, err = base64.RawStdEncoding.DecodeString(b64)
	}
	if err != nil {
		return nil, fmt.Errorf("invalid data URL: invalid base64: %v", err)
	}
	if len(out) > limit {
		return nil, fmt.Errorf("data URL content of %d bytes exceeds the limit of %d bytes", len(out), limit)
	}
	return out, nil
}

func unhex(c byte) (byte, bool) {
	switch {
	case c >= '0' && c <= '9':
		return c - '0', true
	case c >= 'a' && c <= 'f':
		return c - 'a' + 10, true
	case c >= 'A' && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}

// percentDecode decodes %XX escapes; everything else is kept byte for byte
// ('+' stays '+': a data URL is not form-encoded).
func percentDecode(s string) ([]byte, error) {
	out := make([]byte, 0, len(s))
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c != '%' {
			out = append(out, c)
			continue
		}
		if i+2 >= len(s) {
			return nil, fmt.Errorf("truncated escape %q at offset %d", s[i:], i)
		}
		h, ok1 := unhex(s[i+1])
		l, ok2 := unhex(s[i+2])
		if !ok1 || !ok2 {
			return nil, fmt.Errorf("invalid escape %q at offset %d", s[i:i+3], i)
		}
		out = append(out, h<<4|l)
		i += 2
	}
	return out, nil
}
