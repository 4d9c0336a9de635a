// Command eva-operator runs the EvaTenant controller manager: pure-cluster mode, where
// each tenant's rendered bundle is server-side applied and its readiness reported.
package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"strings"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/controller-runtime/pkg/metrics/filters"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	eva "github.com/aidonow/eva"
	"github.com/aidonow/eva/internal/chartrepo"
	"github.com/aidonow/eva/internal/claim"
	"github.com/aidonow/eva/internal/controller"
	"github.com/aidonow/eva/internal/publish"
	githttp "github.com/go-git/go-git/v5/plumbing/transport/http"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/aidonow/eva/internal/buildinfo"
	"github.com/aidonow/eva/internal/leaselock"
	"github.com/aidonow/eva/internal/messaging"
	"github.com/aidonow/eva/internal/metrics"
	"github.com/aidonow/eva/internal/overlay"
	"github.com/aidonow/eva/internal/render"
	"github.com/aidonow/eva/internal/rollout"
	"github.com/aidonow/eva/internal/shard"
	"github.com/aidonow/eva/internal/tenant"
)

// version is the operator's release, stamped by the image build (-X main.version).
var version = "dev"

// defaultNamespace is the operator's namespace when POD_NAMESPACE is not set.
const defaultNamespace = "eva-system"

// config is everything the operator reads at start-up, once.
type config struct {
	ownNamespace    string
	metricsAddr     string
	metricsSecure   bool
	metricsCertDir  string
	tenantNS        string
	claimsNS        string
	probeAddr       string
	profilerAddr    string
	leaderElect     bool
	catalogPath     string
	overlays        string
	environmentDir  string
	publishedCharts string
	env             string
	concurrency     int
	shard           string
	operatorVersion string
	nats            messaging.Config
	messagingMode   string
	// natsSignerSecret and natsSystemSecret name the platform's NATS Secrets.
	natsSignerSecret, natsSystemSecret string
	// natsMoveShared moves the tenants' streams out of the shared account.
	natsMoveShared bool
	publishMode    string
	gitURL         string
	gitBranch      string
	gitPath        string
	gitCache       string
	gitTokenFile   string
	ociRef         string
	ociInsecure    bool
	batchWindow    time.Duration
	// tenantPublishInterval is GitOps.MinInterval.
	tenantPublishInterval time.Duration
	depthInterval         time.Duration
	presenceInterval      time.Duration
	blockedGrace          time.Duration
	// cell and fleetKubeconfig make a cell's operator (docs/cells.md).
	cell            string
	fleetKubeconfig string
	moveDrain       time.Duration
}

func main() {
	setGCPercent(os.Getenv)
	var cfg config
	printVersion, opts := bindFlags(flag.CommandLine, &cfg)
	flag.Parse()
	if *printVersion {
		fmt.Println(version)
		return
	}
	cfg.operatorVersion = os.Getenv("OPERATOR_VERSION")
	ownNamespace := os.Getenv("POD_NAMESPACE")
	if ownNamespace == "" {
		ownNamespace = defaultNamespace
	}
	cfg.ownNamespace = ownNamespace
	if cfg.tenantNS == "" {
		cfg.tenantNS = ownNamespace
	}
	if cfg.claimsNS == "" {
		cfg.claimsNS = ownNamespace
	}

	ctrl.SetLogger(zap.New(zap.UseFlagOptions(opts)))
	limit, err := setMemoryLimit(os.Getenv)
	if err != nil {
		ctrl.Log.Error(err, "operator not started")
		os.Exit(1)
	}
	if limit > 0 {
		ctrl.Log.WithName("setup").Info("Go soft memory limit set from the container's", "bytes", limit)
	}
	if err := run(cfg); err != nil {
		ctrl.Log.Error(err, "operator stopped")
		os.Exit(1)
	}
}

