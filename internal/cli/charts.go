package cli

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/aidonow/eva/internal/chartrepo"
)

func newChartsCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "charts",
		Short: "Package, publish and mirror the module charts (Helm OCI artifacts, by digest)",
		Long: `The module charts reach the cluster as Helm charts in an OCI registry, which the
environment's chartSource.url names. Published versions are listed, by digest, in
<charts>/` + chartrepo.LockFile + `: tenant pins and the catalog's versions are checked against it
by validate and render, and chart verification renders exactly those archives.`,
	}
	cmd.AddCommand(newChartsPackageCommand(), newChartsPushCommand(), newChartsMirrorCommand())
	return cmd
}

func newChartsPackageCommand() *cobra.Command {
	var charts, out, output string
	cmd := &cobra.Command{
		Use:   "package",
		Short: "Package every chart reproducibly into <name>-<version>.tgz",
		Long: `Package every chart folder under --charts with the Helm SDK's loader (.helmignore
honoured) into a reproducible archive: the same folder always gives the same bytes, so a
digest can be checked by anyone who packages the same commit.`,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkOutput(output); err != nil {
				return err
			}
			archives, err := chartrepo.PackageAll(charts)
			if err != nil {
				return &ExitError{Code: ExitInvalid, Err: err}
			}
			if err := os.MkdirAll(out, 0o755); err != nil {
				return err
			}
			var rep artifactReport
			for _, a := range archives {
				file := filepath.Join(out, a.FileName())
				if err := os.WriteFile(file, a.Data, 0o644); err != nil {
					return err
				}
				rep.Items = append(rep.Items, artifact{Chart: a.Name, Version: a.Version, Ref: file, Digest: a.Digest})
				if output == "text" {
					fmt.Fprintf(cmd.OutOrStdout(), "%s %s %s\n", file, a.Version, a.Digest)
				}
			}
			return finishArtifacts(cmd, output, rep, nil)
		},
	}
	cmd.Flags().StringVar(&charts, "charts", "charts", "folder of module charts")
	cmd.Flags().StringVar(&out, "out", "dist/charts", "folder the archives are written to")
	outputFlag(cmd, &output)
	return cmd
}

func newChartsPushCommand() *cobra.Command {
	var charts, to, output string
	var rf registryFlags
	cmd := &cobra.Command{
		Use:   "push",
		Short: "Push every chart to an OCI chart source and record the digests in " + chartrepo.LockFile,
		Long: `Package every chart reproducibly and push it to --to (oci://host/path) as
<path>/<chart>:<version>, the layout Helm and Flux's HelmRepository of type oci read.
A version already published with other content, in the lock file or in the registry, is
refused before anything is pushed: published versions are immutable. Each pushed digest
is read back from the registry, then recorded in <charts>/` + chartrepo.LockFile + `.`,
		Example: `  evactl charts push --to oci://ghcr.io/aidonow/eva/charts`,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if to == "" {
				return &ExitError{Code: ExitUsage, Err: fmt.Errorf("--to is required (oci://host/path)")}
			}
			if err := checkOutput(output); err != nil {
				return err
			}
			if _, err := chartrepo.Repository(to, "x"); err != nil {
				return &ExitError{Code: ExitUsage, Err: fmt.Errorf("--to: %w", err)}
			}
			archives, err := chartrepo.PackageAll(charts)
			if err != nil {
				return &ExitError{Code: ExitInvalid, Err: err}
			}
			lockPath := filepath.Join(charts, chartrepo.LockFile)
			lock, err := chartrepo.ReadLockIfPresent(lockPath)
			if err != nil {
				return &ExitError{Code: ExitInvalid, Err: err}
			}
			if lock == nil {
				lock = &chartrepo.Lock{}
			}
			var conflicts []string
			for _, a := range archives {
				if err := lock.Conflict(a); err != nil {
					conflicts = append(conflicts, err.Error())
				}
			}
			if len(conflicts) > 0 {
				return &ExitError{Code: ExitInvalid, Err: fmt.Errorf("nothing pushed:\n  %s", strings.Join(conflicts, "\n  "))}
			}
			reg := rf.registry()
			rep := artifactReport{Lock: lockPath}
			for _, a := range archives {
				repo, _ := chartrepo.Repository(to, a.Name)
				ref := repo + ":" + chartrepo.Tag(a.Version)
				p, err := chartrepo.Push(cmd.Context(), to, a, reg)
				if err != nil {
					// What was pushed before stays recorded.
					if werr := lock.Write(lockPath); werr != nil {
						return werr
					}
					rep.Items = append(rep.Items, artifact{Chart: a.Name, Version: a.Version, Ref: ref, Error: err.Error()})
					return finishArtifacts(cmd, output, rep, &ExitError{Code: ExitInvalid, Err: err})
				}
				lock.Add(a.Name, p)
				rep.Items = append(rep.Items, artifact{Chart: a.Name, Version: a.Version, Ref: ref, Digest: p.Digest})
				if output == "text" {
					fmt.Fprintf(cmd.OutOrStdout(), "%s@%s\n", ref, p.Digest)
				}
			}
			if err := lock.Write(lockPath); err != nil {
				return err
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "pushed %d chart(s); digests recorded in %s\n", len(archives), lockPath)
			return finishArtifacts(cmd, output, rep, nil)
		},
	}
	cmd.Flags().StringVar(&charts, "charts", "charts", "folder of module charts (and of "+chartrepo.LockFile+")")
	cmd.Flags().StringVar(&to, "to", "", "OCI chart source to push to, oci://host/path")
	outputFlag(cmd, &output)
	rf.bind(cmd)
	return cmd
}

