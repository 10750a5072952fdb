package controller

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/oslayer/oslayer/api/v1alpha1"
	"github.com/oslayer/oslayer/pipeline"
)

// inputError is a failure of the PoolImage's input (a missing object, a
// document that does not parse): retrying won't help until it changes.
type inputError struct{ msg string }

func (e *inputError) Error() string { return e.msg }

func inputErrorf(format string, a ...any) error { return &inputError{fmt.Sprintf(format, a...)} }

// document is one input document read from the cluster. Name is how
// messages and provenance name it: "Secret/NS/NAME/KEY".
type document struct {
	Name    string
	Kind    string // OSC, MachineConfig, MachineConfigPool, Secret (secretRef content)
	Content []byte
}

// inputs is everything a build of one PoolImage reads from the cluster.
type inputs struct {
	docs []document
	// packageStage reports that the build needs a package stage
	// (spec.packages, MachineConfig extensions or kernelType), and
	// packageReason names what asks for it.
	packageStage  bool
	packageReason string
	// digest covers the spec (but spec.publish and spec.pin) and every document's name
	// and content.
	digest string
	// from names what the documents were read from when their names do
	// not say it (the OpenShift pool and its MachineConfigs).
	from string
}

// readInputs reads the PoolImage's source objects.
func readInputs(ctx context.Context, c client.Reader, pi *v1alpha1.PoolImage) (*inputs, error) {
	docs, from, err := readSource(ctx, c, pi)
	if err != nil {
		return nil, err
	}
	var reasons []string
	for _, d := range docs {
		if d.Kind == "MachineConfig" && needsPackages(d.Content) {
			reasons = append(reasons, d.Name+": spec.extensions/kernelType")
		}
	}
	if p := pi.Spec.Packages; p != nil {
		reasons = append(reasons, "spec.packages")
		pd, err := readPackages(ctx, c, pi.Namespace, p)
		if err != nil {
			return nil, err
		}
		docs = append(docs, pd...)
	}
	digest, err := inputsDigest(pi.Spec, docs)
	if err != nil {
		return nil, err
	}
	return &inputs{docs: docs, from: from, digest: digest,
		packageStage: len(reasons) > 0, packageReason: strings.Join(reasons, ", ")}, nil
}

// readSource reads the documents of spec.source (exactly one of
// openshift, gardener, documents); from names the object they were read
// from when it is not in their names.
func readSource(ctx context.Context, c client.Reader, pi *v1alpha1.PoolImage) (docs []document, from string, err error) {
	src := pi.Spec.Source
	switch {
	case src.OpenShift != nil:
		return poolDocs(ctx, c, pi)
	case src.Gardener != nil:
		docs, err = gardenerDocs(ctx, c, pi)
		return docs, "", err
	case src.Documents != nil:
		docs, err = objectDocs(ctx, c, pi)
		return docs, "", err
	default:
		return nil, "", inputErrorf("spec.source: exactly one of gardener, openshift, documents must be set")
	}
}

// gardenerDocs reads the node agent's OSC Secret and the Secrets its
// units and files refer to (spec.source.gardener).
func gardenerDocs(ctx context.Context, c client.Reader, pi *v1alpha1.PoolImage) ([]document, error) {
	g := pi.Spec.Source.Gardener
	ns := g.Namespace
	if ns == "" {
		ns = pi.Namespace
	}
	s, err := oscSecret(ctx, c, ns, g)
	if err != nil {
		return nil, err
	}
	b, err := pipeline.SecretManifest(s)
	if err != nil {
		return nil, err
	}
	docs := []document{{Name: objName("Secret", ns, s.Name, ""), Kind: "OSC", Content: b}}
	for i, name := range g.SecretRefs {
		s, err := getSecret(ctx, c, ns, name, fmt.Sprintf("spec.source.gardener.secretRefs[%d]", i))
		if err != nil {
			return nil, err
		}
		b, err := pipeline.SecretManifest(s)
		if err != nil {
			return nil, err
		}
		docs = append(docs, document{Name: objName("Secret", ns, name, ""), Kind: "Secret", Content: b})
	}
	return docs, nil
}

// objectDocs reads the documents of spec.source.documents: the given
// keys of each object (every key, in order, when none is given).
func objectDocs(ctx context.Context, c client.Reader, pi *v1alpha1.PoolImage) ([]document, error) {
	var docs []document
	for i, o := range pi.Spec.Source.Documents.Objects {
		field := fmt.Sprintf("spec.source.documents.objects[%d]", i)
		data, err := objectData(ctx, c, pi.Namespace, o, field)
		if err != nil {
			return nil, err
		}
		keys := o.Keys
		if len(keys) == 0 {
			for k := range data {
				keys = append(keys, k)
			}
			sort.Strings(keys)
		}
		for _, k := range keys {
			v, ok := data[k]
			if !ok {
				return nil, inputErrorf("%s: %s %s/%s has no data key %q", field+".keys", o.Kind, pi.Namespace, o.Name, k)
			}
			name := objName(o.Kind, pi.Namespace, o.Name, k)
			kind, err := documentKind(v)
			if err != nil {
				return nil, inputErrorf("%s: %s: %v", field, name, err)
			}
			docs = append(docs, document{Name: name, Kind: kind, Content: v})
		}
	}
	return docs, nil
}

