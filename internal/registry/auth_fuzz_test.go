package registry

import (
	"encoding/json"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// messageText is what error messages say on their own: a credential that
// is part of it, or of a map key (keys are named in errors on purpose), is
// not a leak.
const messageText = `F S --authfile --auth-secret (document ) auths[""].auth is not valid base64 does not decode to "user:password"
.username is empty but a password is set invalid JSON at byte field want found a JSON string number bool object array null (top level)
credHelpers credsStore invalid helper name no registry host auths key not a YAML or JSON manifest syntax error line
no Secret of type kubernetes.io/dockerconfigjson (or kubernetes.io/dockercfg) found (found nothing kind Secret of type has no
data. stringData. .dockerconfigjson .dockercfg map[string]string map[string]registry.authEntry registry.authEntry []uint8 int float64`

// credentialValues collects the values of credential fields anywhere in a
// JSON or YAML document (and in JSON embedded in string values).
func credentialValues(b []byte) []string {
	var v any
	if err := yaml.Unmarshal(b, &v); err != nil {
		if err := json.Unmarshal(b, &v); err != nil {
			return nil
		}
	}
	var out, keys []string
	var walk func(any, int)
	walk = func(v any, depth int) {
		if depth > 20 {
			return
		}
		switch x := v.(type) {
		case map[string]any:
			for k, e := range x {
				keys = append(keys, k)
				switch strings.ToLower(k) {
				case "auth", "password", "identitytoken", "registrytoken", "secret":
					if s, ok := e.(string); ok && len(s) >= 6 {
						out = append(out, s)
					}
				}
				walk(e, depth+1)
			}
		case []any:
			for _, e := range x {
				walk(e, depth+1)
			}
		case string:
			var inner any
			if json.Unmarshal([]byte(x), &inner) == nil {
				walk(inner, depth+1)
			}
		}
	}
	walk(v, 0)
	var leaks []string
next:
	for _, c := range out {
		if strings.Contains(messageText, c) {
			continue
		}
		for _, k := range keys {
			if strings.Contains(k, c) {
				continue next
			}
		}
		leaks = append(leaks, c)
	}
	return leaks
}

func FuzzAuthFile(f *testing.F) {
	f.Add([]byte(`{"auths":{"quay.io":{"auth":"dTpw"}}}`))
	f.Add([]byte(`{"auths":{"https://index.docker.io/v1/":{"username":"u","password":"secret-pw"}}}`))
	f.Add([]byte(`{"auths":{"q.io":{"auth":"not base64 secret"}}}`))
	f.Add([]byte(`{"auths":{"q.io":{"password":"only-a-password"}}}`))
	f.Add([]byte(`{"credHelpers":{"q.io":"x y"},"credsStore":"a/b"}`))
	f.Add([]byte(`{"auths":{"":{"auth":"x"}}}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		_, err := parseDockerConfig(b, "F", "", true)
		if err == nil {
			return
		}
		for _, c := range credentialValues(b) {
			if strings.Contains(err.Error(), c) {
				t.Fatalf("error quotes credential %q: %v", c, err)
			}
		}
	})
}

func FuzzSecretManifest(f *testing.F) {
	f.Add([]byte("kind: Secret\ntype: kubernetes.io/dockerconfigjson\nstringData:\n  .dockerconfigjson: '{\"auths\":{\"q.io\":{\"auth\":\"bad-secret-value\"}}}'\n"))
	f.Add([]byte("kind: Secret\ntype: kubernetes.io/dockercfg\ndata:\n  .dockercfg: e30=\n"))
	f.Add([]byte("kind: Secret\ntype: kubernetes.io/dockerconfigjson\ndata:\n  .dockerconfigjson: '%%%secret%%%'\n"))
	f.Add([]byte("---\n---\nkind: ConfigMap\n"))
	f.Add([]byte(`{"kind":"Secret","type":"kubernetes.io/dockerconfigjson","data":{".dockerconfigjson":42}}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		_, err := parseSecret(b, "S")
		if err == nil {
			return
		}
		for _, c := range credentialValues(b) {
			if strings.Contains(err.Error(), c) {
				t.Fatalf("error quotes credential %q: %v", c, err)
			}
		}
	})
}
