package nodeside

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

// gardener-node-agent's classification of the update command's output
// (pkg/nodeagent/controller/operatingsystemconfig/reconciler.go, v1.149.3);
// test/oracle/nodeagent runs the agent's own code against the script.
var (
	retriable    = regexp.MustCompile(`(?i)network problems`)
	nonRetriable = regexp.MustCompile(`(?i)invalid arguments|system failure`)
)

const (
	testDigest  = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	otherDigest = "sha256:fedcba9876543210fedcba9876543210fedcba9876543210fedcba9876543210"
	testImage   = "registry.example:5000/pools/worker@" + testDigest
)

// standIn records its name and arguments in $STANDIN_DIR/calls and, for
// `status`, prints $STANDIN_DIR/NAME.status. Otherwise, with a count in
// NAME.failures, it fails (NAME.stderr to stderr, exit 1) while the count,
// which it decrements, is above 0, then exits 0; without one it prints
// NAME.stderr to stderr and exits with NAME.exit (0 when missing).
const standIn = `#!/bin/sh
n=$(basename "$0")
printf '%s\n' "$n $*" >>"$STANDIN_DIR/calls"
if [ "$1" = status ]; then
	cat "$STANDIN_DIR/$n.status" 2>/dev/null
	exit 0
fi
if [ -f "$STANDIN_DIR/$n.failures" ]; then
	k=$(cat "$STANDIN_DIR/$n.failures")
	[ "$k" -gt 0 ] || exit 0
	echo $((k - 1)) >"$STANDIN_DIR/$n.failures"
	cat "$STANDIN_DIR/$n.stderr" >&2
	exit 1
fi
[ -f "$STANDIN_DIR/$n.stderr" ] && cat "$STANDIN_DIR/$n.stderr" >&2
exit "$(cat "$STANDIN_DIR/$n.exit" 2>/dev/null || echo 0)"
`

// node is a PATH with only the shell tools the script uses and the
// recording stand-ins named.
type node struct {
	t   testing.TB
	dir string // stand-in state: calls, NAME.status/.stderr/.exit
	bin string
	tmp string   // the command's TMPDIR
	env []string // more of the command's environment
	cmd string   // the update command
}

func newNode(t testing.TB, standIns ...string) *node {
	t.Helper()
	n := &node{t: t, dir: t.TempDir(), bin: t.TempDir(), tmp: t.TempDir()}
	for _, tool := range []string{"sh", "tr", "grep", "tail", "mktemp", "cat", "rm", "basename", "awk", "sleep"} {
		p, err := exec.LookPath(tool)
		if err != nil {
			t.Skipf("no %s: %v", tool, err)
		}
		if err := os.Symlink(p, filepath.Join(n.bin, tool)); err != nil {
			t.Fatal(err)
		}
	}
	for _, s := range standIns {
		n.write(filepath.Join(n.bin, s), standIn, 0o755)
	}
	n.cmd = filepath.Join(t.TempDir(), "os-update")
	n.write(n.cmd, UpdateScript(), 0o755)
	return n
}

// lockPath is the update command's lock on this node.
func (n *node) lockPath() string { return filepath.Join(n.dir, "os-update.lock") }

// tool adds the host's tool to the node's PATH.
func (n *node) tool(name string) {
	n.t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		n.t.Skipf("no %s: %v", name, err)
	}
	if err := os.Symlink(p, filepath.Join(n.bin, name)); err != nil {
		n.t.Fatal(err)
	}
}

func (n *node) write(p, content string, mode os.FileMode) {
	n.t.Helper()
	if err := os.WriteFile(p, []byte(content), mode); err != nil {
		n.t.Fatal(err)
	}
}

// set writes a stand-in's behaviour file (NAME.status, .stderr, .exit).
func (n *node) set(file, content string) { n.write(filepath.Join(n.dir, file), content, 0o644) }

// run runs the update command and returns its output and exit code.
func (n *node) run(args ...string) (string, int) {
	n.t.Helper()
	out, code, err := n.exec(args...)
	if err != nil {
		n.t.Fatalf("running the update command: %v", err)
	}
	return out, code
}

