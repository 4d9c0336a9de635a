package cli

import (
	"context"
	"fmt"
	"maps"
	"path"
	"slices"
	"strings"
	"time"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	kustomizev1 "github.com/fluxcd/kustomize-controller/api/v1"
	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	evav1 "github.com/aidonow/eva/api/v1alpha1"
	nackv1beta2 "github.com/aidonow/eva/internal/nack/v1beta2"
	"github.com/aidonow/eva/internal/observe"
	"github.com/aidonow/eva/internal/overlay"
	"github.com/aidonow/eva/internal/publish"
	"github.com/aidonow/eva/internal/render"
	"github.com/aidonow/eva/internal/saga"
	"github.com/aidonow/eva/internal/status"
)

// moveFlags are the flags of the publishes that advance moves of tenant files.
type moveFlags struct {
	// kubeconfigs are the cells' clusters, by cell name.
	kubeconfigs map[string]string
	drain       time.Duration
}

func (m *moveFlags) bind(f *pflag.FlagSet) {
	f.StringToStringVar(&m.kubeconfigs, "cell-kubeconfig", nil, "NAME=FILE: the kubeconfig of cell NAME's cluster, read to take a tenant file moving between cells one step further (repeat the flag per cell; docs/cells.md#moves)")
	f.DurationVar(&m.drain, "move-drain", saga.DefaultMoveDrain, "how long a moving tenant's source cell keeps its workloads once its traffic (Ingress) is seen gone")
}

// cellRevisions reads what a cell's destination holds (publish.Revisions).
type cellRevisions func(c overlay.Cell) (publish.Revisions, error)

// cellReader reads one cell for a move: its cluster, what its destination holds, and
// the folder its tree is published under (the tenants' Kustomizations name it).
type cellReader struct {
	name     string
	c        client.Client
	revs     publish.Revisions
	treePath string
}

// advanceMoves takes each move of a tenant file one step further where the cells'
// clusters (mf.kubeconfigs) show the last step done, as the operator's saga would:
// the target provisions the tenant until it is Active there; then the source's copy
// goes through the decommission saga's steps (internal/saga), its traffic first, each
// step once its cluster's Flux applied the one before, and only while the target
// serves the tenant. A move whose clusters evactl may not or cannot read waits, and
// says why; the other tenants are published all the same.
func (j *job) advanceMoves(ctx context.Context, mf moveFlags, revisions cellRevisions, treePath treePaths, now time.Time) error {
	cells := map[string]overlay.Cell{}
	for _, c := range j.r.Env.Settings.Cells {
		cells[c.Name] = c
	}
	for name := range mf.kubeconfigs {
		if _, ok := cells[name]; !ok {
			return &ExitError{Code: ExitUsage, Err: fmt.Errorf("--cell-kubeconfig %s: environment %s has no such cell (%s)", name, j.r.Env.Name, strings.Join(cellNames(j.r.Env.Settings.Cells), ", "))}
		}
	}
	read := func(name string) (*cellReader, string) {
		file := mf.kubeconfigs[name]
		if file == "" {
			return nil, fmt.Sprintf("evactl reads cell %s's cluster to go on: pass --cell-kubeconfig %s=FILE", name, name)
		}
		c, err := cellClient(file)
		if err != nil {
			return nil, fmt.Sprintf("cannot read cell %s (--cell-kubeconfig %s=%s): %v", name, name, file, err)
		}
		revs, err := revisions(cells[name])
		if err != nil {
			return nil, fmt.Sprintf("cannot read cell %s's published tree: %v", name, err)
		}
		return &cellReader{name: name, c: c, revs: revs, treePath: treePath(cells[name])}, ""
	}
	for _, code := range slices.Sorted(maps.Keys(j.moves)) {
		m := j.moves[code]
		if m.started {
			m.message = fmt.Sprintf("starts: cell %s's tree records it; cell %s gets the tenant with the next publish", m.from, m.next.To)
			continue
		}
		if t := j.tenant(code); t != nil && t.Spec.LifecycleOrDefault() != evav1.LifecycleActive && m.record.Step == "" {
			// Decommissioned meanwhile: nothing is to be served on the target, and the
			// source's copy goes as the saga takes it apart.
			m.next.Step = evav1.StepTrafficRemoved
			m.message = fmt.Sprintf("Decommissioned; step %s on cell %s", m.next.Step, m.from)
			continue
		}
		if err := j.advance(ctx, m, read, mf.drain, now); err != nil {
			m.message = fmt.Sprintf("at step %s: %v", stepName(m.record.Step), err)
		}
	}
	return nil
}

