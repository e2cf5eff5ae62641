# pmx — build, run and test the exchange. `make help` lists the targets.

SHELL := /usr/bin/env bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := help

GO       ?= go
BIN      := $(CURDIR)/bin
PMX      := $(BIN)/pmx
PMXTOOLS := $(BIN)/pmxtools

# Pinned tool versions, installed into bin/ on first use.
STATICCHECK_VERSION := v0.8.2
STATICCHECK := $(BIN)/staticcheck-$(STATICCHECK_VERSION)
# Redocly CLI lints the API documents, the two OpenAPI 3.0 ones and the AsyncAPI 3.0 one alike, by
# redocly.yaml's rules. One npm package whose dependencies are bundled in it: npm installs it into
# bin/ in seconds.
REDOCLY_VERSION := 2.77.0
REDOCLY := $(BIN)/redocly-$(REDOCLY_VERSION)/node_modules/.bin/redocly
# Prometheus's promtool checks the chart's alerts and runs their unit tests (internal/charttest,
# `promtool test rules`); internal/charttest reads this version and these tags, and
# hack/metricscheck's go.mod requires Prometheus at this same version (a test keeps them one).
# Built from Prometheus's Go module, once, then never again while it exists. Prometheus's own build
# tag remove_all_sd leaves out every service-discovery plugin (the AWS, Azure, GCE, Kubernetes,
# Consul... clients), which promtool's rule checks and tests never use: with the modules downloaded
# and an empty build cache, on this 2-core machine shared with other builds, the build took 5 m 54 s
# (7 m 24 s user CPU) without the tag and 2 m 00 s (2 m 50 s user CPU) with it.
PROMTOOL_VERSION := v0.316.0
PROMTOOL_TAGS    := remove_all_sd
PROMTOOL := $(BIN)/promtool-$(PROMTOOL_VERSION)
# The Prometheus server of the same release and tags scrapes a real run of pmx in the dashboard's
# test (internal/charttest), which renders every panel's queries from it. Built after promtool, it
# shares most of promtool's build.
PROMETHEUS := $(BIN)/prometheus-$(PROMTOOL_VERSION)

# `make run` passes RUN_FLAGS to pmx dev (e.g. RUN_FLAGS="--addr 127.0.0.1:8081 --metrics-addr 127.0.0.1:9091").
RUN_FLAGS ?=
# `make demo` (hack/demo.sh) reads these, given on make's command line or in the environment:
# DEMO_ADDR and DEMO_METRICS_ADDR, its pmx dev's --addr and --metrics-addr (default 127.0.0.1:8080
# and 127.0.0.1:9090, as `make run`'s); DEMO_DATA_DIR, its --data-dir (default .pmx, as `make
# run`'s); DEMO_PMX_FLAGS, more flags for it (e.g. --database-url postgres://...); PMX_ADMIN_TOKEN,
# its admin token. Beside a running `make run` it refuses to start, saying so: give it its own, as
# in `make demo DEMO_ADDR=127.0.0.1:8081 DEMO_METRICS_ADDR=127.0.0.1:9091 DEMO_DATA_DIR=.pmx-demo`.
# `make test` runs every test, under the race detector; TEST_FLAGS adds more (e.g. -run Engine).
TEST_FLAGS ?=
# TEST_TIMEOUT bounds each package's tests, in place of go test's 10 minutes: internal/exchangetest
# took 11.5 minutes alone on a 2-core machine busy with another build, and more beside a second
# `make test`. A test that hangs still fails, with every goroutine's stack.
TEST_TIMEOUT ?= 45m
# `make test-python` (and `make test`) runs the Python SDK's tests under Debian's python3 (not a
# pyenv or virtualenv python3 on PATH, which lacks Debian's packages); PYTEST_FLAGS adds more (e.g. -k feed).
PYTHON ?= /usr/bin/python3
PYTHON_DEBS := python3 python3-pip python3-httpx python3-websockets python3-pytest python3-yaml python3-mypy python3-cryptography
PYTEST_FLAGS ?=
# `make bench` runs the engine benchmarks on one core; BENCH_FLAGS adds more (e.g. -count 6).
BENCH_FLAGS ?= -benchtime 2s
# ...then the end-to-end benchmark, pmxtools bench, once with each mix of requests (basic: single
# placements and cancels; market-maker: batches, amends, cancels of several orders), the basic mix
# once more with the feeds' event log off (what the feeds cost), and once with 8 WebSocket clients
# following every market's book (the live feed's figures). Each first measures this machine's HTTP
# and commit floors (--floors) and prints every run's ratio to them. E2E_FLAGS adds to each (e.g.
# --bots 16 --duration 60s).
E2E_FLAGS ?=
# `make bench-sweep` offers these loads (orders/s, open loop) and charts the latency.
SWEEP_RATES ?= 250,500,1000,1500,2000,2500,3000,3500,4000,4500,5000

