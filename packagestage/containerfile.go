// Package packagestage plans the package stage of a pool image: what cannot
// be appended as files (MachineConfig extensions and kernelType, a user's
// Containerfile installing a 3rd-party RPM) is built with a container build
// that runs commands in the base, before the config layers are appended.
//
// Plan turns a pool's package inputs into one Containerfile and a cache key:
//
//   - the generated part starts from the official base, named by the build
//     argument OSLAYER_BASE (set by the executor to the pinned base), as the
//     stage "packages" (BaseStage). It installs the extensions' packages
//     and swaps the kernel exactly as the MCO's on-cluster build maps them
//     (see mco.go for the tables and their source);
//   - the user's Containerfile follows. Its final stage must start
//     FROM packages (directly or through its own earlier stages), as a
//     MachineOSConfig's containerfile starts FROM configs; "configs" is
//     accepted as another name for the same stage so such files work
//     unchanged (in oslayer the config files come after this stage, so
//     they are not in it yet);
//   - the key is a hash of every package input: the base digest, the
//     generated and the user Containerfile, the build arguments, the files
//     of the build context and the repository definitions. Secrets are
//     never part of it.
//
// Repository definitions are mounted for the steps that install packages
// and removed in the same step, so they are never in a layer.
package packagestage

import (
	"bytes"
	"fmt"
	"regexp"
	"sort"
	"strings"
)

// BaseStage is the name under which a user Containerfile refers to the base
// with the extensions and kernel applied (FROM packages).
const BaseStage = "packages"

// MCOStageAlias is accepted for BaseStage: MachineOSConfig containerfiles
// start FROM configs.
const MCOStageAlias = "configs"

// BaseArg is the build argument that names the official base image in the
// generated Containerfile. The executor sets it to the pinned base; it is
// not a user build argument and not part of the key (the base digest is).
const BaseArg = "OSLAYER_BASE"

// ReposContext is the name of the additional build context that holds the
// repository definitions (Inputs.Repos) during the build; ReposMount is
// where the install steps see it.
const (
	ReposContext = "oslayer-repos"
	ReposMount   = "/run/oslayer/repos.d"
)

// Inputs are a pool's package inputs.
type Inputs struct {
	// Extensions and KernelType as the pool's MachineConfigs give them
	// (model.Config).
	Extensions []string
	KernelType string
	// Arch is the base's architecture in Go's naming (amd64, arm64, ...);
	// 64k-pages needs arm64, as the MCO requires.
	Arch string
	// Containerfile is the user's Containerfile (nil for none) and
	// ContainerfileName names it in errors.
	Containerfile     []byte
	ContainerfileName string
	// BuildArgs are the user's build arguments.
	BuildArgs map[string]string
	// Repos are repository definitions (*.repo files) for the install
	// steps, by file name.
	Repos map[string][]byte
}

// Empty reports whether the pool needs no package stage.
func (in Inputs) Empty() bool {
	return len(in.Extensions) == 0 && CanonicalKernelType(in.KernelType) == KernelDefault && len(in.Containerfile) == 0
}

// Containerfile is the Containerfile the package stage builds: the
// generated part followed by the user's.
type Containerfile struct {
	// Generated is the part oslayer generates from extensions and
	// kernelType; User is the user's Containerfile as given.
	Generated []byte
	User      []byte
	// UserName names the user's Containerfile in errors.
	UserName string
	// Packages are the extension packages, KernelType the canonical kernel
	// type the generated part selects.
	Packages   []string
	KernelType string
}

// Bytes is the whole Containerfile: the user's preamble (what comes before
// its first FROM: global ARGs, parser directives, comments), the generated
// part, an empty line, then the rest of the user's Containerfile. So the
// user's global ARGs stay global (usable in its FROM lines), as in the file
// given.
func (c *Containerfile) Bytes() []byte {
	pre, rest := c.userSplit()
	out := bytes.Clone(pre)
	out = append(out, c.Generated...)
	if len(c.User) > 0 {
		out = append(out, '\n')
		out = append(out, rest...)
		if !bytes.HasSuffix(rest, []byte("\n")) {
			out = append(out, '\n')
		}
	}
	return out
}

