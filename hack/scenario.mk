# Twin scenario targets, included from the Makefile:
#   make scenario   run every scenarios/*.yaml with its negative controls
#   make bench      the 1,000- and 10,000-node rollouts with --bench
#   make whatif-bench  the speed of a bootroll whatif sweep (issue 14's figure)
# Also usable alone: make -f Makefile -f hack/scenario.mk scenario
# Included once even when also named with -f.
ifndef BOOTROLL_SCENARIO_MK
BOOTROLL_SCENARIO_MK := 1

BIN ?= $(CURDIR)/bin
BOOTROLL := $(BIN)/bootroll
# scenarios/bench/ holds the benchmarks; make scenario leaves them out.
# scenarios/regressions/ holds the explorer's shrunk reproducers of bugs
# that were fixed; make scenario runs them too.
SHIPPED   := $(sort $(wildcard scenarios/*.yaml))
SCENARIOS := $(SHIPPED) $(sort $(wildcard scenarios/regressions/*.yaml))
BENCH_SCENARIOS := scenarios/bench/bench-1000.yaml scenarios/bench/bench-10000.yaml

# make explore: a long exploration; override EXPLORE_SEEDS, EXPLORE_FAULTS,
# EXPLORE_JOBS, EXPLORE_BUDGET, EXPLORE_OUT.
EXPLORE_SEEDS  ?= 2000
EXPLORE_FAULTS ?= all
EXPLORE_JOBS   ?= $(shell nproc 2>/dev/null || echo 2)
EXPLORE_BUDGET ?= 60m
EXPLORE_OUT    ?= out/explore

# make whatif-bench: issue 14's speed figure, 5 maxUnavailable values × 50
# seeds of a 200-node pool, with Karpenter consolidation on (pool-200) and
# without Karpenter (pool-200-static); override WHATIF_SCENARIOS,
# WHATIF_SEEDS, WHATIF_JOBS, WHATIF_OUT.
WHATIF_SCENARIOS ?= scenarios/whatif/pool-200-static.yaml scenarios/whatif/pool-200.yaml
WHATIF_SEEDS     ?= 50
WHATIF_JOBS      ?= $(shell nproc 2>/dev/null || echo 2)
WHATIF_OUT       ?= out/whatif-bench

# make whatif-examples: the example reports under docs/whatif-examples/
# (issue 14): maxUnavailable 1, 2, 5, 10, 20% on a 200-node pool with
# Karpenter consolidation on, and consolidateAfter 0s, 30s, 5m against
# postUpdateProtection off (0s) and on (5m, the default).
# WHATIF_EXAMPLE_SEEDS seeds per point. Exit status 1 (a run violated an
# invariant) is expected of the unprotected runs and is not an error here.
WHATIF_EXAMPLE_SEEDS ?= 10
WHATIF_EXAMPLES      ?= docs/whatif-examples

# make e2e / make fidelity (issue 15): the scenarios of scenarios/cluster/
# on a local control plane with the real Karpenter (bootroll cluster up,
# started and stopped per run; needs make cluster-tools).
CLUSTER_SCENARIOS ?= $(sort $(wildcard scenarios/cluster/*.yaml))

.PHONY: scenario bench explore bootroll-cli whatif-bench whatif-examples e2e fidelity bench-100k

# The CLI (the twin, explore, what-if) is built with Go's size-specialized
# allocator when the toolchain knows the experiment (Go 1.26): 5-6% fewer
# instructions per twin run, the same traces (docs/decisions.md). The
# controller and daemon binaries (make build, make images) are not.
CLI_GOEXPERIMENT := $(shell GOEXPERIMENT=sizespecializedmalloc go env GOEXPERIMENT 2>/dev/null)

bootroll-cli:
	GOEXPERIMENT=$(CLI_GOEXPERIMENT) go build -o $(BOOTROLL) ./cmd/bootroll

scenario: bootroll-cli ## Run every scenario in the twin with its negative controls; fails if any fails.
	$(BOOTROLL) scenario run --negative-controls $(SCENARIOS)

bench: bootroll-cli ## Run the 1,000- and 10,000-node rollouts in the twin with --bench.
	$(BOOTROLL) scenario run --bench $(BENCH_SCENARIOS)

explore: bootroll-cli ## Explore every scenario under many seeds with random faults and actions; write and shrink what fails (EXPLORE_SEEDS, EXPLORE_BUDGET).
	$(BOOTROLL) scenario explore $(SHIPPED) --seeds $(EXPLORE_SEEDS) --faults $(EXPLORE_FAULTS) --jobs $(EXPLORE_JOBS) --budget $(EXPLORE_BUDGET) --out $(EXPLORE_OUT)

whatif-bench: bootroll-cli ## Time bootroll whatif: 5 maxUnavailable values × 50 seeds of 200-node pools (runs/s and wall on stderr; not in make test).
	@for f in $(WHATIF_SCENARIOS); do \
		echo "== $$f"; \
		$(BOOTROLL) whatif $$f --vary 'bootroll.pools[0].maxUnavailable=1,2,5%,10%,20%' --seeds $(WHATIF_SEEDS) --jobs $(WHATIF_JOBS) --out $(WHATIF_OUT)/$$(basename $$f .yaml) || exit $$?; \
	done

e2e: bootroll-cli cluster-tools karpenter-v1.14 ## Run every scenarios/cluster/*.yaml and its negative controls on a local control plane with the real Karpenter (scenario run --target cluster --negative-controls; minutes each; not in make test).
	$(BOOTROLL) scenario run --target cluster --negative-controls $(CLUSTER_SCENARIOS)

fidelity: bootroll-cli cluster-tools karpenter-v1.14 ## Run scenarios/cluster/*.yaml in the twin and on a local control plane and regenerate the table in docs/fidelity.md (minutes each; not in make test).
	$(BOOTROLL) fidelity $(CLUSTER_SCENARIOS) --markdown docs/fidelity.md

bench-100k: bootroll-cli ## Run the 100,000-node rollout (scenarios/bench/bench-100000.yaml) under a 7 GiB Go memory limit and print its peak heap and RSS (about half an hour on 2 cores; not in make test).
	$(BOOTROLL) scenario run --bench --memory-limit 7Gi scenarios/bench/bench-100000.yaml

whatif-examples: bootroll-cli ## Regenerate the example what-if reports in docs/whatif-examples (not in make test; minutes).
	$(BOOTROLL) whatif scenarios/whatif/pool-200.yaml --vary 'bootroll.pools[0].maxUnavailable=1,2,5%,10%,20%' \
		--seeds $(WHATIF_EXAMPLE_SEEDS) --jobs $(WHATIF_JOBS) --out $(WHATIF_EXAMPLES)/max-unavailable || test $$? -le 1
	$(BOOTROLL) whatif scenarios/whatif/pool-200.yaml --vary 'karpenter.nodePools[0].consolidateAfter=0s,30s,5m' \
		--vary 'bootroll.pools[0].karpenter.postUpdateProtection=0s,5m' \
		--seeds $(WHATIF_EXAMPLE_SEEDS) --jobs $(WHATIF_JOBS) --out $(WHATIF_EXAMPLES)/consolidate-after || test $$? -le 1

endif
