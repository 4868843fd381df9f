# cabpk-formats: kubeadm bootstrap provider for Cluster API with pluggable bootstrap formats.
SHELL := /usr/bin/env bash -o pipefail
.SHELLFLAGS := -ec
.DEFAULT_GOAL := help

include internal/testbin/versions.env

export GOTOOLCHAIN := local
# Everything builds the way the release builds its manager (static, paths
# trimmed), so the release test's build reuses the packages vet and the unit
# tests compiled instead of compiling every dependency a second time.
export CGO_ENABLED := 0
export GOFLAGS := $(strip $(GOFLAGS) -trimpath)
TOOLS_CACHE ?= $(or $(CABPK_TOOLS_CACHE),$(or $(XDG_CACHE_HOME),$(HOME)/.cache)/cabpk-formats/tools)
export CABPK_TOOLS_CACHE := $(TOOLS_CACHE)

CONTROLLER_GEN := $(TOOLS_CACHE)/controller-gen/$(CONTROLLER_GEN_VERSION)/controller-gen
GOLANGCI_LINT := $(TOOLS_CACHE)/golangci-lint/$(GOLANGCI_LINT_VERSION)/golangci-lint
BIN_DIR := bin
# The repository's Go modules: the product's, the release builders shared by
# the release command and the e2e, the developer tools, and the tests (e2e,
# simulated provider, scale) with the tools that build their world.
GO_MODULES := . internal/release hack test
# What builds and runs in the test module (test/go.mod), from the repository root.
GO_TEST_MODULE := go -C test
# What builds and runs in the tools' module (hack/go.mod).
GO_TOOLS_MODULE := go -C hack
CONFIG_DIR := bootstrap/kubeadm/config
SIMULATED_CONFIG_DIR := test/infrastructure/simulated/config

# Fuzz time per fuzz target (make fuzz).
FUZZTIME ?= 10s

.PHONY: help
help: ## Show the targets.
	@grep -hE '^[a-zA-Z_-]+:.*?## ' $(firstword $(MAKEFILE_LIST)) | awk 'BEGIN {FS = ":.*?## "}; {printf "  %-18s %s\n", $$1, $$2}'

##@ Tools

.PHONY: tools
tools: ## Build/install every tool binary into the versioned cache (idempotent).
	hack/tools.sh all

$(CONTROLLER_GEN):
	hack/tools.sh controller-gen

$(GOLANGCI_LINT):
	hack/tools.sh golangci-lint

##@ Generate

.PHONY: generate
generate: generate-go generate-manifests generate-docs generate-e2e-flavors ## Regenerate deepcopy, CRDs, RBAC, webhook manifests, docs/reference/fields.md and the e2e templates.

.PHONY: generate-docs
generate-docs:
	$(GO_TOOLS_MODULE) run ./formatsdoc $(CURDIR)/docs/reference/fields.md

.PHONY: generate-e2e-flavors
generate-e2e-flavors:
	$(GO_TEST_MODULE) run ./tools/e2eflavors $(CURDIR)/test/e2e/capi/data/infrastructure-simulated

.PHONY: generate-go
generate-go: $(CONTROLLER_GEN)
	rm -f bootstrap/kubeadm/api/v1beta2/zz_generated.deepcopy.go
	$(CONTROLLER_GEN) object:headerFile=hack/boilerplate.go.txt paths=./bootstrap/kubeadm/api/...
	cd test && $(CONTROLLER_GEN) object:headerFile=../hack/boilerplate.go.txt paths=./infrastructure/simulated/api/...

# v1beta1 is served with upstream's own types and schema (see internal/webhooks/conversion).
UPSTREAM_V1BETA1_API := sigs.k8s.io/cluster-api/api/bootstrap/kubeadm/v1beta1

