package nodeside

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"os"
	"strings"
	"testing"

	"github.com/coreos/ignition/v2/config"
	"github.com/coreos/ignition/v2/config/v3_4"
	extensionsv1alpha1 "github.com/gardener/gardener/pkg/apis/extensions/v1alpha1"
	"sigs.k8s.io/yaml"

	"github.com/oslayer/oslayer/sign"
	"github.com/oslayer/oslayer/test/fixtures"
)

// gardenerProvisionOSC is the provision OSC gardener generates for a
// worker pool (gardener-node-init, the node agent's files).
func gardenerProvisionOSC(t *testing.T) *extensionsv1alpha1.OperatingSystemConfig {
	t.Helper()
	b, err := os.ReadFile(fixtures.Path(t, "gardener", "generated", "osc-worker-a-provision.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	osc := &extensionsv1alpha1.OperatingSystemConfig{}
	if err := yaml.Unmarshal(b, osc); err != nil {
		t.Fatal(err)
	}
	if osc.Spec.Purpose != extensionsv1alpha1.OperatingSystemConfigPurposeProvision || len(osc.Spec.Units) == 0 {
		t.Fatalf("the fixture is not a provision OSC with units")
	}
	return osc
}

// edgeOSC adds what the generated OSC lacks to osc: a secretRef file, a
// plain file without permissions, a unit given only drop-ins, a disabled
// unit and one with command stop, filePaths.
func edgeOSC(osc *extensionsv1alpha1.OperatingSystemConfig) *extensionsv1alpha1.OperatingSystemConfig {
	osc = osc.DeepCopy()
	osc.Spec.Files = append(osc.Spec.Files,
		extensionsv1alpha1.File{Path: "/etc/kubernetes/pki/edge.key", Permissions: new(uint32(0o600)),
			Content: extensionsv1alpha1.FileContent{SecretRef: &extensionsv1alpha1.FileContentSecretRef{Name: "edge", DataKey: "key"}}},
		extensionsv1alpha1.File{Path: "/etc/edge/plain.conf",
			Content: extensionsv1alpha1.FileContent{Inline: &extensionsv1alpha1.FileContentInline{Data: "a = 1\n# 100% plain, with <html> & \"quotes\"\n"}}},
	)
	osc.Spec.Units = append(osc.Spec.Units,
		extensionsv1alpha1.Unit{Name: "chronyd.service", DropIns: []extensionsv1alpha1.DropIn{{Name: "10-edge.conf", Content: "[Service]\nNice=5\n"}}},
		extensionsv1alpha1.Unit{Name: "edge-off.service", Enable: new(false),
			Content: new("[Unit]\nDescription=off\n[Service]\nExecStart=/bin/true\n[Install]\nWantedBy=multi-user.target\n")},
		extensionsv1alpha1.Unit{Name: "edge-stop.service", Command: new(extensionsv1alpha1.CommandStop), FilePaths: []string{"/etc/edge/plain.conf"},
			Content: new("[Unit]\nDescription=stop\n[Service]\nExecStart=/bin/true\n[Install]\nWantedBy=multi-user.target\n")},
	)
	return osc
}

var edgeSecrets = map[string]map[string][]byte{"edge": {"key": []byte("-----BEGIN EC PRIVATE KEY-----\nedge\n-----END EC PRIVATE KEY-----\n")}}

// trustBundle is what `oslayer trust` writes for the pool repository.
// With accept, the images the node pulls unsigned, as the extension
// passes them (NodeImages).
func trustBundle(t *testing.T, accept ...string) (policy, sigstore, pub []byte, keyPath string) {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalPKIXPublicKey(&k.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	pub = pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})
	b, err := sign.Trust("registry.example:5000/pools/worker", pub, sign.TrustOptions{AcceptImages: accept})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range b.Files {
		switch {
		case f.NodePath == sign.NodePolicyPath:
			policy = f.Content
		case strings.HasPrefix(f.NodePath, sign.NodeRegistriesDDir+"/"):
			sigstore = f.Content
		case strings.HasPrefix(f.NodePath, sign.NodeKeyDir+"/"):
			keyPath = f.NodePath
		}
	}
	if policy == nil || sigstore == nil || keyPath == "" {
		t.Fatalf("the trust bundle lacks a file: %+v", b.Files)
	}
	return policy, sigstore, pub, keyPath
}

// parseIgnition parses ud with Ignition's own parsers, the spec version's
// and the any-version one the machine's Ignition uses, and fails on any
// report entry (Ignition refuses errors; the config has no warnings).
func parseIgnition(t *testing.T, ud []byte) {
	t.Helper()
	if _, rpt, err := v3_4.Parse(ud); err != nil || len(rpt.Entries) != 0 {
		t.Fatalf("v3_4.Parse: %v\n%s", err, rpt.String())
	}
	if _, rpt, err := config.Parse(ud); err != nil || len(rpt.Entries) != 0 {
		t.Fatalf("config.Parse: %v\n%s", err, rpt.String())
	}
}

func TestUserDataParses(t *testing.T) {
	osc := edgeOSC(gardenerProvisionOSC(t))
	policy, sigstore, pub, _ := trustBundle(t)
	for name, p := range map[string]Provision{
		"no image":   {OSC: osc, Secrets: edgeSecrets},
		"image":      {OSC: osc, Secrets: edgeSecrets, Image: testImage},
		"image+sigs": {OSC: osc, Secrets: edgeSecrets, Image: testImage, Policy: policy, SigstoreConfig: sigstore, PublicKey: pub},
	} {
		t.Run(name, func(t *testing.T) {
			ud, err := UserData(p)
			if err != nil {
				t.Fatal(err)
			}
			parseIgnition(t, ud)
			if got := strings.Contains(string(ud), `"name":"`+PivotUnit+`"`); got != (p.Image != "") {
				t.Errorf("pivot unit in the user data: %v, want %v", got, p.Image != "")
			}
		})
	}
}

// TestUserDataPlaceholders: machine-controller-manager replaces the
// bootstrap token and machine name placeholders URL-encoded in Ignition
// user data; they must be there so, and the config must still parse.
func TestUserDataPlaceholders(t *testing.T) {
	ud, err := UserData(Provision{OSC: gardenerProvisionOSC(t)})
	if err != nil {
		t.Fatal(err)
	}
	for _, ph := range []string{"%3C%3CBOOTSTRAP_TOKEN%3E%3E", "%3C%3CMACHINE_NAME%3E%3E"} {
		if !strings.Contains(string(ud), ph) {
			t.Errorf("the user data has no %s", ph)
		}
	}
}

func TestUserDataRefusals(t *testing.T) {
	base := gardenerProvisionOSC(t)
	for _, c := range []struct {
		name  string
		edit  func(*Provision)
		field string
	}{
		{"tag image", func(p *Provision) { p.Image = "registry.example:5000/pools/worker:41" }, "image"},
		{"missing secret key", func(p *Provision) {
			p.OSC.Spec.Files[3].Content = extensionsv1alpha1.FileContent{SecretRef: &extensionsv1alpha1.FileContentSecretRef{Name: "edge", DataKey: "nope"}}
		}, "spec.files[3].content.secretRef"},
		{"imageRef", func(p *Provision) {
			p.OSC.Spec.Files[2].Content = extensionsv1alpha1.FileContent{ImageRef: &extensionsv1alpha1.FileContentImageRef{Image: "x", FilePathInImage: "/y"}}
		}, "spec.files[2].content.imageRef"},
		{"hostName", func(p *Provision) { p.OSC.Spec.Files[1].HostName = new("node-1") }, "spec.files[1].hostName"},
		{"bad base64", func(p *Provision) { p.OSC.Spec.Files[0].Content.Inline.Data = "not base64!" }, "spec.files[0].content.inline.data"},
		{"encoding", func(p *Provision) { p.OSC.Spec.Files[0].Content.Inline.Encoding = "gzip" }, "spec.files[0].content.inline.encoding"},
		{"relative path", func(p *Provision) { p.OSC.Spec.Files[4].Path = "etc/x" }, "spec.files[4].path"},
		{"unit name", func(p *Provision) { p.OSC.Spec.Units[1].Name = "kubelet" }, "spec.units[1].name"},
		{"drop-in name", func(p *Provision) {
			p.OSC.Spec.Units[0].DropIns = []extensionsv1alpha1.DropIn{{Name: "x.txt", Content: "[Unit]\n"}}
		}, "spec.units[0].dropIns[0].name"},
		{"filePaths", func(p *Provision) { p.OSC.Spec.Units[2].FilePaths = []string{"/etc/none"} }, "spec.units[2].filePaths[0]"},
		{"command", func(p *Provision) { p.OSC.Spec.Units[0].Command = new(extensionsv1alpha1.UnitCommand("reload")) }, "spec.units[0].command"},
		{"pivot unit", func(p *Provision) { p.Image = testImage; p.OSC.Spec.Units[1].Name = PivotUnit }, "spec.units[1].name"},
		{"pivot file", func(p *Provision) { p.Image = testImage; p.OSC.Spec.Files[4].Path = UpdateCommand }, "spec.files[4].path"},
		{"purpose", func(p *Provision) { p.OSC.Spec.Purpose = extensionsv1alpha1.OperatingSystemConfigPurposeReconcile }, "spec.purpose"},
		{"key without policy", func(p *Provision) { p.Image = testImage; p.PublicKey = []byte("k") }, "policy"},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := Provision{OSC: base.DeepCopy(), Secrets: edgeSecrets}
			c.edit(&p)
			ud, err := UserData(p)
			if err == nil || ud != nil {
				t.Fatalf("UserData = %d bytes, %v; want a refusal", len(ud), err)
			}
			if !strings.HasPrefix(err.Error(), c.field+":") {
				t.Errorf("error %q does not start with the field %s", err, c.field)
			}
		})
	}
}

// fileData is the content of an OSC file as the node agent decodes it.
func fileData(t *testing.T, f extensionsv1alpha1.File, secrets map[string]map[string][]byte) []byte {
	t.Helper()
	switch {
	case f.Content.SecretRef != nil:
		return secrets[f.Content.SecretRef.Name][f.Content.SecretRef.DataKey]
	case f.Content.Inline.Encoding == "b64":
		b, err := base64.StdEncoding.DecodeString(f.Content.Inline.Data)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	return []byte(f.Content.Inline.Data)
}

// TestUserDataSize: the user data of gardener's provision OSC with the
// pivot and its policy fits AWS's 16 KiB user data limit (the smallest
// of the providers), as os-coreos's user data for the same OSC does.
func TestUserDataSize(t *testing.T) {
	osc := gardenerProvisionOSC(t)
	policy, sigstore, pub, _ := trustBundle(t, NodeImages(osc)...)
	ud, err := UserData(Provision{OSC: osc, Image: testImage, Policy: policy, SigstoreConfig: sigstore, PublicKey: pub})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("user data: %d bytes", len(ud))
	if len(ud) > 16<<10 {
		t.Errorf("user data of %d bytes exceeds 16 KiB", len(ud))
	}
}
