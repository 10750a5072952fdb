package main

import (
	"errors"

	"github.com/spf13/cobra"
)

func newVerifyCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "verify",
		Short: "not implemented yet",
		RunE: func(cmd *cobra.Command, args []string) error {
			return errors.New("verify: not implemented yet")
		},
	}
}