.PHONY: generate-manifests
generate-manifests: $(CONTROLLER_GEN)
	rm -rf $(CONFIG_DIR)/crd/bases $(CONFIG_DIR)/webhook/manifests.yaml $(CONFIG_DIR)/rbac/role.yaml
	# CRDs: controller-gen's CRD generator, one parser per kind (see hack/crdgen); v1beta2 is ours, v1beta1 upstream's.
	# It loads the packages from the product module, so it runs here, built in the tools' module.
	$(GO_TOOLS_MODULE) build -o $(CURDIR)/$(BIN_DIR)/crdgen ./crdgen
	$(BIN_DIR)/crdgen -output-dir ./$(CONFIG_DIR)/crd/bases ./bootstrap/kubeadm/api/... $(UPSTREAM_V1BETA1_API)
	$(CONTROLLER_GEN) \
		paths=./bootstrap/kubeadm/cmd/... \
		paths=./bootstrap/kubeadm/internal/... \
		paths=./internal/... \
		rbac:roleName=manager-role \
		webhook \
		output:rbac:dir=./$(CONFIG_DIR)/rbac \
		output:webhook:dir=./$(CONFIG_DIR)/webhook
	# The e2e stack's simulated infrastructure provider, from the test module.
	rm -rf $(SIMULATED_CONFIG_DIR)/crd/bases $(SIMULATED_CONFIG_DIR)/rbac/role.yaml
	cd test && $(CONTROLLER_GEN) \
		paths=./infrastructure/simulated/... \
		crd rbac:roleName=manager-role \
		output:crd:dir=$(CURDIR)/$(SIMULATED_CONFIG_DIR)/crd/bases \
		output:rbac:dir=$(CURDIR)/$(SIMULATED_CONFIG_DIR)/rbac

.PHONY: verify
verify: verify-generate verify-headers verify-fmt verify-modules ## Check generated files, license headers, formatting and each module's go.mod.

# Go files of the tree as git sees it: committed, and new ones not ignored.
GO_FILES = $$(git ls-files --cached --others --exclude-standard '*.go')

.PHONY: verify-headers
verify-headers: ## Fail if a Go file lacks the license header (hack/boilerplate.go.txt).
	@missing=$$(for f in $(GO_FILES); do head -n 20 "$$f" | grep -q 'Copyright The cabpk-formats Authors' || echo "$$f"; done); \
	if [ -n "$$missing" ]; then echo "Go files without the license header of hack/boilerplate.go.txt:"; echo "$$missing"; exit 1; fi

.PHONY: verify-fmt
verify-fmt: ## Fail if a Go file is not formatted as gofmt formats it.
	@unformatted=$$(gofmt -l $(GO_FILES)); \
	if [ -n "$$unformatted" ]; then echo "Go files gofmt would change (gofmt -w them):"; echo "$$unformatted"; exit 1; fi

.PHONY: verify-modules
verify-modules: ## Fail if a module's go.mod or go.sum is not what go mod tidy writes (the product's requires only what it links).
	@for m in $(GO_MODULES); do (cd $$m && go mod tidy -diff) || { echo "$$m: run 'go mod tidy' there and commit"; exit 1; }; done

.PHONY: lint
lint: $(GOLANGCI_LINT) ## Run golangci-lint (.golangci.yml) in each module: bugs, security, style, gofmt and goimports.
	for m in $(GO_MODULES); do (cd $$m && $(GOLANGCI_LINT) run --config $(CURDIR)/.golangci.yml ./...) || exit 1; done

.PHONY: lint-fix
lint-fix: $(GOLANGCI_LINT) ## Fix what golangci-lint can fix by itself (formatting, imports).
	for m in $(GO_MODULES); do (cd $$m && $(GOLANGCI_LINT) run --config $(CURDIR)/.golangci.yml --fix ./...) || exit 1; done

.PHONY: verify-generate
verify-generate: generate ## Fail if generated files differ from what is committed.
	@if [ -n "$$(git status --porcelain -- bootstrap/kubeadm docs internal test)" ]; then \
		git status --porcelain -- bootstrap/kubeadm docs internal test; git diff --stat; \
		echo "generated files are out of date: run 'make generate' and commit"; exit 1; fi

##@ Build

.PHONY: build
build: ## Build the manager and render binaries into bin/.
	go build -o $(BIN_DIR)/manager ./bootstrap/kubeadm/cmd/manager
	go build -o $(BIN_DIR)/render ./bootstrap/kubeadm/cmd/render

##@ Release

# The image is tagged $(REGISTRY)/cluster-api-kubeadm-bootstrap-controller:$(TAG).
REGISTRY ?= ghcr.io/cabpk-formats
TAG ?= v0.1.0
PLATFORMS ?= linux/amd64,linux/arm64
RELEASE_DIR ?= out

.PHONY: image
image: ## Build the manager image tarball(s) into RELEASE_DIR, no Docker engine needed (REGISTRY, TAG, PLATFORMS).
	$(GO_TOOLS_MODULE) run ./release --image-only --out $(abspath $(RELEASE_DIR)) --registry $(REGISTRY) --tag $(TAG) --platforms $(PLATFORMS)

