# Eva — build, generate, test. `make help` lists the targets.
SHELL := /usr/bin/env bash -o pipefail
.SHELLFLAGS := -ec
export GOTOOLCHAIN := local

BIN            := $(CURDIR)/bin
CONTROLLER_GEN_VERSION := v0.23.0
CONTROLLER_GEN := $(BIN)/tools/controller-gen-$(CONTROLLER_GEN_VERSION)
GOLANGCI_LINT_VERSION := v2.15.0
GOLANGCI_LINT  := $(BIN)/tools/golangci-lint-$(GOLANGCI_LINT_VERSION)
# The operator image: where `make image` pushes it and the version it is tagged with.
IMAGE_REPO     ?= ghcr.io/aidonow/eva-operator
VERSION        ?= 0.1.0
IMAGE_FLAGS    ?=
TENANTS        ?= tenants
ENV            ?= dev
OUT            ?= out/gitops
GO_TEST_FLAGS  ?= -race -count=1 -timeout=30m -parallel=4
FUZZTIME       ?= 30s
SLA_TENANTS    ?= 3
# A realistic time from scheduling to Ready for a module pod: image already on the node,
# container start, first readiness probe.
SLA_POD_START_DELAY ?= 15s

.DEFAULT_GOAL := help

##@ General

.PHONY: help
help: ## Show this help.
	@awk 'BEGIN {FS = ":.*##"; printf "Usage: make <target>\n"} \
	  /^[a-zA-Z_0-9-]+:.*?##/ { printf "  \033[36m%-16s\033[0m %s\n", $$1, $$2 } \
	  /^##@/ { printf "\n\033[1m%s\033[0m\n", substr($$0, 5) }' $(MAKEFILE_LIST)

##@ Main job

.PHONY: render
render: ## Render tenants/ into a local git repository at $(OUT) (ENV=dev).
	go run ./cmd/evactl render --tenants $(TENANTS) --env $(ENV) --out $(OUT)

.PHONY: validate
validate: ## Validate the tenant files under tenants/.
	go run ./cmd/evactl validate $(TENANTS)

##@ Development

.PHONY: build
build: ## Build evactl and eva-operator into bin/.
	go build -o $(BIN)/evactl ./cmd/evactl
	go build -o $(BIN)/eva-operator ./cmd/eva-operator

.PHONY: generate
generate: $(CONTROLLER_GEN) ## Generate deepcopy code from the API types.
	$(CONTROLLER_GEN) object:headerFile=hack/boilerplate.go.txt paths=./api/... paths=./internal/nack/... paths=./internal/monitoring/... paths=./internal/argocd/...

.PHONY: manifests
manifests: $(CONTROLLER_GEN) ## Generate the CRD and RBAC under base/ from markers, and the operator chart's copies of them.
	$(CONTROLLER_GEN) crd paths=./api/... output:crd:artifacts:config=base/crd/bases
	$(CONTROLLER_GEN) rbac:roleName=eva-operator paths=./cmd/... paths=./internal/... output:rbac:artifacts:config=base/rbac
	@# CRDs of the systems Eva renders for, for tests: Flux's from its API modules, and
	@# NACK's Stream and the PrometheusRule from Eva's own partial types.
	$(CONTROLLER_GEN) crd paths=github.com/fluxcd/helm-controller/api/v2 paths=github.com/fluxcd/kustomize-controller/api/v1 \
	  paths=github.com/fluxcd/source-controller/api/v1 output:crd:artifacts:config=internal/testenv/crds/flux
	$(CONTROLLER_GEN) crd:maxDescLen=0 paths=./internal/nack/... paths=./internal/monitoring/... output:crd:artifacts:config=internal/testenv/crds/addons
	@# Argo CD's Application and AppProject CRDs as Argo CD publishes them.
	hack/argocd-crds.sh internal/testenv/crds/argocd
	@# The operator's Helm chart follows base/ (CRDs, RBAC, policies) and the overlays.
	go run ./hack/chartgen -base base -overlays overlays -charts charts -chart deploy/charts/eva-operator

.PHONY: verify
verify: $(CONTROLLER_GEN) ## Fail when generated files are stale (regenerated in a temporary copy: uncommitted edits elsewhere do not matter).
	@CONTROLLER_GEN=$(CONTROLLER_GEN) hack/verify-generated.sh

.PHONY: fmt
fmt: ## Format the Go code.
	gofmt -w $$(git ls-files '*.go')

