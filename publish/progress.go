package publish

import (
	"fmt"
	"io"
	"os"
	"sync"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// progress renders v1.Update values: on a terminal one line rewritten with
// "\r" whenever the whole percentage changes; otherwise a plain line at
// every 10% step. Total is known up front (all blobs and the manifest), so
// skipped and mounted blobs count as done. Bytes done are what
// go-containerregistry last reported on updates plus what the caller added
// itself (add: mounted blobs, layout writes). Every line also says what
// moved: the bytes really sent and those the target already had (or got
// by a mount), as the caller counts them (setMoved), so that a push of
// blobs the registry has reads "0 B uploaded", not a transfer.
type progress struct {
	w        io.Writer
	label    string
	total    int64
	terminal bool
	updates  chan v1.Update
	done     chan struct{}

	mu   sync.Mutex
	last int // last percentage (terminal) or tenth (plain) printed
	n    int64
	// remote is the last Complete go-containerregistry reported; own is
	// what add counted.
	remote, own int64
	// moved returns the bytes sent and those not sent because the
	// target had them (nil: not known); sent and kept name them.
	moved      func() (sent, kept int64)
	sent, kept string
}

// setMoved tells the progress where the bytes really sent and those the
// target had come from, and how to name them ("uploaded", "already there
// or mounted").
func (p *progress) setMoved(sent, kept string, moved func() (int64, int64)) {
	if p == nil {
		return
	}
	p.mu.Lock()
	p.moved, p.sent, p.kept = moved, sent, kept
	p.mu.Unlock()
}

// what says what moved so far: ", 12.0 KiB uploaded, 1.0 MiB already
// there or mounted" ("" when not known). p.mu is held.
func (p *progress) what() string {
	if p.moved == nil {
		return ""
	}
	sent, kept := p.moved()
	return fmt.Sprintf(", %s %s, %s %s", human(sent), p.sent, human(kept), p.kept)
}

// IsTerminal reports whether w is a terminal (a character device).
func IsTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// newProgress returns nil when o has no progress writer. The caller feeds
// updates, closes the channel when it is done, waits on done and calls
// finish.
func newProgress(o options, label string, total int64) *progress {
	if o.progress == nil {
		return nil
	}
	term := IsTerminal(o.progress)
	if o.terminal != nil {
		term = *o.terminal
	}
	p := &progress{w: o.progress, label: label, total: total, terminal: term, last: -1,
		updates: make(chan v1.Update, 64), done: make(chan struct{})}
	go func() {
		defer close(p.done)
		for u := range p.updates {
			if u.Error != nil {
				continue
			}
			p.mu.Lock()
			p.remote = u.Complete
			p.mu.Unlock()
			p.show()
		}
	}()
	return p
}

// show prints if a step was crossed.
func (p *progress) show() {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := p.remote + p.own
	if n > p.total {
		n = p.total
	}
	p.n = n
	pct := 100
	if p.total > 0 {
		pct = int(n * 100 / p.total)
	}
	if p.terminal {
		if pct == p.last {
			return
		}
		p.last = pct
		const width = 30
		fill := pct * width / 100
		bar := make([]byte, width)
		for i := range bar {
			if i < fill {
				bar[i] = '='
			} else {
				bar[i] = ' '
			}
		}
		fmt.Fprintf(p.w, "\r%s [%s] %3d%% %s/%s%s", p.label, bar, pct, human(n), human(p.total), p.what())
		return
	}
	step := pct / 10
	if step == p.last {
		return
	}
	p.last = step
	fmt.Fprintf(p.w, "%s: %d%% (%s of %s%s)\n", p.label, step*10, human(n), human(p.total), p.what())
}

// add counts n more bytes done outside go-containerregistry.
func (p *progress) add(n int64) {
	if p == nil {
		return
	}
	p.mu.Lock()
	p.own += n
	p.mu.Unlock()
	p.show()
}

// complete marks everything done.
func (p *progress) complete() {
	if p == nil {
		return
	}
	p.mu.Lock()
	p.own = p.total - p.remote
	p.mu.Unlock()
	p.show()
}

func (p *progress) finish(err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	status := "done"
	if err != nil {
		status = "failed"
	}
	if p.terminal {
		if p.last >= 0 {
			fmt.Fprintf(p.w, "\r%s: %s (%s%s)\x1b[K\n", p.label, status, human(p.total), p.what())
		} else {
			fmt.Fprintf(p.w, "%s: %s (%s%s)\n", p.label, status, human(p.total), p.what())
		}
		return
	}
	if err != nil || p.last < 10 {
		fmt.Fprintf(p.w, "%s: %s (%s of %s%s)\n", p.label, status, human(p.n), human(p.total), p.what())
	}
}

func human(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit && exp < 4; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTP"[exp])
}
