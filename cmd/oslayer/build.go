package main

import (
	"errors"

	"github.com/spf13/cobra"
)

func newBuildCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "build",
		Short: "not implemented yet",
		RunE: func(cmd *cobra.Command, args []string) error {
			return errors.New("build: not implemented yet")
		},
	}
}
