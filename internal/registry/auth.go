package registry

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"sort"
	"strconv"
	"strings"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"sigs.k8s.io/yaml"

	"github.com/oslayer/oslayer/internal/inputfile"
)

// Keychain returns the credentials oslayer uses, in this order of
// precedence:
//
//  1. authfile (--authfile): a podman auth.json or docker config.json;
//  2. secretFile (--auth-secret): a Kubernetes Secret manifest of type
//     kubernetes.io/dockerconfigjson (key .dockerconfigjson) or the legacy
//     kubernetes.io/dockercfg (key .dockercfg), YAML or JSON, with the value
//     base64 in data or plain in stringData;
//  3. the docker config ($DOCKER_CONFIG/config.json, ~/.docker/config.json,
//     podman's auth.json) and its credential helpers (credHelpers,
//     credsStore), as authn.DefaultKeychain resolves them.
//
// Empty paths are skipped. Both files are read and checked now: an error
// names the file and the field, never a credential.
//
// Hosts match as docker matches them: a key may carry a scheme and a path
// ("https://index.docker.io/v1/"), and docker.io, index.docker.io and
// registry-1.docker.io are one registry. A key with a repository path
// ("quay.io/org") applies to repositories under it, the longest key wins
// (as in podman's auth.json).
func Keychain(authfile, secretFile string) (authn.Keychain, error) {
	var kcs []authn.Keychain
	if authfile != "" {
		kc, err := AuthFileKeychain(authfile)
		if err != nil {
			return nil, err
		}
		kcs = append(kcs, kc)
	}
	if secretFile != "" {
		kc, err := SecretKeychain(secretFile)
		if err != nil {
			return nil, err
		}
		kcs = append(kcs, kc)
	}
	kcs = append(kcs, authn.DefaultKeychain)
	return authn.NewMultiKeychain(kcs...), nil
}

// AuthFileKeychain reads a podman auth.json or docker config.json:
// auths.HOST.auth (base64 "user:password"), auths.HOST.username and
// .password, auths.HOST.identitytoken, auths.HOST.registrytoken, and the
// credential helpers credHelpers.HOST and credsStore (docker-credential-NAME
// on PATH).
func AuthFileKeychain(path string) (authn.Keychain, error) {
	b, err := inputfile.Read(path)
	if err != nil {
		return nil, fmt.Errorf("registry.authfile: %w", err)
	}
	return parseDockerConfig(b, "registry.authfile "+path, "", true)
}

// SecretKeychain reads a Kubernetes Secret manifest of type
// kubernetes.io/dockerconfigjson (or the legacy kubernetes.io/dockercfg).
// A file with several YAML documents uses every such Secret in it, the
// first one listed wins for a host they share.
func SecretKeychain(path string) (authn.Keychain, error) {
	b, err := inputfile.Read(path)
	if err != nil {
		return nil, fmt.Errorf("registry.authSecret: %w", err)
	}
	return parseSecret(b, path)
}

