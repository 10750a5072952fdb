package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/oslayer/oslayer/sign"
	"github.com/oslayer/oslayer/test/regtest"
)

// badInputFiles are the files the bad-input cases name: a signing key
// (password "right"), a wrong password, a key that does not parse.
type badInputFiles struct {
	key, wrongPW, rightPW, garbageKey string
}

func writeBadInputFiles(t *testing.T, dir string) badInputFiles {
	t.Helper()
	kp, err := sign.GenerateKeyPair([]byte("right"))
	if err != nil {
		t.Fatal(err)
	}
	f := badInputFiles{key: filepath.Join(dir, "cosign.key"), wrongPW: filepath.Join(dir, "wrong"),
		rightPW: filepath.Join(dir, "right"), garbageKey: filepath.Join(dir, "garbage.key")}
	for path, data := range map[string][]byte{f.key: kp.Private, f.wrongPW: []byte("wrong"), f.rightPW: []byte("right"),
		f.garbageKey: []byte("-----BEGIN NOTHING-----\nxx\n-----END NOTHING-----\n")} {
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return f
}

// Bad input to oslayer build, from its flags or the specification they
// make (keys, layer limits, targets, platforms, preflight names, ...):
// each exits 2 with a message naming the flag (and the input), and
// nothing is written: the target registry sees no write, the layout
// folder is not created.
func TestBuildBadInputExit2(t *testing.T) {
	t.Setenv("OSLAYER_BASEINDEX_CACHE", t.TempDir())
	t.Setenv("COSIGN_PASSWORD", "")
	dir := t.TempDir()
	f := writeBadInputFiles(t, dir)
	px := regtest.NewProxy(t, regtest.Memory(t).Host)
	layout, repo := filepath.Join(dir, "layout"), px.Host+"/os/worker:latest"
	common := []string{"build", "--base", "oci:" + example(t, "base"), "--pool", "worker", "--osc", example(t, "gardener", "worker-osc.yaml")}
	for _, tc := range []struct {
		name string
		args []string // after common, before --push (the layout unless given)
		push string
		want []string
	}{
		{"wrong key password", []string{"--sign-key", f.key, "--sign-key-password-file", f.wrongPW}, repo,
			[]string{"--sign-key: key " + f.key + ": wrong or missing password (COSIGN_PASSWORD, --sign-key-password-file"}},
		{"key without its password", []string{"--sign-key", f.key}, repo, []string{"--sign-key: key " + f.key + ": wrong or missing password"}},
		{"key that does not parse", []string{"--sign-key", f.garbageKey, "--sign-key-password-file", f.rightPW}, repo, []string{f.garbageKey}},
		{"key that does not exist", []string{"--sign-key", filepath.Join(dir, "none.key")}, repo, []string{filepath.Join(dir, "none.key")}},
		{"password file that does not exist", []string{"--sign-key", f.key, "--sign-key-password-file", filepath.Join(dir, "none")}, repo,
			[]string{"--sign-key", filepath.Join(dir, "none")}},
		{"layout target without --sign-identity", []string{"--sign-key", f.key, "--sign-key-password-file", f.rightPW}, "",
			[]string{"--sign-identity", layout}},
		{"--sign-identity that does not parse", []string{"--sign-key", f.key, "--sign-key-password-file", f.rightPW, "--sign-identity", "Not A Repo"}, "",
			[]string{"--sign-identity", "Not A Repo"}},
		{"--sign-identity with a registry target", []string{"--sign-key", f.key, "--sign-key-password-file", f.rightPW, "--sign-identity", "r.example/os/w"}, repo,
			[]string{"--sign-identity"}},
		{"--sign-referrers with a layout target", []string{"--sign-key", f.key, "--sign-key-password-file", f.rightPW, "--sign-identity", "r.example/os/w", "--sign-referrers"}, "",
			[]string{"--sign-referrers"}},
		{"--sign-identity without --sign-key", []string{"--sign-identity", "r.example/os/w"}, "", []string{"--sign-identity", "--sign-key"}},
		{"--warn-layers at --max-layers", []string{"--warn-layers", "60", "--max-layers", "50"}, repo, []string{"--warn-layers 60 must be below maxLayers 50"}},
		{"negative --max-layers", []string{"--max-layers", "-1"}, repo, []string{"--warn-layers", "-1"}},
		{"--max-added-bytes that does not parse", []string{"--max-added-bytes", "lots"}, repo, []string{`--max-added-bytes "lots"`}},
		{"--skip of no check", []string{"--skip", "nope"}, repo, []string{`--skip "nope": no such check`}},
		{"--base-index of no mode", []string{"--base-index", "sometimes"}, repo, []string{`--base-index "sometimes"`}},
		{"--arch naming a platform twice", []string{"--arch", "amd64,x86_64"}, repo, []string{`--arch "amd64,x86_64"`, "twice"}},
		{"--arch with all and more", []string{"--arch", "all,arm64"}, repo, []string{`--arch "all,arm64"`, "stands alone"}},
		{"several platforms signed into a layout", []string{"--arch", "amd64,arm64", "--sign-key", f.key, "--sign-identity", "r.example/os/w"}, "",
			[]string{"--arch amd64,arm64 with --sign-key"}},
		{"--imageref-budget that does not parse", []string{"--imageref-budget", "much"}, repo, []string{"--imageref-budget"}},
		{"negative --imageref-timeout", []string{"--imageref-timeout", "-1s"}, repo, []string{"--imageref-timeout -1s"}},
		{"base of another architecture", []string{"--arch", "arm64"}, repo, []string{`image is for architecture "amd64", --arch is "arm64"`}},
		{"layout target by digest", nil, "oci:" + layout + "@sha256:" + strings.Repeat("0", 64), []string{"push target", layout}},
		{"registry target that does not parse", nil, px.Host + "/OS/Worker:latest", []string{"push target", "OS/Worker"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			push := tc.push
			if push == "" {
				push = "oci:" + layout
			}
			args := append(append(append([]string{}, common...), tc.args...), "--push", push)
			code, stdout, stderr := oslayerRun(t, args...)
			checkBadInput(t, px, layout, code, stdout, stderr, tc.want)
		})
	}
	// And the flags build needs.
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"build", "--osc", example(t, "gardener", "worker-osc.yaml"), "--push", repo}, "--pool"},
		{[]string{"build", "--pool", "worker", "--push", repo}, "--osc"},
		{[]string{"build", "--pool", "worker", "--osc", example(t, "gardener", "worker-osc.yaml")}, "--push"},
		{[]string{"build", "--pool", "worker", "--osc", example(t, "gardener", "worker-osc.yaml"), "--push", repo}, "no base image: give --base"},
	} {
		code, stdout, stderr := oslayerRun(t, tc.args...)
		checkBadInput(t, px, layout, code, stdout, stderr, []string{tc.want})
	}
}

