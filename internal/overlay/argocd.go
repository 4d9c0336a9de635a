package overlay

import (
	"fmt"
	"net/url"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/utils/ptr"
)

// Applier names a GitOps tool.
type Applier string

// The appliers Eva renders for.
const (
	ApplierFlux   Applier = "flux"
	ApplierArgoCD Applier = "argocd"
)

// ArgoCD are the settings of the Argo CD output: per tenant, an AppProject confined to
// the tenant's namespace and Applications for its foundation, its workloads and each
// module (a Helm source of the chart repository).
type ArgoCD struct {
	// Namespace is where Argo CD runs and the tenants' Applications and AppProjects
	// live (default argocd).
	Namespace string `json:"namespace,omitempty"`
	// RepoURL is the git repository the tree is published to, as Argo CD reaches it.
	RepoURL string `json:"repoURL"`
	// TargetRevision is the branch (or tag) of RepoURL Argo CD follows (default HEAD).
	TargetRevision string `json:"targetRevision,omitempty"`
	// ChartRepository is the Helm repository of the module charts, as Argo CD names it:
	// an http(s):// URL of a chart repository (index.yaml), or an OCI registry path
	// without a scheme (host/path; Argo CD then needs a repository Secret with
	// enableOCI). Every module Application reads its chart from here.
	ChartRepository string `json:"chartRepository"`
	// DestinationServer is the cluster the tenants are deployed to, as Argo CD names it
	// (default https://kubernetes.default.svc, Argo CD's own cluster).
	DestinationServer string `json:"destinationServer,omitempty"`
	// SyncRetries is how many times Argo CD retries a failed sync of a tenant's
	// Application before it gives up, which fails the tenant (default 5, at most 10; a
	// sync retried forever would never fail it).
	SyncRetries *int64 `json:"syncRetries,omitempty"`
	// SyncRetryBackoff is the wait before the first retry, doubled at each one up to 3
	// minutes (default 5s; unset, not 0s, takes the default).
	SyncRetryBackoff *metav1.Duration `json:"syncRetryBackoff,omitempty"`
}

// SyncRetryCap bounds the wait between two retries of an Argo CD sync.
const SyncRetryCap = 3 * time.Minute

// defaults fills in what the Argo CD settings leave out.
func (a *ArgoCD) defaults() {
	for _, d := range []struct {
		v   *string
		def string
	}{
		{&a.Namespace, "argocd"}, {&a.TargetRevision, "HEAD"}, {&a.DestinationServer, "https://kubernetes.default.svc"},
	} {
		if *d.v == "" {
			*d.v = d.def
		}
	}
	if a.SyncRetries == nil {
		a.SyncRetries = ptr.To[int64](5)
	}
	if a.SyncRetryBackoff == nil {
		a.SyncRetryBackoff = &metav1.Duration{Duration: 5 * time.Second}
	}
}

// checkArgoCD checks the settings of the Argo CD output.
func (s *Settings) checkArgoCD() error {
	a := s.ArgoCD
	if a == nil {
		return fmt.Errorf("argocd: required with applier: argocd (namespace, repoURL, chartRepository)")
	}
	if s.FluxShards != nil {
		return fmt.Errorf("fluxShards: only with applier: flux (Argo CD shards its application controller by cluster)")
	}
	if msgs := validation.IsDNS1123Label(a.Namespace); len(msgs) > 0 {
		return fmt.Errorf("argocd.namespace: %q: %s", a.Namespace, msgs[0])
	}
	if err := checkURL(a.RepoURL, "https", "http", "ssh"); err != nil {
		return fmt.Errorf("argocd.repoURL: %q: %w", a.RepoURL, err)
	}
	if a.TargetRevision != strings.TrimSpace(a.TargetRevision) || strings.ContainsAny(a.TargetRevision, " \t\n~^:?*[\\") {
		return fmt.Errorf("argocd.targetRevision: %q is not a git branch, tag or commit", a.TargetRevision)
	}
	if strings.Contains(a.ChartRepository, "://") {
		if err := checkURL(a.ChartRepository, "https", "http"); err != nil {
			return fmt.Errorf("argocd.chartRepository: %q: %w (or an OCI registry path without a scheme)", a.ChartRepository, err)
		}
	} else if host, _, _ := strings.Cut(a.ChartRepository, "/"); host == "" || strings.ContainsAny(a.ChartRepository, " \t\n?#@") {
		return fmt.Errorf("argocd.chartRepository: %q: must be an http(s):// chart repository or an OCI registry path (host/path)", a.ChartRepository)
	}
	if err := checkURL(a.DestinationServer, "https", "http"); err != nil {
		return fmt.Errorf("argocd.destinationServer: %q: %w", a.DestinationServer, err)
	}
	if n := *a.SyncRetries; n < 0 || n > 10 {
		return fmt.Errorf("argocd.syncRetries: %d: must be between 0 and 10", n)
	}
	if d := a.SyncRetryBackoff.Duration; d < time.Second || d > SyncRetryCap {
		return fmt.Errorf("argocd.syncRetryBackoff: %s: must be between 1s and %s", d, SyncRetryCap)
	}
	// Argo CD decrypts no SOPS files, and Eva never writes a decrypted Secret.
	if s.Secrets != nil {
		return fmt.Errorf("secrets: not supported with applier: argocd (Argo CD does not decrypt SOPS-encrypted Secrets; deliver them with an external secrets operator)")
	}
	return nil
}

// checkURL checks an absolute URL with one of the schemes and a host.
func checkURL(raw string, schemes ...string) error {
	u, err := url.Parse(raw)
	if err != nil {
		return err
	}
	for _, s := range schemes {
		if u.Scheme == s && u.Host != "" {
			return nil
		}
	}
	return fmt.Errorf("must be an absolute %s URL", strings.Join(schemes, ", "))
}