// userSplit splits the user's Containerfile before the line of its first
// FROM.
func (c *Containerfile) userSplit() (pre, rest []byte) {
	for _, in := range parse(c.User) {
		if in.cmd == "FROM" {
			n := 0
			for i := 1; i < in.line; i++ {
				n += bytes.IndexByte(c.User[n:], '\n') + 1
			}
			return c.User[:n], c.User[n:]
		}
	}
	return nil, c.User
}

// Commands lists the instructions of the whole Containerfile, one string
// each (comments and empty lines left out, continuation lines joined,
// heredoc bodies left out).
func (c *Containerfile) Commands() []string {
	var out []string
	for _, in := range parse(c.Bytes()) {
		out = append(out, in.text)
	}
	return out
}

// Locate maps a line of Bytes (1-based) to the file it came from and its
// line there: "generated Containerfile line 7" or "FILE line 3".
func (c *Containerfile) Locate(line int) string {
	pre, _ := c.userSplit()
	p := bytes.Count(pre, []byte("\n"))
	gen := bytes.Count(c.Generated, []byte("\n"))
	switch {
	case line <= p:
		return fmt.Sprintf("%s line %d", c.userName(), line)
	case line <= p+gen || len(c.User) == 0:
		return fmt.Sprintf("generated Containerfile line %d", line-p)
	}
	// One empty line separates the generated part from the rest.
	return fmt.Sprintf("%s line %d", c.userName(), line-gen-1)
}

func (c *Containerfile) userName() string {
	if c.UserName == "" {
		return "Containerfile"
	}
	return c.UserName
}

// Generate builds the Containerfile for the inputs. Errors name the field
// (spec.extensions, spec.kernelType) or the user Containerfile's line.
func Generate(in Inputs) (*Containerfile, error) {
	pkgs, err := ExtensionPackages(in.Extensions)
	if err != nil {
		return nil, fmt.Errorf("spec.extensions: %w", err)
	}
	kt := CanonicalKernelType(in.KernelType)
	if kt == Kernel64kPages && in.Arch != "arm64" {
		return nil, fmt.Errorf("spec.kernelType: 64k-pages is only supported on arm64 (aarch64), the base is %q", in.Arch)
	}
	for name := range in.BuildArgs {
		if name == BaseArg {
			return nil, fmt.Errorf("build argument %s is set by oslayer (it names the base)", BaseArg)
		}
		if !argName.MatchString(name) {
			return nil, fmt.Errorf("build argument %q: not a valid name", name)
		}
	}
	for name := range in.Repos {
		if !strings.HasSuffix(name, ".repo") || strings.ContainsAny(name, "/\\") || strings.HasPrefix(name, ".") {
			return nil, fmt.Errorf("repository definition %q: want a file name ending in .repo", name)
		}
	}
	cf := &Containerfile{User: in.Containerfile, UserName: in.ContainerfileName, Packages: pkgs, KernelType: kt}
	if len(in.Containerfile) > 0 {
		if err := checkUser(in.Containerfile, cf.userName()); err != nil {
			return nil, err
		}
	}
	cf.Generated = generate(pkgs, kt, len(in.Repos) > 0)
	return cf, nil
}

