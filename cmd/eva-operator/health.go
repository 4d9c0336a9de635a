package main

import (
	"context"
	"errors"
	"net/http"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
)

// cacheSyncWait is how long one readiness probe waits for the caches.
const cacheSyncWait = time.Second

// cachesSynced is the readiness check: it passes once the manager's cache has started
// and every informer in it has synced, so a replica whose watches cannot list (no RBAC
// yet, an API server that does not answer) is not reported ready and a rollout waits.
func cachesSynced(c cache.Cache) healthz.Checker {
	return func(req *http.Request) error {
		ctx, cancel := context.WithTimeout(req.Context(), cacheSyncWait)
		defer cancel()
		if !c.WaitForCacheSync(ctx) {
			return errors.New("informer caches have not synced")
		}
		return nil
	}
}
