package packagestage

import (
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

func TestKeyCoversEveryPackageInput(t *testing.T) {
	base := v1.Hash{Algorithm: "sha256", Hex: strings.Repeat("a", 64)}
	otherBase := v1.Hash{Algorithm: "sha256", Hex: strings.Repeat("b", 64)}
	ctxDir := t.TempDir()
	write := func(rel, data string, mode os.FileMode) {
		p := filepath.Join(ctxDir, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(data), mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, mode); err != nil {
			t.Fatal(err)
		}
	}
	write("agent.rpm", "rpm bytes", 0o644)
	write("etc/agent.conf", "level=1\n", 0o644)
	inputs := func() Inputs {
		return Inputs{
			Extensions:    []string{"usbguard"},
			KernelType:    "realtime",
			Arch:          "amd64",
			Containerfile: []byte("FROM packages\nCOPY agent.rpm /tmp/\nRUN rpm -i /tmp/agent.rpm\n"),
			BuildArgs:     map[string]string{"VERSION": "1", "CHANNEL": "stable"},
			Repos:         map[string][]byte{"agent.repo": []byte("[agent]\nbaseurl=https://repo.example/\n")},
		}
	}
	key := func(b v1.Hash, in Inputs) Key {
		t.Helper()
		p, err := NewPlan(b, in, ctxDir)
		if err != nil {
			t.Fatal(err)
		}
		return p.Key
	}
	k0 := key(base, inputs())
	if !strings.HasPrefix(k0.String(), "sha256:") || len(k0.Tag()) != len("packages-")+64 {
		t.Fatalf("key %s tag %s", k0, k0.Tag())
	}
	// Same inputs (map order, the files' times, the Containerfile's name) give
	// the same key.
	same := inputs()
	same.BuildArgs = maps.Clone(same.BuildArgs)
	same.ContainerfileName = "elsewhere/Containerfile"
	if err := os.Chtimes(filepath.Join(ctxDir, "agent.rpm"), time.Unix(1, 0), time.Unix(1, 0)); err != nil {
		t.Fatal(err)
	}
	if k := key(base, same); k != k0 {
		t.Fatalf("same inputs: key %s, want %s", k, k0)
	}
	changes := map[string]func(*Inputs){
		"extension":     func(in *Inputs) { in.Extensions = append(in.Extensions, "sysstat") },
		"kernel type":   func(in *Inputs) { in.KernelType = "" },
		"containerfile": func(in *Inputs) { in.Containerfile = append(in.Containerfile, "RUN true\n"...) },
		"arg value":     func(in *Inputs) { in.BuildArgs["VERSION"] = "2" },
		"arg name":      func(in *Inputs) { delete(in.BuildArgs, "VERSION"); in.BuildArgs["VERSIONS"] = "1" },
		"repo content":  func(in *Inputs) { in.Repos["agent.repo"] = []byte("[agent]\n") },
		"repo name":     func(in *Inputs) { in.Repos["other.repo"] = in.Repos["agent.repo"]; delete(in.Repos, "agent.repo") },
		"field shift":   func(in *Inputs) { in.BuildArgs = map[string]string{"VERSION1": "", "CHANNEL": "stable"} },
	}
	seen := map[Key]string{k0: "original"}
	for name, change := range changes {
		in := inputs()
		change(&in)
		k := key(base, in)
		if prev, ok := seen[k]; ok {
			t.Errorf("%s: key %s equals the key of %s", name, k, prev)
		}
		seen[k] = name
	}
	if k := key(otherBase, inputs()); k == k0 {
		t.Errorf("base digest: key unchanged")
	}
	// The build context: content, mode, a new file, a symlink's target.
	ctxChanges := []struct {
		name string
		do   func() error
	}{
		{"context content", func() error { write("etc/agent.conf", "level=2\n", 0o644); return nil }},
		{"context mode", func() error { return os.Chmod(filepath.Join(ctxDir, "agent.rpm"), 0o755) }},
		{"context new file", func() error { write("etc/extra", "", 0o644); return nil }},
		{"context symlink", func() error { return os.Symlink("agent.rpm", filepath.Join(ctxDir, "link")) }},
		{"context symlink target", func() error {
			os.Remove(filepath.Join(ctxDir, "link"))
			return os.Symlink("etc/agent.conf", filepath.Join(ctxDir, "link"))
		}},
	}
	for _, c := range ctxChanges {
		if err := c.do(); err != nil {
			t.Fatal(err)
		}
		k := key(base, inputs())
		if prev, ok := seen[k]; ok {
			t.Errorf("%s: key %s equals the key of %s", c.name, k, prev)
		}
		seen[k] = c.name
	}
}

func TestKeyRefusesAMissingContext(t *testing.T) {
	_, err := NewPlan(v1.Hash{Algorithm: "sha256", Hex: strings.Repeat("a", 64)}, Inputs{Extensions: []string{"sysstat"}}, filepath.Join(t.TempDir(), "nope"))
	if err == nil || !strings.Contains(err.Error(), "build context") {
		t.Fatalf("missing context: %v", err)
	}
}