// parseSecret parses the Secret manifest(s) in b, read from path.
func parseSecret(b []byte, path string) (authn.Keychain, error) {
	docs := splitYAMLDocs(b)
	var kcs []authn.Keychain
	var seen []string
	for i, doc := range docs {
		where := path
		if len(docs) > 1 {
			where = fmt.Sprintf("%s (document %d)", path, i+1)
		}
		j, err := yaml.YAMLToJSON(doc)
		if err != nil {
			return nil, fmt.Errorf("registry.authSecret %s: not a YAML or JSON manifest: %s", where, yamlErrLine(err))
		}
		if bytes.Equal(bytes.TrimSpace(j), []byte("null")) {
			continue
		}
		var sec struct {
			Kind       string            `json:"kind"`
			Type       string            `json:"type"`
			Data       map[string]string `json:"data"`
			StringData map[string]string `json:"stringData"`
			Metadata   struct {
				Name string `json:"name"`
			} `json:"metadata"`
		}
		if err := json.Unmarshal(j, &sec); err != nil {
			return nil, fmt.Errorf("registry.authSecret %s: %s", where, jsonErr(err))
		}
		if sec.Kind != "Secret" {
			seen = append(seen, "kind "+safeQuote(sec.Kind))
			continue
		}
		var key string
		legacy := false
		switch sec.Type {
		case "kubernetes.io/dockerconfigjson":
			key = ".dockerconfigjson"
		case "kubernetes.io/dockercfg":
			key, legacy = ".dockercfg", true
		default:
			seen = append(seen, fmt.Sprintf("Secret %s of type %s", safeQuote(sec.Metadata.Name), safeQuote(sec.Type)))
			continue
		}
		var raw []byte
		field := ""
		if v, ok := sec.StringData[key]; ok {
			raw, field = []byte(v), "stringData."+key
		} else if v, ok := sec.Data[key]; ok {
			field = "data." + key
			raw, err = base64.StdEncoding.DecodeString(strings.TrimSpace(v))
			if err != nil {
				return nil, fmt.Errorf("registry.authSecret %s: %s is not valid base64", where, field)
			}
		} else {
			return nil, fmt.Errorf("registry.authSecret %s: Secret %s of type %s has no data.%s or stringData.%s", where, safeQuote(sec.Metadata.Name), sec.Type, key, key)
		}
		kc, err := parseDockerConfig(raw, "registry.authSecret "+where, field, !legacy)
		if err != nil {
			return nil, err
		}
		kcs = append(kcs, kc)
	}
	if len(kcs) == 0 {
		found := "nothing"
		if len(seen) > 0 {
			found = strings.Join(seen, ", ")
		}
		return nil, fmt.Errorf("registry.authSecret %s: no Secret of type kubernetes.io/dockerconfigjson (or kubernetes.io/dockercfg) found (found %s)", path, found)
	}
	return authn.NewMultiKeychain(kcs...), nil
}

// safeQuote quotes a Kubernetes name, kind or type for an error message;
// anything that does not look like one (and so might be a credential pasted
// in the wrong place) is not repeated.
func safeQuote(s string) string {
	if len(s) > 253 {
		return "(a long value)"
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-._/", r)) {
			return "(a value with unexpected characters)"
		}
	}
	return strconv.Quote(s)
}

// splitYAMLDocs splits a multi-document YAML stream on "---" lines.
func splitYAMLDocs(b []byte) [][]byte {
	var docs [][]byte
	var cur []byte
	for _, line := range bytes.SplitAfter(b, []byte("\n")) {
		t := bytes.TrimRight(line, " \t\r\n")
		if bytes.Equal(t, []byte("---")) || bytes.HasPrefix(t, []byte("--- ")) {
			docs = append(docs, cur)
			cur = nil
			continue
		}
		cur = append(cur, line...)
	}
	docs = append(docs, cur)
	var out [][]byte
	for _, d := range docs {
		if len(bytes.TrimSpace(d)) > 0 {
			out = append(out, d)
		}
	}
	if len(out) == 0 {
		out = [][]byte{b}
	}
	return out
}

// yamlErrLine keeps the position of a YAML error and drops anything that
// could quote the document (and so a credential).
func yamlErrLine(err error) string {
	s := err.Error()
	if i := strings.Index(s, "line "); i >= 0 {
		rest := s[i:]
		if j := strings.Index(rest, ":"); j > 0 {
			return rest[:j]
		}
	}
	return "syntax error"
}

// jsonErr describes a JSON decoding error without quoting the input.
func jsonErr(err error) string {
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &se):
		return fmt.Sprintf("invalid JSON at byte %d", se.Offset)
	case errors.As(err, &te):
		f := te.Field
		if f == "" {
			f = "(top level)"
		}
		return fmt.Sprintf("field %s: want %s, found a JSON %s", f, te.Type.String(), te.Value)
	default:
		return "invalid JSON"
	}
}