// inputsDigest covers the spec (but spec.publish, spec.pin,
// spec.retention and spec.rollback) and every document's name, kind and
// content.
func inputsDigest(s v1alpha1.PoolImageSpec, docs []document) (string, error) {
	h := sha256.New()
	// Where the image is published, which one (spec.pin, spec.rollback)
	// and how long it is kept (spec.retention) change nothing that is
	// built.
	s.Publish, s.Pin, s.Retention, s.Rollback = nil, "", nil, nil
	spec, err := json.Marshal(s)
	if err != nil {
		return "", err
	}
	writeField(h, spec)
	for _, d := range docs {
		writeField(h, []byte(d.Name))
		writeField(h, []byte(d.Kind))
		writeField(h, d.Content)
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil)), nil
}

// Document kinds of the package inputs read from ConfigMaps.
const (
	kindContainerfile = "Containerfile"
	kindRepo          = "Repo"
)

// readPackages reads the package stage's ConfigMaps: the user
// Containerfile and the repository definitions (every key of the repos
// ConfigMap, in order). Build secrets are not read here: they are mounted
// into the build pod and are no input of the digest.
func readPackages(ctx context.Context, c client.Reader, ns string, p *v1alpha1.Packages) ([]document, error) {
	var docs []document
	if cf := p.Containerfile; cf != nil {
		key := cf.Key
		if key == "" {
			key = "Containerfile"
		}
		data, err := objectData(ctx, c, ns, v1alpha1.DocumentObject{Kind: "ConfigMap", Name: cf.Name}, "spec.packages.containerfile")
		if err != nil {
			return nil, err
		}
		v, ok := data[key]
		if !ok {
			return nil, inputErrorf("spec.packages.containerfile.key: ConfigMap %s/%s has no data key %q", ns, cf.Name, key)
		}
		docs = append(docs, document{Name: objName("ConfigMap", ns, cf.Name, key), Kind: kindContainerfile, Content: v})
	}
	if r := p.Repos; r != nil {
		data, err := objectData(ctx, c, ns, v1alpha1.DocumentObject{Kind: "ConfigMap", Name: r.Name}, "spec.packages.repos")
		if err != nil {
			return nil, err
		}
		if len(data) == 0 {
			return nil, inputErrorf("spec.packages.repos: ConfigMap %s/%s has no repository definitions", ns, r.Name)
		}
		keys := make([]string, 0, len(data))
		for k := range data {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			if !strings.HasSuffix(k, ".repo") {
				return nil, inputErrorf("spec.packages.repos: ConfigMap %s/%s key %q: want NAME.repo", ns, r.Name, k)
			}
			docs = append(docs, document{Name: objName("ConfigMap", ns, r.Name, k), Kind: kindRepo, Content: data[k]})
		}
	}
	return docs, nil
}

// needsPackages reports whether a MachineConfig asks for extensions or a
// kernel type other than the default (what only a package stage builds).
func needsPackages(b []byte) bool {
	var mc struct {
		Spec struct {
			Extensions []string `json:"extensions"`
			KernelType string   `json:"kernelType"`
		} `json:"spec"`
	}
	if yaml.Unmarshal(b, &mc) != nil {
		return false // the render step names what does not parse
	}
	return len(mc.Spec.Extensions) > 0 || (mc.Spec.KernelType != "" && mc.Spec.KernelType != "default")
}

func writeField(h interface{ Write([]byte) (int, error) }, b []byte) {
	fmt.Fprintf(h, "%d:", len(b))
	h.Write(b)
}

func objName(kind, ns, name, key string) string {
	s := kind + "/" + ns + "/" + name
	if key != "" {
		s += "/" + key
	}
	return s
}

// oscSecret is the Gardener source's OSC Secret: by name, or by label
// selector. Several Secrets match while a worker pool rolls (Gardener names
// the Secret after a hash of the pool's settings, and the old nodes keep
// theirs until they are replaced): the newest (creation time, then name)
// is the one new nodes get, and the one built.
func oscSecret(ctx context.Context, c client.Reader, ns string, g *v1alpha1.GardenerSource) (*corev1.Secret, error) {
	if g.Selector == nil {
		return getSecret(ctx, c, ns, g.SecretName, "spec.source.gardener.secretName")
	}
	const field = "spec.source.gardener.selector"
	sel, err := metav1.LabelSelectorAsSelector(g.Selector)
	if err != nil {
		return nil, inputErrorf("%s: %v", field, err)
	}
	var list corev1.SecretList
	if err := c.List(ctx, &list, client.InNamespace(ns), client.MatchingLabelsSelector{Selector: sel}); err != nil {
		return nil, fmt.Errorf("%s: listing Secrets in %s: %w", field, ns, err)
	}
	if len(list.Items) == 0 {
		return nil, inputErrorf("%s: no Secret in namespace %s matches %q", field, ns, sel.String())
	}
	newest := &list.Items[0]
	for i := range list.Items[1:] {
		s := &list.Items[i+1]
		if t, nt := s.CreationTimestamp, newest.CreationTimestamp; nt.Before(&t) || (t.Equal(&nt) && s.Name > newest.Name) {
			newest = s
		}
	}
	return newest, nil
}

