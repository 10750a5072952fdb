package main

import (
	"errors"

	"github.com/spf13/cobra"
)

func newKeygenCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "keygen",
		Short: "not implemented yet",
		RunE: func(cmd *cobra.Command, args []string) error {
			return errors.New("keygen: not implemented yet")
		},
	}
}