.PHONY: release
release: ## Write the release into RELEASE_DIR: bootstrap-components.yaml, metadata.yaml, image tarballs, checksums.txt.
	rm -rf $(RELEASE_DIR)
	$(GO_TOOLS_MODULE) run ./release --out $(abspath $(RELEASE_DIR)) --registry $(REGISTRY) --tag $(TAG) --platforms $(PLATFORMS)

##@ Test

# phase prints where a long target is, with the time of day.
phase = @printf '[%s %s] %s\n' "$@" "$$(date +%T)" "$(1)"

# Fuzz targets as package:FuzzFunction: each renderer, and each surface a
# hostile or damaged input reaches (file templates and how they nest, the
# content budget of a spec, decoding, YAML aliases and the extra Ignition
# configuration they reach, token Secrets in workload clusters, the raw
# agent's paths).
FUZZ_TARGETS := \
	bootstrap/kubeadm/internal/cloudinit:FuzzRender \
	bootstrap/kubeadm/internal/ignition:FuzzRender \
	bootstrap/kubeadm/internal/raw:FuzzRender \
	bootstrap/kubeadm/internal/bootstraptoken:FuzzKeepTokenSecretShapes \
	bootstrap/kubeadm/internal/plan:FuzzTemplateBudget \
	bootstrap/kubeadm/internal/plan:FuzzTemplateNesting \
	bootstrap/kubeadm/internal/plan:FuzzContentBudget \
	internal/machinechecks:FuzzDecode \
	internal/yamlsize:FuzzExpanded \
	internal/fieldrules:FuzzExtraIgnitionConfigAliases \
	pkg/rawagent:FuzzWritePaths

CONTROLLER_PKG := ./bootstrap/kubeadm/internal/controllers/kubeadmconfig

# The e2e packages, in the test module.
E2E_PKG := ./e2e

CAPI_E2E_PKG := ./e2e/capi
CAPI_E2E_ARTIFACTS := $(CURDIR)/test/e2e/capi/_artifacts
# GINKGO_LABEL_FILTER picks Cluster API's specs by spec and format, e.g.
# 'QuickStart && raw' or 'ignition'; empty runs them all.
GINKGO_LABEL_FILTER ?=
# GINKGO_NODES is how many specs run side by side, each in a process of its
# own sharing the first process's management cluster, as in upstream's suite.
GINKGO_NODES ?= 1

.PHONY: test
# The fuzz targets' seeds and saved inputs (testdata/fuzz) run with the unit
# tests; fuzzing itself (make fuzz: instrumented builds of every package, ~6
# minutes cold) is outside make test's 75-minute budget.
test: tools verify lint ## Build tools, check generated files, headers, formatting and lint, vet, run every test (fuzz seeds included), the e2e suite and Cluster API's smoke specs.
	$(call phase,vet)
	for m in $(GO_MODULES); do (cd $$m && go vet ./...) || exit 1; done
	$(call phase,unit and envtest tests)
	for m in . internal/release hack; do (cd $$m && go test -count=1 ./...) || exit 1; done
	cd test && go test -count=1 $$(go list ./... | grep -v -e '/test/e2e$$' -e '/test/e2e/management$$')
	$(call phase,e2e)
	$(MAKE) test-e2e
	$(call phase,Cluster API e2e specs (smoke))
	$(MAKE) test-e2e-capi GINKGO_LABEL_FILTER=smoke GINKGO_NODES=3
	$(call phase,request count)
	$(MAKE) bench-requests
	$(call phase,done)

.PHONY: test-e2e
test-e2e: ## Run the e2e suite: Cluster API's controllers, simulated hosts, real cloud-init/Ignition/kubeadm (needs root).
	hack/tools.sh e2e
	$(GO_TEST_MODULE) test -count=1 -timeout=40m -v $(E2E_PKG)

MANAGEMENT_E2E_PKG := ./e2e/management

.PHONY: test-e2e-management
test-e2e-management: ## Check the releases clusterctl installs (cert-manager, Cluster API, this and the simulated provider), built from source, and `clusterctl init` of a management cluster on hosts (needs root; not part of make test).
	hack/tools.sh e2e upstream-releases
	$(GO_TEST_MODULE) test -count=1 -timeout=30m -v $(MANAGEMENT_E2E_PKG)