// exec runs the update command (TMPDIR its own directory) and returns its
// output and exit code, or the error that kept it from running.
func (n *node) exec(args ...string) (string, int, error) {
	c := exec.Command(n.cmd, args...)
	c.Env = append([]string{"PATH=" + n.bin, "STANDIN_DIR=" + n.dir, "TMPDIR=" + n.tmp, "OS_UPDATE_RETRY_SECONDS=0", "OS_UPDATE_LOCK=" + n.lockPath()}, n.env...)
	out, err := c.CombinedOutput()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return string(out), 0, nil
	case errors.As(err, &ee):
		return string(out), ee.ExitCode(), nil
	}
	return "", 0, err
}

// calls are the stand-ins' recorded invocations.
func (n *node) calls() []string {
	b, err := os.ReadFile(filepath.Join(n.dir, "calls"))
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		n.t.Fatal(err)
	}
	return strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
}

// bootcStatus is `bootc status --json` (as bootc 1.1 prints it) with
// booted running booted and the rollback deployment rollback.
func bootcStatus(booted, rollback string) string { return bootcStatusStaged("", booted, rollback) }

// bootcStatusStaged is bootcStatus with a staged deployment running
// staged ("": none).
func bootcStatusStaged(staged, booted, rollback string) string {
	dep := func(d string) string {
		return `{
      "image": {
        "image": { "image": "registry.example:5000/pools/worker", "transport": "registry" },
        "version": "41.20250101.0",
        "timestamp": null,
        "imageDigest": "` + d + `"
      },
      "cachedUpdate": null,
      "incompatible": false,
      "pinned": false,
      "store": "ostreeContainer",
      "ostree": { "checksum": "41a1", "deploySerial": 0 }
    }`
	}
	stagedDep := "null"
	if staged != "" {
		stagedDep = dep(staged)
	}
	return `{
  "apiVersion": "org.containers.bootc/v1",
  "kind": "BootcHost",
  "metadata": { "name": "host" },
  "spec": { "image": { "image": "registry.example:5000/pools/worker", "transport": "registry" }, "bootOrder": "default" },
  "status": {
    "staged": ` + stagedDep + `,
    "booted": ` + dep(booted) + `,
    "rollback": ` + dep(rollback) + `,
    "rollbackQueued": false,
    "type": "bootcHost"
  }
}
`
}

// rpmOstreeStatus is `rpm-ostree status --json` of a node booted from
// image (by digest), with a staged deployment of staged first when it is
// not "" (whether --booted filters the JSON or not).
func rpmOstreeStatus(image, digest, staged string) string {
	dep := func(ref, d string, booted bool) string {
		return fmt.Sprintf(`{"id":"fedora-coreos-%.6s.0","osname":"fedora-coreos","booted":%v,"staged":%v,`+
			`"base-commit-meta":{"ostree.manifest-digest":"%s","version":"41"},`+
			`"container-image-reference":"ostree-image-signed:docker://%s",`+
			`"container-image-reference-digest":"%s","checksum":"41a1"}`, d[7:], booted, !booted, d, ref, d)
	}
	deps := dep(image, digest, true)
	if staged != "" {
		_, sd, _ := strings.Cut(staged, "@")
		deps = dep(staged, sd, false) + ",\n  " + deps
	}
	return "{\"deployments\":[\n  " + deps + "\n],\"transaction\":null,\"cached-update\":null}\n"
}

