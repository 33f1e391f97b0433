# hostpath: dynamic hostPath volumes for Kubernetes.
# `make help` lists the targets.

SHELL := /usr/bin/env bash
.SHELLFLAGS := -euo pipefail -c

# Tool versions, pinned. The Kubernetes release of the local cluster, and
# the etcd and pause image it expects, are pinned in scripts/lib.sh
# (K8S_VERSION, K8S_OLDEST); K8S_VERSION=... in the environment overrides.

MODULES := api manager provisioner hostdefiner e2e tools
BINARIES := manager provisioner hostdefiner
GO ?= go
STATICCHECK_VERSION ?= v0.8.2
STATICCHECK := $(GO) run honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION)
BIN_DIR ?= bin
# FUZZTIME bounds `make fuzz`.
FUZZTIME ?= 60s
# REGISTRY is where `make push` sends the images: HOST[:PORT][/PATH].
REGISTRY ?=
# VERSION is the release `make release` builds: vX.Y.Z, recorded in RELEASES.
VERSION ?=
# DOCS_PENDING: pages that links may name before they exist (written on
# another branch); docscheck checks them like the others once they do.
DOCS_PENDING :=

.DEFAULT_GOAL := help

.PHONY: help
help: ## List the targets.
	@awk 'BEGIN {FS = ":.*## "} /^[a-zA-Z0-9_-]+:.*## / {printf "  %-14s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

.PHONY: build
build: ## Build the three programs and the kubectl plugin kubectl-hostpath into bin/.
	@mkdir -p $(BIN_DIR)
	@for b in $(BINARIES); do (cd $$b && CGO_ENABLED=0 $(GO) build -trimpath -o ../$(BIN_DIR)/$$b ./cmd/$$b); done
	@cd hostdefiner && CGO_ENABLED=0 $(GO) build -trimpath -o ../$(BIN_DIR)/kubectl-hostpath ./cmd/kubectl-hostpath

.PHONY: fmt
fmt: ## Format all Go code.
	gofmt -w $(MODULES)

.PHONY: verify
verify: check-releases check-docs check-chart ## gofmt, go vet, staticcheck, GOWORK=off builds of every module, size rules, layers (scripts/check-layers.sh), no test helper in a binary, generated code up to date, RELEASES, docs, the Helm chart.
	@out=$$(gofmt -l $(MODULES)); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	@for m in $(MODULES); do (cd $$m && $(GO) vet ./...); done
	@for m in $(MODULES); do (cd $$m && $(STATICCHECK) $$($(GO) list ./... | grep -v /api/generated/)); done
	@scripts/check-size.sh
	@scripts/check-layers.sh
	@for b in $(BINARIES); do (cd $$b && if $(GO) list -deps ./cmd/... | grep -E '^hostpath\.dev/.*test$$'; then echo "$$b: test-only packages (above) are linked into a binary"; exit 1; fi); done
	@scripts/codegen.sh --verify
	@for m in $(MODULES); do (cd $$m && GOWORK=off $(GO) build ./...); done
	@echo "verify: ok"

.PHONY: check-releases
check-releases: ## RELEASES is well formed (semver, increasing), each commit an ancestor of HEAD, a CHANGELOG.md section each.
	@cd tools && $(GO) run ./cmd/releases check $(CURDIR)

.PHONY: check-docs
check-docs: build ## Every flag of each program's --help is on its docs/ page, relative links of README.md and docs/ lead somewhere, README.md at most 300 lines.
	@cd tools && $(GO) run ./cmd/docscheck check -bin $(CURDIR)/$(BIN_DIR) $(addprefix -pending ,$(DOCS_PENDING)) $(CURDIR)

.PHONY: check-chart
check-chart: ## The Helm chart renders the objects of manifests/ (defaults, ci/ values as OpenShift, components, monitoring; helm v3 and v4 alike), passes helm lint --strict, its files/ copies and docs/install.md's values table are up to date.
	@helm=$$(scripts/tool.sh helm); helm4=$$(scripts/tool.sh helm4); kustomize=$$(scripts/tool.sh kustomize); \
	cd tools && $(GO) run ./cmd/chartcheck check -helm "$$helm" -helm4 "$$helm4" -kustomize "$$kustomize" $(CURDIR)

.PHONY: chart-sync
chart-sync: ## Rewrite charts/hostpath/files/ from manifests/ and docs/install.md's chart values table from charts/hostpath/values.yaml.
	@cd tools && $(GO) run ./cmd/chartcheck sync $(CURDIR)

