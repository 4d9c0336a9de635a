package main

import (
	"cmp"
	"fmt"
	"os"
	"path"
	"strings"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/client-go/tools/clientcmd"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"

	evav1 "github.com/aidonow/eva/api/v1alpha1"
	"github.com/aidonow/eva/internal/claim"
	"github.com/aidonow/eva/internal/controller"
	"github.com/aidonow/eva/internal/leaselock"
	"github.com/aidonow/eva/internal/overlay"
	"github.com/aidonow/eva/internal/publish"
	"github.com/aidonow/eva/internal/shard"
	"github.com/aidonow/eva/internal/tenant"
)

// role is what this operator does (docs/cells.md): in an environment without cells it
// delivers every tenant; with cells, the fleet operator places the tenants and each
// cell's operator delivers those placed on its cell.
type role int

const (
	roleOneCluster role = iota
	roleFleet
	roleCell
)

// roleOf decides the operator's role from --cell and --fleet-kubeconfig, and returns
// the cell a cell's operator serves.
func roleOf(cfg config, env *overlay.Environment) (role, *overlay.Cell, error) {
	cells := env.Settings.Cells
	switch {
	case len(cells) == 0 && cfg.cell == "" && cfg.fleetKubeconfig == "":
		return roleOneCluster, nil, nil
	case len(cells) == 0:
		return 0, nil, fmt.Errorf("--cell and --fleet-kubeconfig: environment %s has no cells", env.Name)
	case cfg.cell == "":
		if cfg.fleetKubeconfig != "" {
			return 0, nil, fmt.Errorf("--fleet-kubeconfig needs --cell: the fleet operator runs on the fleet cluster")
		}
		return roleFleet, nil, nil
	}
	var names []string
	for i := range cells {
		if cells[i].Name == cfg.cell {
			if cfg.fleetKubeconfig == "" {
				return 0, nil, fmt.Errorf("--cell %s needs --fleet-kubeconfig: the kubeconfig of the cluster holding the EvaTenants", cfg.cell)
			}
			return roleCell, &cells[i], nil
		}
		names = append(names, cells[i].Name)
	}
	return 0, nil, fmt.Errorf("--cell %s: environment %s has no such cell (it has %s)", cfg.cell, env.Name, strings.Join(names, ", "))
}

// leaderElectionID is the Lease this operator elects its leader on. The fleet
// operator's and each cell's differ from each other and from a one-cluster operator's,
// so they can run in one cluster; so do each operator version's (OPERATOR_VERSION), so
// that two versions serving their own tenants (blue/green) both run, while the replicas
// of one version and shard share one leader.
func leaderElectionID(r role, cell, version string, shards shard.Selector) string {
	base := "eva-operator.eva.aidonow.com"
	switch r {
	case roleFleet:
		base = "eva-fleet.eva.aidonow.com"
	case roleCell:
		base = "eva-cell-" + cell + ".eva.aidonow.com"
	}
	if v := leaseSafe(version); v != "" {
		base = "v" + v + "." + base
	}
	return shards.LeaderElectionID(base)
}

// leaseSafe is version as one label of a Lease name: lower case, characters a name
// cannot hold as '-', at most 40 characters, trimmed of '-' at either end.
func leaseSafe(version string) string {
	var b strings.Builder
	for _, c := range strings.ToLower(strings.TrimPrefix(version, "v")) {
		if (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') {
			b.WriteRune(c)
		} else {
			b.WriteByte('-')
		}
	}
	out := b.String()
	if len(out) > 40 {
		out = out[:40]
	}
	return strings.Trim(out, "-")
}

// publishToCell points the publish flags at the cell's own tree: its folder below
// --git-path, or its repository below --oci-ref's, as evactl publishes it.
func publishToCell(cfg *config, c *overlay.Cell) {
	cfg.gitPath = path.Join(cfg.gitPath, c.Path)
	if cfg.ociRef != "" {
		cfg.ociRef = publish.CellRef(cfg.ociRef, c.Path)
	}
}