.PHONY: test-e2e-capi
test-e2e-capi: ## Run Cluster API's own e2e specs in every format (needs root); GINKGO_LABEL_FILTER picks some, GINKGO_NODES runs that many side by side.
	hack/tools.sh e2e ginkgo
	cd test && $$(../hack/tools.sh path ginkgo) run --tags e2e --procs=$(GINKGO_NODES) -v --label-filter='$(GINKGO_LABEL_FILTER)' --timeout=180m \
		--output-dir=$(CAPI_E2E_ARTIFACTS) --json-report=report.json $(CAPI_E2E_PKG)

.PHONY: test-versions
test-versions: ## Validate what every format renders, for each supported Kubernetes minor, with that minor's kubeadm, and boot the oldest and newest minors' clusters (builds them; needs root).
	hack/tools.sh e2e oldest-newest kubeadm-matrix
	go test -count=1 -tags versionmatrix -run '^TestVersionMatrix$$' ./bootstrap/kubeadm/internal/bootstrapdata
	$(GO_TEST_MODULE) test -count=1 -tags versionmatrix -timeout=30m -v ./e2e/versions

.PHONY: e2e-capi-results
e2e-capi-results: ## Write the last make test-e2e-capi run's results into docs/developer/e2e.md.
	$(GO_TOOLS_MODULE) run ./e2eresults $(CAPI_E2E_ARTIFACTS)/report.json $(CURDIR)/docs/developer/e2e.md

.PHONY: e2e-capi-upgrade-results
e2e-capi-upgrade-results: ## Write the last make test-e2e-capi run's Kubernetes upgrades (time, availability) into docs/developer/e2e.md.
	$(GO_TOOLS_MODULE) run ./e2eresults -upgrades $(CAPI_E2E_ARTIFACTS)/report.json $(CURDIR)/docs/developer/e2e.md

.PHONY: e2e-capi-in-place-results
e2e-capi-in-place-results: ## Write the last make test-e2e-capi run's in-place updates (changes, time to every host) into docs/developer/e2e.md.
	$(GO_TOOLS_MODULE) run ./e2eresults -in-place $(CAPI_E2E_ARTIFACTS)/report.json $(CURDIR)/docs/developer/e2e.md

.PHONY: bench-requests
bench-requests: ## Count the API requests the controller makes per KubeadmConfig (one benchmark round).
	go test -run='^$$' -bench='^BenchmarkReconcileRequests$$' -benchtime=1x $(CONTROLLER_PKG)

.PHONY: fuzz
fuzz: ## Run each fuzz target (renderers, hostile inputs) for FUZZTIME (default 10s).
	# The cached corpus grows with every run, and re-running it counts against
	# FUZZTIME until the whole budget goes to that ("context deadline
	# exceeded"); each run starts from the committed testdata/fuzz seeds.
	go clean -fuzzcache
	for target in $(FUZZ_TARGETS); do \
		go test -run='^$$' -fuzz="^$${target##*:}\$$" -fuzztime=$(FUZZTIME) -fuzzminimizetime=10x ./$${target%%:*} || exit 1; \
	done

BENCH_COUNT ?= 6
# The benchmark outputs docs/developer/performance.md's tables come from.
BENCH_DIR := docs/developer/bench

.PHONY: bench
bench: bench-requests ## Benchmark the renderers side by side with upstream Cluster API's (benchstat), and count the controller's API requests.
	hack/tools.sh benchstat
	go test -run='^$$' -bench=. -benchmem -count=$(BENCH_COUNT) ./bootstrap/kubeadm/internal/bootstrapdata | tee $(BENCH_DIR)/renderers.txt
	$$(hack/tools.sh path benchstat) -col /impl $(BENCH_DIR)/renderers.txt
	$(MAKE) bench-tables

.PHONY: bench-tables
bench-tables: ## Write docs/developer/performance.md's tables from the outputs in docs/developer/bench.
	$(GO_TOOLS_MODULE) run ./benchtables $(CURDIR)/$(BENCH_DIR) $(CURDIR)/docs/developer/performance.md

SCALE_SIZES ?= 100,500,1000
# Extra flags for both managers in the scale run (the same for both).
SCALE_FLAGS ?=
SCALE_SHAPES ?= 1x1000,100x10,1000x1,1000x3
SCALE_IMPLS ?= ours,upstream

