package cli

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"sigs.k8s.io/controller-runtime/pkg/client"

	evav1 "github.com/aidonow/eva/api/v1alpha1"
	"github.com/aidonow/eva/internal/rollout"
	"github.com/aidonow/eva/internal/rolloutfile"
	"github.com/aidonow/eva/internal/safetext"
)

func newRolloutCommand(opts *options) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "rollout",
		Short: "Follow platform releases (EvaRollout) on a cluster, or move those kept as files",
	}
	cmd.AddCommand(newRolloutStatusCommand(opts), newRolloutPlanCommand(opts), newRolloutPromoteCommand(opts))
	return cmd
}

func newRolloutStatusCommand(opts *options) *cobra.Command {
	var cluster clusterFlags
	var namespace, dir, output string
	cmd := &cobra.Command{
		Use:   "status [NAME]",
		Short: "Show each rollout's phase and a progress bar per wave",
		Long: "Reads the EvaRollouts of a namespace (or the one named) from the cluster and shows, newest first, " +
			"each one's phase and message and, per wave, how many tenants it updated, which are skipped and why.",
		Example: `  evactl rollout status -n tenants
  evactl rollout status crm-1-5 -n tenants --context prod -o yaml
  evactl rollout status --rollouts rollouts`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkOutput(output); err != nil {
				return err
			}
			var items []evav1.EvaRollout
			ns := namespace
			if cmd.Flags().Changed("rollouts") {
				catalog, err := opts.catalog()
				if err != nil {
					return err
				}
				files, problems, err := rolloutfile.Load(dir, catalog)
				if err != nil {
					return &ExitError{Code: ExitUsage, Err: err}
				}
				if len(problems) > 0 {
					printProblems(cmd.ErrOrStderr(), problems)
					return &ExitError{Code: ExitInvalid, Err: fmt.Errorf("%d problem(s) in the release files", len(problems))}
				}
				for _, f := range files {
					if ns == "" || f.Rollout.Namespace == ns {
						items = append(items, *f.Rollout)
					}
				}
				ns = dir
			} else {
				c, cns, err := cluster.client(namespace)
				if err != nil {
					return &ExitError{Code: ExitUsage, Err: err}
				}
				var list evav1.EvaRolloutList
				if err := c.List(cmd.Context(), &list, client.InNamespace(cns)); err != nil {
					return fmt.Errorf("listing rollouts in %s: %w", cns, err)
				}
				items, ns = list.Items, cns
			}
			all := items
			if len(args) == 1 {
				items = nil
				for _, ro := range all {
					if ro.Name == args[0] {
						items = append(items, ro)
					}
				}
				if len(items) == 0 {
					return &ExitError{Code: ExitInvalid, Err: fmt.Errorf("no EvaRollout %s in %s", args[0], ns)}
				}
			}
			sort.Slice(items, func(i, j int) bool { return rollout.Newer(&items[i], &items[j]) })
			if output != "text" {
				if items == nil {
					items = []evav1.EvaRollout{}
				}
				return writeStructured(cmd.OutOrStdout(), output, items)
			}
			if len(items) == 0 {
				fmt.Fprintf(cmd.OutOrStdout(), "no EvaRollout in %s\n", safetext.Escape(ns))
				return nil
			}
			for i := range items {
				WriteRolloutStatus(cmd.OutOrStdout(), &items[i])
			}
			return nil
		},
	}
	cluster.bind(cmd.Flags(), "kubeconfig file")
	cmd.Flags().StringVarP(&output, "output", "o", "text", "output format: text, json or yaml (the EvaRollouts, status included)")
	cmd.Flags().StringVarP(&namespace, "namespace", "n", "", "namespace of the tenants and their rollouts (default: the context's)")
	cmd.Flags().StringVar(&dir, "rollouts", "", "read the releases kept as files in this folder instead of the cluster")
	return cmd
}

// barWidth is the number of cells of a wave's progress bar.
const barWidth = 20

// WriteRolloutStatus writes one rollout: a header line (name, phase, current wave,
// tenants updated), its message, and a line per wave with a progress bar of the tenants
// it updated out of those it may update, the skipped tenants and their reasons.
func WriteRolloutStatus(w io.Writer, ro *evav1.EvaRollout) {
	st := ro.Status
	wave := "-"
	if st.CurrentWave > 0 {
		wave = fmt.Sprint(st.CurrentWave)
	}
	phase := string(st.Phase)
	if phase == "" {
		phase = "Pending"
	}
	fmt.Fprintf(w, "%s  %s  wave %s  %d/%d tenants  %s\n", safetext.Escape(ro.Name), phase, wave, st.Updated, st.Total, safetext.Escape(versionsOf(ro)))
	if st.Message != "" {
		// The message carries tenants' conditions: escaped, it cannot drive the terminal.
		fmt.Fprintf(w, "  %s\n", safetext.Escape(st.Message))
	}
	for _, ws := range st.Waves {
		eligible := int(ws.Total) - len(ws.Skipped)
		updated := len(ws.Updated)
		filled := 0
		if eligible > 0 {
			filled = min(barWidth, updated*barWidth/eligible)
		}
		fmt.Fprintf(w, "  wave %d  [%s%s] %d/%d", ws.Wave, strings.Repeat("#", filled), strings.Repeat("-", barWidth-filled), updated, eligible)
		switch {
		case ws.PassedOver && ws.CompletedAt != nil:
			fmt.Fprintf(w, "  passed over %s (no tenant could take the release)", ws.CompletedAt.UTC().Format(time.RFC3339))
		case ws.CompletedAt != nil:
			fmt.Fprintf(w, "  complete %s", ws.CompletedAt.UTC().Format(time.RFC3339))
		case ws.BakeStartedAt != nil:
			fmt.Fprintf(w, "  baking since %s", ws.BakeStartedAt.UTC().Format(time.RFC3339))
		}
		for _, e := range ws.Updated {
			if e.SetAsideAt != nil {
				fmt.Fprintf(w, "\n          set aside %s: %s", e.Code, safetext.Escape(e.Reason))
			}
		}
		for _, s := range ws.Skipped {
			fmt.Fprintf(w, "\n          skipped %s: %s", s.Code, safetext.Escape(s.Reason))
		}
		fmt.Fprintln(w)
	}
}

func versionsOf(ro *evav1.EvaRollout) string {
	modules := make([]string, 0, len(ro.Spec.Versions))
	for m, v := range ro.Spec.Versions {
		modules = append(modules, m+" "+string(v))
	}
	sort.Strings(modules)
	return strings.Join(modules, ", ")
}
