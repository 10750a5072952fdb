package sign

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"path"
	"regexp"
	"strconv"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	"sigs.k8s.io/yaml"
)

// Where a node reads its container trust configuration.
const (
	NodePolicyPath      = "/etc/containers/policy.json"
	NodeRegistriesDDir  = "/etc/containers/registries.d"
	NodeKeyDir          = "/etc/pki/containers"
	TrustPolicyFile     = "policy.json"
	TrustFragmentFile   = "policy-fragment.json"
	TrustOSCFile        = "trust-osc.yaml"
	TrustMachineConfig  = "99-oslayer-trust.yaml"
	trustRegistriesDDir = "registries.d"
)

// TrustOptions tune the trust files.
type TrustOptions struct {
	// NodeKeyPath is where the public key lives on the node (default
	// /etc/pki/containers/oslayer-HASH.pub, HASH from the repository).
	NodeKeyPath string
	// Pool is the MachineConfig role label (default "worker").
	Pool string
	// OSCType is the OperatingSystemConfig spec.type (default "coreos").
	OSCType string
	// BasePolicy is the node's existing policy.json to add the repository
	// to (e.g. RHCOS's, which carries GPG requirements for Red Hat
	// registries). Empty means the stock Fedora CoreOS policy. Either
	// way a default that only accepts anything becomes reject (see
	// NodeDefault).
	BasePolicy []byte
	// AcceptImages are the images the node still pulls unsigned through
	// containers/image (skopeo, podman, CRI-O): kubelet's pause image,
	// the node agent's, the images its configuration names. Each one's
	// repository gets an insecureAcceptAnything entry, since the default
	// rejects. The signed repository itself cannot be one of them.
	AcceptImages []string
	// ClusterImagePolicy also writes TrustClusterImagePolicyFile, the
	// OpenShift ClusterImagePolicy for the repository and key.
	ClusterImagePolicy bool
}

// TrustFile is one file Trust produces.
type TrustFile struct {
	// Path is relative to the output directory.
	Path string `json:"path"`
	// NodePath is where it belongs on a node ("" for the oslayer inputs).
	NodePath string `json:"nodePath,omitempty"`
	Mode     uint32 `json:"mode"`
	Content  []byte `json:"-"`
}

// MarshalJSON writes Mode as an octal string ("0644"), as every mode in
// oslayer's JSON output is (render's report and manifest).
func (f TrustFile) MarshalJSON() ([]byte, error) {
	type plain TrustFile
	return json.Marshal(struct {
		plain
		Mode string `json:"mode"`
	}{plain(f), fmt.Sprintf("%04o", f.Mode)})
}

// UnmarshalJSON reads what MarshalJSON writes.
func (f *TrustFile) UnmarshalJSON(b []byte) error {
	type plain TrustFile
	var v struct {
		plain
		Mode string `json:"mode"`
	}
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	m, err := strconv.ParseUint(v.Mode, 8, 32)
	if err != nil {
		return fmt.Errorf("trust file %s: mode %q: want octal, e.g. \"0644\"", v.Path, v.Mode)
	}
	*f = TrustFile(v.plain)
	f.Mode = uint32(m)
	return nil
}

// TrustBundle is what a node needs to enforce the signatures of one
// repository, plus the same files as oslayer inputs.
type TrustBundle struct {
	// Repository is the normalized repository ("REG/REPO").
	Repository string `json:"repository"`
	// Files are written in this order.
	Files []TrustFile `json:"files"`
}

// Policy is a containers-policy.json(5) document.
type Policy struct {
	Default    []PolicyRequirement                       `json:"default,omitempty"`
	Transports map[string]map[string][]PolicyRequirement `json:"transports"`
}

// PolicyRequirement is one policy requirement.
type PolicyRequirement struct {
	Type           string          `json:"type"`
	KeyPath        string          `json:"keyPath,omitempty"`
	SignedIdentity *SignedIdentity `json:"signedIdentity,omitempty"`
}

// SignedIdentity is a sigstoreSigned signedIdentity.
type SignedIdentity struct {
	Type string `json:"type"`
}

// hostRE is a registry host: a DNS name, IPv4 or [IPv6], optional port.
var hostRE = regexp.MustCompile(`^([A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?(\.[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?)*|\[[0-9A-Fa-f:.]+\])(:[0-9]{1,5})?$`)