var argName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// generate writes the generated part. The steps are the MCO's on-cluster
// build steps (Containerfile.on-cluster-build-template), in POSIX sh so
// that they run on any base with a shell:
//   - extensions: rpm-ostree install, as the MCO does; a base without
//     rpm-ostree (a plain bootc or test base) gets dnf install instead, and a
//     base with neither fails naming both;
//   - kernelType: rpm -q finds the base's kernel type; if it differs, its
//     packages are removed and the new type's installed in one dnf shell
//     transaction (the MCO's command), or with rpm-ostree override remove
//     --install where there is no dnf;
//   - ostree container commit where the base has ostree (it cleans /tmp and
//     /var as the MCO's build does);
//   - the MCO's hard-coded tmpfiles for usbguard and ipsec.
func generate(pkgs []string, kt string, repos bool) []byte {
	var b strings.Builder
	b.WriteString("# Generated by oslayer from the pool's extensions and kernelType.\n")
	fmt.Fprintf(&b, "ARG %s\n", BaseArg)
	fmt.Fprintf(&b, "FROM ${%s} AS %s\n", BaseArg, BaseStage)
	mount, addRepos, dropRepos := "", "", ""
	if repos {
		mount = fmt.Sprintf("--mount=type=bind,from=%s,target=%s ", ReposContext, ReposMount)
		addRepos = fmt.Sprintf(`for f in %s/*.repo; do cp "$f" "/etc/yum.repos.d/oslayer-${f##*/}"; done; \`+"\n    ", ReposMount)
		dropRepos = "rm -f /etc/yum.repos.d/oslayer-*.repo; \\\n    "
	}
	if len(pkgs) > 0 {
		fmt.Fprintf(&b, "RUN %sset -eu; \\\n    %spkgs=%s; \\\n", mount, addRepos, shQuote(strings.Join(pkgs, " ")))
		b.WriteString("    if command -v rpm-ostree >/dev/null 2>&1; then rpm-ostree install $pkgs; \\\n")
		b.WriteString("    elif command -v dnf >/dev/null 2>&1; then dnf -y install $pkgs; \\\n")
		b.WriteString("    else echo 'oslayer: extensions: the base has neither rpm-ostree nor dnf' >&2; exit 1; fi; \\\n")
		fmt.Fprintf(&b, "    %strue\n", dropRepos)
	}
	if kt != KernelDefault {
		fmt.Fprintf(&b, "RUN %sset -eu; \\\n    %s", mount, addRepos)
		b.WriteString("if rpm -q kernel-rt-core >/dev/null 2>&1; then cur=" + KernelRealtime + "; \\\n")
		b.WriteString("    elif rpm -q kernel-64k-core >/dev/null 2>&1; then cur=" + Kernel64kPages + "; \\\n")
		b.WriteString("    elif rpm -q kernel >/dev/null 2>&1; then cur=" + KernelDefault + "; \\\n")
		fmt.Fprintf(&b, "    else echo 'oslayer: kernelType: unknown base kernel type, cannot switch to %s' >&2; exit 1; fi; \\\n", kt)
		b.WriteString("    case $cur in \\\n")
		for _, t := range []string{KernelDefault, KernelRealtime, Kernel64kPages} {
			fmt.Fprintf(&b, "      %s) old=%s ;; \\\n", t, shQuote(strings.Join(kernelPackages[t], " ")))
		}
		b.WriteString("    esac; \\\n")
		fmt.Fprintf(&b, "    new=%s; \\\n", shQuote(strings.Join(kernelPackages[kt], " ")))
		fmt.Fprintf(&b, "    if [ \"$cur\" != %s ]; then \\\n", kt)
		b.WriteString("      if command -v dnf >/dev/null 2>&1; then printf 'remove %s\\ninstall %s\\nrun\\n' \"$old\" \"$new\" | dnf -y shell; \\\n")
		b.WriteString("      elif command -v rpm-ostree >/dev/null 2>&1; then rpm-ostree override remove $old $(for p in $new; do printf ' --install %s' \"$p\"; done); \\\n")
		b.WriteString("      else echo 'oslayer: kernelType: the base has neither dnf nor rpm-ostree' >&2; exit 1; fi; \\\n")
		b.WriteString("    fi; \\\n")
		fmt.Fprintf(&b, "    %strue\n", dropRepos)
	}
	b.WriteString("RUN if command -v ostree >/dev/null 2>&1; then ostree container commit; fi\n")
	b.WriteString("RUN rm -f /usr/lib/tmpfiles.d/usbguard.conf && mkdir -p /usr/lib/tmpfiles.d && \\\n")
	b.WriteString("    printf 'd /var/log/usbguard 0755 root root -\\nd /var/lib/ipsec 0700 root root -\\nd /var/lib/ipsec/nss 0700 root root -\\n' > /usr/lib/tmpfiles.d/usbguard_ipsec.conf\n")
	return []byte(b.String())
}

// shQuote quotes s for sh in single quotes.
func shQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// instruction is one logical Containerfile instruction.
type instruction struct {
	line int // first physical line, 1-based
	cmd  string
	args []string
	text string // the instruction, continuation lines joined
}

// heredocStart finds "<<EOF", "<<-EOF", "<<'EOF'", "<<\"EOF\"".
var heredocStart = regexp.MustCompile(`<<(-?)["']?([A-Za-z_][A-Za-z0-9_]*)["']?`)

// parse splits a Containerfile into instructions: comments and empty lines
// skipped, backslash continuations joined, heredoc bodies skipped.
func parse(data []byte) []instruction {
	lines := strings.Split(string(data), "\n")
	var out []instruction
	for i := 0; i < len(lines); i++ {
		t := strings.TrimSpace(lines[i])
		if t == "" || strings.HasPrefix(t, "#") {
			continue
		}
		start := i
		text := t
		for strings.HasSuffix(text, `\`) && i+1 < len(lines) {
			i++
			next := strings.TrimSpace(lines[i])
			if strings.HasPrefix(next, "#") {
				continue
			}
			text = strings.TrimSuffix(text, `\`) + " " + next
		}
		for _, m := range heredocStart.FindAllStringSubmatch(text, -1) {
			for i+1 < len(lines) {
				i++
				l := lines[i]
				if m[1] == "-" {
					l = strings.TrimLeft(l, "\t")
				}
				if l == m[2] {
					break
				}
			}
		}
		f := strings.Fields(text)
		out = append(out, instruction{line: start + 1, cmd: strings.ToUpper(f[0]), args: f[1:], text: text})
	}
	return out
}

// checkUser checks that the user's Containerfile builds on the package
// base: its final stage comes FROM packages (or configs), directly or
// through earlier stages of the same file. Other stages may use any image
// (a builder image compiling a module, say).
func checkUser(data []byte, name string) error {
	stages := map[string]string{} // stage name → what it is FROM
	var last instruction
	froms := 0
	for _, in := range parse(data) {
		if in.cmd != "FROM" {
			continue
		}
		froms++
		last = in
		args := in.args
		for len(args) > 0 && strings.HasPrefix(args[0], "--") {
			args = args[1:]
		}
		if len(args) == 0 {
			return fmt.Errorf("%s line %d: FROM without an image", name, in.line)
		}
		if len(args) >= 3 && strings.EqualFold(args[1], "AS") {
			st := strings.ToLower(args[2])
			if st == BaseStage || st == MCOStageAlias {
				return fmt.Errorf("%s line %d: stage name %s is taken: it names the package base", name, in.line, args[2])
			}
			stages[st] = strings.ToLower(args[0])
		}
	}
	if froms == 0 {
		return fmt.Errorf("%s: no FROM; start it with FROM %s (the base with extensions and kernel applied)", name, BaseStage)
	}
	args := last.args
	for len(args) > 0 && strings.HasPrefix(args[0], "--") {
		args = args[1:]
	}
	from := strings.ToLower(args[0])
	seen := map[string]bool{}
	for !seen[from] {
		if from == BaseStage || from == MCOStageAlias {
			return nil
		}
		seen[from] = true
		next, ok := stages[from]
		if !ok {
			break
		}
		from = next
	}
	return fmt.Errorf("%s line %d: the final stage is FROM %s; it must build on the package base: FROM %s (or a stage FROM %s)", name, last.line, args[0], BaseStage, BaseStage)
}

// sortedKeys returns a map's keys in order.
func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// Describe names what the stage's layer holds by what the user wrote: the
// extensions' packages, the kernel type and the steps of the user's
// Containerfile that change files (RUN, COPY, ADD), e.g.
// `extensions: usbguard; agent.Containerfile: COPY agent.rpm /tmp/agent.rpm; RUN rpm -i /tmp/agent.rpm`.
// It is the source of a package layer, so that the layer holding an RPM
// can be found.
func (c *Containerfile) Describe() string {
	var parts []string
	if len(c.Packages) > 0 {
		parts = append(parts, "extensions: "+strings.Join(c.Packages, " "))
	}
	if c.KernelType != "" && c.KernelType != KernelDefault {
		parts = append(parts, "kernelType: "+c.KernelType)
	}
	if u := c.DescribeUser(); u != "" {
		parts = append(parts, u)
	}
	return strings.Join(parts, "; ")
}

// DescribeUser is the user's part of Describe: the user's Containerfile's
// steps that change files ("" for none).
func (c *Containerfile) DescribeUser() string {
	var steps []string
	for _, in := range parse(c.User) {
		switch in.cmd {
		case "RUN", "COPY", "ADD":
			steps = append(steps, strings.Join(strings.Fields(in.text), " "))
		}
	}
	if len(steps) == 0 {
		return ""
	}
	return c.userName() + ": " + strings.Join(steps, "; ")
}