// authEntry is one auths.HOST entry of a docker config.json.
type authEntry struct {
	Auth          string `json:"auth"`
	Username      string `json:"username"`
	Password      string `json:"password"`
	IdentityToken string `json:"identitytoken"`
	RegistryToken string `json:"registrytoken"`
}

type fileKeychain struct {
	// where names the file (and field) for errors.
	where   string
	entries []keyedAuth
	helpers map[string]string // host → helper suffix
	store   string            // credsStore helper suffix
}

type keyedAuth struct {
	key  string // normalized: host[/path]
	orig string
	cfg  authn.AuthConfig
}

// parseDockerConfig parses a docker config.json (auths wrapper) or, when
// wrapped is false, a legacy .dockercfg (HOST → entry).
func parseDockerConfig(b []byte, file, field string, wrapped bool) (*fileKeychain, error) {
	where := file
	if field != "" {
		where = file + ": " + field
	}
	prefix := ""
	if field != "" {
		prefix = field + ": "
	}
	var cfg struct {
		Auths       map[string]authEntry `json:"auths"`
		CredHelpers map[string]string    `json:"credHelpers"`
		CredsStore  string               `json:"credsStore"`
	}
	if wrapped {
		if err := json.Unmarshal(b, &cfg); err != nil {
			return nil, fmt.Errorf("%s: %s%s", file, prefix, jsonErr(err))
		}
	} else if err := json.Unmarshal(b, &cfg.Auths); err != nil {
		return nil, fmt.Errorf("%s: %s%s", file, prefix, jsonErr(err))
	}
	kc := &fileKeychain{where: where, helpers: map[string]string{}, store: cfg.CredsStore}
	fieldName := func(host, f string) string {
		if wrapped {
			return fmt.Sprintf("%sauths[%q].%s", prefix, host, f)
		}
		return fmt.Sprintf("%s[%q].%s", prefix, host, f)
	}
	hosts := make([]string, 0, len(cfg.Auths))
	for h := range cfg.Auths {
		hosts = append(hosts, h)
	}
	sort.Strings(hosts)
	for _, h := range hosts {
		e := cfg.Auths[h]
		key, err := normalizeAuthKey(h)
		if err != nil {
			return nil, fmt.Errorf("%s: %sauths key %q: %v", file, prefix, h, err)
		}
		ac := authn.AuthConfig{Username: e.Username, Password: e.Password, IdentityToken: e.IdentityToken, RegistryToken: e.RegistryToken}
		if e.Auth != "" {
			dec, err := base64.StdEncoding.DecodeString(strings.TrimSpace(e.Auth))
			if err != nil {
				return nil, fmt.Errorf("%s: %s is not valid base64", file, fieldName(h, "auth"))
			}
			user, pass, ok := strings.Cut(string(dec), ":")
			if !ok {
				return nil, fmt.Errorf("%s: %s does not decode to \"user:password\"", file, fieldName(h, "auth"))
			}
			ac.Username, ac.Password = user, pass
		}
		if ac.Username == "" && ac.Password != "" {
			return nil, fmt.Errorf("%s: %s is empty but a password is set", file, fieldName(h, "username"))
		}
		if ac == (authn.AuthConfig{}) {
			continue // an entry a helper fills, or an empty placeholder
		}
		kc.entries = append(kc.entries, keyedAuth{key: key, orig: h, cfg: ac})
	}
	for h, helper := range cfg.CredHelpers {
		key, err := normalizeAuthKey(h)
		if err != nil {
			return nil, fmt.Errorf("%s: %scredHelpers key %q: %v", file, prefix, h, err)
		}
		if helper == "" || strings.ContainsAny(helper, "/\\ ") {
			return nil, fmt.Errorf("%s: %scredHelpers[%q]: invalid helper name %q", file, prefix, h, helper)
		}
		kc.helpers[key] = helper
	}
	if strings.ContainsAny(cfg.CredsStore, "/\\ ") {
		return nil, fmt.Errorf("%s: %scredsStore: invalid helper name %q", file, prefix, cfg.CredsStore)
	}
	return kc, nil
}

