// Package e2e runs Eva's loop against a real cluster in one process tree
// (internal/testcluster): real kube-apiserver, kube-controller-manager, kube-scheduler,
// kwok nodes, and the real Flux source-, kustomize- and helm-controller, fed by a git
// server and a Helm chart repository on loopback. Nothing of Flux is played here.
//
// `make e2e` builds the components (hack/e2e-binaries.sh) and runs only these tests;
// `make test` runs them with the rest.
package e2e