// checkBadInput checks a bad-input run: exit 2, a message naming every
// want, nothing on stdout, no write to the registry behind px, no layout.
func checkBadInput(t *testing.T, px *regtest.Proxy, layout string, code int, stdout, stderr string, want []string) {
	t.Helper()
	if code != 2 {
		t.Errorf("exit %d, want 2 (bad input): %s", code, stderr)
	}
	for _, w := range want {
		if !strings.Contains(stderr, w) {
			t.Errorf("stderr %q does not name %q", stderr, w)
		}
	}
	if stdout != "" {
		t.Errorf("stdout %q, want none", stdout)
	}
	for _, r := range px.Requests() {
		if r.Method != "GET" && r.Method != "HEAD" {
			t.Errorf("the registry saw %s %s", r.Method, r.Path)
		}
	}
	if _, err := os.Stat(layout); !os.IsNotExist(err) {
		t.Errorf("the layout %s was written: %v", layout, err)
	}
}

// Bad input to oslayer fleet build: its flags exit 2 naming the flag; a
// pool whose key does not decrypt fails as the pool's input (kind input,
// exit 2 as every input failure of a pool: docs/fleet.md) naming the
// plan's field and where the password comes from; nothing is written.
func TestFleetBadInput(t *testing.T) {
	t.Setenv("OSLAYER_BASEINDEX_CACHE", t.TempDir())
	t.Setenv("COSIGN_PASSWORD", "")
	t.Setenv("JOB_COMPLETION_INDEX", "7")
	dir := t.TempDir()
	f := writeBadInputFiles(t, dir)
	px := regtest.NewProxy(t, regtest.Memory(t).Host)
	layout := filepath.Join(dir, "layout")
	plan := filepath.Join(dir, "fleet.yaml")
	if err := os.WriteFile(plan, []byte(`
defaults:
  base: oci:`+example(t, "base")+`
  target: `+px.Host+`/os/{cluster}-{pool}:latest
  signKey: `+f.key+`
  signKeyPasswordFile: `+f.wrongPW+`
clusters:
- name: dev
  pools:
  - {name: worker, osc: [`+example(t, "gardener", "worker-osc.yaml")+`]}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"--jobs", "0"}, []string{"--jobs 0"}},
		{[]string{"--shard", "2/2"}, []string{"--shard", `"2/2"`}},
		{[]string{"--shards", "4"}, []string{"--shards and $JOB_COMPLETION_INDEX", `"7/4"`}},
		{[]string{"--shard", "0/2", "--shards", "2"}, []string{"--shard I/N or --shards N"}},
		{[]string{"--imageref-budget", "much"}, []string{"--imageref-budget"}},
		{[]string{"--imageref-timeout", "-1s"}, []string{"--imageref-timeout -1s"}},
	} {
		code, stdout, stderr := oslayerRun(t, append([]string{"fleet", "build", plan}, tc.args...)...)
		checkBadInput(t, px, layout, code, stdout, stderr, tc.want)
	}
	code, _, stderr := oslayerRun(t, "fleet", "build", plan)
	want := "clusters[0].pools[0].signKey: key " + f.key + ": wrong or missing password (the pool's signKeyPasswordFile, else COSIGN_PASSWORD, or the Secret's cosign.password): "
	if code != 2 || !strings.Contains(stderr, want) {
		t.Errorf("exit %d, stderr %q; want 2 and %q", code, stderr, want)
	}
	for _, r := range px.Requests() {
		if r.Method != "GET" && r.Method != "HEAD" {
			t.Errorf("the registry saw %s %s", r.Method, r.Path)
		}
	}
}

// A required base that cannot be read fails the build (exit 1: it may be
// a registry's failure) before anything is written; the preflight stage's
// error names the field preflight.requireBase, the CLI its flag.
func TestBuildRequireBaseNamesFlag(t *testing.T) {
	t.Setenv("OSLAYER_BASEINDEX_CACHE", t.TempDir())
	dir := t.TempDir()
	layout, missing := filepath.Join(dir, "layout"), filepath.Join(dir, "official")
	code, stdout, stderr := oslayerRun(t, "build", "--base", "oci:"+example(t, "base"), "--pool", "worker",
		"--osc", example(t, "gardener", "worker-osc.yaml"), "--require-base", "oci:"+missing, "--push", "oci:"+layout)
	if want := "preflight: --require-base oci:" + missing + ": "; code != 1 || !strings.Contains(stderr, want) || strings.Contains(stderr, "preflight.requireBase") {
		t.Errorf("exit %d, stderr %q; want 1 and %q", code, stderr, want)
	}
	if _, err := os.Stat(layout); stdout != "" || !os.IsNotExist(err) {
		t.Errorf("stdout %q; the layout %s was written: %v", stdout, layout, err)
	}
}