##@ General

# A heading prints with its first described target, so that a section of file targets only (Tools)
# does not show as an empty heading.
.PHONY: help
help: ## Show this help.
	@awk 'BEGIN {FS = ":.*##"; printf "Usage: make <target>\n"} \
		/^##@/ { heading = substr($$0, 5) } \
		/^[a-zA-Z_0-9-]+:.*?##/ { \
			if (heading != "") printf "\n\033[1m%s\033[0m\n", heading; \
			heading = ""; printf "  \033[36m%-12s\033[0m %s\n", $$1, $$2 }' $(MAKEFILE_LIST)

##@ Development

.PHONY: run
run: build postgres ## Run the whole exchange on this machine (pmx dev) on a private Postgres under .pmx/; RUN_FLAGS adds flags (e.g. --addr).
	$(PMX) dev $(RUN_FLAGS)

.PHONY: demo
demo: build postgres ## Run pmx dev with the example market maker and three noise traders on its first open market (Ctrl-C stops all); DEMO_ADDR, DEMO_METRICS_ADDR, DEMO_DATA_DIR, DEMO_PMX_FLAGS (see the Makefile) give it its own.
	$(GO) build -o $(BIN)/marketmaker ./examples/marketmaker
	$(GO) build -o $(BIN)/noisetrader ./examples/noisetrader
	BIN=$(BIN) hack/demo.sh

.PHONY: test
test: postgres chromium jq helm promtool k8s-bins ## Run all tests, with the race detector (hack/metricscheck's module too); then the Python SDK's.
	$(GO) test -race -count=1 -timeout $(TEST_TIMEOUT) $(TEST_FLAGS) ./...
	cd hack/metricscheck && $(GO) test -race -count=1 -timeout $(TEST_TIMEOUT) $(TEST_FLAGS) ./...
	@$(MAKE) --no-print-directory test-python

.PHONY: test-python
test-python: build postgres python-deps ## Run the Python SDK's tests (client/python) against a real pmx dev.
	$(PYTHON) -m pytest -q -p no:cacheprovider client/python/tests $(PYTEST_FLAGS)

.PHONY: bench
bench: build postgres ## Run the engine benchmarks (one core), then the whole exchange end to end (pmxtools bench): each mix, the feeds off, feed subscribers.
	$(GO) test -run '^$$' -bench . -benchmem -cpu 1 $(BENCH_FLAGS) ./engine/...
	$(PMXTOOLS) bench --floors --mix basic $(E2E_FLAGS)
	$(PMXTOOLS) bench --floors --mix basic --dev-arg=--no-event-log $(E2E_FLAGS)
	$(PMXTOOLS) bench --floors --mix market-maker $(E2E_FLAGS)
	$(PMXTOOLS) bench --floors --feed-subscribers 8 $(E2E_FLAGS)

.PHONY: bench-sweep
bench-sweep: build postgres ## Chart placement latency against offered load (SWEEP_RATES) into docs/latency.png.
	$(PMXTOOLS) bench --sweep $(SWEEP_RATES) --chart docs/latency.png $(E2E_FLAGS)

