package main

// The permissions the operator needs; `make manifests` turns these markers into
// base/rbac/role.yaml.
//
// +kubebuilder:rbac:groups=eva.aidonow.com,resources=evatenants,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=eva.aidonow.com,resources=evatenants/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=eva.aidonow.com,resources=evatenants/finalizers,verbs=update
// +kubebuilder:rbac:groups="",resources=events,verbs=create;patch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch
// +kubebuilder:rbac:groups=coordination.k8s.io,resources=leases,verbs=get;list;watch;create;update;patch;delete
