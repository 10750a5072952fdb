package main

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/spf13/pflag"

	"github.com/oslayer/oslayer/internal/field"
	"github.com/oslayer/oslayer/pipeline"
	"github.com/oslayer/oslayer/pipeline/settings"
	"github.com/oslayer/oslayer/preflight"
	"github.com/oslayer/oslayer/sign"
)

// registerSettings adds the flags of one group of pipeline.Flags to fs,
// each bound to its field in s and set to its default.
func registerSettings(fs *pflag.FlagSet, group string, s *settings.Settings) {
	for _, fl := range pipeline.Flags {
		if fl.Group != group {
			continue
		}
		v := settingValue(fl.Value(s))
		if fl.Default != "" {
			if err := v.Set(fl.Default); err != nil {
				panic(fmt.Sprintf("--%s: default %q: %v", fl.Name, fl.Default, err))
			}
		}
		f := fs.VarPF(v, fl.Name, "", fl.Help)
		if v.Type() == "bool" {
			f.NoOptDefVal = "true"
		}
	}
}

// settingValue is the flag value of a field: a *string, **bool,
// *[]string (one element per use) or *int32.
func settingValue(field any) pflag.Value {
	switch p := field.(type) {
	case *string:
		return (*stringSetting)(p)
	case **bool:
		return boolSetting{p}
	case *[]string:
		return (*listSetting)(p)
	case *int32:
		return (*intSetting)(p)
	}
	panic(fmt.Sprintf("no flag value for a field of type %T", field))
}

type stringSetting string

func (v *stringSetting) String() string     { return string(*v) }
func (v *stringSetting) Set(s string) error { *v = stringSetting(s); return nil }
func (v *stringSetting) Type() string       { return "string" }

// boolSetting is set only when the flag is given.
type boolSetting struct{ p **bool }

func (v boolSetting) String() string { return strconv.FormatBool(settings.True(*v.p)) }
func (v boolSetting) Set(s string) error {
	b, err := strconv.ParseBool(s)
	if err != nil {
		return err
	}
	*v.p = settings.Bool(b)
	return nil
}
func (v boolSetting) Type() string     { return "bool" }
func (v boolSetting) IsBoolFlag() bool { return true }

type listSetting []string

// String is "" when empty, so that --help shows no default.
func (v *listSetting) String() string {
	if len(*v) == 0 {
		return ""
	}
	return "[" + strings.Join(*v, ",") + "]"
}
func (v *listSetting) Set(s string) error { *v = append(*v, s); return nil }
func (v *listSetting) Type() string       { return "stringArray" }

type intSetting int32

func (v *intSetting) String() string { return strconv.Itoa(int(*v)) }
func (v *intSetting) Set(s string) error {
	n, err := strconv.ParseInt(s, 0, 32)
	if err != nil {
		return err
	}
	*v = intSetting(n)
	return nil
}
func (v *intSetting) Type() string { return "int" }

// specFlags are the flags outside the settings table (pipeline.Flags)
// that set a field an error of pipeline names.
var specFlags = map[string]string{"signing.key": "sign-key"}

// fieldFlags are the flags outside the settings table that set a field a
// library message names (field.Name).
var fieldFlags = map[field.Name]string{
	"base": "base", "pool": "pool", "arch": "arch", "target": "push",
	"secretsDir": "secrets", "signing.key": "sign-key", "signing.identity": "sign-identity",
	"registry.authfile": "authfile", "registry.authSecret": "auth-secret", "registry.insecure": "insecure-registry",
	"registry.mirrors": "mirror", "registry.timeout": "timeout",
}

// plainFields are the fields that plain library texts (the sources'
// warnings and runtime reasons) name as field.SpellText reads them:
// "(strict refuses it)".
var plainFields = []field.Name{"bakeSecrets", "strict",
	"registry.authfile", "registry.authSecret", "registry.insecure", "registry.mirrors", "registry.timeout"}

// plainFlagText is s with the plainFields it names spelled as flags.
func plainFlagText(s string) string {
	for _, n := range plainFields {
		s = field.SpellText(s, n, flagOf)
	}
	return s
}

// flagOf is the flag that sets field (--base, --max-layers), the field's
// own name when no flag sets it.
func flagOf(f field.Name) string {
	if fl := pipeline.FlagOf(string(f)); fl != nil {
		return "--" + fl.Name
	}
	if name, ok := fieldFlags[f]; ok {
		return "--" + name
	}
	return string(f)
}

// flagError names the flag of each field an error of pipeline or of the
// preflight checks names (--max-added-bytes "lots": ...), keeping the
// error itself in the chain: bad input (pipeline.IsInput) still exits 2.
func flagError(err error) error {
	var out []error
	for _, e := range unjoinErr(err) {
		out = append(out, flagNamed(e))
	}
	return errors.Join(out...)
}

// flagNamed is e with the flag of the field it names in place of the
// field, e itself when it names none.
func flagNamed(e error) error {
	var pe *pipeline.Error
	var oe *preflight.OptionError
	switch {
	case errors.As(e, &pe):
		if fl := pipeline.FlagOf(pe.Field); fl != nil {
			return &renamed{msg: fmt.Sprintf("--%s %v", fl.Name, flagNamed(pe.Err)), err: e}
		} else if name, ok := specFlags[pe.Field]; ok {
			return &renamed{msg: fmt.Sprintf("--%s: %v", name, passwordHint(pe.Err)), err: e}
		}
	case errors.As(e, &oe):
		if fl := pipeline.FlagOf(oe.Field); fl != nil {
			msg := strings.Replace(e.Error(), oe.Error(), fmt.Sprintf("--%s %v", fl.Name, oe.Err), 1)
			return &renamed{msg: msg, err: e}
		}
	}
	var fe field.Speller
	if errors.As(e, &fe) {
		return &renamed{msg: plainFlagText(field.Spell(e, flagOf)), err: e}
	}
	if msg := plainFlagText(e.Error()); msg != e.Error() {
		return &renamed{msg: msg, err: e}
	}
	return e
}

// renamed is err with the message the command-line user reads (flags for
// fields); err stays in the chain.
type renamed struct {
	msg string
	err error
}

func (r *renamed) Error() string { return r.msg }
func (r *renamed) Unwrap() error { return r.err }

// passwordHint says, for a key that did not decrypt, where the CLI takes
// its password from: the Secret manifest --sign-key names, else
// --sign-key-password-file, else $COSIGN_PASSWORD (passFunc). Other
// errors are returned as they are.
func passwordHint(err error) error {
	var pw *sign.PasswordError
	if !errors.As(err, &pw) {
		return err
	}
	return fmt.Errorf("key %s: wrong or missing password (COSIGN_PASSWORD, --sign-key-password-file or the Secret's %s): %w",
		pw.Source, sign.SecretPasswordField, pw.Err)
}

// unjoinErr lists the errors err joins (err itself when it joins none).
func unjoinErr(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	if err == nil {
		return nil
	}
	return []error{err}
}
