package main

// Permissions of the manager itself; the reconciler's are on it in internal/controller.
// `make manifests` turns these markers into base/rbac/role.yaml.
//
// Events are recorded on tenants in any accepted namespace.
// +kubebuilder:rbac:groups="",resources=events,verbs=create;patch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch
//
// Leader election and the capsule-code claims are Leases in the operator's own
// namespace only (a Role, not a ClusterRole).
// +kubebuilder:rbac:groups=coordination.k8s.io,resources=leases,verbs=get;list;watch;create;update;patch;delete,namespace=eva-system
//
// Secure metrics: each scrape is authenticated and authorized by the API server.
// +kubebuilder:rbac:groups=authentication.k8s.io,resources=tokenreviews,verbs=create
// +kubebuilder:rbac:groups=authorization.k8s.io,resources=subjectaccessreviews,verbs=create
//
// GitOps mode asks Flux to fetch each new publish at once (reconcile.fluxcd.io/requestedAt
// on the environment's source), in Flux's namespace only.
// +kubebuilder:rbac:groups=source.toolkit.fluxcd.io,resources=gitrepositories;ocirepositories;buckets,verbs=get;patch,namespace=flux-system
