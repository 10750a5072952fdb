package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"

	"github.com/oslayer/oslayer/internal/field"
)

// humanHandler writes log records for people, one line each:
// "warning: MESSAGE", "error: MESSAGE", and "info: MESSAGE key=value ..."
// (debug likewise). A warning is printed once however often it is logged
// or reported (warn shares the record of what was printed). --log-format
// json replaces it with slog's JSON handler.
type humanHandler struct {
	level slog.Leveler
	out   *humanOut
	attrs []slog.Attr
}

// humanOut is the stderr stream the handler and warn share.
type humanOut struct {
	mu   sync.Mutex
	w    io.Writer
	seen map[string]bool
}

func newHumanHandler(w io.Writer, level slog.Leveler) *humanHandler {
	return &humanHandler{level: level, out: &humanOut{w: w, seen: map[string]bool{}}}
}

func (h *humanHandler) Enabled(_ context.Context, l slog.Level) bool { return l >= h.level.Level() }

func (h *humanHandler) Handle(_ context.Context, r slog.Record) error {
	r = flagText(r)
	switch {
	case r.Level >= slog.LevelError:
		return h.out.line("error", r.Message, "")
	case r.Level >= slog.LevelWarn:
		return h.out.warn(r.Message)
	}
	var b strings.Builder
	add := func(a slog.Attr) bool {
		if a.Equal(slog.Attr{}) || a.Key == fieldAttr {
			return true
		}
		fmt.Fprintf(&b, " %s=%v", a.Key, a.Value.Resolve())
		return true
	}
	for _, a := range h.attrs {
		add(a)
	}
	r.Attrs(add)
	lvl := "info"
	if r.Level < slog.LevelInfo {
		lvl = "debug"
	}
	return h.out.line(lvl, r.Message, b.String())
}

func (h *humanHandler) WithAttrs(as []slog.Attr) slog.Handler {
	c := *h
	c.attrs = append(append([]slog.Attr(nil), h.attrs...), as...)
	return &c
}

// WithGroup keeps the attributes flat: a human reads key=value.
func (h *humanHandler) WithGroup(string) slog.Handler { return h }

func (o *humanOut) line(level, msg, attrs string) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	_, err := fmt.Fprintf(o.w, "%s: %s%s\n", level, msg, attrs)
	return err
}

// warn prints "warning: msg" unless it was printed already.
func (o *humanOut) warn(msg string) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.seen[msg] {
		return nil
	}
	o.seen[msg] = true
	_, err := fmt.Fprintf(o.w, "warning: %s\n", msg)
	return err
}

// newLogger is the logger of --log-format and --log-level on w.
func newLogger(w io.Writer, format, level string) (*slog.Logger, *humanOut, error) {
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(level)); err != nil {
		return nil, nil, fmt.Errorf("--log-level %q: want debug, info, warn or error", level)
	}
	switch format {
	case "text":
		h := newHumanHandler(w, lvl)
		return slog.New(h), h.out, nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, &slog.HandlerOptions{Level: lvl})), nil, nil
	}
	return nil, nil, fmt.Errorf("--log-format %q: want text or json", format)
}

// fieldAttr is the attribute of a record whose message names a
// specification field (a preflight finding's Field).
const fieldAttr = "field"

// flagText is r with the field its message names spelled as the flag
// that sets it (preflight.maxLayers: --max-layers).
func flagText(r slog.Record) slog.Record {
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == fieldAttr {
			r.Message = field.SpellText(r.Message, field.Name(a.Value.String()), flagOf)
			return false
		}
		return true
	})
	return r
}