.PHONY: generate
generate: ## Generate the HostDefinition deepcopy, clientset, listers, informers and CRD (scripts/codegen.sh).
	scripts/codegen.sh

.PHONY: verify-tidy
verify-tidy: tidy ## `make tidy` changes nothing that is committed.
	git diff --exit-code -- '*.mod' '*.sum' go.work go.work.sum

.PHONY: tidy
tidy: ## go work sync and go mod tidy in every module.
	$(GO) work sync
	@for m in $(MODULES); do (cd $$m && $(GO) mod tidy); done

.PHONY: unit
unit: ## Unit tests of every module (fuzz seed corpora included; not the e2e suite itself, nor the release tests of make test-release).
	@for m in $(MODULES); do (cd $$m && $(GO) test -count=1 $$($(GO) list ./... | grep -vxE 'hostpath.dev/e2e(/release)?')); done

.PHONY: fuzz
fuzz: ## Run the manager's fuzz tests for FUZZTIME each.
	cd manager && $(GO) test -run '^$$' -fuzz FuzzConfinement -fuzztime $(FUZZTIME) ./internal/disk/

.PHONY: k8s
k8s: ## Build the pinned Kubernetes components into .cache/ (reused when present).
	scripts/build-k8s.sh

.PHONY: images
images: ## Build the OCI image tarballs and import them into every running node.
	scripts/images.sh

.PHONY: push
push: ## Build the three product images and push them to REGISTRY (HOST[:PORT]/PATH) with skopeo; IMAGE_TAG, REGISTRY_TLS_VERIFY=false, PLATFORMS=linux/amd64,linux/arm64 for multi-platform images (scripts/push.sh, docs/install.md).
	scripts/push.sh "$(REGISTRY)"

.PHONY: release
release: ## Build release VERSION (vX.Y.Z of RELEASES and CHANGELOG.md) from its commit into dist/: multi-platform image archives, hostpath.yaml, the Helm chart, the kubectl plugin, SHA256SUMS (scripts/release.sh, docs/releasing.md).
	scripts/release.sh "$(VERSION)"

.PHONY: cluster-up
cluster-up: k8s ## Start the local cluster (kubeconfig: .cluster/kubeconfig).
	scripts/cluster-up.sh

.PHONY: cluster-down
cluster-down: ## Stop the local cluster and remove its state.
	scripts/cluster-down.sh

.PHONY: deploy
deploy: ## Install the product on the local cluster (kubectl apply -k manifests/).
	scripts/deploy.sh

# E2E_PARALLEL: how many of the e2e tests that call t.Parallel (those that
# touch only their own namespaces and objects) run at once, after the
# serial ones (docs/development.md, "Tests").
E2E_PARALLEL ?= 4

.PHONY: e2e
e2e: ## Run the e2e suite against the running local cluster, but the fault tests (TestFault*: make e2e-faults) and the lifecycle tests (LIFECYCLE_TESTS: make e2e-lifecycle), E2E_PARALLEL at a time of those that may run side by side; then the manifests' checks, which need the cluster's kubectl.
	cd e2e && $(GO) test -count=1 -timeout 30m -v -parallel $(E2E_PARALLEL) -skip '^TestFault|$(LIFECYCLE_TESTS)' .
	cd e2e && $(GO) test -count=1 -v ./internal/manifests

# LIFECYCLE_TESTS: the tests that replace the install itself (the upgrades
# from the recorded releases, the chart's install, upgrade and uninstall, the
# kustomize uninstall) or restart every provisioner (the claim-labelling
# policy's binding removed and put back): `make test-lifecycle` runs them apart from `make
# test`, on the cluster .ci/run keeps (docs/development.md, "Time budget").
LIFECYCLE_TESTS := ^(TestUpgrade|TestHelm|TestUninstall|TestClaimPolicyBinding)$$

.PHONY: e2e-lifecycle
e2e-lifecycle: ## Run the lifecycle tests (LIFECYCLE_TESTS: upgrades from the recorded releases, the Helm chart's install, upgrade and uninstall, the kustomize uninstall) against the running local cluster.
	cd e2e && $(GO) test -count=1 -timeout 30m -v -run '$(LIFECYCLE_TESTS)' .

.PHONY: e2e-faults
e2e-faults: ## Run the fault tests (TestFault*: crashes, outages, reboots, failovers) against the running local cluster.
	cd e2e && $(GO) test -count=1 -timeout 40m -v -run '^TestFault' .