// advance takes one move a step further, once the target serves the tenant: its
// source's traffic first, then the saga's steps.
func (j *job) advance(ctx context.Context, m *fileMove, read func(string) (*cellReader, string), drain time.Duration, now time.Time) error {
	target, why := read(m.record.To)
	if target == nil {
		m.message = fmt.Sprintf("at step %s; %s", stepName(m.record.Step), why)
		return nil
	}
	active, why, err := j.targetActive(ctx, m, target, now)
	if err != nil {
		return fmt.Errorf("reading cell %s: %w", target.name, err)
	}
	step := evav1.MoveProvisioningTarget
	if m.record.Step != "" {
		step = evav1.MoveRemovingSource
	}
	// A file move is neither undone nor redirected, and its source is taken apart only
	// while the target serves the tenant (the clusters are read again at each publish).
	d := saga.NextMove(saga.MoveObserved{Move: evav1.Move{From: m.from, To: m.record.To, Step: step}, TargetActive: active, AllowsTarget: true},
		saga.MovePolicy{TargetServesThroughout: true})
	if !active {
		m.message = fmt.Sprintf("at step %s, %s: %s", stepName(m.record.Step), d.Message, why)
		return nil
	}
	if d.Action == saga.MoveRemoveSource {
		if d := saga.Next(saga.Observed{Moving: true, EverPublished: true}); d.Action == saga.Publish {
			m.next.Step = d.Step
		}
		m.message = fmt.Sprintf("Active on cell %s; step %s: its Ingress goes from cell %s", target.name, m.next.Step, m.from)
		return nil
	}
	source, why := read(m.from)
	if source == nil {
		m.message = fmt.Sprintf("at step %s; %s", stepName(m.record.Step), why)
		return nil
	}
	if err := j.advanceSource(ctx, m, source, drain, now); err != nil {
		return fmt.Errorf("reading cell %s: %w", source.name, err)
	}
	return nil
}

// targetActive says whether the tenant is Active on the target, judged from the
// target's cluster by status.Compute as the operator judges it, and why not.
func (j *job) targetActive(ctx context.Context, m *fileMove, target *cellReader, now time.Time) (bool, string, error) {
	t := j.tenant(m.code)
	if t == nil {
		return false, "its tenant file is gone", nil
	}
	o := status.Observed{Now: now, SeedsVersion: t.Spec.SeedsVersion}
	if err := observe.Objects(ctx, target.c, m.code, t.Spec.SeedsVersion, false, &o); err != nil {
		return false, "", err
	}
	b, err := j.r.Bundle(t)
	if err != nil {
		return false, "", err
	}
	digests := b.ReleaseSpecDigests()
	var modules []observe.Module
	for _, module := range j.r.Catalog.ModulesOf(t.Spec.Tier) {
		modules = append(modules, observe.Module{Name: module, Version: j.r.Catalog.ModuleVersion(t, module), SpecDigest: digests[module],
			ChartDigest: j.r.ChartDigest(t, module)})
	}
	if o.Releases, err = observe.HelmReleases(ctx, target.c, m.code, modules); err != nil {
		return false, "", err
	}
	var other string
	o.Applied.Revision, o.GitOps, other, err = j.delivered(ctx, target, m.code)
	if err != nil || other != "" {
		return false, other, err
	}
	if res := status.Compute(o); res.Phase != evav1.PhaseActive {
		return false, firstNotReady(res), nil
	}
	return true, "", nil
}

