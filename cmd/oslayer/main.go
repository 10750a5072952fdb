// Command oslayer builds the OS image a pool of Kubernetes nodes boots: it
// renders node configuration (Gardener OperatingSystemConfigs, OpenShift
// MachineConfigs) into layers on an ostree-native base image, checks the
// result, pushes it and signs it.
package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"
)

// version is set at link time: -ldflags "-X main.version=v1.2.3".
var version = "dev"

// exitError carries a specific exit code (e.g. preflight's 1 vs 2).
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

// globals are the flags every command shares.
type globals struct {
	output   string // "text" or "json"
	logLevel string
	log      *slog.Logger
}

func (g *globals) json() bool { return g.output == "json" }

func newRootCmd() *cobra.Command {
	g := &globals{}
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
			if g.output != "text" && g.output != "json" {
				return fmt.Errorf("-o %q: want text or json", g.output)
			}
			var lvl slog.Level
			if err := lvl.UnmarshalText([]byte(g.logLevel)); err != nil {
				return fmt.Errorf("--log-level %q: want debug, info, warn or error", g.logLevel)
			}
			g.log = slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), &slog.HandlerOptions{Level: lvl}))
			return nil
		},
	}
	root.PersistentFlags().StringVarP(&g.output, "output-format", "o", "text", "output format: text or json")
	root.PersistentFlags().StringVar(&g.logLevel, "log-level", "warn", "log level on stderr: debug, info, warn, error")
	for _, c := range []func(*globals) *cobra.Command{
		newRenderCmd,
		newBuildCmd,
		newPreflightCmd,
		newKeygenCmd,
		newVerifyCmd,
		newTrustCmd,
	} {
		root.AddCommand(c(g))
	}
	return root
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := newRootCmd().ExecuteContext(ctx)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "oslayer:", err)
		var ee *exitError
		if errors.As(err, &ee) {
			os.Exit(ee.code)
		}
		os.Exit(1)
	}
}