func run(cfg config) error {
	log := ctrl.Log.WithName("setup")
	catalog, err := tenant.LoadCatalog(cfg.catalogPath)
	if err != nil {
		return err
	}
	var env *overlay.Environment
	if cfg.environmentDir != "" {
		env, err = overlay.LoadDir(cfg.environmentDir, cfg.env)
	} else {
		env, err = overlay.Load(cfg.overlays, cfg.env)
	}
	if err != nil {
		return err
	}
	renderer := &render.Renderer{Catalog: catalog, Env: env}
	if renderer.Charts, err = publishedCharts(cfg.publishedCharts); err != nil {
		return err
	}
	if renderer.ArgoCD() && cfg.publishMode == "oci" {
		return fmt.Errorf("environment %s renders for Argo CD (applier: argocd), whose Applications read a git repository: use --publish=git", env.Name)
	}
	shards, err := shard.Parse(cfg.shard)
	if err != nil {
		return err
	}
	role, cell, err := roleOf(cfg, env)
	if err != nil {
		return err
	}
	if role == roleFleet && shards.Sharded() {
		// Each shard would place its own tenants against whole cells: a cell's room
		// counted once per shard, and a tenant refused for room relabelled into another.
		return fmt.Errorf("--shard %s: the fleet operator places every tenant of the fleet against the cells' whole capacity, and cannot be sharded (shard the cells' operators instead; docs/cells.md)", shards)
	}
	if cell != nil {
		publishToCell(&cfg, cell)
	}
	scheme := controller.NewScheme()

	restCfg, err := ctrl.GetConfig()
	if err != nil {
		return fmt.Errorf("loading kubeconfig: %w", err)
	}
	if err := metrics.CountWrites(restCfg, ctrlmetrics.Registry); err != nil {
		return fmt.Errorf("registering the write counter: %w", err)
	}
	mgr, err := ctrl.NewManager(restCfg, ctrl.Options{
		Scheme:                  scheme,
		Metrics:                 metricsOptions(cfg),
		HealthProbeBindAddress:  cfg.probeAddr,
		PprofBindAddress:        cfg.profilerAddr,
		LeaderElection:          cfg.leaderElect,
		LeaderElectionID:        leaderElectionID(role, cfg.cell, cfg.operatorVersion, shards),
		LeaderElectionNamespace: cfg.ownNamespace,
		Cache:                   controller.CacheOptions(cfg.claimsNS, shards, renderer.ArgoCD() && cfg.publishMode != "none", splitList(cfg.tenantNS)),
	})
	if err != nil {
		return fmt.Errorf("creating manager: %w", err)
	}
	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		return fmt.Errorf("adding health check: %w", err)
	}
	if err := mgr.AddReadyzCheck("informers", cachesSynced(mgr.GetCache())); err != nil {
		return fmt.Errorf("adding readiness check: %w", err)
	}
	if cfg.messagingMode != "nack" && cfg.messagingMode != "direct" {
		return fmt.Errorf("--messaging must be nack or direct, not %q", cfg.messagingMode)
	}
	if cfg.messagingMode == "direct" && cfg.nats.URL == "" {
		return fmt.Errorf("--messaging=direct needs --nats-url")
	}
	if cfg.natsMoveShared && !env.Settings.NATSAccounts {
		return fmt.Errorf("--nats-move-shared-streams moves streams into the tenants' own accounts: environment %s has no natsAccounts", env.Name)
	}
	if env.Settings.NATSAccounts && cfg.nats.URL == "" {
		return fmt.Errorf("environment %s has natsAccounts: the operator needs --nats-url to push the tenants' accounts", env.Name)
	}
	if cfg.blockedGrace <= 0 {
		return fmt.Errorf("--blocked-grace must be positive, not %s", cfg.blockedGrace)
	}
	var fleet cluster.Cluster
	tenants := client.Reader(mgr.GetClient())
	if role == roleCell {
		if fleet, err = fleetCluster(cfg, scheme, shards); err != nil {
			return err
		}
		if err := mgr.Add(fleet); err != nil {
			return err
		}
		tenants = fleet.GetClient()
	}
	m, err := metrics.New(ctrlmetrics.Registry, tenants)
	if err != nil {
		return fmt.Errorf("registering metrics: %w", err)
	}
	var streams *messaging.Client
	var depths *metrics.QueueDepthLoop
	var accounts *controller.Accounts
	if env.Settings.NATSAccounts {
		// Each tenant's streams live in its own account; no shared connection is made.
		accounts = &controller.Accounts{Reader: mgr.GetAPIReader(), Client: mgr.GetClient(), Namespace: cfg.ownNamespace,
			SignerSecret: cfg.natsSignerSecret, SystemSecret: cfg.natsSystemSecret, Config: cfg.nats,
			HoldCreds: cfg.messagingMode == "nack"}
		if c := env.Settings.NATSConsumer; c != nil {
			accounts.ConsumerSubjects = c.Subjects
		}
	}
	if cfg.nats.URL != "" {
		depths = &metrics.QueueDepthLoop{Reader: mgr.GetClient(), Gauge: m.QueueDepth,
			Interval: cfg.depthInterval, Log: ctrl.Log.WithName("queue-depth")}
		if accounts != nil {
			depths.Accounts = accounts
		} else {
			if streams, err = messaging.Connect(cfg.nats); err != nil {
				return err
			}
			defer streams.Close()
			depths.Streams = streams
		}
		if err := mgr.Add(depths); err != nil {
			return err
		}
	}
	ctx := ctrl.SetupSignalHandler()
	r := &controller.EvaTenantReconciler{
		Metrics:         m,
		Client:          mgr.GetClient(),
		Recorder:        mgr.GetEventRecorder("eva-operator"),
		Renderer:        renderer,
		OperatorVersion: cfg.operatorVersion,
		APIReader:       mgr.GetAPIReader(),
		Claims: &claim.Store{Client: mgr.GetClient(), Reader: mgr.GetAPIReader(), Namespace: cfg.claimsNS,
			Limit: env.Settings.Entitlements.TenantLimit()},
		TenantNamespaces: splitList(cfg.tenantNS),
		BlockedGrace:     cfg.blockedGrace,
	}
	switch {
	case accounts != nil:
		r.Accounts, r.DirectAccounts = accounts, cfg.messagingMode == "direct"
		if cfg.natsMoveShared {
			if r.MoveFrom, err = messaging.Connect(cfg.nats); err != nil {
				return err
			}
			defer r.MoveFrom.Close()
		}
	case cfg.messagingMode == "direct":
		r.Streams = streams
	}
	if renderer.Env.Settings.Secrets != nil {
		r.AgeKeys = &controller.AgeKeys{Reader: mgr.GetAPIReader(), Namespace: cfg.ownNamespace}
	}
	if role != roleFleet {
		r.Fence = &controller.FenceCheck{Reader: mgr.GetAPIReader(), Namespace: cfg.ownNamespace, Env: env}
		if err := mgr.Add(r.Fence); err != nil {
			return err
		}
	}
	if fleet != nil {
		joinFleet(mgr, fleet, cfg, r)
	}
	if role == roleOneCluster && cfg.presenceInterval > 0 {
		// Cells' and the fleet's tenants live on another cluster than their Leases.
		r.Presence = &controller.Presence{Client: mgr.GetClient(), Reader: mgr.GetAPIReader(), Namespace: cfg.claimsNS,
			Version: cfg.operatorVersion, Every: cfg.presenceInterval}
		if err := mgr.Add(r.Presence); err != nil {
			return err
		}
	}
	gitops, err := gitOpsFrom(cfg, m, mgr.GetClient(), mgr.GetAPIReader(), renderer)
	if err != nil {
		return err
	}
	r.GitOps = gitops
	if cfg.publishMode == "git" {
		r.Renderer.TreePath = cfg.gitPath // Flux resolves Kustomization paths from the repository root
	}
	if role == roleFleet {
		// The fleet operator places tenants on cells and runs the releases; each
		// cell's operator delivers.
		if err := setupPlacer(mgr, r, cfg); err != nil {
			return err
		}
	} else if err := r.SetupWithManager(ctx, mgr, cfg.concurrency); err != nil {
		return err
	}
	if name := env.Settings.ChartSource.PullSecret; name != "" && role != roleFleet && !renderer.ArgoCD() {
		// Every tenant namespace of this cluster gets the chart registry's credentials.
		pull := &controller.ChartPull{Client: mgr.GetClient(), Reader: mgr.GetAPIReader(), Namespace: cfg.ownNamespace, Name: name,
			Recorder: mgr.GetEventRecorder("eva-operator")}
		if err := pull.SetupWithManager(mgr); err != nil {
			return err
		}
	}
	if accounts != nil && role != roleFleet {
		// Every tenant's NACK Account orders its teardown; a tenant file's asks for its account.
		files := &controller.NACKAccounts{Client: mgr.GetClient(), Reader: mgr.GetAPIReader(), Accounts: accounts,
			Catalog: renderer.Catalog, Entitlements: env.Settings.Entitlements, Recorder: mgr.GetEventRecorder("eva-operator")}
		if err := files.SetupWithManager(mgr); err != nil {
			return err
		}
	}
	if role == roleCell {
		log.Info("Starting manager", "version", version, "env", env.Name, "cell", cfg.cell, "tenantNamespaces", r.TenantNamespaces)
		return mgr.Start(ctx)
	}
	rollouts := &controller.EvaRolloutReconciler{Client: mgr.GetClient(), Recorder: mgr.GetEventRecorder("eva-operator"),
		TenantNamespaces: r.TenantNamespaces, Metrics: m, Catalog: renderer.Catalog, FluxShards: env.Settings.FluxShards,
		Delivery: rollout.Delivery{ReleasesPerMinute: env.Settings.HelmReleasesPerMinute}}
	if depths != nil {
		rollouts.Depths = depths
	}
	rollouts.Presence = r.Presence
	if err := rollouts.SetupWithManager(mgr); err != nil {
		return err
	}
	log.Info("Starting manager", "version", version, "build", buildinfo.Read().String(), "operatorVersion", cfg.operatorVersion, "leaderElection", cfg.leaderElect, "env", env.Name,
		"tenantNamespaces", r.TenantNamespaces, "claimsNamespace", cfg.claimsNS, "shard", shards.String())
	return mgr.Start(ctx)
}

