package preflight

import "testing"

func FuzzParseKargs(f *testing.F) {
	for _, s := range []string{"kargs = [\"a\", 'b']\n", "match-architectures = [\"x86_64\"]\nkargs=[]", "kargs = [\"\\u00e9\"]", "[t]\n", "kargs = \"x\""} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		k, _, err := ParseKargs(b)
		if err == nil && k == nil {
			t.Fatalf("no error and no kargs for %q", b)
		}
	})
}

func FuzzParseUnit(f *testing.F) {
	for _, s := range []string{"[Unit]\nA=b\n", "A=b", "[Service]\nExecStart=a \\\n b\n", "[x"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) { _ = ParseUnit(b) })
}

func FuzzDetectSecret(f *testing.F) {
	for _, s := range []string{testPEM, `{"auths":{"r":{"auth":"x"}}}`, "kind: Config\nusers:\n token: x"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) { _ = DetectSecret(b) })
}
