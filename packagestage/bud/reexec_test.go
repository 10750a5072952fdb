//go:build containers_image_openpgp && exclude_graphdriver_btrfs && exclude_graphdriver_devicemapper

package bud

import (
	"bytes"
	"errors"
	"strings"
	"testing"
)

// The steps run again only while buildah's helper could not start, at
// most reexecAttempts times, and a failing step's tail shows its own
// run only.
func TestRetryReexec(t *testing.T) {
	busy := "[1/2] STEP 2/3: RUN true\nClose_Fd " + reexecBusy + "\n"
	failed := errors.New("exit status 1")
	for _, c := range []struct {
		name    string
		outputs []string // what each run prints; a run fails unless its output is "ok"
		runs    int
		err     bool
		tail    string
	}{
		{"succeeds", []string{"ok"}, 1, false, "ok"},
		{"busy, then succeeds", []string{busy, "ok"}, 2, false, "ok"},
		{"busy, then a step fails", []string{busy, "step failed\n"}, 2, true, "step failed\n"},
		{"busy every time", []string{busy, busy, busy, "ok"}, reexecAttempts, true, busy},
		{"a step fails", []string{"step failed: " + "sealing memfd copy\n"}, 1, true, "step failed: sealing memfd copy\n"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var log bytes.Buffer
			tail := &tailBuffer{max: 1 << 10}
			runs := 0
			err := retryReexec(&log, tail, func() error {
				out := c.outputs[runs]
				runs++
				tail.Write([]byte(out))
				if out == "ok" {
					return nil
				}
				return failed
			})
			if runs != c.runs || (err != nil) != c.err || tail.String() != c.tail {
				t.Errorf("runs %d, err %v, tail %q; want runs %d, err %v, tail %q", runs, err, tail.String(), c.runs, c.err, c.tail)
			}
			if warned := strings.Count(log.String(), "running the steps again"); warned != c.runs-1 {
				t.Errorf("%d warnings, want %d:\n%s", warned, c.runs-1, log.String())
			}
		})
	}
}