// PolicyScope returns the policy.json scope containers/image uses for repo
// ("docker.io/library/x" for Docker Hub, "REG/REPO" otherwise).
func PolicyScope(repo string) (string, error) {
	if repo == "" || strings.Contains(repo, "@") || strings.Contains(repo, "://") {
		return "", fmt.Errorf("repository %q: give REG/REPO without scheme, tag or digest", repo)
	}
	r, err := name.NewRepository(repo)
	if err != nil {
		return "", fmt.Errorf("repository %q: %v (give REG/REPO without tag or digest)", repo, err)
	}
	reg := r.RegistryStr()
	if !hostRE.MatchString(reg) {
		return "", fmt.Errorf("repository %q: registry host %q is not a host name or address with an optional port", repo, reg)
	}
	if reg == name.DefaultRegistry {
		reg = "docker.io"
	}
	return reg + "/" + r.RepositoryStr(), nil
}

// Trust returns the node trust files for repo and the PEM public key pub:
// policy.json (default reject, see NodeDefault; sigstoreSigned for repo;
// insecureAcceptAnything for the repositories of o.AcceptImages; the rest
// as in o.BasePolicy), a fragment with only repo's entry to merge into
// an existing policy, registries.d/oslayer-REPO.yaml turning on sigstore
// attachments, the public key, and the same three as a Gardener
// OperatingSystemConfig and an OpenShift MachineConfig (Ignition 3.4) so
// the trust bootstrap can be baked into the first image.
func Trust(repo string, pub []byte, o TrustOptions) (*TrustBundle, error) {
	scope, err := PolicyScope(repo)
	if err != nil {
		return nil, err
	}
	if _, err := ParsePublicKey("--key", pub); err != nil {
		return nil, err
	}
	sum := sha256.Sum256([]byte(scope))
	slug := hex.EncodeToString(sum[:])[:16]
	if o.NodeKeyPath == "" {
		o.NodeKeyPath = path.Join(NodeKeyDir, "oslayer-"+slug+".pub")
	}
	if !path.IsAbs(o.NodeKeyPath) {
		return nil, fmt.Errorf("node key path %q: must be absolute", o.NodeKeyPath)
	}
	if o.Pool == "" {
		o.Pool = "worker"
	}
	if o.OSCType == "" {
		o.OSCType = "coreos"
	}
	req := []PolicyRequirement{{Type: "sigstoreSigned", KeyPath: o.NodeKeyPath, SignedIdentity: &SignedIdentity{Type: "matchRepository"}}}
	accept, err := acceptScopes(scope, o.AcceptImages)
	if err != nil {
		return nil, err
	}
	fullJSON, err := mergePolicy(o.BasePolicy, scope, req, accept)
	if err != nil {
		return nil, err
	}
	frag := Policy{Transports: map[string]map[string][]PolicyRequirement{"docker": {scope: req}}}
	fragJSON, err := json.MarshalIndent(frag, "", "  ")
	if err != nil {
		return nil, err
	}
	regd, err := yaml.Marshal(map[string]any{"docker": map[string]any{scope: map[string]any{"use-sigstore-attachments": true}}})
	if err != nil {
		return nil, err
	}
	regdName := "oslayer-" + fileSlug(scope) + ".yaml"
	keyName := path.Base(o.NodeKeyPath)

	node := []TrustFile{
		{Path: TrustPolicyFile, NodePath: NodePolicyPath, Mode: 0o644, Content: append(fullJSON, '\n')},
		{Path: path.Join(trustRegistriesDDir, regdName), NodePath: path.Join(NodeRegistriesDDir, regdName), Mode: 0o644, Content: regd},
		{Path: keyName, NodePath: o.NodeKeyPath, Mode: 0o644, Content: pub},
	}
	osc, err := trustOSC(node, o)
	if err != nil {
		return nil, err
	}
	mc, err := trustMachineConfig(node, o)
	if err != nil {
		return nil, err
	}
	files := append([]TrustFile{}, node...)
	files = append(files,
		TrustFile{Path: TrustFragmentFile, Mode: 0o644, Content: append(fragJSON, '\n')},
		TrustFile{Path: TrustOSCFile, Mode: 0o644, Content: osc},
		TrustFile{Path: TrustMachineConfig, Mode: 0o644, Content: mc},
	)
	if o.ClusterImagePolicy {
		cip, err := ClusterImagePolicy(repo, pub)
		if err != nil {
			return nil, err
		}
		files = append(files, TrustFile{Path: TrustClusterImagePolicyFile, Mode: 0o644, Content: cip})
	}
	return &TrustBundle{Repository: scope, Files: files}, nil
}

