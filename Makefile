# Serverless Manager — see README.md. Every target builds what it needs itself.
SHELL := /usr/bin/env bash
.SHELLFLAGS := -eu -o pipefail -c
export GOTOOLCHAIN := local
# Every build and test compiles alike (static, reproducible paths, as the
# images ship), so tests, `make build` and `make image` share one build cache
# instead of compiling every package twice.
export CGO_ENABLED := 0
export GOFLAGS := $(strip $(GOFLAGS) -trimpath)
# Go's FIPS 140-3 module v1.0.0 (docs/contributor/fips.md), for tests too:
# it replaces the crypto packages' source, so a test built without it would
# compile a second copy of every package that links crypto (nearly all).
export GOFIPS140 := v1.0.0

ASSETS := $(CURDIR)/bin/assets
export KUBEBUILDER_ASSETS := $(ASSETS)
GO_TEST_FLAGS ?= -count=1

.PHONY: all tools build image test test-unit test-e2e test-cgroup2 run bench cluster-up cluster-down manifests render docker-build module-template fuzz fmt vet

all: build

tools: ## build the control plane and tool binaries into bin/ (no-op when present)
	hack/tools.sh

build: ## every binary (operator/cmd/<name> → bin/<name>), built as in the images (static, no symbols, GOFIPS140): tests and bench measure what ships
	go build -ldflags "-s -w" -o bin/ ./operator/cmd/...

IMAGE_REPOSITORY ?= europe-docker.pkg.dev/kyma-project/prod
# The local registry image (bin/image/local/registry) is the registry binary
# hack/tools.sh builds (a no-op when built); the other tools are not needed.
image: ## the OCI image of every binary in bin/image/<name>/ (no container engine; push with skopeo or crane)
	hack/tools.sh registry >/dev/null
	go run ./hack/image -repository $(IMAGE_REPOSITORY)

manifests: tools ## regenerate CRDs and each binary's ClusterRole from controller-gen markers
	$(ASSETS)/controller-gen object paths=./operator/api/...
	hack/manifests.sh

# The unit tests run alongside the images and the e2e tests: the e2e tests
# mostly wait for the cluster (about half of two cores is idle), and the unit
# tests use what they leave. The e2e tests set how long make test takes, so
# their path goes first: before it only the cluster's tools are built, and
# the unit lane starts once the binaries and images are built (UNIT_AFTER),
# with controller-gen and helm (only unit tests use them) and then the
# tests, one package at a time (UNIT_P=1: two at once slowed the e2e builds
# by a third).
test: ## all three layers: unit and envtest integration tests alongside the images and the e2e tests
	hack/tools.sh cluster
	$(MAKE) --no-print-directory -j2 test-unit test-e2e UNIT_P=1 UNIT_AFTER="build image"

# go test runs packages in the order it is given them, two at a time on two
# cores: the longest ones go first so that none of them is left running alone
# at the end.
SLOW_TEST_PACKAGES := ./operator/internal/manager/app ./operator/internal/manager/reconciler ./operator/internal/function/app ./operator/cmd/function-controller ./operator/internal/manager/render

test-unit: $(UNIT_AFTER) ## unit and envtest integration tests (UNIT_P=N: N packages at a time, default one per core)
	hack/tools.sh
	go test $(GO_TEST_FLAGS) $(if $(UNIT_P),-p $(UNIT_P)) $(SLOW_TEST_PACKAGES) ./...
	@echo "test-unit: passed"

test-e2e: build image ## end-to-end tests on the local cluster they start themselves (its real node runs the images of make image)
	go test $(GO_TEST_FLAGS) -tags e2e -timeout 70m -p 1 -parallel 7 -v ./tests/...

# cgroup v2 (unified) hosts: the real node in a QEMU guest of Debian's
# packages (hack/cgroup2.sh). The host may mount cgroup v1: make test runs
# the node there.
test-cgroup2: tools image ## the local cluster on cgroup v2, in a guest: make cluster-up, a Function that builds and answers, make cluster-down (builds the guest once into bin/cgroup2; needs root; installs qemu-system-x86 and debootstrap from Debian; 7–10 minutes under emulation, the first build 1.5–3 more)
	hack/cgroup2.sh

run: ## local cluster + manager + default CR until Ready (the Function controller and registry as the chart's Pods), then prints how to create and call a Function and returns; the cluster keeps running (also after Ctrl-C, unless it was still starting) until make cluster-down
	hack/run.sh

bench: tools build image ## install/idle/restart/change/delete figures on the local cluster, empty and at scale; memory with a busy module namespace; 300 Functions built and run, and run buildless; real builds with npm dependencies; a registry clean-up round; real Pods: start-up, scale-out and drift, build mode against buildless mode; scale to zero: wake-ups, a burst at zero, the latency added
	go run ./tests/bench
	go run ./tests/bench -scale
	go run ./tests/bench -busy-namespace
	go run ./tests/bench -functions
	go run ./tests/bench -builds
	go run ./tests/bench -cleanup
	go run ./tests/bench -pods
	go run ./tests/bench -zero

cluster-up: ## local control plane with a real node and simulated nodes under .cluster/ (no-op when healthy); prints KUBECONFIG
	hack/cluster.sh up

cluster-down: ## stop the local control plane and remove .cluster/
	hack/cluster.sh down

render: ## one install YAML on stdout (IMG=... sets the manager image)
	@go run ./hack/render

IMG ?= $(IMAGE_REPOSITORY)/serverless-manager:$(shell cat VERSION)
FUNCTION_CONTROLLER_IMG ?= $(IMAGE_REPOSITORY)/serverless-function-controller:$(shell cat VERSION)
REGISTRY_AGENT_IMG ?= $(IMAGE_REPOSITORY)/serverless-registry-agent:$(shell cat VERSION)
ACTIVATOR_IMG ?= $(IMAGE_REPOSITORY)/serverless-activator:$(shell cat VERSION)
DOCKER_BUILD = docker build --build-arg VERSION=$(shell cat VERSION) --build-arg REVISION=$(shell git rev-parse HEAD 2>/dev/null)
docker-build: ## the images `make image` builds, with a container engine
	$(DOCKER_BUILD) --build-arg BINARY=manager -t $(IMG) .
	$(DOCKER_BUILD) --build-arg BINARY=function-controller -t $(FUNCTION_CONTROLLER_IMG) .
	$(DOCKER_BUILD) --build-arg BINARY=registry-agent -t $(REGISTRY_AGENT_IMG) .
	$(DOCKER_BUILD) --build-arg BINARY=activator -t $(ACTIVATOR_IMG) .

module-template: ## module-template/ from VERSION and the default CR
	go run ./hack/moduletemplate

fuzz: ## run the fuzzers for a while (their seeds run in make test)
	go test ./operator/internal/manager/values -run XXX -fuzz FuzzBuild -fuzztime 60s

fmt:
	gofmt -w $$(git ls-files '*.go')

vet:
	go vet ./...
