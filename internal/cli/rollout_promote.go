package cli

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	evav1 "github.com/aidonow/eva/api/v1alpha1"
	"github.com/aidonow/eva/internal/publish"
	"github.com/aidonow/eva/internal/rollout"
	"github.com/aidonow/eva/internal/rolloutfile"
	"github.com/aidonow/eva/internal/safetext"
	"github.com/aidonow/eva/internal/tenant"
	"github.com/aidonow/eva/internal/tenantfile"
)

// releaseFileOptions are the flags of the commands that move a release kept as a file.
type releaseFileOptions struct {
	tenants     []string
	rollouts    string
	namespace   string
	cluster     clusterFlags
	assumeReady bool
	// charts check that the release's chart versions exist before a step is taken.
	charts chartFlags
}

func (o *releaseFileOptions) bind(f *pflag.FlagSet) {
	f.StringSliceVar(&o.tenants, "tenants", []string{DefaultTenantsDir}, "tenant files or folders")
	f.StringVar(&o.rollouts, "rollouts", rolloutfile.DefaultDir, "folder of the release files")
	f.StringVarP(&o.namespace, "namespace", "n", "", "namespace of the release, when two release files share its name")
	o.cluster.bind(f, "read the tenants' health from the cluster of this kubeconfig (their HelmReleases, as Flux applied the published render)")
	f.BoolVar(&o.assumeReady, "assume-ready", false, "without cluster access: vouch that every tenant the release reached is Ready on it (the commit says so)")
	o.charts.bind(f)
}

// checkVersions refuses a release naming a chart version that neither the charts
// folder nor the environment's chart source holds: promoting it would admit tenants to
// a release no one can install.
func (o *releaseFileOptions) checkVersions(cmd *cobra.Command, catalog *tenant.Catalog, target *rolloutfile.File) error {
	if !o.charts.verify {
		return nil
	}
	env, envErr := loadEnvironment(cmd, o.charts.overlays, o.charts.env)
	checker, err := o.charts.load(cmd, env, envErr)
	if err != nil || checker == nil {
		return err
	}
	if problems := releaseChartProblems([]*rolloutfile.File{target}, catalog, checker); len(problems) > 0 {
		printProblems(cmd.ErrOrStderr(), problems)
		return &ExitError{Code: ExitInvalid, Err: fmt.Errorf("%d problem(s) in the release file; nothing was promoted", len(problems))}
	}
	return nil
}

// step is one promotion of a release file, decided and not yet written.
type step struct {
	target   *rolloutfile.File
	decision rollout.Decision
	// changed are the files whose status (or start) the step changes: the target, and
	// older releases it supersedes.
	changed    []*rolloutfile.File
	superseded []string
	health     string
}

