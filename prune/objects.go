package prune

import (
	"fmt"
	"strings"
	"time"
)

// InputError is a reference input that cannot be read: it names the
// input (file or cluster), the document, the object and the field.
type InputError struct {
	Input  string // "references FILE" or "cluster"
	Doc    int    // 1-based document number in a file; 0 in a cluster
	Object string // "KIND NS/NAME"
	Field  string
	Err    string
}

func (e *InputError) Error() string {
	s := e.Input
	if e.Doc > 0 {
		s += fmt.Sprintf(": document %d", e.Doc)
	}
	if e.Object != "" {
		s += " (" + e.Object + ")"
	}
	if e.Field != "" {
		s += ": " + e.Field
	}
	return s + ": " + e.Err
}

// The annotations the machine-config daemon keeps on a Node.
const (
	annCurrentConfig = "machineconfiguration.openshift.io/currentConfig"
	annDesiredConfig = "machineconfiguration.openshift.io/desiredConfig"
	annCurrentImage  = "machineconfiguration.openshift.io/currentImage"
	annDesiredImage  = "machineconfiguration.openshift.io/desiredImage"
)

// collector turns objects into references. MachineConfig osImageURLs
// wait in mcs until finish knows which configs pools and nodes name.
type collector struct {
	refs Refs
	// mcs are the osImageURLs by MachineConfig name; rendered marks the
	// MCO's rendered configs, which count only while named.
	mcs      map[string]Ref
	rendered map[string]bool
	// named are the MachineConfig names pools and nodes reference.
	named map[string]bool
	// every makes every MachineConfig count (reference files).
	every bool
}

func newCollector(every bool) *collector {
	return &collector{mcs: map[string]Ref{}, rendered: map[string]bool{}, named: map[string]bool{}, every: every}
}

// obj is one object being read, for fields and errors.
type obj struct {
	m     map[string]any
	input string
	doc   int
	id    string // "KIND NS/NAME"
}

func (o obj) fail(field, format string, a ...any) error {
	return &InputError{Input: o.input, Doc: o.doc, Object: o.id, Field: field, Err: fmt.Sprintf(format, a...)}
}

// add reads one object (a List's items each) into c.
func (c *collector) add(input string, doc int, m map[string]any) error {
	kind, _ := m["kind"].(string)
	o := obj{m: m, input: input, doc: doc, id: objectID(m)}
	if strings.HasSuffix(kind, "List") {
		items, ok := m["items"].([]any)
		if !ok && m["items"] != nil {
			return o.fail("items", "not a list")
		}
		for i, it := range items {
			im, ok := it.(map[string]any)
			if !ok {
				return o.fail(fmt.Sprintf("items[%d]", i), "not an object")
			}
			if err := c.add(input, doc, im); err != nil {
				return err
			}
		}
		return nil
	}
	switch kind {
	case "PoolImage":
		return c.poolImage(o)
	case "ConfigMap":
		return c.configMap(o)
	case "MachineConfig":
		return c.machineConfig(o)
	case "MachineConfigPool":
		return c.machineConfigPool(o)
	case "Node":
		return c.node(o)
	case "BootcNode":
		return c.bootcNode(o)
	case "BootcNodePool":
		return c.bootcNodePool(o)
	case "":
		return o.fail("kind", "missing")
	}
	return o.fail("kind", "%q is not a kind that references images (want PoolImage, ConfigMap, MachineConfig, MachineConfigPool, Node, BootcNode, BootcNodePool or a List of them)", kind)
}

// objectID is "KIND NS/NAME" (or "KIND NAME").
func objectID(m map[string]any) string {
	kind, _ := m["kind"].(string)
	ns, _ := field(m, "metadata", "namespace").(string)
	n, _ := field(m, "metadata", "name").(string)
	if ns != "" {
		n = ns + "/" + n
	}
	return strings.TrimSpace(kind + " " + n)
}

// field walks m along path; nil when a step is missing.
func field(m map[string]any, path ...string) any {
	var v any = m
	for _, p := range path {
		mm, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = mm[p]
	}
	return v
}

// str reads an optional string field; a value of another type is an error.
func (o obj) str(path ...string) (string, error) {
	v := field(o.m, path...)
	if v == nil {
		return "", nil
	}
	s, ok := v.(string)
	if !ok {
		return "", o.fail(strings.Join(path, "."), "not a string")
	}
	return s, nil
}

// ref adds the reference in field path (if set) as kind.
func (c *collector) ref(o obj, kind, pool string, t time.Time, path ...string) error {
	s, err := o.str(path...)
	if err != nil || s == "" {
		return err
	}
	return c.refValue(o, kind, pool, t, strings.Join(path, "."), s)
}

// refValue adds the reference s read from field f.
func (c *collector) refValue(o obj, kind, pool string, t time.Time, f, s string) error {
	r, err := parseRef(s)
	if err != nil {
		return o.fail(f, "%v", err)
	}
	r.Kind, r.From, r.Pool, r.Time = kind, o.id+" "+f, pool, t
	c.refs.add(r)
	return nil
}

// timeField reads an RFC 3339 time field ("" when unset).
func (o obj) timeField(path ...string) (time.Time, error) {
	s, err := o.str(path...)
	if err != nil || s == "" {
		return time.Time{}, err
	}
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		return time.Time{}, o.fail(strings.Join(path, "."), "invalid time %q (want RFC 3339)", s)
	}
	return t, nil
}

// finish adds the osImageURLs of the MachineConfigs that count: every one
// that is not a rendered config, and rendered ones a pool or node names.
func (c *collector) finish() *Refs {
	for n, r := range c.mcs {
		if c.every || !c.rendered[n] || c.named[n] {
			c.refs.add(r)
		}
	}
	c.mcs = map[string]Ref{}
	return &c.refs
}