func expectCalls(t *testing.T, n *node, want ...string) {
	t.Helper()
	if got := n.calls(); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("calls:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// expectClass checks the exit code and that gardener-node-agent reads the
// output as the class: "retriable", "fatal" or "" (success).
func expectClass(t *testing.T, out string, code, wantCode int, class string) {
	t.Helper()
	if code != wantCode {
		t.Errorf("exit code %d, want %d; output:\n%s", code, wantCode, out)
	}
	r, f := retriable.MatchString(out), nonRetriable.MatchString(out)
	switch {
	case class == "retriable" && (!r || f), class == "fatal" && (r || !f), class == "" && (r || f):
		t.Errorf("the node agent reads the output as retriable=%v fatal=%v, want %q:\n%s", r, f, class, out)
	}
}

func TestUpdateBootcSwitches(t *testing.T) {
	n := newNode(t, "bootc", "rpm-ostree", "systemctl")
	// The rollback deployment runs the image: that is not the booted one.
	n.set("bootc.status", bootcStatus(otherDigest, testDigest))
	out, code := n.run(testImage, "41.20250201.0")
	expectClass(t, out, code, 0, "")
	expectCalls(t, n, "bootc status --json", "bootc switch --apply --enforce-container-sigpolicy "+testImage)
}

func TestUpdateBootcAlreadyBooted(t *testing.T) {
	n := newNode(t, "bootc", "systemctl")
	n.set("bootc.status", bootcStatus(testDigest, otherDigest))
	out, code := n.run(testImage)
	expectClass(t, out, code, 0, "")
	expectCalls(t, n, "bootc status --json")
	if !strings.Contains(out, "already runs") {
		t.Errorf("output %q does not say the node already runs the image", out)
	}
}

func TestUpdateFailures(t *testing.T) {
	for _, c := range []struct {
		name, stderr string
		exit, code   int
		class        string
	}{
		{"connection refused", `ERROR Switching: Pulling: Creating importer: failed to invoke method OpenImage: pinging container registry registry.example:5000: Get "https://registry.example:5000/v2/": dial tcp 10.0.0.5:5000: connect: connection refused`, 1, 75, "retriable"},
		{"TLS handshake timeout", `error: Importing: Fetching manifest: Get "https://registry.example:5000/v2/pools/worker/manifests/sha256:01": net/http: TLS handshake timeout`, 1, 75, "retriable"},
		{"no such host", `dial tcp: lookup registry.example on 127.0.0.53:53: no such host`, 1, 75, "retriable"},
		{"manifest unknown", `error: reading manifest sha256:0123 in registry.example:5000/pools/worker: manifest unknown`, 1, 64, "fatal"},
		{"signature rejected", `error: Source image rejected: A signature was required, but no signature exists`, 1, 70, "fatal"},
		{"no space", `error: Writing content object: No space left on device`, 1, 70, "fatal"},
	} {
		t.Run(c.name, func(t *testing.T) {
			n := newNode(t, "bootc")
			n.set("bootc.status", bootcStatus(otherDigest, otherDigest))
			n.set("bootc.stderr", c.stderr+"\n")
			n.set("bootc.exit", "1")
			out, code := n.run(testImage)
			expectClass(t, out, code, c.code, c.class)
			expectCalls(t, n, "bootc status --json", "bootc switch --apply --enforce-container-sigpolicy "+testImage)
			if !strings.Contains(out, c.stderr) {
				t.Errorf("the output does not carry bootc's error:\n%s", out)
			}
		})
	}
}

func TestUpdateInvalidArguments(t *testing.T) {
	for name, args := range map[string][]string{
		"tag":           {"registry.example:5000/pools/worker:41"},
		"short digest":  {"registry.example:5000/pools/worker@sha256:0123"},
		"upper hex":     {"registry.example:5000/pools/worker@" + strings.ToUpper(testDigest)},
		"no repository": {"@" + testDigest},
		"no argument":   nil,
		"three":         {testImage, "41", "extra"},
	} {
		t.Run(name, func(t *testing.T) {
			n := newNode(t, "bootc", "rpm-ostree", "systemctl")
			out, code := n.run(args...)
			expectClass(t, out, code, 64, "fatal")
			if !strings.Contains(out, "invalid arguments") {
				t.Errorf("output %q", out)
			}
			expectCalls(t, n)
		})
	}
}

func TestUpdateRpmOstree(t *testing.T) {
	n := newNode(t, "rpm-ostree", "systemctl")
	// Another image is staged: rebase and reboot.
	n.set("rpm-ostree.status", rpmOstreeStatus("registry.example:5000/pools/worker@"+otherDigest, otherDigest, "registry.example:5000/pools/worker@"+otherDigest))
	out, code := n.run(testImage)
	expectClass(t, out, code, 0, "")
	expectCalls(t, n, "rpm-ostree status --json",
		"rpm-ostree rebase ostree-image-signed:docker://"+testImage, "systemctl reboot")
}

// An update finds the image staged (by the staging unit): it only reboots.
func TestUpdateStagedReboots(t *testing.T) {
	n := newNode(t, "rpm-ostree", "systemctl")
	n.set("rpm-ostree.status", rpmOstreeStatus("registry.example:5000/pools/worker@"+otherDigest, otherDigest, testImage))
	out, code := n.run(testImage)
	expectClass(t, out, code, 0, "")
	expectCalls(t, n, "rpm-ostree status --json", "systemctl reboot")

	// bootc switch --apply of the staged image would change nothing and
	// not reboot.
	n = newNode(t, "bootc", "systemctl")
	n.set("bootc.status", bootcStatusStaged(testDigest, otherDigest, otherDigest))
	out, code = n.run(testImage)
	expectClass(t, out, code, 0, "")
	expectCalls(t, n, "bootc status --json", "systemctl reboot")
}

// --stage stages the image for the next boot and does not reboot;
// nothing when the node runs it or has it staged.
func TestStage(t *testing.T) {
	const timer = "systemctl is-enabled --quiet bootc-fetch-apply-updates.timer"
	for _, c := range []struct {
		name, status string
		timer        bool // bootc-fetch-apply-updates.timer enabled
		want         []string
	}{
		{"bootc", bootcStatus(otherDigest, testDigest), false, []string{"bootc status --json", timer, "bootc switch --enforce-container-sigpolicy " + testImage}},
		{"bootc another staged", bootcStatusStaged(otherDigest, otherDigest, otherDigest), false, []string{"bootc status --json", timer, "bootc switch --enforce-container-sigpolicy " + testImage}},
		{"bootc staged", bootcStatusStaged(testDigest, otherDigest, otherDigest), false, []string{"bootc status --json"}},
		{"bootc booted", bootcStatus(testDigest, otherDigest), false, []string{"bootc status --json"}},
		{"bootc auto-apply timer", bootcStatus(otherDigest, testDigest), true, []string{"bootc status --json", timer}},
		{"rpm-ostree", rpmOstreeStatus("registry.example:5000/pools/worker@"+otherDigest, otherDigest, ""), false,
			[]string{"rpm-ostree status --json", timer, "rpm-ostree rebase ostree-image-signed:docker://" + testImage}},
		{"rpm-ostree staged", rpmOstreeStatus("registry.example:5000/pools/worker@"+otherDigest, otherDigest, testImage), false, []string{"rpm-ostree status --json"}},
		{"rpm-ostree booted", rpmOstreeStatus(testImage, testDigest, ""), false, []string{"rpm-ostree status --json"}},
		{"rpm-ostree auto-apply timer", rpmOstreeStatus("registry.example:5000/pools/worker@"+otherDigest, otherDigest, ""), true, []string{"rpm-ostree status --json", timer}},
	} {
		t.Run(c.name, func(t *testing.T) {
			tool, _, _ := strings.Cut(c.name, " ")
			n := newNode(t, tool, "systemctl")
			n.set(tool+".status", c.status)
			if !c.timer {
				n.set("systemctl.exit", "1") // is-enabled: not enabled
			}
			out, code := n.run("--stage", testImage)
			expectClass(t, out, code, 0, "")
			expectCalls(t, n, c.want...)
		})
	}
}

// --retry --stage (the staging unit) stages again after network problems.
func TestStageRetry(t *testing.T) {
	n := newNode(t, "bootc", "systemctl")
	n.set("bootc.status", bootcStatus(otherDigest, otherDigest))
	n.set("bootc.stderr", "dial tcp 10.0.0.5:5000: connect: connection refused\n")
	n.set("bootc.failures", "1")
	n.set("systemctl.exit", "1")
	out, code := n.run("--retry", "--stage", testImage)
	expectClass(t, out, code, 0, "retriable")
	const timer = "systemctl is-enabled --quiet bootc-fetch-apply-updates.timer"
	expectCalls(t, n, "bootc status --json", timer, "bootc switch --enforce-container-sigpolicy "+testImage, "bootc status --json", timer, "bootc switch --enforce-container-sigpolicy "+testImage)
}

// One run at a time: a run waits while another holds the lock, and
// holds it itself while it switches.
func TestUpdateLock(t *testing.T) {
	n := newNode(t, "systemctl")
	n.tool("flock")
	n.tool("mkdir")
	n.tool("dirname")
	// bootc records whether the lock is held while it switches.
	n.write(filepath.Join(n.bin, "bootc"), `#!/bin/sh
if [ "$1" = status ]; then cat "$STANDIN_DIR/bootc.status"; exit 0; fi
if flock -n "$OS_UPDATE_LOCK" true; then echo "bootc $* unlocked"; else echo "bootc $* locked"; fi >>"$STANDIN_DIR/calls"
`, 0o755)
	n.set("bootc.status", bootcStatus(otherDigest, otherDigest))
	f, err := os.OpenFile(n.lockPath(), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	c := exec.Command(n.cmd, testImage)
	c.Env = []string{"PATH=" + n.bin, "STANDIN_DIR=" + n.dir, "OS_UPDATE_LOCK=" + n.lockPath()}
	var out strings.Builder
	c.Stdout, c.Stderr = &out, &out
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- c.Wait() }()
	select {
	case err := <-done:
		t.Fatalf("the update command ran while the lock was held: %v\n%s", err, out.String())
	case <-time.After(300 * time.Millisecond):
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_UN); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("%v\n%s", err, out.String())
		}
	case <-time.After(time.Minute):
		_ = c.Process.Kill()
		t.Fatal("the update command still waits after the lock was released")
	}
	expectCalls(t, n, "bootc switch --apply --enforce-container-sigpolicy "+testImage+" locked")
}

