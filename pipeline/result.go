package pipeline

import (
	"github.com/oslayer/oslayer/assemble"
	"github.com/oslayer/oslayer/preflight"
	"github.com/oslayer/oslayer/publish"
	"github.com/oslayer/oslayer/sign"
)

// What a front-end reads of a build, named here so that front-ends
// import the pipeline and no stage.
type (
	// Result is what a build produced (assemble.Result).
	Result = assemble.Result
	// Phase is one step of a build and its wall time (assemble.Phase).
	Phase = assemble.Phase
	// SignResult is the signing stage's output in Result.Stages
	// (sign.SignResult).
	SignResult = sign.SignResult
	// KeyMaterial is an encrypted cosign key and where it came from
	// (sign.KeyMaterial).
	KeyMaterial = sign.KeyMaterial
)

// The build steps a result or an Error names.
const (
	// StepSign is the signing stage's step (and Result.Stages key).
	StepSign = sign.StageSign
	// StepPreflight and StepPreflightWritten are the preflight checks' of
	// the content and of the written image.
	StepPreflight        = preflight.StageName
	StepPreflightWritten = preflight.StageWritten
	// BaseIndexAuto and BaseIndexOff are Spec.BaseIndex's values.
	BaseIndexAuto = assemble.BaseIndexAuto
	BaseIndexOff  = assemble.BaseIndexOff
)

// ReadKey reads a cosign key file or a Secret manifest holding one
// (sign.ReadKey).
func ReadKey(path string) (*KeyMaterial, error) { return sign.ReadKey(path) }

// Password is a fixed key password, PasswordFile one read from a file
// when needed (sign.Password, sign.PasswordFile).
func Password(p []byte) sign.PassFunc { return sign.Password(p) }

// PasswordFile reads the key password from path when needed.
func PasswordFile(path string) sign.PassFunc { return sign.PasswordFile(path) }

// ParseBytes reads a size ("2GiB", "500M", a number of bytes) as
// preflight.maxAddedBytes takes it.
func ParseBytes(s string) (int64, error) { return preflight.ParseBytes(s) }

// CheckSkip checks that name is a preflight check that can be skipped.
func CheckSkip(name string) error { return preflight.CheckKnown(name, nil) }

// TargetName checks a registry target (REG/REPO[:TAG]) and returns it
// with its tag (latest when none is given).
func TargetName(target string) (string, error) {
	t, err := publish.ParseTarget(target)
	if err != nil {
		return "", err
	}
	return t.Name(), nil
}

// ArchAll (arch all) builds for every platform of the base's index.
const ArchAll = assemble.ArchAll

// Platforms are the platforms a build is for (assemble.Platforms), parsed
// once by a front-end.
type Platforms = assemble.Platforms

// ParsePlatforms reads a comma-separated list of architectures: "" (none:
// amd64), one, several, or ArchAll alone; x86_64 and aarch64 are amd64 and
// arm64, a name given twice is an error. Its errors name no field or flag
// (the caller names the one it read).
func ParsePlatforms(s string) (Platforms, error) { return assemble.ParsePlatforms(s) }