.PHONY: vet
vet: ## Run go vet and check formatting.
	@unformatted=$$(gofmt -l $$(git ls-files '*.go')); \
	  if [ -n "$$unformatted" ]; then echo "gofmt needed: $$unformatted"; exit 1; fi
	go vet ./...

.PHONY: lint
lint: $(GOLANGCI_LINT) ## Run golangci-lint (pinned, built into bin/tools) with .golangci.yml.
	$(GOLANGCI_LINT) run ./...

.PHONY: image
image: ## Build the operator image (linux/amd64+arm64, no container engine), push it to IMAGE_REPO:VERSION with its SBOM, and pin its digest in images.txt and the air-gap overlay.
	@revision=$$(git rev-parse HEAD); if [ -n "$$(git status --porcelain -- cmd internal api charts go.mod go.sum)" ]; then \
	  if [ "$(ALLOW_DIRTY)" != 1 ]; then echo "make image: uncommitted changes in the image's sources; commit them (or ALLOW_DIRTY=1 for a -dirty build)" >&2; exit 1; fi; \
	  revision=$$revision-dirty; fi; \
	  go run ./cmd/eva-image --repo $(IMAGE_REPO) --version $(VERSION) --revision $$revision \
	    --created $$(git log -1 --format=%ct) --sbom-out dist/eva-operator-$(VERSION).cdx.json $(IMAGE_FLAGS)

RELEASE_REGISTRY ?= ghcr.io/aidonow
RELEASE_FLAGS ?=

.PHONY: release
release: ## Build release VERSION into dist/VERSION (evactl for linux and darwin on amd64 and arm64, SBOMs, checksums) and push the operator image and the operator and module charts under RELEASE_REGISTRY.
	@if [ -n "$$(git status --porcelain)" ]; then echo "make release: commit first: a release is built from a commit" >&2; exit 1; fi
	go run ./cmd/eva-release --version $(VERSION) --registry $(RELEASE_REGISTRY) --revision $$(git rev-parse HEAD) \
	  --created $$(git log -1 --format=%ct) $(RELEASE_FLAGS)

.PHONY: release-check
release-check: ## Fail while images.txt or the rendered overlays hold PLACEHOLDER or tag-only images.
	go run ./cmd/evactl images verify
	@for env in dev prod airgap; do \
	  if kubectl kustomize overlays/$$env | grep -E 'image: .*PLACEHOLDER'; then echo "overlays/$$env: PLACEHOLDER digest"; exit 1; fi; done
	@if kubectl kustomize overlays/airgap | grep -E '^\s*image:' | grep -v '@sha256:'; then echo "overlays/airgap: tag-only image"; exit 1; fi

##@ Test

.PHONY: envtest
envtest: ## Build kube-apiserver and etcd for envtest into bin/k8s (once per machine).
	@hack/envtest-binaries.sh $(BIN) >/dev/null

.PHONY: e2e-binaries
e2e-binaries: $(CONTROLLER_GEN) ## Build kube-controller-manager, kube-scheduler, kwok and the Flux controllers into bin/e2e (once per machine).
	@CONTROLLER_GEN=$(CONTROLLER_GEN) hack/e2e-binaries.sh $(BIN) >/dev/null

.PHONY: e2e
e2e: envtest e2e-binaries ## Run the end-to-end suite (real control plane, kwok nodes, real Flux controllers) and evactl render under hack/egress: no packet may leave.
	hack/run-e2e.sh "$(GO_TEST_FLAGS)"

.PHONY: cluster
cluster: envtest e2e-binaries ## Start a cluster to try Eva on (kwok nodes, real Flux, the operator's chart, the operator binary beside it); prints the kubeconfig, stays up until Ctrl-C.
	go build -o $(BIN)/eva-cluster ./hack/cluster
	KUBEBUILDER_ASSETS="$$(hack/envtest-binaries.sh $(BIN))" exec $(BIN)/eva-cluster --env $(ENV)

.PHONY: e2e-journey
e2e-journey: envtest e2e-binaries ## Run the first-cluster journey (evactl init, the chart with evactl operator values, docs/flux-wiring.md's objects, every tier, diff, decommission) on a cluster of its own, under hack/egress.
	EVA_E2E_JOURNEY=1 hack/run-e2e.sh "-count=1 -timeout=30m -v -run ^TestJourney"

.PHONY: e2e-cells
e2e-cells: envtest e2e-binaries ## Run the cells scenarios on two clusters, each with its own real Flux (docs/cells.md), under hack/egress.
	EVA_E2E_CELLS=1 hack/run-e2e.sh "-count=1 -timeout=30m -v -run ^TestCells"