# COMPAT_TESTS: the part of the e2e suite `make test-compat` runs on the
# oldest supported Kubernetes (scripts/lib.sh, K8S_OLDEST); the node
# restriction tests check that its API server enforces the admission
# policies as the newest one does; TestWatchLabels that without the
# claim-labelling policy (not served there) claims bind unlabelled while
# PVs are labelled.
COMPAT_TESTS := ^(TestWatchLabels|TestSmoke|TestProvisionerWaitForFirstConsumer|TestProvisionerPinnedClaims|TestMultihostDaemonSet|TestHostDefinerReady|TestManagerTLS|TestSizesBtrfs|TestLocalVolumes|TestCapacityAwareScheduling|TestNodeRestrictionPVCreate|TestNodeRestrictionBoundPV|TestNodeRestrictionCapacity)$$

.PHONY: e2e-compat
e2e-compat: ## Run the compatibility part of the e2e suite (COMPAT_TESTS: watch labels without the claim policy, smoke, both modes, host definer Ready, TLS, sizes, local volumes, capacity, node restriction) against the running local cluster.
	cd e2e && $(GO) test -count=1 -timeout 20m -v -parallel $(E2E_PARALLEL) -run '$(COMPAT_TESTS)' .

.PHONY: e2e-storage
e2e-storage: ## Run the upstream Kubernetes External Storage suite against the running local cluster, once per e2e/storage/*.yaml test driver.
	scripts/storage-suite.sh

.PHONY: bench
bench: ## On the running local cluster: provisioning against a no-op provisioner at several kube-controller-manager client limits (N=1000), then bench-fleet and bench-foreign (see docs/benchmarks.md).
	scripts/bench-provision.sh
	scripts/bench-fleet.sh
	scripts/bench-foreign.sh

.PHONY: bench-foreign
bench-foreign: ## On the running local cluster: each provisioner's RSS idle, with 10,000 claims and 10,000 PVs of another provisioner, and after their deletion (MiB per 1,000).
	scripts/bench-foreign.sh

.PHONY: bench-fleet
bench-fleet: ## On the running local cluster: many instances, multihost fan-out and backfill over a fleet of fake nodes with real manager and provisioner processes; with BENCH_FOREIGN=N, each instance's cost per node and per claim of another provisioner, and the watch events per node-mode and multihost volume without and with the fleet (BENCH_FLEET_VOLUMES, BENCH_FLEET_MULTIHOST); with BENCH_NODE_COST=1000,5000, each instance's memory with the pods and HostDefinitions of that many nodes, without their processes.
	scripts/bench-fleet.sh

.PHONY: bench-clone
bench-clone: ## On this machine, as root (no cluster): cloning a 1 GiB volume by snapshot, reflink and byte copy on loop-mounted btrfs and xfs and the host filesystem (medians, ratios to the byte copy).
	scripts/bench-clone.sh

.PHONY: demo
demo: ## The README's first command: cluster up if needed, images, install, a node-mode and a multihost claim in use; leaves the cluster up.
	scripts/demo.sh

.PHONY: test
test: ## What CI runs first: verify, unit, cluster up, e2e (but the fault tests), cluster down (also on failure; KEEP_CLUSTER=1 keeps it); prints each phase's time and test counts.
	scripts/test.sh

.PHONY: test-lifecycle
test-lifecycle: ## The lifecycle tests: cluster up (or reuse a healthy one), images, e2e-lifecycle, cluster down (CI runs it after make test-storage, on their cluster).
	scripts/test.sh lifecycle

.PHONY: test-faults
test-faults: ## The fault tests: cluster up (or reuse a healthy one), images, e2e-faults, cluster down (CI runs it last of the three on one cluster).
	scripts/test.sh faults

.PHONY: test-compat
test-compat: ## The compatibility tests (e2e-compat) on a fresh cluster of the oldest supported Kubernetes (K8S_OLDEST in scripts/lib.sh): build, cluster up, images, e2e-compat, cluster down (CI runs it too).
	scripts/test.sh compat

.PHONY: test-storage
test-storage: ## The upstream External Storage suite: suite build, cluster up (or reuse a healthy one), images, e2e-storage, cluster down (CI runs it after make test, on its cluster).
	scripts/test.sh storage

.PHONY: test-release
test-release: ## A release rehearsed in a throwaway clone (make release), its dist/ checked (images per platform, arm64 binaries under qemu, SHA256SUMS, chart), make push of an index to a local registry, hostpath.yaml on a fresh cluster (CI runs it too).
	scripts/test.sh release