// metricsOptions serves /metrics over HTTPS behind the API server's authentication and
// authorization (a TokenReview and a SubjectAccessReview per scrape), unless
// --metrics-secure=false.
func metricsOptions(cfg config) metricsserver.Options {
	o := metricsserver.Options{BindAddress: cfg.metricsAddr}
	if cfg.metricsSecure {
		o.SecureServing = true
		o.FilterProvider = filters.WithAuthenticationAndAuthorization
		o.CertDir = cfg.metricsCertDir
	}
	return o
}

// splitList splits a comma-separated flag value, dropping empty items.
func splitList(v string) []string {
	var out []string
	for _, item := range strings.Split(v, ",") {
		if item = strings.TrimSpace(item); item != "" {
			out = append(out, item)
		}
	}
	return out
}

// gitOpsFrom builds GitOps mode from the flags (nil in pure-cluster mode). After each
// publish that committed something, Flux is asked to fetch the environment's GitOps
// source at once; Argo CD finds the commit at its next refresh (timeout.reconciliation).
func gitOpsFrom(cfg config, m *metrics.Metrics, c client.Client, reader client.Reader, renderer *render.Renderer) (*controller.GitOps, error) {
	argoCD := renderer.ArgoCD()
	var sink publish.Sink
	var revisions publish.Revisions
	if cfg.publishMode == overlay.PublishGit || cfg.publishMode == overlay.PublishOCI {
		if err := renderer.Env.Settings.CheckPublish(cfg.publishMode); err != nil {
			return nil, fmt.Errorf("--publish=%s: environment %s: %w", cfg.publishMode, renderer.Env.Name, err)
		}
	}
	switch cfg.publishMode {
	case "none":
		return nil, nil
	case "git":
		if cfg.gitURL == "" {
			return nil, fmt.Errorf("--publish=git needs --git-url")
		}
		g := &publish.GitRemote{URL: cfg.gitURL, Branch: cfg.gitBranch, Path: cfg.gitPath, CacheDir: cfg.gitCache,
			Subject: "eva-operator: publish tenants"}
		if cfg.gitTokenFile != "" {
			token, err := os.ReadFile(cfg.gitTokenFile)
			if err != nil {
				return nil, fmt.Errorf("reading --git-token-file: %w", err)
			}
			g.Auth = &githttp.BasicAuth{Username: "x-access-token", Password: strings.TrimSpace(string(token))}
		}
		sink, revisions = g, g
	case "oci":
		if cfg.ociRef == "" {
			return nil, fmt.Errorf("--publish=oci needs --oci-ref")
		}
		o := &publish.OCI{Ref: cfg.ociRef, Insecure: cfg.ociInsecure}
		// Operators publishing to one tag take turns through a Lease in the claims
		// namespace: the registry cannot refuse a push made on a stale read.
		holder, _ := os.Hostname()
		sum := sha256.Sum256([]byte(strings.TrimPrefix(cfg.ociRef, "oci://")))
		lock := &leaselock.Lock{Client: c, Reader: reader, Namespace: cfg.claimsNS,
			Name: "eva-publish-" + hex.EncodeToString(sum[:8]), Holder: fmt.Sprintf("%s/%d", holder, os.Getpid()),
			Log: ctrl.Log.WithName("publish-lock")}
		sink, revisions = &publish.Locked{Sink: o, Acquire: lock.Acquire}, o
	default:
		return nil, fmt.Errorf("--publish must be none, git or oci, not %q", cfg.publishMode)
	}
	batcher := &publish.Batcher{Sink: sink, Window: cfg.batchWindow, DeliveryDir: renderer.DeliveryDir(), OnPublish: func(d time.Duration, res *publish.Result, err error) {
		m.PublishSeconds.Observe(d.Seconds())
		if err == nil && res.Attempts > 1 {
			m.PublishRetries.Add(float64(res.Attempts - 1))
		}
		if err == nil && res.Committed && !argoCD {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			// Not fatal: without it Flux fetches at the source's next interval.
			if err := controller.RequestReconcile(ctx, c, renderer.Env.Settings.GitOpsSource, time.Now()); err != nil {
				ctrl.Log.WithName("publish").Error(err, "asking Flux to fetch the new revision")
			}
		}
	}}
	return &controller.GitOps{Batcher: batcher, Revisions: revisions, MinInterval: cfg.tenantPublishInterval}, nil
}

// publishedCharts is the list of published chart digests the tenants' chart sources
// pin: the file given, or the one this release's module charts carry (charts/
// published.yaml, embedded as evactl embeds it). A chart's digest is its content's, so
// the list holds in any registry the charts were pushed or mirrored to.
func publishedCharts(file string) (*chartrepo.Lock, error) {
	if file != "" {
		lock, err := chartrepo.ReadLock(file)
		if err != nil {
			return nil, fmt.Errorf("--published-charts: %w", err)
		}
		return lock, nil
	}
	const own = "charts/" + chartrepo.LockFile
	data, err := fs.ReadFile(eva.Release, own)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return chartrepo.ParseLock("the release's "+own, data)
}
