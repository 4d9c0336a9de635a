package cli

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/aidonow/eva/internal/airgap"
	"github.com/aidonow/eva/internal/chartcheck"
	"github.com/aidonow/eva/internal/overlay"
	"github.com/aidonow/eva/internal/render"
)

func newImagesCommand(opts *options) *cobra.Command {
	cmd := &cobra.Command{Use: "images", Short: "Check the digest-pinned image list for air-gapped installs"}
	cmd.AddCommand(newImagesVerifyCommand(opts))
	return cmd
}

func newImagesVerifyCommand(opts *options) *cobra.Command {
	var file, charts, overlays, env string
	cmd := &cobra.Command{
		Use:   "verify",
		Short: "Fail on placeholder, tag-only, malformed or duplicate images, and on chart images images.txt lacks",
		Long: `Check images.txt: every line <image>@sha256:<digest>; PLACEHOLDER digests, tag-only or
malformed references and duplicates are refused, each with its line. Then every image the
module charts can produce (each chart rendered with the Helm SDK for every tier's values)
and the seeder image must be listed; a missing one is named with its chart.`,
		RunE: func(cmd *cobra.Command, _ []string) error {
			catalog, err := opts.catalog()
			if err != nil {
				return err
			}
			f, err := os.Open(file)
			if err != nil {
				return &ExitError{Code: ExitUsage, Err: err}
			}
			defer f.Close()
			entries, problems := airgap.Parse(f)
			e, err := overlay.Load(overlays, env)
			if err != nil {
				return &ExitError{Code: ExitUsage, Err: err}
			}
			checker, err := chartcheck.Load(charts)
			if err != nil {
				return &ExitError{Code: ExitUsage, Err: err}
			}
			images, err := airgap.ChartImages(&render.Renderer{Catalog: catalog, Env: e}, checker)
			if err != nil {
				return err
			}
			problems = append(problems, airgap.Covers(entries, images)...)
			for _, p := range problems {
				fmt.Fprintln(cmd.OutOrStdout(), p.String())
			}
			if len(problems) > 0 {
				return &ExitError{Code: ExitInvalid, Err: fmt.Errorf("%d problem(s) in %s", len(problems), file)}
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "%d images pinned, %d chart and seeder images covered\n", len(entries), len(images))
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&file, "file", "images.txt", "the image list")
	f.StringVar(&charts, "charts", "charts", "folder of module charts")
	f.StringVar(&overlays, "overlays", "overlays", "folder of environment overlays")
	f.StringVar(&env, "env", "dev", "environment whose seeder image must be listed")
	return cmd
}