// mergePolicy sets transports.docker[scope] = req in base (a policy.json;
// empty means the stock Fedora CoreOS one), adds an insecureAcceptAnything
// entry for each scope of accept the base does not name, makes a default
// that accepts anything reject (NodeDefault), and keeps everything else as
// it was, including requirement fields this package does not model.
func mergePolicy(base []byte, scope string, req []PolicyRequirement, accept []string) ([]byte, error) {
	if len(bytes.TrimSpace(base)) == 0 {
		base = []byte(`{"default":[{"type":"insecureAcceptAnything"}],"transports":{"docker-daemon":{"":[{"type":"insecureAcceptAnything"}]}}}`)
	}
	var doc map[string]json.RawMessage
	if err := json.Unmarshal(base, &doc); err != nil {
		return nil, fmt.Errorf("base policy: %v", err)
	}
	def, err := nodeDefault(doc["default"])
	if err != nil {
		return nil, err
	}
	doc["default"] = def
	transports := map[string]map[string]json.RawMessage{}
	if raw, ok := doc["transports"]; ok {
		if err := json.Unmarshal(raw, &transports); err != nil {
			return nil, fmt.Errorf("base policy: transports: %v", err)
		}
	}
	if transports["docker"] == nil {
		transports["docker"] = map[string]json.RawMessage{}
	}
	r, err := json.Marshal(req)
	if err != nil {
		return nil, err
	}
	transports["docker"][scope] = r
	for _, a := range accept {
		if _, ok := transports["docker"][a]; !ok {
			transports["docker"][a] = json.RawMessage(`[{"type":"insecureAcceptAnything"}]`)
		}
	}
	t, err := json.Marshal(transports)
	if err != nil {
		return nil, err
	}
	doc["transports"] = t
	out, err := json.Marshal(doc)
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	if err := json.Indent(&buf, out, "", "  "); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// fileSlug makes a repository usable as a file name.
func fileSlug(s string) string {
	return strings.NewReplacer("/", "-", ":", "-", "@", "-").Replace(s)
}

func trustOSC(files []TrustFile, o TrustOptions) ([]byte, error) {
	type inline struct {
		Encoding string `json:"encoding"`
		Data     string `json:"data"`
	}
	type content struct {
		Inline inline `json:"inline"`
	}
	type file struct {
		Path        string  `json:"path"`
		Permissions uint32  `json:"permissions"`
		Content     content `json:"content"`
	}
	var fs []file
	for _, f := range files {
		fs = append(fs, file{Path: f.NodePath, Permissions: f.Mode, Content: content{Inline: inline{Encoding: "b64", Data: base64.StdEncoding.EncodeToString(f.Content)}}})
	}
	doc := map[string]any{
		"apiVersion": "extensions.gardener.cloud/v1alpha1",
		"kind":       "OperatingSystemConfig",
		"metadata":   map[string]any{"name": "oslayer-trust"},
		"spec":       map[string]any{"type": o.OSCType, "purpose": "reconcile", "files": fs},
	}
	return yaml.Marshal(doc)
}

func trustMachineConfig(files []TrustFile, o TrustOptions) ([]byte, error) {
	type contents struct {
		Source string `json:"source"`
	}
	type file struct {
		Path      string   `json:"path"`
		Mode      uint32   `json:"mode"`
		Overwrite bool     `json:"overwrite"`
		Contents  contents `json:"contents"`
	}
	var fs []file
	for _, f := range files {
		fs = append(fs, file{Path: f.NodePath, Mode: f.Mode, Overwrite: true, Contents: contents{Source: "data:;base64," + base64.StdEncoding.EncodeToString(f.Content)}})
	}
	doc := map[string]any{
		"apiVersion": "machineconfiguration.openshift.io/v1",
		"kind":       "MachineConfig",
		"metadata": map[string]any{
			"name":   "99-" + o.Pool + "-oslayer-trust",
			"labels": map[string]string{"machineconfiguration.openshift.io/role": o.Pool},
		},
		"spec": map[string]any{"config": map[string]any{
			"ignition": map[string]any{"version": "3.4.0"},
			"storage":  map[string]any{"files": fs},
		}},
	}
	return yaml.Marshal(doc)
}
