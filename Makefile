# bootroll — see README.md. Every tool is built from a pinned Go module into
# bin/ (git-ignored); file targets make a second run reuse them.
SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c

BIN        := $(CURDIR)/bin
K8S_BIN    := $(BIN)/k8s
TOOLS_MOD  := hack/tools/go.mod
K8S_VERSION := v1.37.2
CONTROLLER_GEN := $(BIN)/controller-gen
CRANE      := $(BIN)/crane
IMAGES_DIR := $(BIN)/images
# The twin explorer and the envtest suites take minutes on a loaded 2-core
# machine: a per-package limit above go test's 10-minute default.
GO_TEST_FLAGS ?= -timeout 25m
export KUBEBUILDER_ASSETS := $(K8S_BIN)
# envtest gives kube-apiserver 20 s to start by default; on a loaded
# 2-core machine it took longer five times in a row (sim/clusterrun,
# TestChaosModeWithoutChaosMesh). A minute, unless set.
export KUBEBUILDER_CONTROLPLANE_START_TIMEOUT ?= 60s

.PHONY: cluster-tools karpenter-v1.14 kind-up kind-deploy kind-scenario kind-down bench-controller images crane containerd chromium all build manifests chart generate test unit lint fmt vet run-controller run-daemon scenario tools clean help

all: build

help: ## Show the targets.
	@grep -hE '^[a-zA-Z0-9_.-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-16s %s\n", $$1, $$2}'

build: ## Build the binaries into bin/.
	go build -o $(BIN)/ ./cmd/...

$(CONTROLLER_GEN): $(TOOLS_MOD)
	cd hack/tools && go build -o $@ sigs.k8s.io/controller-tools/cmd/controller-gen

# Without the version the servers report v0.0.0-master, which kubectl and
# client-go's discovery cannot parse.
K8S_LDFLAGS := -s -w -X k8s.io/component-base/version.gitVersion=$(K8S_VERSION) -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=37

$(K8S_BIN)/kube-apiserver: $(TOOLS_MOD)
	@echo ">> building kube-apiserver $(K8S_VERSION) from k8s.io/kubernetes (about 4-8 minutes the first time)"
	mkdir -p $(K8S_BIN)
	cd hack/tools && CGO_ENABLED=0 go build -trimpath -ldflags "$(K8S_LDFLAGS)" -o $@ k8s.io/kubernetes/cmd/kube-apiserver

# kube-controller-manager and kube-scheduler: the same module and version as
# kube-apiserver (bootroll cluster up).
$(K8S_BIN)/kube-controller-manager $(K8S_BIN)/kube-scheduler: $(K8S_BIN)/%: $(TOOLS_MOD)
	@echo ">> building $* $(K8S_VERSION) from k8s.io/kubernetes (about 3-4 minutes the first time)"
	mkdir -p $(K8S_BIN)
	cd hack/tools && CGO_ENABLED=0 go build -trimpath -ldflags "$(K8S_LDFLAGS)" -o $@ k8s.io/kubernetes/cmd/$*

# kwok and Karpenter's KWOK provider: modules of their own (hack/tools/kwok,
# hack/tools/karpenter) so they build with their own dependency versions;
# karpenter v1.15.0 needs Go 1.26.9+, so only that build uses go1.27.3 (the
# go command fetches that toolchain from the module proxy once).
KWOK_MOD      := hack/tools/kwok/go.mod
KARPENTER_MOD := hack/tools/karpenter/go.mod
KARPENTER_GOTOOLCHAIN := go1.27.3

$(K8S_BIN)/kwok: $(KWOK_MOD)
	@echo ">> building kwok from sigs.k8s.io/kwok (about 1 minute the first time)"
	mkdir -p $(K8S_BIN)
	cd hack/tools/kwok && CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o $@ sigs.k8s.io/kwok/cmd/kwok

$(K8S_BIN)/karpenter-kwok: $(KARPENTER_MOD)
	@echo ">> building karpenter-kwok from sigs.k8s.io/karpenter/kwok with $(KARPENTER_GOTOOLCHAIN) (about 2 minutes the first time)"
	mkdir -p $(K8S_BIN)
	cd hack/tools/karpenter && GOTOOLCHAIN=$(KARPENTER_GOTOOLCHAIN) CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o $@ sigs.k8s.io/karpenter/kwok

