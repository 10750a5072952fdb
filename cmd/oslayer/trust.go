package main

import (
	"errors"

	"github.com/spf13/cobra"
)

func newTrustCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "trust",
		Short: "not implemented yet",
		RunE: func(cmd *cobra.Command, args []string) error {
			return errors.New("trust: not implemented yet")
		},
	}
}