.PHONY: devbench
devbench: k8s-bins ## Pack pmx, pmxtools, Postgres, kube-apiserver and etcd for a bare 16-core device machine, one carry (bin/devbench; then hack/devbench/issue53.sh or issue17.sh there).
	hack/devbench/pack.sh $(KUBEBUILDER_ASSETS)

.PHONY: fuzz
fuzz: ## Fuzz the engine's submission path, the request decoders (every one that takes a time among them) and the feed's reader of client messages, FUZZTIME each (default 60s).
	$(GO) test -run '^$$' -timeout 0 -fuzz FuzzSubmit -fuzztime $${FUZZTIME:-60s} ./engine
	$(GO) test -run '^$$' -timeout 0 -fuzz FuzzDecodeOrder -fuzztime $${FUZZTIME:-60s} ./apiserver
	$(GO) test -run '^$$' -timeout 0 -fuzz FuzzObjectString -fuzztime $${FUZZTIME:-60s} ./apiserver
	$(GO) test -run '^$$' -timeout 0 -fuzz FuzzParseRequest -fuzztime $${FUZZTIME:-60s} ./apiserver
	$(GO) test -run '^$$' -timeout 0 -fuzz FuzzCandleWindow -fuzztime $${FUZZTIME:-60s} ./apiserver
	$(GO) test -run '^$$' -timeout 0 -fuzz FuzzDecodeMarket -fuzztime $${FUZZTIME:-60s} ./apiserver

.PHONY: lint
lint: $(STATICCHECK) lint-api ## Check formatting, go vet and staticcheck; lint the API documents.
	@unformatted=$$(gofmt -l $$(git ls-files '*.go')); \
	if [ -n "$$unformatted" ]; then echo "gofmt would change:"; echo "$$unformatted"; exit 1; fi
	$(GO) vet ./...
	$(STATICCHECK) ./...
	cd hack/metricscheck && $(GO) vet ./... && $(STATICCHECK) ./...
	cd hack/kind && $(GO) vet ./... && $(STATICCHECK) ./...

.PHONY: lint-api
lint-api: $(REDOCLY) ## Lint the OpenAPI (public, admin) and AsyncAPI documents under apiserver/ with Redocly CLI (redocly.yaml).
	REDOCLY_SUPPRESS_UPDATE_NOTICE=true $(REDOCLY) lint --format=stylish

.PHONY: fmt
fmt: ## Format all Go code.
	gofmt -w $$(git ls-files '*.go')

# The PostgreSQL server binaries pmx dev and the tests start their private clusters from: on PATH
# or under /usr/lib/postgresql/*/bin. Installed with apt when missing.
.PHONY: postgres
postgres:
	@if command -v initdb >/dev/null 2>&1 || ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1; then exit 0; fi; \
	echo "PostgreSQL server binaries not found: installing them with apt-get"; \
	SUDO=$$( [ "$$(id -u)" -eq 0 ] || echo sudo ); \
	$$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq postgresql

# Debian's python3 and the Python SDK's dependencies (client/python: httpx, websockets;
# cryptography for signed requests; pytest, PyYAML and mypy for its tests) as Debian packages,
# since PyPI is not reachable here. Installed with apt when missing.
.PHONY: python-deps
python-deps:
	@if $(PYTHON) -c 'import pip, httpx, websockets, pytest, yaml, mypy, cryptography' >/dev/null 2>&1; then exit 0; fi; \
	echo "The Python SDK's test dependencies are missing: installing $(PYTHON_DEBS) with apt-get"; \
	SUDO=$$( [ "$$(id -u)" -eq 0 ] || echo sudo ); \
	$$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq $(PYTHON_DEBS)

# Debian's chromium, which the browser tests (internal/browsertest) drive headless through chromedp.
# Installed with apt when missing.
.PHONY: chromium
chromium:
	@if [ -x /usr/bin/chromium ]; then exit 0; fi; \
	echo "Chromium not found: installing it with apt-get"; \
	SUDO=$$( [ "$$(id -u)" -eq 0 ] || echo sudo ); \
	$$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq chromium

