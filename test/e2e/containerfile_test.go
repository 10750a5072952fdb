package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/oslayer/oslayer/packagestage/bud"
)

type instr struct {
	cmd, args string
	line      int
}

// parseContainerfile splits a Containerfile into instructions (comments
// dropped, continuation lines joined) grouped by stage.
func parseContainerfile(t *testing.T, text string) (pre []instr, stages [][]instr) {
	t.Helper()
	var cur string
	start := 0
	flush := func(n int) {
		s := strings.TrimSpace(cur)
		cur = ""
		if s == "" {
			return
		}
		cmd, args, _ := strings.Cut(s, " ")
		in := instr{cmd: strings.ToUpper(cmd), args: strings.TrimSpace(args), line: n}
		if in.cmd == "FROM" {
			stages = append(stages, nil)
		}
		if len(stages) == 0 {
			pre = append(pre, in)
		} else {
			stages[len(stages)-1] = append(stages[len(stages)-1], in)
		}
	}
	for i, l := range strings.Split(text, "\n") {
		tl := strings.TrimSpace(l)
		if strings.HasPrefix(tl, "#") {
			continue
		}
		if cur == "" {
			start = i + 1
		}
		if strings.HasSuffix(tl, "\\") {
			cur += strings.TrimSuffix(tl, "\\") + " "
			continue
		}
		cur += tl
		flush(start)
	}
	return pre, stages
}

func TestContainerfile(t *testing.T) {
	stages := readContainerfile(t, "Containerfile")
	// The package stage's executor is linked in (the build pod runs it);
	// it needs cgo, so the binary is static through the external linker.
	name, _, out := checkBuilder(t, stages[0], "CGO_ENABLED=1", "-trimpath", "-tags "+bud.Tags+",netgo,osusergo ", "-extldflags -static", "./cmd/oslayer", "-o ")
	checkRuntime(t, stages[len(stages)-1], name, out)
}

// The OS extension's Containerfile: the same shape, a CGO_ENABLED=0 build
// of the extension's module. (Its module's tests run the build command as
// written.)
func TestExtensionContainerfile(t *testing.T) {
	stages := readContainerfile(t, "extension/Containerfile")
	name, _, out := checkBuilder(t, stages[0], "cd extension && ", "CGO_ENABLED=0", "-trimpath", "-tags "+bud.Tags+" ", "./cmd/oslayer-os-extension", "-o ")
	checkRuntime(t, stages[len(stages)-1], name, out)
}

// readContainerfile parses the Containerfile at path (from the repository
// root): ARGs only before the first FROM, a builder and a runtime stage.
func readContainerfile(t *testing.T, path string) [][]instr {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot(t), path))
	if err != nil {
		t.Fatal(err)
	}
	pre, stages := parseContainerfile(t, string(b))
	for _, in := range pre {
		if in.cmd != "ARG" {
			t.Errorf("%s line %d: %s before the first FROM", path, in.line, in.cmd)
		}
	}
	if len(stages) < 2 {
		t.Fatalf("%s: %d stages, want a builder stage and a runtime stage", path, len(stages))
	}
	return stages
}

// checkBuilder checks the builder stage: a Go image named by AS, whose go
// build command has every part in want. It returns the stage's name, the
// command and the binary's path.
func checkBuilder(t *testing.T, builder []instr, want ...string) (name, goBuild, out string) {
	t.Helper()
	from := strings.Fields(builder[0].args)
	if len(from) != 3 || !strings.Contains(from[0], "golang") || !strings.EqualFold(from[1], "AS") {
		t.Errorf("builder stage FROM %q: want golang... AS NAME", builder[0].args)
	}
	name = from[len(from)-1]
	for _, in := range builder {
		if in.cmd == "RUN" && strings.Contains(in.args, "go build") {
			goBuild = in.args
		}
	}
	for _, w := range want {
		if !strings.Contains(goBuild, w) {
			t.Errorf("go build %q lacks %q", goBuild, w)
		}
	}
	if i := strings.Index(goBuild, "-o "); i >= 0 {
		out = strings.Fields(goBuild[i+3:])[0]
	}
	return name, goBuild, out
}

// checkRuntime checks the runtime stage: a minimal base, only the binary
// out copied from the builder stage name, a non-root user, an exec-form
// entrypoint running the binary.
func checkRuntime(t *testing.T, final []instr, name, out string) {
	t.Helper()
	base := strings.Fields(final[0].args)[0]
	if !strings.Contains(base, "distroless/static") && !strings.Contains(base, "fedora-minimal") {
		t.Errorf("runtime base %q is not minimal", base)
	}
	var user, entry string
	copies := 0
	for _, in := range final[1:] {
		switch in.cmd {
		case "COPY":
			f := strings.Fields(in.args)
			if len(f) != 3 || f[0] != "--from="+name || f[1] != out {
				t.Errorf("line %d: COPY %s: the runtime stage may only copy the binary %s from %s", in.line, in.args, out, name)
			}
			copies++
			entry = f[2]
		case "USER":
			user = in.args
		case "ENTRYPOINT":
			var ep []string
			if err := json.Unmarshal([]byte(in.args), &ep); err != nil || len(ep) == 0 {
				t.Errorf("line %d: ENTRYPOINT %s: want the exec (JSON) form", in.line, in.args)
			} else if ep[0] != entry {
				t.Errorf("ENTRYPOINT runs %q, the binary is copied to %q", ep[0], entry)
			}
		case "ADD", "RUN":
			t.Errorf("line %d: %s in the runtime stage", in.line, in.cmd)
		}
	}
	if copies != 1 {
		t.Errorf("%d COPY instructions in the runtime stage, want 1", copies)
	}
	u, _, _ := strings.Cut(user, ":")
	if user == "" || u == "0" || u == "root" {
		t.Errorf("USER %q: want a non-root user", user)
	}
}

func TestParseContainerfileCatchesRoot(t *testing.T) {
	_, st := parseContainerfile(t, "FROM golang AS b\nRUN go \\\n build\nFROM scratch\nUSER root\n")
	if len(st) != 2 || st[0][1].args != "go  build" || st[1][1].cmd != "USER" || st[1][1].args != "root" {
		t.Errorf("parsed %+v", st)
	}
}

// The Containerfile links VERSION into the binary (--version, the image
// label of what it builds, the provenance) and labels its own image with it.
func TestContainerfileVersion(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(repoRoot(t), "Containerfile"))
	if err != nil {
		t.Fatal(err)
	}
	_, stages := parseContainerfile(t, string(b))
	has := func(stage []instr, cmd, want string) bool {
		for _, in := range stage {
			if in.cmd == cmd && strings.Contains(in.args, want) {
				return true
			}
		}
		return false
	}
	for i, st := range [][]instr{stages[0], stages[len(stages)-1]} {
		if !has(st, "ARG", "VERSION") {
			t.Errorf("stage %d does not declare ARG VERSION", i)
		}
	}
	if !has(stages[0], "RUN", "-X main.version=${VERSION}") {
		t.Error("go build does not link VERSION into main.version")
	}
	if !has(stages[len(stages)-1], "LABEL", "org.opencontainers.image.version=${VERSION}") {
		t.Error("the image has no org.opencontainers.image.version label from VERSION")
	}
}
