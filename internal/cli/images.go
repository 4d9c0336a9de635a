package cli

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/aidonow/eva/internal/airgap"
	"github.com/aidonow/eva/internal/render"
)

func newImagesCommand(opts *options) *cobra.Command {
	cmd := &cobra.Command{Use: "images", Short: "Check the digest-pinned image list for air-gapped installs"}
	cmd.AddCommand(newImagesVerifyCommand(opts), newImagesPinCommand(), newImagesMirrorCommand())
	return cmd
}

type registryFlags struct {
	insecure       bool
	registryConfig string
}

func (r *registryFlags) bind(cmd *cobra.Command) {
	cmd.Flags().BoolVar(&r.insecure, "insecure", false, "allow plain-HTTP registries")
	cmd.Flags().StringVar(&r.registryConfig, "registry-config", "", "Docker config.json with registry credentials (default: the user's)")
}

func (r *registryFlags) registry() airgap.Registry {
	reg := airgap.Registry{Insecure: r.insecure}
	if r.registryConfig != "" {
		// The Docker keychain reads DOCKER_CONFIG: point it at the given file's folder.
		_ = os.Setenv("DOCKER_CONFIG", filepath.Dir(r.registryConfig))
	}
	return reg
}

func newImagesPinCommand() *cobra.Command {
	var file, output string
	var airgapOverlays []string
	var rf registryFlags
	cmd := &cobra.Command{
		Use:   "pin",
		Short: "Resolve each image's tag to its digest, rewrite images.txt in place and sync the air-gap overlay",
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkOutput(output); err != nil {
				return err
			}
			n, err := airgap.Pin(cmd.Context(), file, rf.registry())
			if err != nil {
				return &ExitError{Code: ExitInvalid, Err: err}
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "pinned %d image(s) in %s\n", n, file)
			f, err := os.Open(file)
			if err != nil {
				return err
			}
			entries, _ := airgap.Parse(f)
			f.Close()
			var rep artifactReport
			for _, e := range entries {
				rep.Items = append(rep.Items, artifact{Ref: e.Ref, Digest: e.Digest})
			}
			for _, path := range airgapOverlays {
				synced, err := airgap.SyncOverlay(path, entries)
				if err != nil {
					return &ExitError{Code: ExitInvalid, Err: err}
				}
				fmt.Fprintf(cmd.ErrOrStderr(), "set %d digest(s) in %s\n", synced, path)
			}
			return finishArtifacts(cmd, output, rep, nil)
		},
	}
	outputFlag(cmd, &output)
	cmd.Flags().StringVar(&file, "file", "images.txt", "the image list")
	cmd.Flags().StringSliceVar(&airgapOverlays, "airgap-overlay", nil,
		"file whose image digests follow images.txt (repeatable): overlays/airgap/kustomization.yaml, overlays/airgap/tenant/kustomization.yaml, overlays/airgap/tenant/environment.yaml")
	rf.bind(cmd)
	return cmd
}