.PHONY: bench-scale
bench-scale: ## Scale run: this manager and upstream's side by side on one API server, N = SCALE_SIZES (not part of make test).
	hack/tools.sh envtest benchstat
	SCALE_SIZES=$(SCALE_SIZES) SCALE_FLAGS="$(SCALE_FLAGS)" $(GO_TEST_MODULE) test -run='^$$' -bench='^BenchmarkScale$$' -benchtime=1x -timeout=90m -v ./scale | tee $(BENCH_DIR)/scale.txt
	$$(hack/tools.sh path benchstat) -col /impl $(BENCH_DIR)/scale.txt
	$(MAKE) bench-tables

# SCALE_CLUSTERS_OUT is the file in BENCH_DIR a many-cluster run writes.
SCALE_CLUSTERS_OUT ?= clusters.txt
# The in-memory workload API servers log every listener they start (klog):
# the committed outputs keep the benchmark's own lines.
WITHOUT_KLOG := grep --line-buffered -v -E '^[IWEF][0-9]{4} [0-9:.]+ +[0-9]+ [^ ]+:[0-9]+\] '

.PHONY: bench-scale-clusters
bench-scale-clusters: ## Many-cluster scale run (Cluster API's in-memory workload API servers): SCALE_SHAPES=1x1000,100x10,1000x1,1000x3 (CLUSTERSxMACHINES), SCALE_IMPLS=ours,upstream (not part of make test).
	hack/tools.sh envtest benchstat
	SCALE_SHAPES=$(SCALE_SHAPES) SCALE_IMPLS=$(SCALE_IMPLS) SCALE_FLAGS="$(SCALE_FLAGS)" $(GO_TEST_MODULE) test -run='^$$' -bench='^BenchmarkScaleClusters$$' -benchtime=1x -timeout=180m -v ./scale | $(WITHOUT_KLOG) | tee $(BENCH_DIR)/$(SCALE_CLUSTERS_OUT)
	$$(hack/tools.sh path benchstat) -col /impl $(BENCH_DIR)/$(SCALE_CLUSTERS_OUT)
	$(MAKE) bench-tables

.PHONY: bench-scale-one-cluster
bench-scale-one-cluster: ## 10,000 machines in one cluster beside 1,000, both managers (not part of make test).
	$(MAKE) bench-scale-clusters SCALE_SHAPES=1x1000,1x10000 SCALE_CLUSTERS_OUT=one-cluster.txt

.PHONY: bench-scale-arrival
bench-scale-arrival: ## Steady arrival: SCALE_ARRIVAL_RATE machines a second (10) for SCALE_ARRIVAL_DURATION (5m) across SCALE_ARRIVAL_CLUSTERS (1000), latency per machine, SCALE_IMPLS (not part of make test).
	hack/tools.sh envtest benchstat
	SCALE_IMPLS=$(SCALE_IMPLS) SCALE_FLAGS="$(SCALE_FLAGS)" $(GO_TEST_MODULE) test -run='^$$' -bench='^BenchmarkScaleArrival$$' -benchtime=1x -timeout=120m -v ./scale | $(WITHOUT_KLOG) | tee $(BENCH_DIR)/arrival.txt
	$$(hack/tools.sh path benchstat) -col /impl $(BENCH_DIR)/arrival.txt
	$(MAKE) bench-tables

##@ Run

.PHONY: demo
demo: ## Main job: Cluster API's quick start with this provider on simulated hosts (BOOTSTRAP_FORMAT=cloud-config|ignition|raw, CONTROL_PLANE_REPLICAS=1; root; Ctrl-C stops).
	hack/tools.sh e2e kubectl clusterctl upstream-releases
	mkdir -p $(BIN_DIR)
	$(GO_TEST_MODULE) build -o $(CURDIR)/$(BIN_DIR)/demo ./e2e/demo
	exec $(BIN_DIR)/demo

.PHONY: run
run: ## Start a local API server with the CRDs and run the manager against it (Ctrl-C stops).
	hack/tools.sh envtest
	go build -o $(BIN_DIR)/manager ./bootstrap/kubeadm/cmd/manager
	$(GO_TOOLS_MODULE) build -o $(CURDIR)/$(BIN_DIR)/runlocal ./runlocal
	exec $(BIN_DIR)/runlocal $(BIN_DIR)/manager $(ARGS)