// decideStep decides the next step of the release called name from the tenant files,
// the release files and the tenants' health, as the operator's rollout controller
// decides it from the cluster's objects: the same planner, the same gates.
func decideStep(cmd *cobra.Command, opts *options, o *releaseFileOptions, name string, now time.Time) (*step, error) {
	ctx, stderr := cmd.Context(), cmd.ErrOrStderr()
	catalog, err := opts.catalog()
	if err != nil {
		return nil, err
	}
	res, err := tenantfile.Load(o.tenants, catalog)
	if err != nil {
		return nil, &ExitError{Code: ExitUsage, Err: err}
	}
	files, problems, err := rolloutfile.Load(o.rollouts, catalog)
	if err != nil {
		return nil, &ExitError{Code: ExitUsage, Err: err}
	}
	problems = append(res.Problems, problems...)
	if len(problems) > 0 {
		tenantfile.SortProblems(problems)
		printProblems(stderr, problems)
		return nil, &ExitError{Code: ExitInvalid, Err: fmt.Errorf("%d problem(s) in the tenant and release files; nothing was promoted", len(problems))}
	}
	target, err := findRelease(files, name, o.namespace, o.rollouts)
	if err != nil {
		return nil, err
	}
	if err := o.checkVersions(cmd, catalog, target); err != nil {
		return nil, err
	}
	health, err := o.health()
	if err != nil {
		return nil, &ExitError{Code: ExitUsage, Err: err}
	}
	ns := target.Rollout.Namespace
	var siblings []*rolloutfile.File
	for _, f := range files {
		if f.Rollout.Namespace == ns {
			siblings = append(siblings, f)
		}
	}
	st := &step{target: target, health: health.describe()}
	stamp := metav1.NewTime(now.UTC().Truncate(time.Second))
	if target.Rollout.CreationTimestamp.IsZero() {
		// A release starts with its first promotion: it is the newest from then on, a
		// second after another started in the same second if need be.
		target.Rollout.CreationTimestamp = stamp
		for _, f := range siblings {
			if f != target && !f.Rollout.CreationTimestamp.IsZero() && rollout.Newer(f.Rollout, target.Rollout) {
				target.Rollout.CreationTimestamp = metav1.NewTime(f.Rollout.CreationTimestamp.Add(time.Second))
			}
		}
		st.changed = append(st.changed, target)
	}
	for _, f := range siblings {
		if f != target && !f.Rollout.CreationTimestamp.IsZero() && rollout.Newer(f.Rollout, target.Rollout) {
			return nil, &ExitError{Code: ExitInvalid, Err: fmt.Errorf("EvaRollout %s started after %s and supersedes it: promote %s instead", f.Rollout.Name, name, f.Rollout.Name)}
		}
	}
	var tenants []*evav1.EvaTenant
	for _, t := range res.Tenants {
		if t.Object.Namespace == ns && t.Object.Spec.LifecycleOrDefault() != evav1.LifecycleDecommissioned {
			tenants = append(tenants, t.Object)
		}
	}
	for _, f := range siblings {
		if f == target || f.Rollout.CreationTimestamp.IsZero() || f.Rollout.Status.Phase == evav1.RolloutSuperseded {
			continue
		}
		d := rollout.Plan(f.Rollout, planTenants(tenants), rollout.Delivery{}, name, stamp.Time)
		f.Rollout.Status = d.Status
		st.changed = appendOnce(st.changed, f)
		st.superseded = append(st.superseded, f.Rollout.Name)
	}
	observed := planTenants(tenants)
	rollouts := rolloutfile.Rollouts(siblings)
	for i, t := range tenants {
		if !rollout.Admitted(target.Rollout, t.Name) {
			observed[i].OnOlderRelease = rollout.OnOlderRelease(rollouts, target.Rollout, t.Name, "", observed[i].Generation)
			if err := health.before(ctx, &observed[i], catalog.ModulesOf(t.Spec.Tier)); err != nil {
				return nil, err
			}
			continue
		}
		want := rollout.Changes(t, target.Rollout, catalog.ModulesOf(t.Spec.Tier))
		if len(want) == 0 {
			// The release changes nothing of it: Ready on it, proving nothing.
			observed[i].OnRelease, observed[i].Ready, observed[i].Unchanged = true, true, true
			continue
		}
		if err := health.observe(ctx, &observed[i], want); err != nil {
			return nil, err
		}
	}
	st.decision = rollout.Plan(target.Rollout, observed, rollout.Delivery{}, "", stamp.Time)
	if !equality.Semantic.DeepEqual(st.decision.Status, target.Rollout.Status) {
		target.Rollout.Status = st.decision.Status
		st.changed = appendOnce(st.changed, target)
	}
	return st, nil
}

// planTenants is what the planner knows of the tenants before their health is read.
func planTenants(tenants []*evav1.EvaTenant) []rollout.Tenant {
	out := make([]rollout.Tenant, len(tenants))
	for i, t := range tenants {
		out[i] = rollout.Tenant{Code: t.Spec.CapsuleCode, Name: t.Name, Tier: t.Spec.Tier,
			Wave: t.Spec.WaveOrDefault(), Frozen: t.Spec.Frozen, Generation: rollout.GenerationOf(t)}
	}
	return out
}

func appendOnce(files []*rolloutfile.File, f *rolloutfile.File) []*rolloutfile.File {
	for _, g := range files {
		if g == f {
			return files
		}
	}
	return append(files, f)
}

func findRelease(files []*rolloutfile.File, name, namespace, dir string) (*rolloutfile.File, error) {
	var found []*rolloutfile.File
	for _, f := range files {
		if f.Rollout.Name == name && (namespace == "" || f.Rollout.Namespace == namespace) {
			found = append(found, f)
		}
	}
	switch len(found) {
	case 0:
		return nil, &ExitError{Code: ExitInvalid, Err: fmt.Errorf("no EvaRollout %s in %s", name, dir)}
	case 1:
		return found[0], nil
	}
	return nil, &ExitError{Code: ExitUsage, Err: fmt.Errorf("EvaRollout %s is in %s and %s: say which with --namespace", name, found[0].Path, found[1].Path)}
}

// health picks where the tenants' health comes from: the cluster named by --kubeconfig,
// --context or $KUBECONFIG, or --assume-ready.
func (o *releaseFileOptions) health() (releaseHealth, error) {
	switch {
	case o.assumeReady && o.cluster.explicit():
		return nil, fmt.Errorf("--assume-ready and --kubeconfig or --context: read the cluster, or vouch without it, not both")
	case o.assumeReady:
		return assumedHealth{}, nil
	case o.cluster.named():
		c, _, err := o.cluster.client("default")
		if err != nil {
			return nil, err
		}
		return clusterHealth{c: c, server: o.cluster.server()}, nil
	}
	return unknownHealth{}, nil
}