# Karpenter v1.14.3's KWOK provider, for scenarios that set
# karpenter.version=v1.14 on the cluster target (make e2e, make fidelity;
# not make test, which runs no such scenario).
KARPENTER_V114_MOD := hack/tools/karpenter-v1.14/go.mod
$(K8S_BIN)/karpenter-kwok-v1.14: $(KARPENTER_V114_MOD)
	@echo ">> building karpenter-kwok v1.14.3 from sigs.k8s.io/karpenter/kwok with $(KARPENTER_GOTOOLCHAIN) (about 2 minutes the first time)"
	mkdir -p $(K8S_BIN)
	cd hack/tools/karpenter-v1.14 && GOTOOLCHAIN=$(KARPENTER_GOTOOLCHAIN) CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o $@ sigs.k8s.io/karpenter/kwok

karpenter-v1.14: $(K8S_BIN)/karpenter-kwok-v1.14 ## Build Karpenter v1.14.3's KWOK provider into bin/k8s/ (scenarios with karpenter.version=v1.14 on --target cluster).

CLUSTER_TOOLS := $(K8S_BIN)/etcd $(K8S_BIN)/kube-apiserver $(K8S_BIN)/kube-controller-manager $(K8S_BIN)/kube-scheduler $(K8S_BIN)/kwok $(K8S_BIN)/karpenter-kwok

cluster-tools: $(CLUSTER_TOOLS) ## Build etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kwok and karpenter-kwok into bin/k8s/ (bootroll cluster up).

$(K8S_BIN)/etcd: $(TOOLS_MOD)
	@echo ">> building etcd from go.etcd.io/etcd/server/v3"
	mkdir -p $(K8S_BIN)
	cd hack/tools && CGO_ENABLED=0 go build -trimpath -o $@ go.etcd.io/etcd/server/v3

$(CRANE): $(TOOLS_MOD)
	cd hack/tools && CGO_ENABLED=0 go build -trimpath -o $@ github.com/google/go-containerregistry/cmd/crane

crane: $(CRANE) ## Build crane (push the images to a registry) into bin/.

images: ## Build the controller and daemon images (linux/amd64, linux/arm64) as OCI layouts and archives in bin/images/.
	go run ./hack/images --out $(IMAGES_DIR)

tools: $(CONTROLLER_GEN) $(K8S_BIN)/kube-apiserver $(K8S_BIN)/etcd ## Build controller-gen, kube-apiserver and etcd into bin/.

generate: $(CONTROLLER_GEN) ## Generate deepcopy code.
	$(CONTROLLER_GEN) object paths=./api/...

manifests: generate ## Generate CRDs and the controller's RBAC into config/.
	$(CONTROLLER_GEN) crd paths=./api/... output:crd:artifacts:config=config/crd/bases
	$(CONTROLLER_GEN) rbac:roleName=bootroll-controller paths=./controller/... output:rbac:artifacts:config=config/rbac
	$(MAKE) chart

