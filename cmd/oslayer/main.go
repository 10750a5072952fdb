// Command oslayer builds the OS image a pool of Kubernetes nodes boots: it
// renders node configuration (Gardener OperatingSystemConfigs, OpenShift
// MachineConfigs) into layers on an ostree-native base image, checks the
// result, pushes it and signs it.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/oslayer/oslayer/internal/field"
	"github.com/oslayer/oslayer/packagestage/bud"
	"github.com/oslayer/oslayer/pipeline"
)

// exitError carries a specific exit code (e.g. preflight's 1 vs 2).
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

// globals are the flags every command shares.
type globals struct {
	output    outputFlag
	logLevel  string
	logFormat string
	log       *slog.Logger
	human     *humanOut // nil with --log-format json
}

func (g *globals) json() bool { return g.output.format == "json" }

// warn reports a warning on stderr: once, as "warning: MESSAGE", or as a
// JSON log record with --log-format json.
func (g *globals) warn(msg string) {
	msg = plainFlagText(msg)
	if g.human != nil {
		_ = g.human.warn(msg)
		return
	}
	g.log.Warn(msg)
}

func newRootCmd() *cobra.Command {
	g := &globals{output: outputFlag{format: "text"}}
	root := &cobra.Command{
		Use:   "oslayer",
		Short: "Build, check, push and sign per-pool OS images for ostree-native nodes",
		Long: `oslayer turns node configuration (Gardener OperatingSystemConfigs, OpenShift
MachineConfigs) into layers on an ostree-native base image (Fedora CoreOS,
RHCOS, bootc images), runs preflight checks, pushes the per-pool image and
signs it, so nodes rebase onto one verified, reproducible image.`,
		SilenceUsage:  true,
		SilenceErrors: true,
		Version:       version,
		PersistentPreRunE: func(cmd *cobra.Command, args []string) error {
			var err error
			g.log, g.human, err = newLogger(cmd.ErrOrStderr(), g.logFormat, g.logLevel)
			return err
		},
	}
	pf := root.PersistentFlags()
	pf.VarP(&g.output, "output", "o", "output format: text or json")
	pf.StringVar(&g.logLevel, "log-level", "warn", "log level on stderr: debug, info, warn, error")
	pf.StringVar(&g.logFormat, "log-format", "text", "log format on stderr: text (one line per message: \"warning: ...\") or json (slog records)")
	for _, c := range []func(*globals) *cobra.Command{
		newRenderCmd,
		newBuildCmd,
		newPreflightCmd,
		newDiffCmd,
		newKeygenCmd,
		newVerifyCmd,
		newTrustCmd,
		newFleetCmd,
		newControllerCmd,
		newPruneCmd,
		newHistoryCmd,
		newBaseIndexCmd,
	} {
		root.AddCommand(c(g))
	}
	root.AddCommand(newDocsCmd())
	return usageErrors(root)
}

// stopGrace is how long a command may take to wind down (cancel requests,
// remove its temporary files) after SIGINT or SIGTERM before the process
// exits anyway.
const stopGrace = 700 * time.Millisecond

func main() {
	// buildah's helpers (the package stage's RUN steps) run as this
	// binary: they do their work and return here.
	if bud.InitReexec() {
		return
	}
	os.Exit(run(newRootCmd(), os.Stderr))
}

// run executes root until it returns or a SIGINT/SIGTERM arrives. A signal
// cancels the command's context; the process then exits with 128 + the
// signal number (130, 143) as soon as the command has returned, and after
// stopGrace (or a second signal) at the latest. Everything oslayer writes
// appears under its final name only when complete, so an exit at any point
// leaves nothing half-written; temporary files of a run stopped this way are
// removed by the next run.
//
// A command that serves until it is stopped (oslayer controller) calls
// stopGracefully: a signal is then its normal end, it gets that long to wind
// down, and its own result is the exit code (0 when it stopped cleanly).
func run(root *cobra.Command, stderr io.Writer) int {
	var grace atomic.Int64
	ctx, cancel := context.WithCancel(context.WithValue(context.Background(), graceKey{}, &grace))
	defer cancel()
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sigs)
	done := make(chan error, 1)
	go func() { done <- root.ExecuteContext(ctx) }()
	select {
	case err := <-done:
		return exitCode(err, stderr)
	case sig := <-sigs:
		cancel()
		code := 128 + int(sig.(syscall.Signal))
		wait := stopGrace
		if g := time.Duration(grace.Load()); g > 0 {
			wait = g
		}
		select {
		case err := <-done:
			if grace.Load() > 0 {
				return exitCode(err, stderr)
			}
		case <-sigs:
		case <-time.After(wait):
		}
		fmt.Fprintf(stderr, "oslayer: stopped by %s\n", signalName(sig))
		return code
	}
}

// graceKey holds the run's *atomic.Int64: the wind-down time a serving
// command asked for (0: stopGrace, and a signal is an interruption).
type graceKey struct{}

// stopGracefully marks the running command as a service: SIGINT and
// SIGTERM end it normally, after at most d.
func stopGracefully(ctx context.Context, d time.Duration) {
	if g, ok := ctx.Value(graceKey{}).(*atomic.Int64); ok {
		g.Store(int64(d))
	}
}

func signalName(s os.Signal) string {
	if s == syscall.SIGTERM {
		return "SIGTERM"
	}
	return "SIGINT"
}

// exitCode prints err (the fields library messages name spelled as
// flags) and returns the exit code it carries: an
// exitError's, 2 for bad input (a specification the pipeline refuses,
// pipeline.IsInput), else 1.
func exitCode(err error, stderr io.Writer) int {
	if err == nil {
		return 0
	}
	fmt.Fprintln(stderr, "oslayer:", plainFlagText(field.Spell(err, flagOf)))
	var ee *exitError
	if errors.As(err, &ee) {
		return ee.code
	}
	if unknownCommand(err) || pipeline.IsInput(err) {
		return 2
	}
	return 1
}