// unknownHealth is neither --kubeconfig nor --assume-ready (plan only: promote needs
// one): no tenant is known Ready, so the release admits none and the tenants it
// reached stay Pending.
type unknownHealth struct{}

func (unknownHealth) observe(_ context.Context, t *rollout.Tenant, _ map[string]evav1.ModuleVersion) error {
	t.Pending = true // waited for, not timed: nothing says whether it reached the tenant
	return nil
}

func (unknownHealth) before(_ context.Context, t *rollout.Tenant, _ []string) error {
	t.Ready, t.Message = false, "health not read (neither --kubeconfig nor --assume-ready)"
	return nil
}

func (unknownHealth) describe() string {
	return "not read (neither --kubeconfig nor --assume-ready): no tenant counts as Ready, so none is admitted"
}

// subject is the first line of the step's commit.
func (st *step) subject() string {
	name := st.target.Rollout.Name
	if len(st.decision.Admitted) > 0 {
		codes := make([]string, len(st.decision.Admitted))
		for i, t := range st.decision.Admitted {
			codes[i] = t.Code
		}
		return fmt.Sprintf("rollout %s: wave %d admits %s", name, st.decision.Admitted[0].Wave, strings.Join(codes, ", "))
	}
	s := st.target.Rollout.Status
	return safetext.Limit(fmt.Sprintf("rollout %s: %s, %s", name, s.Phase, safetext.Escape(firstLine(s.Message))), 120)
}

// body is the rest of the step's commit: where the health came from, what it
// supersedes, and the release's progress.
func (st *step) body() string {
	var b bytes.Buffer
	fmt.Fprintf(&b, "Health: %s.\n", st.health)
	if len(st.superseded) > 0 {
		fmt.Fprintf(&b, "Supersedes: %s.\n", strings.Join(st.superseded, ", "))
	}
	b.WriteString("\n")
	WriteRolloutStatus(&b, st.target.Rollout)
	return b.String()
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}

func newRolloutPlanCommand(opts *options) *cobra.Command {
	o := &releaseFileOptions{}
	var output string
	cmd := &cobra.Command{
		Use:   "plan NAME",
		Short: "Show the next step of a release kept as a file, without writing anything",
		Long: "Decides, as evactl rollout promote would, the next step of the release in " + rolloutfile.DefaultDir + "/ called NAME " +
			"(which tenants it admits, which gate holds it), and prints it. Nothing is written.",
		Example: `  evactl rollout plan crm-1-5 --kubeconfig ~/.kube/config`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkOutput(output); err != nil {
				return err
			}
			st, err := decideStep(cmd, opts, o, args[0], time.Now())
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if output != "text" {
				return writeStructured(out, output, st.report())
			}
			if len(st.changed) == 0 {
				fmt.Fprintln(out, "nothing to promote")
			} else {
				fmt.Fprintln(out, "next step: "+safetext.Escape(st.subject()))
			}
			fmt.Fprint(out, st.body())
			return nil
		},
	}
	o.bind(cmd.Flags())
	cmd.Flags().StringVarP(&output, "output", "o", "text", "output format: text, json or yaml (the step: admitted tenants, the release's status after it)")
	return cmd
}