// dockerHubHosts are the names of Docker Hub's registry.
var dockerHubHosts = map[string]bool{
	"docker.io": true, "index.docker.io": true, "registry-1.docker.io": true, "registry.hub.docker.com": true,
}

// normalizeAuthKey turns a config key ("https://quay.io", "quay.io/org",
// "https://index.docker.io/v1/") into "host[/path]" with Docker Hub as
// index.docker.io.
func normalizeAuthKey(k string) (string, error) {
	s := strings.TrimSpace(k)
	s = strings.TrimPrefix(strings.TrimPrefix(s, "https://"), "http://")
	s = strings.TrimRight(s, "/")
	host, path, _ := strings.Cut(s, "/")
	host = strings.ToLower(host)
	if host == "" {
		return "", errors.New("no registry host")
	}
	if dockerHubHosts[host] {
		host = name.DefaultRegistry
		if path == "v1" || path == "v2" {
			path = ""
		}
	} else if path == "v1" || path == "v2" {
		// "https://host/v1/": docker's legacy form of a host key.
		path = ""
	}
	if path == "" {
		return host, nil
	}
	return host + "/" + path, nil
}

// Resolve implements authn.Keychain.
func (k *fileKeychain) Resolve(r authn.Resource) (authn.Authenticator, error) {
	return k.ResolveContext(context.Background(), r)
}

// ResolveContext implements authn.ContextKeychain.
func (k *fileKeychain) ResolveContext(ctx context.Context, r authn.Resource) (authn.Authenticator, error) {
	host := strings.ToLower(r.RegistryStr())
	if dockerHubHosts[host] {
		host = name.DefaultRegistry
	}
	full := host
	if s := r.String(); s != r.RegistryStr() {
		// A repository: String() is "registry/repository".
		if _, repo, ok := strings.Cut(s, "/"); ok {
			full = host + "/" + repo
		}
	}
	if h, ok := k.helpers[host]; ok {
		return k.helper(ctx, h, host)
	}
	best := -1
	for i, e := range k.entries {
		if e.key == host || strings.HasPrefix(full, e.key+"/") || full == e.key {
			if best < 0 || len(e.key) > len(k.entries[best].key) {
				best = i
			}
		}
	}
	if best >= 0 {
		return authn.FromConfig(k.entries[best].cfg), nil
	}
	if k.store != "" {
		return k.helper(ctx, k.store, host)
	}
	return authn.Anonymous, nil
}

// helper runs "docker-credential-NAME get" for host. A helper that has no
// credentials for host gives anonymous access; its output never reaches an
// error message.
func (k *fileKeychain) helper(ctx context.Context, helperName, host string) (authn.Authenticator, error) {
	server := host
	if host == name.DefaultRegistry {
		server = authn.DefaultAuthKey
	}
	bin := "docker-credential-" + helperName
	cmd := exec.CommandContext(ctx, bin, "get")
	cmd.Stdin = strings.NewReader(server)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		out := stdout.String() + stderr.String()
		if strings.Contains(out, "credentials not found") {
			return authn.Anonymous, nil
		}
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return nil, fmt.Errorf("%s: credential helper %s failed for %s (exit status %d)", k.where, bin, host, ee.ExitCode())
		}
		return nil, fmt.Errorf("%s: credential helper %s for %s: %w", k.where, bin, host, err)
	}
	var c struct {
		Username string `json:"Username"`
		Secret   string `json:"Secret"`
	}
	if err := json.Unmarshal(stdout.Bytes(), &c); err != nil {
		return nil, fmt.Errorf("%s: credential helper %s for %s printed no valid JSON (%s)", k.where, bin, host, jsonErr(err))
	}
	if c.Username == "<token>" {
		return authn.FromConfig(authn.AuthConfig{IdentityToken: c.Secret}), nil
	}
	if c.Username == "" && c.Secret == "" {
		return authn.Anonymous, nil
	}
	return authn.FromConfig(authn.AuthConfig{Username: c.Username, Password: c.Secret}), nil
}