// credential reads a pull, push, signing or build Secret: from the API, or
// in the build pod from its volume under Options.SecretsDir (one file per
// data key; the type follows from the keys).
func (r *Reconciler) credential(ctx context.Context, ns, name, field string) (*corev1.Secret, error) {
	if r.Options.SecretsDir == "" {
		return getSecret(ctx, r.Client, ns, name, field)
	}
	dir := filepath.Join(r.Options.SecretsDir, name)
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, inputErrorf("%s: Secret %s/%s is not mounted at %s: %v", field, ns, name, dir, err)
	}
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Data: map[string][]byte{}}
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), "..") {
			continue // the volume's own bookkeeping (..data)
		}
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			return nil, fmt.Errorf("%s: Secret %s/%s: %w", field, ns, name, err)
		}
		s.Data[e.Name()] = b
	}
	switch {
	case s.Data[corev1.DockerConfigJsonKey] != nil:
		s.Type = corev1.SecretTypeDockerConfigJson
	case s.Data[corev1.DockerConfigKey] != nil:
		s.Type = corev1.SecretTypeDockercfg
	}
	return s, nil
}

func getSecret(ctx context.Context, c client.Reader, ns, name, field string) (*corev1.Secret, error) {
	var s corev1.Secret
	if err := c.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, &s); err != nil {
		return nil, notFoundInput(err, field, "Secret", ns, name)
	}
	return &s, nil
}

func objectData(ctx context.Context, c client.Reader, ns string, o v1alpha1.DocumentObject, field string) (map[string][]byte, error) {
	key := types.NamespacedName{Namespace: ns, Name: o.Name}
	switch o.Kind {
	case "ConfigMap":
		var cm corev1.ConfigMap
		if err := c.Get(ctx, key, &cm); err != nil {
			return nil, notFoundInput(err, field, o.Kind, ns, o.Name)
		}
		data := make(map[string][]byte, len(cm.Data)+len(cm.BinaryData))
		for k, v := range cm.Data {
			data[k] = []byte(v)
		}
		for k, v := range cm.BinaryData {
			data[k] = v
		}
		return data, nil
	case "Secret":
		s, err := getSecret(ctx, c, ns, o.Name, field)
		if err != nil {
			return nil, err
		}
		return s.Data, nil
	}
	return nil, inputErrorf("%s.kind: %q is neither ConfigMap nor Secret", field, o.Kind)
}

// notFoundInput turns a missing object into an input error; other errors
// (API server unreachable) stay retryable.
func notFoundInput(err error, field, kind, ns, name string) error {
	if client.IgnoreNotFound(err) == nil {
		return inputErrorf("%s: %s %s/%s not found", field, kind, ns, name)
	}
	return fmt.Errorf("%s: reading %s %s/%s: %w", field, kind, ns, name, err)
}

// documentKind says what a document in a ConfigMap or Secret is.
func documentKind(b []byte) (string, error) {
	var tm struct {
		Kind string `json:"kind"`
	}
	if err := yaml.Unmarshal(b, &tm); err != nil {
		return "", fmt.Errorf("not a YAML or JSON document: %v", err)
	}
	switch tm.Kind {
	case "OperatingSystemConfig":
		return "OSC", nil
	case "MachineConfig", "MachineConfigPool":
		return tm.Kind, nil
	case "Secret":
		return "Secret", nil
	}
	return "", fmt.Errorf("kind %q is none of OperatingSystemConfig, MachineConfig, MachineConfigPool, Secret", tm.Kind)
}

// writeDocs writes the documents under dir, each at its Name, and returns
// the paths by kind.
func writeDocs(dir string, docs []document) (byKind map[string][]string, secretsDir string, err error) {
	byKind = map[string][]string{}
	secretsDir = filepath.Join(dir, "secretrefs")
	if err := os.MkdirAll(secretsDir, 0o700); err != nil {
		return nil, "", err
	}
	for i, d := range docs {
		p := filepath.Join(dir, filepath.FromSlash(d.Name))
		if d.Kind == "Secret" {
			p = filepath.Join(secretsDir, fmt.Sprintf("%03d.yaml", i))
		}
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			return nil, "", err
		}
		if err := os.WriteFile(p, d.Content, 0o600); err != nil {
			return nil, "", err
		}
		byKind[d.Kind] = append(byKind[d.Kind], p)
	}
	return byKind, secretsDir, nil
}
