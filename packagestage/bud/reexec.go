//go:build containers_image_openpgp && exclude_graphdriver_btrfs && exclude_graphdriver_devicemapper

package bud

import (
	"fmt"
	"io"
	"strings"
)

// reexecBusy is what buildah's helper process prints when it could not
// start a RUN step at all: before it runs a step, the helper re-executes
// the running binary from a sealed in-memory copy (containers/storage,
// pkg/unshare/unshare.c, copy_self_proc_exe), and the kernel answers the
// seal with EBUSY while it still holds extra references to the copy's
// pages (mm/memfd.c, memfd_wait_for_pins), which happens now and then on
// a busy machine. The step's command never ran, so running the steps
// again changes nothing but the time.
const reexecBusy = "sealing memfd copy: Device or resource busy"

// reexecAttempts bounds the runs of the steps when the helper could not
// start.
const reexecAttempts = 3

// retryReexec runs the steps, and runs them again (up to reexecAttempts
// in all) while they failed because buildah's helper could not start,
// as the output kept in tail shows; the tail is emptied before each new
// run, so a failing step's error shows only its own run.
func retryReexec(log io.Writer, tail *tailBuffer, run func() error) error {
	for attempt := 1; ; attempt++ {
		err := run()
		if err == nil || attempt == reexecAttempts || !strings.Contains(tail.String(), reexecBusy) {
			return err
		}
		fmt.Fprintf(log, "warning: package stage: buildah could not start a step (%s); running the steps again (%d of %d)\n",
			reexecBusy, attempt+1, reexecAttempts)
		tail.Reset()
	}
}