// advanceSource asks the decommission saga for the next step of the source's copy,
// from the source's cluster.
func (j *job) advanceSource(ctx context.Context, m *fileMove, source *cellReader, drain time.Duration, now time.Time) error {
	revision, g, other, err := j.delivered(ctx, source, m.code)
	if err != nil {
		return err
	}
	if other != "" {
		m.message = fmt.Sprintf("at step %s: %s", m.record.Step, other)
		return nil
	}
	o := saga.Observed{Step: m.record.Step, Revision: revision, EverPublished: true, Moving: true,
		Drained: m.record.TrafficMovedAt != nil && !now.Before(m.record.TrafficMovedAt.Add(drain))}
	o.Foundation, o.Workloads = observe.SagaDeliveries(g)
	if err := observe.SagaObjects(ctx, source.c, m.code, &o); err != nil {
		return err
	}
	d := saga.Next(o)
	switch d.Action {
	case saga.Wait:
		m.message = fmt.Sprintf("at step %s on cell %s: %s", m.record.Step, m.from, d.Message)
	case saga.Drain:
		if m.record.TrafficMovedAt == nil {
			at := now.UTC().Truncate(time.Second)
			m.next.TrafficMovedAt = &at
		}
		m.message = fmt.Sprintf("its traffic is off cell %s; draining until %s", m.from, m.next.TrafficMovedAt.Add(drain).Format(time.RFC3339))
	default:
		// Publish, or Finish (nothing left on the source): the copy's next step.
		m.next.Step = d.Step
		if d.Action == saga.Finish {
			m.next.Step = evav1.StepRemoved
		}
		m.message = fmt.Sprintf("step %s on cell %s", m.next.Step, m.from)
		if m.removed() {
			m.message = fmt.Sprintf("its copy leaves cell %s: the move is done once Flux prunes it", m.from)
		}
	}
	return nil
}

// delivered reads the tenant's two Flux Kustomizations on a cell, each Applied when the
// revision it applied holds the tenant's files as the cell's published tree held them
// when this run read it (read from the destination: the operator's rule), and returns
// that tree's revision. A cluster whose Kustomization of the tenant applies another folder than
// the cell's is another cell's (a kubeconfig given for the wrong cell: every cell's
// Flux follows the one branch): what it says is not the cell's, and why is returned.
func (j *job) delivered(ctx context.Context, cell *cellReader, code string) (string, *status.GitOpsState, string, error) {
	head, dir := j.treeRevisions[cell.name], render.DirName(code)
	var ks kustomizev1.Kustomization
	key := types.NamespacedName{Namespace: j.r.Env.Settings.FluxNamespace, Name: render.FoundationName(code)}
	found, err := observe.Get(ctx, cell.c, key, &ks)
	if err != nil {
		return "", nil, "", err
	}
	if want := "./" + path.Join(cell.treePath, render.TenantsDir, dir); found && path.Clean(ks.Spec.Path) != path.Clean(want) {
		return "", nil, fmt.Sprintf("the cluster --cell-kubeconfig %s names applies %s for Kustomization %s, not cell %s's %s: is it another cell's?",
			cell.name, ks.Spec.Path, key, cell.name, want), nil
	}
	var files []render.File
	for p, data := range j.cellTrees[cell.name] {
		if publish.TenantOf(p) == dir {
			files = append(files, render.File{Path: p, Data: data})
		}
	}
	if len(files) == 0 {
		// Not in the cell's tree yet: nothing of it can have been applied.
		head = ""
	}
	published := publish.TenantDigest(files)
	g, err := observe.Kustomizations(ctx, cell.c, j.r.Env.Settings.FluxNamespace, code, func(ctx context.Context, revision string) (bool, string) {
		if revision == "" || head == "" {
			return false, ""
		}
		held, err := cell.revs.TenantDigest(ctx, revision, dir)
		if err != nil {
			return false, err.Error()
		}
		return held == published, ""
	})
	return head, g, "", err
}

// firstNotReady names the first of the five conditions that is not True, and why.
func firstNotReady(res status.Result) string {
	for _, ct := range status.ConditionTypes {
		if v := res.Verdicts[ct]; v.Status != "True" {
			return ct + ": " + v.Message
		}
	}
	return res.Verdicts[evav1.ConditionReady].Message
}

// tenant is the job's tenant of code, as it renders; nil when no file holds it.
func (j *job) tenant(code string) *evav1.EvaTenant {
	if i := slices.IndexFunc(j.tenants, func(t *evav1.EvaTenant) bool { return t.Spec.CapsuleCode == code }); i >= 0 {
		return j.tenants[i]
	}
	return nil
}

// cellClient is a client of the cluster a kubeconfig file names, for the kinds a
// move reads.
func cellClient(file string) (client.Client, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", file)
	if err != nil {
		return nil, err
	}
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, helmv2.AddToScheme, kustomizev1.AddToScheme, nackv1beta2.AddToScheme} {
		if err := add(scheme); err != nil {
			return nil, err
		}
	}
	return client.New(cfg, client.Options{Scheme: scheme})
}