func newImagesMirrorCommand() *cobra.Command {
	var file, to, output string
	var parallel int
	var dryRun bool
	var rf registryFlags
	cmd := &cobra.Command{
		Use:   "mirror",
		Short: "Copy every image by digest to a mirror registry (no Docker needed)",
		Long: `Copy each image of images.txt by digest to --to, keeping repository paths and tags;
multi-arch indexes are copied whole and every copy is verified by reading its digest back.
Copies run in parallel and continue past failures; the command exits 1 listing them.`,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if to == "" {
				return &ExitError{Code: ExitUsage, Err: fmt.Errorf("--to is required")}
			}
			if err := checkOutput(output); err != nil {
				return err
			}
			f, err := os.Open(file)
			if err != nil {
				return &ExitError{Code: ExitUsage, Err: err}
			}
			entries, problems := airgap.Parse(f)
			f.Close()
			if len(problems) > 0 {
				for _, p := range problems {
					fmt.Fprintln(cmd.OutOrStdout(), p.String())
				}
				return &ExitError{Code: ExitInvalid, Err: fmt.Errorf("fix images.txt first (evactl images pin)")}
			}
			out := cmd.OutOrStdout()
			if output != "text" {
				out = cmd.ErrOrStderr() // progress; the report goes to standard output
			}
			done := 0
			copies := airgap.Mirror(cmd.Context(), entries, to, rf.registry(), parallel, dryRun, func(c airgap.Copy) {
				done++
				status := "ok"
				if c.Err != nil {
					status = "FAILED"
				}
				fmt.Fprintf(out, "[%d/%d] %s -> %s %s\n", done, len(entries), c.From, c.To, status)
			})
			rep := artifactReport{DryRun: dryRun}
			var failed []string
			for _, c := range copies {
				item := artifact{From: c.From, Ref: c.To}
				if c.Err != nil {
					item.Error = c.Err.Error()
					failed = append(failed, fmt.Sprintf("%s: %v", c.From, c.Err))
				}
				rep.Items = append(rep.Items, item)
				if dryRun && output == "text" {
					fmt.Fprintf(out, "would copy %s -> %s\n", c.From, c.To)
				}
			}
			if len(failed) > 0 && !dryRun {
				return finishArtifacts(cmd, output, rep, &ExitError{Code: ExitInvalid, Err: fmt.Errorf("%d of %d copies failed:\n  %s", len(failed), len(copies), strings.Join(failed, "\n  "))})
			}
			return finishArtifacts(cmd, output, rep, nil)
		},
	}
	outputFlag(cmd, &output)
	cmd.Flags().StringVar(&file, "file", "images.txt", "the image list")
	cmd.Flags().StringVar(&to, "to", "", "mirror registry (and optional path), e.g. registry.internal:5000/eva")
	cmd.Flags().IntVar(&parallel, "parallel", 4, "copies at once")
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "print the plan, copy nothing")
	rf.bind(cmd)
	return cmd
}

func newImagesVerifyCommand(opts *options) *cobra.Command {
	var file, charts, overlays, env, output string
	cmd := &cobra.Command{
		Use:   "verify",
		Short: "Fail on placeholder, tag-only, malformed or duplicate images, and on chart images images.txt lacks",
		Long: `Check images.txt: every line <image>@sha256:<digest>; PLACEHOLDER digests, tag-only or
malformed references and duplicates are refused, each with its line. Then every image the
module charts can produce (each chart rendered with the Helm SDK for every tier's values)
and the seeder image must be listed; a missing one is named with its chart.`,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkOutput(output); err != nil {
				return err
			}
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
			e, err := loadEnvironment(cmd, overlays, env)
			if err != nil {
				return &ExitError{Code: ExitUsage, Err: err}
			}
			checker, err := loadCharts(cmd, charts)
			if err != nil {
				return &ExitError{Code: ExitUsage, Err: err}
			}
			images, err := airgap.ChartImages(&render.Renderer{Catalog: catalog, Env: e, Charts: checker.Published()}, checker)
			if err != nil {
				return err
			}
			problems = append(problems, airgap.Covers(entries, images)...)
			if output != "text" {
				if problems == nil {
					problems = []airgap.Problem{}
				}
				report := struct {
					Valid    bool             `json:"valid"`
					File     string           `json:"file"`
					Pinned   int              `json:"pinned"`
					Covered  int              `json:"covered"`
					Problems []airgap.Problem `json:"problems"`
				}{len(problems) == 0, file, len(entries), len(images), problems}
				if err := writeStructured(cmd.OutOrStdout(), output, report); err != nil {
					return err
				}
			} else {
				for _, p := range problems {
					fmt.Fprintln(cmd.OutOrStdout(), p.String())
				}
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
	f.StringVarP(&output, "output", "o", "text", "output format: text, json or yaml")
	return cmd
}