# jq, with which the README's quickstart reads the API's answers; internal/doctest runs the
# quickstart. Installed with apt when missing.
.PHONY: jq
jq:
	@if command -v jq >/dev/null 2>&1; then exit 0; fi; \
	echo "jq not found: installing it with apt-get"; \
	SUDO=$$( [ "$$(id -u)" -eq 0 ] || echo sudo ); \
	$$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq jq

##@ Build

.PHONY: build
build: ## Build bin/pmx (the exchange, what the image carries) and bin/pmxtools (load generator, benchmarks, demo).
	$(GO) build -o $(PMX) ./cmd/pmx
	$(GO) build -o $(PMXTOOLS) ./cmd/pmxtools

.PHONY: clean
clean: ## Remove build outputs and tools.
	rm -rf $(BIN)

##@ Tools

.PHONY: promtool
promtool: $(PROMTOOL) $(PROMETHEUS) ## Install the pinned promtool and Prometheus into bin/ (once), for the tests of the chart's alerts and dashboard.

$(PROMTOOL):
	@mkdir -p $(BIN)
	GOBIN=$(BIN) $(GO) install -tags=$(PROMTOOL_TAGS) github.com/prometheus/prometheus/cmd/promtool@$(PROMTOOL_VERSION)
	mv $(BIN)/promtool $@

$(PROMETHEUS): $(PROMTOOL)
	GOBIN=$(BIN) $(GO) install -tags=$(PROMTOOL_TAGS) github.com/prometheus/prometheus/cmd/prometheus@$(PROMTOOL_VERSION)
	mv $(BIN)/prometheus $@

$(STATICCHECK):
	@mkdir -p $(BIN)
	GOBIN=$(BIN) $(GO) install honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION)
	mv $(BIN)/staticcheck $@

# npm (and the Node.js it runs on: Redocly CLI wants 20.19 or later) is Debian's, installed with apt
# when missing. The pinned version's tarball is checked against the registry's integrity hash.
$(REDOCLY):
	@command -v npm >/dev/null 2>&1 || { \
		echo "npm not found: installing Debian's npm with apt-get"; \
		SUDO=$$( [ "$$(id -u)" -eq 0 ] || echo sudo ); \
		$$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq npm; }
	@mkdir -p $(BIN)/redocly-$(REDOCLY_VERSION)
	npm install --prefix $(BIN)/redocly-$(REDOCLY_VERSION) --no-save --no-audit --no-fund --loglevel=error \
		@redocly/cli@$(REDOCLY_VERSION)

##@ Code generation

# controller-gen writes the deepcopy methods of api/ and the CRD manifests under config/crd/bases.
# api/v1alpha1/generated_test.go reads this version and fails when the committed output is stale.
CONTROLLER_GEN_VERSION := v0.23.0
CONTROLLER_GEN := $(BIN)/controller-gen-$(CONTROLLER_GEN_VERSION)