chart: ## Copy the generated CRDs and the alert rules from config/ into charts/bootroll (a test fails when they differ).
	rm -f charts/bootroll/crds/*.yaml
	cp config/crd/bases/*.yaml charts/bootroll/crds/
	mkdir -p charts/bootroll/files/rbac
	cp config/prometheus/prometheusrule.yaml charts/bootroll/files/prometheusrule.yaml
	# controller-gen's role.yaml holds the ClusterRole, then the Roles in
	# bootroll-pull-secrets and bootroll-system, in that order.
	awk '/^---$$/{n++; next} {print > ("charts/bootroll/files/rbac/controller-" n ".yaml")}' config/rbac/role.yaml
	cp config/rbac/daemon_role.yaml charts/bootroll/files/rbac/daemon.yaml
	awk '/^---$$/{exit} {print}' config/rbac/daemon_status_policy.yaml > charts/bootroll/files/rbac/daemon-policy.yaml

fmt: ## Format the code.
	gofmt -w $$(git ls-files '*.go')

vet: ## go vet.
	go vet ./...

lint: ## gofmt check and go vet.
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	go vet ./...

containerd: ## Make sure containerd is installed (Debian's package; needs root to install).
	bash hack/ensure-containerd.sh

chromium: ## Make sure Chromium is installed for the what-if report test (Debian's package; needs root to install).
	bash hack/ensure-chromium.sh

test: tools cluster-tools containerd chromium ## Run every test: unit, envtest on a real kube-apiserver + etcd, a local control plane with real Karpenter (bootroll cluster up), CRI on a real containerd, report.html in headless Chromium.
	go test $(GO_TEST_FLAGS) ./...

unit: ## Run the tests that need no API server (fast).
	go test $(GO_TEST_FLAGS) -short ./...

run-controller: manifests ## Run the controller against the cluster of $KUBECONFIG.
	go run ./cmd/bootroll-controller --kubeconfig="$${KUBECONFIG:-$$HOME/.kube/config}"

run-daemon: ## Run the daemon for $NODE_NAME against $KUBECONFIG (on a bootc host).
	go run ./cmd/bootroll-daemon --node-name="$${NODE_NAME:?set NODE_NAME}"

BENCH_NODES ?= 5000
BENCH_PODS_PER_NODE ?= 30
bench-controller: $(K8S_BIN)/kube-apiserver $(K8S_BIN)/etcd ## Measure the controller binary on a real kube-apiserver with 5,000 Nodes and 150,000 Pods: RSS and API requests/s, idle and in a rollout step (not in make test; ~15 min).
	go build -o $(BIN)/bootroll-controller ./cmd/bootroll-controller
	go build -o $(BIN)/bench-controller ./hack/bench-controller
	timeout 1800 $(BIN)/bench-controller --controller=$(BIN)/bootroll-controller --nodes=$(BENCH_NODES) --pods-per-node=$(BENCH_PODS_PER_NODE)

clean: ## Remove bin/.
	rm -rf $(BIN)

# kind: a local cluster in Docker (kind/README.md). Each target needs a
# running Docker engine, kind and kubectl; the development machines have
# none (docker there is only a client), so the targets check first.
KIND            ?= kind
KIND_CLUSTER    ?= bootroll
KIND_DIR        := $(BIN)/kind
KIND_KUBECONFIG ?= $(KIND_DIR)/kubeconfig
KIND_SCENARIO   ?= scenarios/plain-rollout-10.yaml
KIND_IMAGES     := bootroll-controller bootroll
KIND_NEEDS_DOCKER = @docker info >/dev/null 2>&1 || { echo "$@: docker info failed: this target needs a running Docker engine (and kind and kubectl on PATH); see kind/README.md" >&2; exit 1; }

kind-up: ## Create the kind cluster of kind/cluster.yaml (1 control plane, 3 workers); needs Docker and kind.
	$(KIND_NEEDS_DOCKER)
	mkdir -p $(KIND_DIR)
	$(KIND) create cluster --config kind/cluster.yaml --name $(KIND_CLUSTER) --kubeconfig $(KIND_KUBECONFIG)
	@echo "kubeconfig: $(KIND_KUBECONFIG)"

kind-deploy: ## Build the images (make images), load them into the kind cluster and apply kind/overlay (daemon in host mode).
	$(KIND_NEEDS_DOCKER)
	$(MAKE) images
	mkdir -p $(KIND_DIR)
	for c in $(KIND_IMAGES); do \
	  go run ./kind/retag --in $(IMAGES_DIR)/$$c.oci.tar --out $(KIND_DIR)/$$c.oci.tar --name kind.local/bootroll/$$c:dev; \
	  $(KIND) load image-archive --name $(KIND_CLUSTER) $(KIND_DIR)/$$c.oci.tar; \
	done
	kubectl --kubeconfig $(KIND_KUBECONFIG) apply --server-side -k kind/overlay
	kubectl --kubeconfig $(KIND_KUBECONFIG) -n bootroll-system rollout status deployment/bootroll-controller --timeout=3m
	kubectl --kubeconfig $(KIND_KUBECONFIG) -n bootroll-system rollout status daemonset/bootroll-daemon --timeout=3m

kind-scenario: ## Run scenario KIND_SCENARIO (default plain-rollout-10) on the kind cluster: bootroll scenario run FILE --target cluster.
	$(KIND_NEEDS_DOCKER)
	go run ./cmd/bootroll scenario run $(KIND_SCENARIO) --target cluster --kubeconfig $(KIND_KUBECONFIG) --controller external --daemon external

kind-down: ## Delete the kind cluster.
	$(KIND_NEEDS_DOCKER)
	$(KIND) delete cluster --name $(KIND_CLUSTER) --kubeconfig $(KIND_KUBECONFIG)

# scenario and bench: the digital twin (hack/scenario.mk).
-include hack/scenario.mk