// fleetCluster connects a cell's operator to the fleet cluster: a cluster whose cache
// holds the EvaTenants labelled with this cell (and in this operator's shards), the
// EvaRollouts and the capsule-code claims. The manager runs it (mgr.Add).
func fleetCluster(cfg config, scheme *runtime.Scheme, shards shard.Selector) (cluster.Cluster, error) {
	restCfg, err := clientcmd.BuildConfigFromFlags("", cfg.fleetKubeconfig)
	if err != nil {
		return nil, fmt.Errorf("--fleet-kubeconfig: %w", err)
	}
	inCell := labels.SelectorFromSet(labels.Set{tenant.CellLabel(cfg.cell): ""})
	if reqs, selectable := shards.Labels().Requirements(); selectable {
		inCell = inCell.Add(reqs...)
	}
	hasCapsule, _ := labels.NewRequirement(tenant.LabelCapsule, selection.Exists, nil)
	fleet, err := cluster.New(restCfg, func(o *cluster.Options) {
		o.Scheme = scheme
		o.Cache = cache.Options{
			DefaultTransform: cache.TransformStripManagedFields(),
			ByObject: map[client.Object]cache.ByObject{
				&evav1.EvaTenant{}: {Label: inCell},
				&coordinationv1.Lease{}: {Label: labels.NewSelector().Add(*hasCapsule),
					Namespaces: map[string]cache.Config{cfg.claimsNS: {}}},
			},
		}
	})
	if err != nil {
		return nil, fmt.Errorf("connecting to the fleet cluster: %w", err)
	}
	return fleet, nil
}

// joinFleet makes r a cell's operator: it reads and writes tenants, their status and
// events on the fleet cluster, and everything else in its own cell.
func joinFleet(mgr ctrl.Manager, fleet cluster.Cluster, cfg config, r *controller.EvaTenantReconciler) {
	r.Cell, r.TenantCache, r.MoveDrain = cfg.cell, fleet.GetCache(), cfg.moveDrain
	r.Client = &controller.CellClient{Client: mgr.GetClient(), Fleet: fleet.GetClient()}
	r.APIReader = &controller.CellReader{Reader: mgr.GetAPIReader(), Fleet: fleet.GetAPIReader()}
	r.Recorder = fleet.GetEventRecorder("eva-operator")
	// A capsule code is unique across the fleet: its claim is on the fleet cluster.
	r.Claims = &claim.Store{Client: fleet.GetClient(), Reader: fleet.GetAPIReader(), Namespace: cfg.claimsNS}
}

// setupPlacer registers the fleet operator's placer, which acts while it holds the
// placer's Lease beside the claims (one placer across the fleet operator's versions),
// and reads the API server before it books a cell's room.
func setupPlacer(mgr ctrl.Manager, r *controller.EvaTenantReconciler, cfg config) error {
	host, err := os.Hostname()
	if err != nil {
		return fmt.Errorf("naming this process in the placer's Lease: %w", err)
	}
	lease := &controller.PlacerLease{Lock: &leaselock.Lock{Client: mgr.GetClient(), Reader: mgr.GetAPIReader(),
		Namespace: cfg.claimsNS, Name: controller.PlacerLeaseName, Holder: host + "/" + cmp.Or(cfg.operatorVersion, "unversioned"),
		Duration: placerLeaseDuration, Retry: placerLeaseDuration / 4, Log: ctrl.Log.WithName("placer-lease")}}
	if err := mgr.Add(lease); err != nil {
		return err
	}
	p := &controller.CellPlacer{Client: mgr.GetClient(), Reader: mgr.GetAPIReader(), Lease: lease, Recorder: mgr.GetEventRecorder("eva-operator"),
		Catalog: r.Renderer.Catalog, Env: r.Renderer.Env, TenantNamespaces: r.TenantNamespaces, Claims: r.Claims}
	return p.SetupWithManager(mgr)
}

// placerLeaseDuration is how long a placer's Lease outlives its holder's last renewal:
// the time placement waits when the fleet operator holding it dies.
const placerLeaseDuration = 30 * time.Second
