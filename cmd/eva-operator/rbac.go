package main

// Permissions of the manager itself; the reconciler's are on it in internal/controller.
// `make manifests` turns these markers into base/rbac/role.yaml.
//
// +kubebuilder:rbac:groups="",resources=events,verbs=create;patch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch
// +kubebuilder:rbac:groups=coordination.k8s.io,resources=leases,verbs=get;list;watch;create;update;patch;delete
