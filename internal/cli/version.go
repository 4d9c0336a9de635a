package cli

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/aidonow/eva/internal/buildinfo"
)

func newVersionCommand() *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:         "version",
		Short:       "Print evactl's version, commit and Go version",
		Annotations: map[string]string{noFleet: ""},
		RunE: func(cmd *cobra.Command, _ []string) error {
			info := buildinfo.Read()
			if err := checkOutput(output); err != nil {
				return err
			}
			if output == "text" {
				_, err := fmt.Fprintln(cmd.OutOrStdout(), "evactl", info)
				return err
			}
			return writeStructured(cmd.OutOrStdout(), output, info)
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "text", "output format: text, json or yaml")
	return cmd
}