func newRolloutPromoteCommand(opts *options) *cobra.Command {
	o := &releaseFileOptions{}
	var author authorFlags
	var commit bool
	var output string
	cmd := &cobra.Command{
		Use:   "promote NAME",
		Short: "Take the next step of a release kept as a file, as one commit",
		Long: `For teams that publish with evactl and no operator. A release is a file under
` + rolloutfile.DefaultDir + `/ holding one EvaRollout; evactl render and publish give each tenant the
versions of the releases that admitted it (its own pins still win).

promote decides the next step as the operator would: the gates of the current wave
(each tenant it reached Ready on the release within the ready timeout, none Failed),
the bake time, maxUpdate, frozen tenants and waves. It records the step in the
release's status (the rest of the file stays as written) and commits that file
alone, one reviewable commit per step; publishing that commit brings the release to
the tenants it admitted. Run it again to take the next step.

The tenants' health is read from the cluster with --kubeconfig (their HelmReleases as
Flux applied the published render); without cluster access, --assume-ready vouches for
them, and the commit says so. One of the two is required. A halted release is recorded,
and promote exits 1.

The commit is made on your behalf and names you as git does (GIT_AUTHOR_NAME and
GIT_AUTHOR_EMAIL, else user.name and user.email of the repository's configuration);
--author-name and --author-email (or EVA_GIT_AUTHOR_NAME and EVA_GIT_AUTHOR_EMAIL) name
someone else, such as a release bot.`,
		Example: `  evactl rollout promote crm-1-5 --kubeconfig ~/.kube/config
  git push origin HEAD   # review, merge, publish: the admitted tenants move`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if !o.assumeReady && !o.cluster.named() {
				return &ExitError{Code: ExitUsage, Err: fmt.Errorf("promote needs the tenants' health: --kubeconfig, --context or $KUBECONFIG (read from the cluster) or --assume-ready (vouched for, and said so in the commit)")}
			}
			if err := checkOutput(output); err != nil {
				return err
			}
			if err := checkAuthor(cmd); err != nil {
				return err
			}
			st, err := decideStep(cmd, opts, o, args[0], time.Now())
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			status := st.target.Rollout.Status
			if len(st.changed) == 0 {
				if output != "text" {
					return cmp.Or(writeStructured(out, output, st.report()), haltedError(st.target.Rollout))
				}
				fmt.Fprintf(out, "nothing to promote: %s, %s\n", status.Phase, safetext.Escape(status.Message))
				return haltedError(st.target.Rollout)
			}
			rep, err := st.take(cmd, commit, author)
			if err != nil {
				return err
			}
			if output != "text" {
				return cmp.Or(writeStructured(out, output, rep), haltedError(st.target.Rollout))
			}
			if rep.Commit != "" {
				fmt.Fprintf(out, "committed %s: %s\n", short(rep.Commit), safetext.Escape(st.subject()))
			} else {
				fmt.Fprintf(out, "wrote %s (not committed): %s\n", safetext.Escape(strings.Join(rep.Files, ", ")), safetext.Escape(st.subject()))
			}
			WriteRolloutStatus(out, st.target.Rollout)
			return haltedError(st.target.Rollout)
		},
	}
	o.bind(cmd.Flags())
	author.bindOnBehalf(cmd.Flags())
	cmd.Flags().StringVarP(&output, "output", "o", "text", "output format: text, json or yaml (the step taken: admitted tenants, files written, the commit, the release's status)")
	cmd.Flags().BoolVar(&commit, "commit", true, "commit the release file in its git repository (--commit=false only writes it)")
	return cmd
}

// take writes the step's files and, with commit, commits them alone; all or nothing:
// a failure puts back the files already written, or the next run would take the
// uncommitted status for the release's own.
func (st *step) take(cmd *cobra.Command, commit bool, author authorFlags) (stepReport, error) {
	rep := st.report()
	var fc *fileCommit
	if commit {
		// Refused before anything is written: a refusal leaves the files as they were.
		var err error
		if fc, err = prepareCommit(rep.Files); err != nil {
			return rep, err
		}
	}
	restore := func(err error) (stepReport, error) {
		for _, f := range st.changed {
			if rerr := f.Restore(); rerr != nil {
				return rep, fmt.Errorf("%w (and %v)", err, rerr)
			}
		}
		return rep, err
	}
	for _, f := range st.changed {
		if err := f.Save(); err != nil {
			return restore(err)
		}
	}
	if fc != nil {
		who, err := commitAuthor(cmd, fc, author)
		if err != nil {
			return restore(err)
		}
		if rep.Commit, err = fc.commit(st.subject()+"\n\n"+st.body(), who); err != nil {
			return restore(err)
		}
	}
	return rep, nil
}

// commitAuthor is who a step's commit names: the --author flags or
// EVA_GIT_AUTHOR_NAME/EMAIL when given, else the user as git names them in the release
// files' repository (the step is theirs, made on their behalf), else Eva.
func commitAuthor(cmd *cobra.Command, fc *fileCommit, flags authorFlags) (publish.Author, error) {
	given := cmd.Flags().Changed("author-name") || cmd.Flags().Changed("author-email") ||
		os.Getenv("EVA_GIT_AUTHOR_NAME") != "" || os.Getenv("EVA_GIT_AUTHOR_EMAIL") != ""
	if given {
		return flags.author(), nil
	}
	user, ok := fc.userIdentity()
	if !ok {
		return flags.author(), nil
	}
	if err := publish.CheckAuthor(user); err != nil {
		return publish.Author{}, &ExitError{Code: ExitUsage, Err: fmt.Errorf("the git identity of the repository: %w (or pass --author-name and --author-email)", err)}
	}
	return user, nil
}

// haltedError makes a halted release the command's failure, once it is recorded.
func haltedError(r *evav1.EvaRollout) error {
	if r.Status.Phase != evav1.RolloutHalted {
		return nil
	}
	return &ExitError{Code: ExitInvalid, Err: fmt.Errorf("EvaRollout %s is halted: %s", r.Name, safetext.Escape(r.Status.Message))}
}