.PHONY: test
test: envtest e2e-binaries vet verify ## Run every test: envtest, and the end-to-end suite with real Flux inside a network namespace with no way out.
	GO_TEST_FLAGS="$(GO_TEST_FLAGS)" hack/run-tests.sh

.PHONY: fuzz
fuzz: ## Run every fuzz target of the module for FUZZTIME each (default 30s).
	@set -e; for pkg in $$(go list ./...); do \
	  dir=$$(go list -f '{{.Dir}}' $$pkg); \
	  for target in $$(grep -ho '^func Fuzz[A-Za-z0-9_]*' $$dir/*_test.go 2>/dev/null | sed 's/^func //'); do \
	    echo "== $$pkg $$target"; go test $$pkg -run '^$$' -fuzz "^$$target\$$" -fuzztime $(FUZZTIME); done; done

.PHONY: sla
sla: envtest e2e-binaries ## Provision SLA_TENANTS tenants per tier on the e2e cluster (real Flux, kwok pods Ready after SLA_POD_START_DELAY) and write out/sla.json.
	KUBEBUILDER_ASSETS="$$(hack/envtest-binaries.sh $(BIN))" EVA_SLA_REPORT=$(CURDIR)/out/sla.json EVA_SLA_TENANTS=$(SLA_TENANTS) \
	  EVA_E2E_POD_START_DELAY=$(SLA_POD_START_DELAY) go test ./internal/e2e -run '^TestSLAReport$$' -count=1 -v -timeout 40m

THROUGHPUT_SHARDS ?= 1,2,4
THROUGHPUT_TENANTS ?= 30
THROUGHPUT_POD_START_DELAY ?= 15s
# THROUGHPUT_CAP, when set (releases a minute per helm-controller), adds two releases to
# every tenant (three waves, maxUpdate 100%) with readyTimeout THROUGHPUT_READY_TIMEOUT:
# without a cap, then with helmReleasesPerMinute at THROUGHPUT_CAP.
THROUGHPUT_CAP ?=
THROUGHPUT_READY_TIMEOUT ?= 1m

.PHONY: throughput
throughput: envtest e2e-binaries ## Deliver THROUGHPUT_TENANTS Starter tenants and a platform release through 1, 2 and 4 Flux shards on the e2e cluster (real Flux, kwok pods Ready after THROUGHPUT_POD_START_DELAY) and write out/throughput.md.
	KUBEBUILDER_ASSETS="$$(hack/envtest-binaries.sh $(BIN))" EVA_THROUGHPUT_REPORT=$(CURDIR)/out/throughput.md \
	  EVA_THROUGHPUT_SHARDS=$(THROUGHPUT_SHARDS) EVA_THROUGHPUT_TENANTS=$(THROUGHPUT_TENANTS) \
	  EVA_THROUGHPUT_CAP=$(THROUGHPUT_CAP) EVA_THROUGHPUT_READY_TIMEOUT=$(THROUGHPUT_READY_TIMEOUT) \
	  EVA_E2E_POD_START_DELAY=$(THROUGHPUT_POD_START_DELAY) go test ./internal/e2e -run '^TestThroughputReport$$' -count=1 -v -timeout 150m

BENCHCOUNT ?= 3
BENCH ?= .
# BENCHNOTE, when set, is printed under the page's header: how the figures were measured (a subset, a busy machine).

.PHONY: bench
bench: envtest ## Run the benchmarks BENCH (default all) BENCHCOUNT times (default 3); write their figures to docs/performance.md, keeping the others.
	@mkdir -p out
	KUBEBUILDER_ASSETS="$$(hack/envtest-binaries.sh $(BIN))" go test ./... -run '^$$' -bench '$(BENCH)' \
	  -benchtime 1x -count $(BENCHCOUNT) -benchmem -timeout 120m | tee out/bench.txt
	go run ./hack/perfpage -out docs/performance.md -keep docs/performance.md -note "$(BENCHNOTE)" out/bench.txt

##@ Tools

$(GOLANGCI_LINT):
	@mkdir -p $(BIN)/tools
	GOBIN=$(BIN)/tools go install github.com/golangci/golangci-lint/v2/cmd/golangci-lint@$(GOLANGCI_LINT_VERSION)
	mv $(BIN)/tools/golangci-lint $(GOLANGCI_LINT)

$(CONTROLLER_GEN):
	@mkdir -p $(BIN)/tools
	GOBIN=$(BIN)/tools go install sigs.k8s.io/controller-tools/cmd/controller-gen@$(CONTROLLER_GEN_VERSION)
	mv $(BIN)/tools/controller-gen $(CONTROLLER_GEN)
