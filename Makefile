# pmx — build, run and test the exchange. `make help` lists the targets.

SHELL := /usr/bin/env bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := help

GO       ?= go
BIN      := $(CURDIR)/bin
PMX      := $(BIN)/pmx

# Pinned tool versions, installed into bin/ on first use.
STATICCHECK_VERSION := v0.8.2
STATICCHECK := $(BIN)/staticcheck-$(STATICCHECK_VERSION)

# `make run` passes RUN_FLAGS to pmx dev (e.g. RUN_FLAGS="--addr 127.0.0.1:9090").
RUN_FLAGS ?=
# `make test` runs every test, under the race detector; TEST_FLAGS adds more (e.g. -run Engine).
TEST_FLAGS ?=
# `make bench` runs the engine benchmarks on one core; BENCH_FLAGS adds more (e.g. -count 6).
BENCH_FLAGS ?= -benchtime 2s

##@ General

.PHONY: help
help: ## Show this help.
	@awk 'BEGIN {FS = ":.*##"; printf "Usage: make <target>\n"} \
		/^[a-zA-Z_0-9-]+:.*?##/ { printf "  \033[36m%-12s\033[0m %s\n", $$1, $$2 } \
		/^##@/ { printf "\n\033[1m%s\033[0m\n", substr($$0, 5) }' $(MAKEFILE_LIST)

##@ Development

.PHONY: run
run: build postgres ## Run the whole exchange on this machine (pmx dev) on a private Postgres under .pmx/.
	$(PMX) dev $(RUN_FLAGS)

.PHONY: test
test: postgres ## Run all tests, with the race detector.
	$(GO) test -race -count=1 $(TEST_FLAGS) ./...

.PHONY: bench
bench: ## Run the benchmarks (one core, allocations shown).
	$(GO) test -run '^$$' -bench . -benchmem -cpu 1 $(BENCH_FLAGS) ./engine/...

.PHONY: fuzz
fuzz: ## Fuzz the engine's submission path and the order decoder, FUZZTIME each (default 60s).
	$(GO) test -run '^$$' -fuzz FuzzSubmit -fuzztime $${FUZZTIME:-60s} ./engine
	$(GO) test -run '^$$' -fuzz FuzzDecodeOrder -fuzztime $${FUZZTIME:-60s} ./apiserver

.PHONY: lint
lint: $(STATICCHECK) ## Check formatting, go vet and staticcheck.
	@unformatted=$$(gofmt -l $$(git ls-files '*.go')); \
	if [ -n "$$unformatted" ]; then echo "gofmt would change:"; echo "$$unformatted"; exit 1; fi
	$(GO) vet ./...
	$(STATICCHECK) ./...

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

##@ Build

.PHONY: build
build: ## Build bin/pmx.
	$(GO) build -o $(PMX) ./cmd/pmx

.PHONY: clean
clean: ## Remove build outputs and tools.
	rm -rf $(BIN)

##@ Tools

$(STATICCHECK):
	@mkdir -p $(BIN)
	GOBIN=$(BIN) $(GO) install honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION)
	mv $(BIN)/staticcheck $@

##@ Code generation

# controller-gen writes the deepcopy methods of api/ and the CRD manifests under config/crd/bases.
# api/v1alpha1/generated_test.go reads this version and fails when the committed output is stale.
CONTROLLER_GEN_VERSION := v0.23.0
CONTROLLER_GEN := $(BIN)/controller-gen-$(CONTROLLER_GEN_VERSION)

.PHONY: manifests
manifests: $(CONTROLLER_GEN) ## Generate the CRD manifests in config/crd/bases from api/.
	$(CONTROLLER_GEN) crd paths=./api/... output:crd:artifacts:config=config/crd/bases

.PHONY: generate
generate: $(CONTROLLER_GEN) ## Generate the deepcopy methods of the api/ types (zz_generated.deepcopy.go).
	$(CONTROLLER_GEN) object paths=./api/...

$(CONTROLLER_GEN):
	@mkdir -p $(BIN)
	GOBIN=$(BIN) $(GO) install sigs.k8s.io/controller-tools/cmd/controller-gen@$(CONTROLLER_GEN_VERSION)
	mv $(BIN)/controller-gen $@