.PHONY: manifests
manifests: $(CONTROLLER_GEN) ## Generate the CRD (config/crd/bases) and the operator's RBAC (config/rbac).
	$(CONTROLLER_GEN) crd paths=./api/... output:crd:artifacts:config=config/crd/bases
	$(CONTROLLER_GEN) rbac:roleName=pmx-operator paths=./controllers/... output:rbac:artifacts:config=config/rbac
	mkdir -p charts/pmx/crds && cp config/crd/bases/*.yaml charts/pmx/crds/

.PHONY: generate
generate: $(CONTROLLER_GEN) ## Generate the deepcopy methods of the api/ types (zz_generated.deepcopy.go).
	$(CONTROLLER_GEN) object paths=./api/...

$(CONTROLLER_GEN):
	@mkdir -p $(BIN)
	GOBIN=$(BIN) $(GO) install sigs.k8s.io/controller-tools/cmd/controller-gen@$(CONTROLLER_GEN_VERSION)
	mv $(BIN)/controller-gen $@

##@ Kubernetes test binaries

# The tests run a real kube-apiserver and etcd (controller-runtime envtest) and a real kubectl. No
# binary download reaches this network, so they are built from source through the Go module proxy by
# the throwaway modules hack/k8s and hack/etcd, whose go.mod and go.sum pin every version, into
# bin/k8s/<kubernetes version>/: once (minutes), then never again while they exist. internal/k8stest
# finds them there by itself; KUBEBUILDER_ASSETS, when set, points the tests at other binaries and
# `make k8s-bins` then builds nothing. Otherwise it is exported for envtest suites that read it.
K8S_VERSION  := $(shell awk '$$1 == "k8s.io/kubernetes" { print $$2 }' hack/k8s/go.mod)
ETCD_VERSION := $(shell awk '$$1 == "go.etcd.io/etcd/server/v3" { print $$2 }' hack/etcd/go.mod)
K8S_BINS     := $(BIN)/k8s/$(K8S_VERSION)
# The node's binaries of `make cluster-bins`, built from the same module (below).
K8S_NODE_BINS := kubelet kube-scheduler kube-controller-manager kube-proxy
# What `kube-apiserver --version` and `kubectl version` report, as kubernetes' hack/lib/version.sh
# stamps it; the build date is the release's, so that the build is reproducible.
K8S_VERSION_VARS = gitVersion=$(K8S_VERSION) gitMajor=$(word 1,$(subst ., ,$(K8S_VERSION:v%=%))) \
	gitMinor=$(word 2,$(subst ., ,$(K8S_VERSION))) gitTreeState=clean buildDate=$$date
K8S_LDFLAGS = -s -w $(foreach pkg,k8s.io/component-base/version k8s.io/client-go/pkg/version, \
	$(foreach var,$(K8S_VERSION_VARS),-X $(pkg).$(var)))
K8S_GO_BUILD := CGO_ENABLED=0 $(GO) build -trimpath

.PHONY: k8s-bins
k8s-bins: ## Build kube-apiserver, etcd and kubectl for the tests into bin/k8s/ (once).
ifeq ($(strip $(KUBEBUILDER_ASSETS)),)
export KUBEBUILDER_ASSETS := $(K8S_BINS)
k8s-bins: $(K8S_BINS)/kube-apiserver $(K8S_BINS)/etcd $(K8S_BINS)/kubectl
else
k8s-bins:
	@echo "KUBEBUILDER_ASSETS is set: the tests use the binaries in $(KUBEBUILDER_ASSETS)"
endif

$(K8S_BINS)/kube-apiserver $(K8S_BINS)/kubectl $(K8S_BINS)/kubeadm $(addprefix $(K8S_BINS)/,$(K8S_NODE_BINS)):
	@echo "building $(@F) $(K8S_VERSION) from source into $(@D), $(if $(filter kube-apiserver,$(@F)),about 5 minutes of 2 cores,about a minute after kube-apiserver) the first time"
	@mkdir -p $(@D)
	@date=$$(cd hack/k8s && $(GO) list -m -f '{{.Time.UTC.Format "2006-01-02T15:04:05Z"}}' k8s.io/kubernetes); \
	cd hack/k8s && $(K8S_GO_BUILD) -ldflags "$(K8S_LDFLAGS)" -o $@.tmp k8s.io/kubernetes/cmd/$(@F)
	@mv $@.tmp $@

$(K8S_BINS)/etcd:
	@echo "building etcd $(ETCD_VERSION) from source into $(@D), about a minute the first time"
	@mkdir -p $(@D)
	@cd hack/etcd && $(K8S_GO_BUILD) -ldflags "-s -w" -o $@.tmp go.etcd.io/etcd/server/v3
	@mv $@.tmp $@

# The one-node cluster of `make test-cluster` (hack/cluster) also needs the node's binaries — from the
# same pinned module as kube-apiserver — and CoreDNS, from its own throwaway module hack/coredns.
COREDNS_VERSION := $(shell awk '$$1 == "github.com/coredns/coredns" { print $$2 }' hack/coredns/go.mod)
CLUSTER_BINS    := $(addprefix $(K8S_BINS)/,kube-apiserver etcd kubectl $(K8S_NODE_BINS) coredns)

.PHONY: cluster-bins
cluster-bins: $(CLUSTER_BINS) ## Build the one-node test cluster's Kubernetes binaries and CoreDNS into bin/k8s/ (once).

$(K8S_BINS)/coredns:
	@echo "building CoreDNS $(COREDNS_VERSION) from source into $(@D), about 5 minutes of 2 cores the first time"
	@mkdir -p $(@D)
	@cd hack/coredns && $(K8S_GO_BUILD) -ldflags "-s -w" -o $@.tmp github.com/coredns/coredns
	@mv $@.tmp $@

##@ Packaging

# The container image (Dockerfile: a static pmx, without pmxtools, on distroless, non-root; `make
# image` builds the same Dockerfile where no registry is reachable) and the Helm chart charts/pmx.
# `kind load docker-image $(IMG)` puts a built image on a kind cluster (README, "Run on
# Kubernetes"). helm is pinned and built from source through the Go module proxy into bin/, like the
# other tools; internal/charttest reads HELM_VERSION from here, so the tests run this same helm.
IMG ?= pmx:dev
HELM_VERSION := v4.3.1
HELM := $(BIN)/helm-$(HELM_VERSION)

.PHONY: docker-build
docker-build: ## Build the container image IMG (default pmx:dev) with Docker.
	docker build -t $(IMG) .

.PHONY: image
image: image-deps ## Build the image IMG from the Dockerfile with no registry (local bases, a private dockerd), and a test node's Postgres and pause images; saved to bin/images/.
	IMG=$(IMG) hack/image/build.sh

.PHONY: test-image
test-image: image-deps ## Build the images as `make image` does, then run each: pmx as 65532 read-only with no shell and no writable /tmp (migrate, api, shard on the Postgres image), Postgres, pause.
	IMG=$(IMG) hack/image/build.sh --test

# Debian's docker.io (`make image` runs a dockerd of its own for the build, then stops it),
# mmdebstrap (the root of its Postgres image) and busybox-static (the shell of its local Go base).
# Installed with apt when missing.
.PHONY: image-deps
image-deps:
	@if [ -x /usr/sbin/dockerd ] && [ -x /usr/bin/docker ] && [ -x /usr/bin/mmdebstrap ] && dpkg -s busybox-static >/dev/null 2>&1; then exit 0; fi; \
	echo "docker.io, mmdebstrap or busybox-static not found: installing them with apt-get"; \
	SUDO=$$( [ "$$(id -u)" -eq 0 ] || echo sudo ); \
	$$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq docker.io mmdebstrap busybox-static

.PHONY: helm
helm: $(HELM) ## Install the pinned helm into bin/ (once).

.PHONY: helm-lint
helm-lint: $(HELM) ## Lint charts/pmx with its default values and the tests' values files.
	$(HELM) lint --strict charts/pmx
	@for values in internal/charttest/testdata/values-*.yaml; do \
		echo "$(HELM) lint --strict charts/pmx -f $$values"; \
		$(HELM) lint --strict charts/pmx -f $$values; \
	done

# helm prints this version (`helm version`) only when the build stamps it, as helm's own Makefile does.
$(HELM):
	@mkdir -p $(BIN)
	GOBIN=$(BIN) $(GO) install -ldflags "-s -w -X helm.sh/helm/$(firstword $(subst ., ,$(HELM_VERSION)))/internal/version.version=$(HELM_VERSION)" \
		helm.sh/helm/$(firstword $(subst ., ,$(HELM_VERSION)))/cmd/helm@$(HELM_VERSION)
	mv $(BIN)/helm $@

##@ Test cluster

# A one-node Kubernetes cluster with real pods, from host processes (hack/cluster/cluster.sh): the
# binaries of `make cluster-bins`, Debian's containerd, runc and CNI plugins, the images of
# `make image`. All its state is under CLUSTER_DIR; `cluster-down` (and test-cluster, also after a
# failure) stops every process and undoes every change to the machine. It needs root.
CLUSTER_DIR ?= $(BIN)/.cluster
CLUSTER_DEBS := containerd runc containernetworking-plugins conntrack iptables nftables openssl curl python3
export CLUSTER_DIR

.PHONY: test-cluster
test-cluster: cluster-deps cluster-bins image helm ## Bring up the one-node cluster, run the chart's tests on real pods (internal/clustertest), take it down.
	HELM=$(HELM) hack/cluster/test.sh

.PHONY: cluster-up
cluster-up: cluster-deps cluster-bins image helm ## Bring up the one-node cluster and leave it running (kubeconfig in CLUSTER_DIR/kubeconfig).
	hack/cluster/cluster.sh up

.PHONY: cluster-down
cluster-down: ## Stop the one-node cluster and undo every change it made to the machine.
	hack/cluster/cluster.sh down

# Installed with apt when missing.
.PHONY: cluster-deps
cluster-deps:
	@missing=$$(for p in $(CLUSTER_DEBS); do dpkg -s $$p >/dev/null 2>&1 || echo $$p; done); \
	[ -z "$$missing" ] && exit 0; \
	echo "installing the test cluster's packages with apt-get:" $$missing; \
	SUDO=$$( [ "$$(id -u)" -eq 0 ] || echo sudo ); \
	$$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq $$missing

# CloudNativePG on the test cluster (internal/clustertest's CNPG scenario): the operator's manager
# binary at the release pinned by its own throwaway module hack/cnpg (go install ...@version cannot
# be used: the module proxy refuses the @v/list it asks for), built into bin/cnpg/ — a cold build
# (empty GOCACHE) took 9 min 36 s of wall clock on a 2-core machine that others loaded to a load
# average of 14 (205 s user + 49 s system CPU: about 3 minutes alone on 2 cores) — then its
# operator image and a Postgres operand image from Debian's packages (`make cnpg-images`:
# hack/image/build.sh --cnpg, into bin/images/ beside pmx's, so the node imports them). Only the
# cluster targets need them: `make image` and `make test-image` stay as they were.
CNPG_VERSION := $(shell awk '{ for (i = 1; i < NF; i++) if ($$i == "github.com/cloudnative-pg/cloudnative-pg") { print $$(i+1); exit } }' hack/cnpg/go.mod)
CNPG_BINS    := $(BIN)/cnpg/$(CNPG_VERSION)
CNPG_MANAGER := $(CNPG_BINS)/manager

.PHONY: cnpg-bins
cnpg-bins: $(CNPG_MANAGER) ## Build the CloudNativePG operator's manager binary into bin/cnpg/ (once).

$(CNPG_MANAGER):
	@echo "building CloudNativePG $(CNPG_VERSION)'s manager from source into $(@D), about 3 minutes of 2 cores the first time"
	@mkdir -p $(@D)
	@cd hack/cnpg && $(K8S_GO_BUILD) -ldflags "-s -w" -o $@.tmp github.com/cloudnative-pg/cloudnative-pg/cmd/manager
	@mv $@.tmp $@

# The operator's manifests as the release ships them (its CRDs, RBAC, webhooks and Deployment: the
# module's config/default rendered by kubectl's kustomize), running the local image, never pulled;
# internal/clustertest applies them.
CNPG_MANIFEST := $(CNPG_BINS)/operator.yaml
$(CNPG_MANIFEST): hack/cnpg/go.mod $(K8S_BINS)/kubectl
	@mkdir -p $(@D)
	dir=$$(cd hack/cnpg && $(GO) list -m -f '{{.Dir}}' github.com/cloudnative-pg/cloudnative-pg) && \
	$(K8S_BINS)/kubectl kustomize "$$dir/config/default" 2>/dev/null | \
		sed -e 's|controller:latest|pmx-local/cnpg:$(CNPG_VERSION:v%=%)|' -e 's|imagePullPolicy: Always|imagePullPolicy: Never|' >$@.tmp
	@grep -q 'image: pmx-local/cnpg:' $@.tmp || { echo "$@: the rendered manifests name no local operator image" >&2; exit 1; }
	@mv $@.tmp $@

.PHONY: cnpg-images
# After image: both run a private dockerd on the same state, one at a time.
cnpg-images: image-deps cnpg-bins image $(CNPG_MANIFEST) ## Build the CloudNativePG operator and Postgres operand images into bin/images/ (for the test cluster).
	CNPG_MANAGER=$(CNPG_MANAGER) CNPG_VERSION=$(CNPG_VERSION) hack/image/build.sh --cnpg

test-cluster cluster-up: cnpg-images

##@ kind

# kind for real where no registry is reachable (hack/kind/kind.sh; docs/kubernetes.md, "kind without
# a registry"): kind and the local-path-provisioner of its node image, built from the throwaway
# module hack/kind that pins them, into KIND_DIR/bin/ (once); a node image made from Debian's
# packages, kind's base files and the binaries of `make cluster-bins`, kept in the Docker engine's
# state; a dockerd of its own (its state in KIND_DIR) where none answers. `make test-kind` runs the
# docs' blocks marked <!-- test: kind --> and leaves the machine as it found it.
KIND_DIR ?= $(BIN)/kind
KIND_VERSION := $(shell awk '$$1 == "sigs.k8s.io/kind" && $$2 ~ /^v/ { print $$2 }' hack/kind/go.mod)
LPP_VERSION  := $(shell awk '$$1 == "github.com/rancher/local-path-provisioner" && $$2 ~ /^v/ { print $$2 }' hack/kind/go.mod)
KIND := $(KIND_DIR)/bin/kind-$(KIND_VERSION)
LPP  := $(KIND_DIR)/bin/local-path-provisioner-$(LPP_VERSION)
KIND_DEBS := docker.io mmdebstrap busybox-static jq curl
export KIND_DIR

.PHONY: kind
kind: kind-images helm ## Create the kind cluster of docs/kubernetes.md with no registry (node image built locally) and leave it up (docs/kubernetes.md says how to use it).
	HELM=$(HELM) hack/kind/kind.sh up

.PHONY: kind-down
kind-down: ## Delete the kind cluster, stop the dockerd kind.sh started (if it did) and remove what it added to the machine.
	hack/kind/kind.sh down

.PHONY: test-kind
test-kind: kind-images helm image jq ## Run docs/kubernetes.md's kind commands (create, load, helm install, samples, a trade through the API Service, delete) with no registry.
	HELM=$(HELM) hack/kind/kind.sh test

.PHONY: kind-images
kind-images: kind-deps cluster-bins $(K8S_BINS)/kubeadm $(KIND) $(LPP) ## Build kind and its node image from local parts (once), starting a dockerd of its own if none answers.
	hack/kind/kind.sh images

$(KIND):
	@echo "building kind $(KIND_VERSION) from source into $(@D)"
	@mkdir -p $(@D)
	@cd hack/kind && $(K8S_GO_BUILD) -ldflags "-s -w" -o $@.tmp sigs.k8s.io/kind
	@mv $@.tmp $@

$(LPP):
	@echo "building local-path-provisioner $(LPP_VERSION) from source into $(@D), about 2 minutes of 2 cores the first time"
	@mkdir -p $(@D)
	@cd hack/kind && $(K8S_GO_BUILD) -ldflags "-s -w" -o $@.tmp github.com/rancher/local-path-provisioner
	@mv $@.tmp $@

# Installed with apt when missing.
.PHONY: kind-deps
kind-deps:
	@missing=$$(for p in $(KIND_DEBS); do dpkg -s $$p >/dev/null 2>&1 || echo $$p; done); \
	[ -z "$$missing" ] && exit 0; \
	echo "installing kind's packages with apt-get:" $$missing; \
	SUDO=$$( [ "$$(id -u)" -eq 0 ] || echo sudo ); \
	$$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq $$missing
