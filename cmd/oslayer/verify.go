package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/spf13/cobra"

	"github.com/oslayer/oslayer/sign"
)

func newVerifyCmd(g *globals) *cobra.Command {
	var key string
	var rf registryFlags
	cmd := &cobra.Command{
		Use: "verify IMAGE --key cosign.pub",
		Example: `  # Check the signature and provenance of a pool image
  oslayer verify registry.example.com/os/worker@sha256:... --key keys/cosign.pub

  # The same as JSON (inputs, base, layers named by the attestation)
  oslayer verify registry.example.com/os/worker:latest --key keys/cosign.pub -o json`,
		Short: "Verify an image's cosign signature and SLSA provenance attestation; print the inputs it names",
		Long: `verify checks IMAGE (REG/REPO@sha256:... or a tag) offline with a cosign
public key, as a node's sigstoreSigned policy does: the manifest must hash to
its digest, a signature by the key must name that digest and the repository,
and a SLSA provenance v1 attestation by the key must have it as subject; an
SPDX SBOM attestation by the key (the files oslayer added, each with its
digests and the document and field it came from) is checked and printed.
No transparency log is consulted. Exit code 0: every check passed; 1: a
check failed (signature or attestation missing, by another key, or for
another digest or repository); 2: the checks could not run (registry
unreachable, image not found, unreadable key, bad arguments).`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			cannot := func(err error) error { return &exitError{code: 2, err: fmt.Errorf("verify: %w", err)} }
			if key == "" {
				return cannot(errors.New("--key is required"))
			}
			reg, err := rf.options()
			if err != nil {
				return cannot(err)
			}
			pub, err := sign.LoadPublicKey(cmd.Context(), key)
			if err != nil {
				return cannot(err)
			}
			v, verr := sign.Verify(cmd.Context(), args[0], pub, sign.WithRegistry(reg), sign.WithLogger(g.log))
			if v == nil {
				// The image could not be read: nothing was checked.
				return cannot(verr)
			}
			if g.json() {
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				if err := enc.Encode(v); err != nil {
					return err
				}
			} else {
				printVerification(cmd.OutOrStdout(), v)
			}
			if verr != nil {
				return &exitError{code: 1, err: fmt.Errorf("verify: %w", verr)}
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&key, "key", "", "cosign public key (cosign.pub)")
	rf.registerReads(cmd.Flags())
	return cmd
}

func printVerification(w io.Writer, v *sign.Verification) {
	status := "FAIL"
	if v.OK() {
		status = "OK"
	}
	fmt.Fprintf(w, "%s %s\n", status, v.Ref)
	if v.SignatureError != "" {
		fmt.Fprintf(w, "signature:   FAIL %s\n", v.SignatureError)
	} else {
		fmt.Fprintf(w, "signature:   OK (%d by this key, identity %s)\n", v.Signatures, v.SignedIdentity)
	}
	if v.AttestationError != "" {
		fmt.Fprintf(w, "attestation: FAIL %s\n", v.AttestationError)
	} else {
		fmt.Fprintf(w, "attestation: OK (%d %s by this key)\n", v.Attestations, sign.PredicateType)
	}
	if v.Index != "" {
		if v.IndexSignatureError != "" {
			fmt.Fprintf(w, "index:       FAIL %s: %s\n", v.Index, v.IndexSignatureError)
		} else {
			fmt.Fprintf(w, "index:       OK %s (%d signatures by this key)\n", v.Index, v.IndexSignatures)
		}
	}
	switch {
	case v.SBOMError != "":
		fmt.Fprintf(w, "sbom:        FAIL %s\n", v.SBOMError)
	case v.SBOM == nil:
		fmt.Fprintf(w, "sbom:        none by this key (images built before oslayer attached one)\n")
	default:
		fmt.Fprintf(w, "sbom:        OK (%s, %d files added)\n", v.SBOM.SPDXVersion, len(v.SBOM.Files))
		for _, f := range v.SBOM.Files {
			sum := ""
			for _, c := range f.Checksums {
				if c.Algorithm == "SHA256" {
					sum = "sha256:" + c.ChecksumValue
				}
			}
			fmt.Fprintf(w, "  %-40s %s %s\n", strings.TrimPrefix(f.FileName, "."), sum, strings.TrimPrefix(f.Comment, "source: "))
		}
	}
	if v.Provenance == nil {
		return
	}
	p := v.Provenance.Predicate
	fmt.Fprintf(w, "builder:     %s %s\n", p.RunDetails.Builder.ID, p.RunDetails.Builder.Version["oslayer"])
	fmt.Fprintf(w, "pool:        %s\n", p.BuildDefinition.ExternalParameters.Pool)
	if v.Base != nil {
		fmt.Fprintf(w, "base:        %s\n", v.Base.URI)
	}
	if f := p.BuildDefinition.ExternalParameters.Flags; len(f) > 0 {
		keys := make([]string, 0, len(f))
		for k := range f {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		var parts []string
		for _, k := range keys {
			parts = append(parts, k+"="+f[k])
		}
		fmt.Fprintf(w, "flags:       %s\n", strings.Join(parts, " "))
	}
	fmt.Fprintf(w, "inputs:      %d\n", len(v.Inputs))
	for _, in := range v.Inputs {
		kind, _ := in.Annotations[sign.AnnotationKind].(string)
		fmt.Fprintf(w, "  %-24s %-32s %s sha256:%s\n", kind, in.Name, in.URI, in.Digest["sha256"])
	}
	for _, l := range p.RunDetails.Byproducts {
		fmt.Fprintf(w, "layer:       %s %s\n", l.Name, "sha256:"+l.Digest["sha256"])
	}
}
