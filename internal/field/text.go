package field

import "strings"

// SpellText is msg, a plain message that names the field n, with n
// spelled by spell (nil: msg). A dotted name (preflight.maxLayers) is
// replaced wherever it occurs; a plain one (base, arch), a word the
// message may use for other things, only where it follows "(" as in
// "(base)" or "(arch amd64)". Messages that cannot carry an Error (a
// preflight finding, which is a comparable value) name fields this way.
func SpellText(msg string, n Name, spell func(Name) string) string {
	if n == "" || spell == nil {
		return msg
	}
	if strings.Contains(string(n), ".") {
		return strings.ReplaceAll(msg, string(n), spell(n))
	}
	return strings.ReplaceAll(msg, "("+string(n), "("+spell(n))
}
