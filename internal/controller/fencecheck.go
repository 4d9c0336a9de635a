package controller

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/aidonow/eva/internal/overlay"
)

// The operator reads the fence's parameters from its own namespace.
// +kubebuilder:rbac:groups="",resources=configmaps,verbs=get,namespace=eva-system

// FenceCheck compares the environment the operator renders with against the one the
// cluster's admission policy eva-tenant-ingresses enforces (the ConfigMap
// overlay.FenceConfigMap of the operator's namespace), every Interval: when the two
// differ, every tenant's Provisioned condition says so, naming both digests, before
// any Ingress is refused (in pure-cluster mode) or Flux fails to apply one (GitOps).
type FenceCheck struct {
	// Reader reads the ConfigMap from the API server (ConfigMaps are not cached).
	Reader client.Reader
	// Namespace is the operator's, where the chart or overlay installs the ConfigMap.
	Namespace string
	// Env is the environment the operator renders with.
	Env *overlay.Environment
	// Interval between looks; zero is a minute.
	Interval time.Duration

	mismatch atomic.Pointer[string]
}

// NeedLeaderElection is false: every replica reports what it renders with.
func (f *FenceCheck) NeedLeaderElection() bool { return false }

// Start looks at the ConfigMap now and every Interval until ctx ends.
func (f *FenceCheck) Start(ctx context.Context) error {
	every := f.Interval
	if every == 0 {
		every = time.Minute
	}
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		if err := f.check(ctx); err != nil {
			ctrl.LoggerFrom(ctx).Error(err, "Reading the cluster's fence parameters")
		}
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
	}
}

// Mismatch is the last look's finding: "" when the two agree, or before the first look.
func (f *FenceCheck) Mismatch() string {
	if m := f.mismatch.Load(); m != nil {
		return *m
	}
	return ""
}

func (f *FenceCheck) check(ctx context.Context) error {
	own := f.Env.Settings.FenceParams()[overlay.FenceDigestKey]
	key := types.NamespacedName{Namespace: f.Namespace, Name: overlay.FenceConfigMap}
	var cm corev1.ConfigMap
	var found string
	switch err := f.Reader.Get(ctx, key, &cm); {
	case apierrors.IsNotFound(err):
		found = fmt.Sprintf("the cluster has no ConfigMap %s, which the admission policy eva-tenant-ingresses reads: every tenant Ingress is refused; install the operator chart with the environment the fleet renders with (evactl operator values)", key)
	case err != nil:
		return err
	case cm.Data[overlay.FenceDigestKey] != own:
		found = fmt.Sprintf("the operator renders for environment %s, fence %s (domain %s), but the cluster enforces fence %s (ConfigMap %s, domain %s): its Ingresses are refused; install the operator chart with the environment the fleet renders with (evactl operator values)",
			f.Env.Name, own, f.Env.Settings.Domain, cm.Data[overlay.FenceDigestKey], key, cm.Data["domain"])
	}
	f.mismatch.Store(&found)
	return nil
}