func newChartsMirrorCommand() *cobra.Command {
	var charts, from, to, output string
	var rf registryFlags
	cmd := &cobra.Command{
		Use:   "mirror",
		Short: "Copy every published chart version by digest to a mirror (air-gapped installs)",
		Long: `Copy every version listed in <charts>/` + chartrepo.LockFile + ` from --from to --to, by
manifest digest, under its version tag, and verify each digest at the mirror. Together
with ` + "`evactl images mirror`" + ` this is everything an air-gapped cluster pulls.`,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if from == "" || to == "" {
				return &ExitError{Code: ExitUsage, Err: fmt.Errorf("--from and --to are required (oci://host/path)")}
			}
			if err := checkOutput(output); err != nil {
				return err
			}
			lock, err := chartrepo.ReadLock(filepath.Join(charts, chartrepo.LockFile))
			if err != nil {
				return &ExitError{Code: ExitUsage, Err: fmt.Errorf("%w (publish with evactl charts push first)", err)}
			}
			reg := rf.registry()
			var failed []string
			var rep artifactReport
			for _, chart := range lock.Names() {
				for _, p := range lock.Charts[chart] {
					status, item := "ok", artifact{Chart: chart, Version: p.Version, Digest: p.Digest}
					item.From, _ = chartrepo.Repository(from, chart)
					item.Ref, _ = chartrepo.Repository(to, chart)
					if err := chartrepo.Copy(cmd.Context(), from, to, chart, p, reg); err != nil {
						status, item.Error = "FAILED", err.Error()
						failed = append(failed, fmt.Sprintf("%s %s: %v", chart, p.Version, err))
					}
					rep.Items = append(rep.Items, item)
					if output == "text" {
						fmt.Fprintf(cmd.OutOrStdout(), "%s %s %s %s\n", chart, p.Version, p.Digest, status)
					}
				}
			}
			if len(failed) > 0 {
				return finishArtifacts(cmd, output, rep, &ExitError{Code: ExitInvalid, Err: fmt.Errorf("%d of %d copies failed:\n  %s", len(failed), len(rep.Items), strings.Join(failed, "\n  "))})
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "mirrored %d chart version(s)\n", len(rep.Items))
			return finishArtifacts(cmd, output, rep, nil)
		},
	}
	outputFlag(cmd, &output)
	cmd.Flags().StringVar(&charts, "charts", "charts", "folder of module charts (and of "+chartrepo.LockFile+")")
	cmd.Flags().StringVar(&from, "from", "", "OCI chart source to copy from, oci://host/path")
	cmd.Flags().StringVar(&to, "to", "", "mirror to copy to, oci://host/path")
	rf.bind(cmd)
	return cmd
}
