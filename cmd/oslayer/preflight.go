package main

import (
	"errors"

	"github.com/spf13/cobra"
)

func newPreflightCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "preflight",
		Short: "not implemented yet",
		RunE: func(cmd *cobra.Command, args []string) error {
			return errors.New("preflight: not implemented yet")
		},
	}
}
