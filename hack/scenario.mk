# Twin scenario targets, included from the Makefile:
#   make scenario   run every scenarios/*.yaml with its negative controls
#   make bench      the 1,000- and 10,000-node rollouts with --bench
# Also usable alone: make -f Makefile -f hack/scenario.mk scenario
# Included once even when also named with -f.
ifndef BOOTROLL_SCENARIO_MK
BOOTROLL_SCENARIO_MK := 1

BIN ?= $(CURDIR)/bin
BOOTROLL := $(BIN)/bootroll
# scenarios/bench/ holds the benchmarks; make scenario leaves them out.
SCENARIOS := $(sort $(wildcard scenarios/*.yaml))
BENCH_SCENARIOS := scenarios/bench/bench-1000.yaml scenarios/bench/bench-10000.yaml

.PHONY: scenario bench bootroll-cli

bootroll-cli:
	go build -o $(BOOTROLL) ./cmd/bootroll

scenario: bootroll-cli ## Run every scenario in the twin with its negative controls; fails if any fails.
	$(BOOTROLL) scenario run --negative-controls $(SCENARIOS)

bench: bootroll-cli ## Run the 1,000- and 10,000-node rollouts in the twin with --bench.
	$(BOOTROLL) scenario run --bench $(BENCH_SCENARIOS)

endif
