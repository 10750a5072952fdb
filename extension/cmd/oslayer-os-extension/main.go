// Command oslayer-os-extension is oslayer's Gardener OS extension: it
// serves the OperatingSystemConfigs of one OS type in a seed (package
// app; the work is in package operatingsystemconfig under pkg/controller).
package main

import (
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"

	"github.com/spf13/pflag"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/oslayer/oslayer/extension/pkg/app"
)

// version is set at link time (-X main.version=...).
var version = "dev"

func main() {
	o := app.Options{Version: version, Logger: slog.New(slog.NewJSONHandler(os.Stderr, nil))}
	o.AddFlags(pflag.CommandLine)
	showVersion := pflag.Bool("version", false, "print the version and exit")
	// controller-runtime's --kubeconfig (and no other flag the
	// dependencies register).
	if f := flag.CommandLine.Lookup("kubeconfig"); f != nil {
		pflag.CommandLine.AddGoFlag(f)
	}
	pflag.Parse()
	if *showVersion {
		fmt.Println("oslayer-os-extension", version)
		return
	}
	ctrl.SetLogger(zap.New())
	ctx := ctrl.SetupSignalHandler()
	var err error
	if o.AdmissionOnly {
		// The admission chart's mode: the webhook alone, no kubeconfig.
		err = app.RunAdmission(ctx, o)
	} else {
		var mgr manager.Manager
		if mgr, err = app.NewManager(ctx, ctrl.GetConfigOrDie(), o); err == nil {
			err = mgr.Start(ctx)
		}
	}
	if errors.Is(err, app.ErrUsage) {
		fmt.Fprintln(os.Stderr, "oslayer-os-extension:", err)
		os.Exit(2)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "oslayer-os-extension:", err)
		os.Exit(1)
	}
}
