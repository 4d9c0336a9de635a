package main

import (
	"flag"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/aidonow/eva/internal/saga"
	"github.com/aidonow/eva/internal/status"
)

// bindFlags defines every command-line flag of the operator on fs, into cfg, the logging
// flags included. docs/operator.md's flag table is checked against it (flags_test.go).
func bindFlags(fs *flag.FlagSet, cfg *config) (printVersion *bool, logOpts *zap.Options) {
	fs.StringVar(&cfg.metricsAddr, "metrics-bind-address", ":8080", "address the /metrics endpoint binds to")
	fs.BoolVar(&cfg.metricsSecure, "metrics-secure", true, "serve /metrics over HTTPS, only to callers the API server authenticates and authorizes (get on the /metrics non-resource URL)")
	fs.StringVar(&cfg.metricsCertDir, "metrics-cert-dir", "", "folder with tls.crt and tls.key for /metrics; empty uses an in-memory self-signed certificate")
	fs.StringVar(&cfg.tenantNS, "tenant-namespaces", "", "comma-separated namespaces EvaTenants are accepted from (default: the operator's own namespace, POD_NAMESPACE); tenants elsewhere are ignored with an event")
	fs.StringVar(&cfg.claimsNS, "claims-namespace", "", "namespace holding the capsule-code claims, shared by every operator version (default: the operator's own namespace, POD_NAMESPACE)")
	fs.StringVar(&cfg.probeAddr, "health-probe-bind-address", ":8081", "address the health probes bind to")
	fs.StringVar(&cfg.profilerAddr, "profiler-bind-address", "", "address Go's pprof endpoints (/debug/pprof/) bind to, for profiling memory and CPU; empty or 0: off")
	fs.BoolVar(&cfg.leaderElect, "leader-elect", false, "elect a leader so only one replica reconciles")
	fs.StringVar(&cfg.catalogPath, "catalog", "", "catalog YAML file replacing the built-in tiers and modules")
	fs.StringVar(&cfg.overlays, "overlays", "overlays", "folder of environment overlays")
	fs.StringVar(&cfg.env, "env", "dev", "environment whose overlay applies to every bundle")
	fs.StringVar(&cfg.publishedCharts, "published-charts", "", "the fleet's charts/published.yaml: the digests each tenant's chart sources pin (evactl operator values gives it to the chart). Empty: this release's own module charts' (what evactl of the release carries)")
	fs.StringVar(&cfg.environmentDir, "environment-dir", "", "folder holding the environment's tenant overlay (overrides --overlays; the deployment mounts it from a ConfigMap)")
	fs.IntVar(&cfg.concurrency, "concurrency", 4, "tenants reconciled in parallel")
	fs.StringVar(&cfg.shard, "shard", "", "label selector over eva.aidonow.com/shard naming the shards this operator reconciles (e.g. eva.aidonow.com/shard=a, or '!eva.aidonow.com/shard' for the tenants of no shard); each selector elects its own leader. Empty: every tenant")
	fs.StringVar(&cfg.publishMode, "publish", "none", "none: apply bundles to the cluster (pure-cluster mode); git or oci: publish them for Flux (GitOps mode)")
	fs.StringVar(&cfg.gitURL, "git-url", "", "GitOps repository URL (--publish=git)")
	fs.StringVar(&cfg.gitBranch, "git-branch", "main", "GitOps branch")
	fs.StringVar(&cfg.gitPath, "git-path", "", "folder of the repository holding the tree")
	fs.StringVar(&cfg.gitCache, "git-cache", "", "local cache of the repository")
	fs.StringVar(&cfg.gitTokenFile, "git-token-file", "", "file holding an HTTPS access token (mount it from a Secret)")
	fs.StringVar(&cfg.ociRef, "oci-ref", "", "artifact reference oci://HOST/REPO:TAG (--publish=oci)")
	fs.BoolVar(&cfg.ociInsecure, "oci-insecure", false, "allow a plain-HTTP registry")
	fs.DurationVar(&cfg.batchWindow, "publish-batch-window", time.Second, "how long a publish waits to batch tenants changing together")
	fs.DurationVar(&cfg.tenantPublishInterval, "tenant-publish-interval", 10*time.Second, "least time between two publishes of one tenant's changes (changes meanwhile coalesce); 0 publishes every change")
	fs.StringVar(&cfg.messagingMode, "messaging", "nack", "nack: render NACK Stream objects; direct: create streams in JetStream with nats.go (needs --nats-url)")
	fs.StringVar(&cfg.nats.URL, "nats-url", "", "NATS URL; when set, capsule_queue_depth is kept current from JetStream")
	fs.StringVar(&cfg.nats.CredsFile, "nats-creds", "", "NATS credentials file")
	fs.StringVar(&cfg.nats.CertFile, "nats-cert", "", "NATS client certificate file")
	fs.StringVar(&cfg.nats.KeyFile, "nats-key", "", "NATS client key file")
	fs.StringVar(&cfg.nats.CAFile, "nats-ca", "", "NATS CA file")
	fs.BoolVar(&cfg.natsMoveShared, "nats-move-shared-streams", false,
		"in an environment with natsAccounts: move what the tenants' streams still hold in the shared account (the one --nats-url and --nats-creds reach) into each tenant's own account, then delete them (docs/upgrade.md)")
	fs.StringVar(&cfg.natsSignerSecret, "nats-operator-signer-secret", "eva-nats-operator-signer",
		"in an environment with natsAccounts: the Secret in the operator's namespace holding the NATS operator's signing key seed (key seed)")
	fs.StringVar(&cfg.natsSystemSecret, "nats-system-secret", "eva-nats-system",
		"in an environment with natsAccounts: the Secret in the operator's namespace holding a system account user's credentials (key creds)")
	fs.DurationVar(&cfg.depthInterval, "queue-depth-interval", 30*time.Second, "how often queue depth is read")
	fs.DurationVar(&cfg.presenceInterval, "presence-interval", 20*time.Second,
		"how often the operator announces its version (a Lease in the claims namespace, lasting three times this); a tenant of a version none announces is Unserved and no release is given to it")
	fs.DurationVar(&cfg.blockedGrace, "blocked-grace", status.DefaultBlockedGrace, "how long a module release may wait on something only a person can fix (a chart version its source lacks, missing values) before its tenant is Failed")
	fs.StringVar(&cfg.cell, "cell", "", "in an environment with cells: the cell this operator delivers, the tenants the fleet operator placed on it (docs/cells.md); empty: this is the fleet operator, which places tenants and delivers none")
	fs.StringVar(&cfg.fleetKubeconfig, "fleet-kubeconfig", "", "with --cell: kubeconfig of the fleet cluster, which holds the EvaTenants, their claims and EvaRollouts")
	fs.DurationVar(&cfg.moveDrain, "move-drain", saga.DefaultMoveDrain, "with --cell: how long a move between cells waits, after taking a tenant's traffic off this cell, before removing the tenant here")
	printVersion = fs.Bool("version", false, "print the version and exit")
	logOpts = &zap.Options{}
	logOpts.BindFlags(fs)
	return printVersion, logOpts
}
