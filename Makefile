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

.PHONY: cluster-tools bench-controller images crane containerd chromium all build manifests chart generate test unit lint fmt vet run-controller run-daemon scenario tools clean help

all: build

help: ## Show the targets.
	@grep -hE '^[a-zA-Z_-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-16s %s\n", $$1, $$2}'

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

# scenario and bench: the digital twin (hack/scenario.mk).
-include hack/scenario.mk
