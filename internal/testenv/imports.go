package testenv

// The Flux API modules are imported so `make manifests` can generate their CRDs from
// the exact versions in go.mod.
import (
	_ "github.com/fluxcd/helm-controller/api/v2"
	_ "github.com/fluxcd/kustomize-controller/api/v1"
	_ "github.com/fluxcd/source-controller/api/v1"
)
