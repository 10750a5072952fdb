package controller_test

import (
	"testing"

	"github.com/oslayer/oslayer/test/oslayerbin"
)

// The oslayer binaries the tests run as processes (the controller, the
// build pod played, oslayer verify). test/oslayerbin builds each once per
// test run ($OSLAYER_BIN and $OSLAYER_BIN_STATIC, which test/run.sh sets,
// or its cache keyed by the command's sources).
//
//   - oslayerCmd is cmd/oslayer with the package stage's tags. Every test
//     runs it but one.
//   - imageBin is the command as the project's image has it
//     (Containerfile: static with cgo, -trimpath, netgo and osusergo).
//     Those flags change every package's build key, so on a cold build
//     cache it compiles the whole dependency graph again. Only the package
//     stage needs it (buildah's RUN steps in the played pod):
//     TestBuildJobPackageStage.
func oslayerCmd(t *testing.T) string { return oslayerbin.Path(t) }

func imageBin(t *testing.T) string { return oslayerbin.Static(t) }
