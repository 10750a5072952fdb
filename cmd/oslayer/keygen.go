package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/oslayer/oslayer/sign"
)

func newKeygenCmd(g *globals) *cobra.Command {
	var dir string
	var force bool
	cmd := &cobra.Command{
		Use: "keygen",
		Example: `  # Write keys/cosign.key and keys/cosign.pub
  COSIGN_PASSWORD=s3cret oslayer keygen --output-dir keys`,
		Short: "Generate a cosign key pair (cosign.key, cosign.pub) for signing pool images",
		Long: `keygen writes cosign.key (encrypted, mode 0600) and cosign.pub, in the
format of "cosign generate-key-pair". The password comes from
$COSIGN_PASSWORD (which may be set but empty), or is asked for on a
terminal. Use the key with "oslayer build --sign-key cosign.key" and give
cosign.pub to "oslayer trust" and "oslayer verify".`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			priv, pub := filepath.Join(dir, "cosign.key"), filepath.Join(dir, "cosign.pub")
			if !force {
				for _, p := range []string{priv, pub} {
					if _, err := os.Lstat(p); err == nil {
						return fmt.Errorf("keygen: %s exists (use --force to replace it)", p)
					}
				}
			}
			pw, ok := os.LookupEnv("COSIGN_PASSWORD")
			if !ok {
				fd := int(os.Stdin.Fd())
				if !term.IsTerminal(fd) {
					return errors.New("keygen: set COSIGN_PASSWORD (it may be empty) or run on a terminal to be asked")
				}
				b, err := askPassword(cmd.ErrOrStderr(), fd)
				if err != nil {
					return fmt.Errorf("keygen: reading password: %w", err)
				}
				pw = string(b)
			}
			if pw == "" {
				g.log.Warn("the private key is not protected by a password")
			}
			kp, err := sign.GenerateKeyPair([]byte(pw))
			if err != nil {
				return fmt.Errorf("keygen: %w", err)
			}
			if err := os.MkdirAll(dir, 0o755); err != nil {
				return fmt.Errorf("keygen: --output-dir %s: %w", dir, err)
			}
			if err := writeKeyFile(priv, kp.Private, 0o600); err != nil {
				return fmt.Errorf("keygen: %w", err)
			}
			if err := writeKeyFile(pub, kp.Public, 0o644); err != nil {
				return fmt.Errorf("keygen: %w", err)
			}
			if g.json() {
				return json.NewEncoder(cmd.OutOrStdout()).Encode(map[string]string{"privateKey": priv, "publicKey": pub})
			}
			fmt.Fprintf(cmd.OutOrStdout(), "Private key written to %s\nPublic key written to %s\n", priv, pub)
			return nil
		},
	}
	cmd.Flags().StringVar(&dir, "output-dir", ".", "directory for cosign.key and cosign.pub")
	cmd.Flags().BoolVar(&force, "force", false, "replace existing key files")
	return cmd
}

// askPassword reads a new password twice from the terminal fd.
func askPassword(w io.Writer, fd int) ([]byte, error) {
	fmt.Fprint(w, "Enter password for private key: ")
	p1, err := term.ReadPassword(fd)
	fmt.Fprintln(w)
	if err != nil {
		return nil, err
	}
	fmt.Fprint(w, "Enter password for private key again: ")
	p2, err := term.ReadPassword(fd)
	fmt.Fprintln(w)
	if err != nil {
		return nil, err
	}
	if string(p1) != string(p2) {
		return nil, errors.New("passwords do not match")
	}
	return p1, nil
}

// writeKeyFile writes b to path via a temporary file in the same
// directory, so a failure leaves no half-written key.
func writeKeyFile(path string, b []byte, mode os.FileMode) error {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	defer os.Remove(tmp)
	if err := f.Chmod(mode); err != nil {
		f.Close()
		return err
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}