func TestUpdateRpmOstreeAlreadyBooted(t *testing.T) {
	n := newNode(t, "rpm-ostree", "systemctl")
	n.set("rpm-ostree.status", rpmOstreeStatus(testImage, testDigest, "registry.example:5000/pools/worker@"+otherDigest))
	out, code := n.run(testImage)
	expectClass(t, out, code, 0, "")
	expectCalls(t, n, "rpm-ostree status --json")
}

func TestUpdateRpmOstreeNetworkFailureDoesNotReboot(t *testing.T) {
	n := newNode(t, "rpm-ostree", "systemctl")
	n.set("rpm-ostree.stderr", "error: Creating importer: failed to invoke method OpenImage: Get \"https://registry.example:5000/v2/\": dial tcp 10.0.0.5:5000: i/o timeout\n")
	n.set("rpm-ostree.exit", "1")
	out, code := n.run(testImage)
	expectClass(t, out, code, 75, "retriable")
	expectCalls(t, n, "rpm-ostree status --json",
		"rpm-ostree rebase ostree-image-signed:docker://"+testImage)
}

func TestUpdateNeitherTool(t *testing.T) {
	n := newNode(t, "systemctl")
	out, code := n.run(testImage)
	expectClass(t, out, code, 70, "fatal")
	expectCalls(t, n)
}

// TestUpdateRetry: --retry (the pivot) runs the switch again after
// network problems until it succeeds, and stops at a fatal failure.
func TestUpdateRetry(t *testing.T) {
	const refused = "dial tcp 10.0.0.5:5000: connect: connection refused\n"
	n := newNode(t, "bootc")
	n.set("bootc.status", bootcStatus(otherDigest, otherDigest))
	n.set("bootc.stderr", refused)
	n.set("bootc.failures", "2")
	out, code := n.run("--retry", testImage)
	expectClass(t, out, code, 0, "retriable") // the failures' messages stay in the output
	var want []string
	for range 3 {
		want = append(want, "bootc status --json", "bootc switch --apply --enforce-container-sigpolicy "+testImage)
	}
	expectCalls(t, n, want...)

	n = newNode(t, "bootc")
	n.set("bootc.status", bootcStatus(otherDigest, otherDigest))
	n.set("bootc.stderr", "error: reading manifest: manifest unknown\n")
	n.set("bootc.exit", "1")
	out, code = n.run("--retry", testImage)
	expectClass(t, out, code, 64, "fatal")
	expectCalls(t, n, "bootc status --json", "bootc switch --apply --enforce-container-sigpolicy "+testImage)
}
