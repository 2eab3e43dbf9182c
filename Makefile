# The front door. On a fresh Debian 12 machine:
#   make run     install missing packages, build (release), simulate scenarios/quickstart.yaml
#   make test    install missing packages, build, run the whole test suite (release, then the
#                debug build with AddressSanitizer and UndefinedBehaviorSanitizer, then each
#                fuzz target over its seed corpus for a fixed number of inputs)
#   make bench   build and run the benchmarks (figures: docs/performance.md)
#   make fuzz    build the libFuzzer targets (clang) and run each for FUZZ_SECONDS (default 60)
# Other targets: build, format, check-format, schema, clean.

PRESET ?= release
CLI := build/$(PRESET)/rocesim

FUZZ_SECONDS ?= 60

.PHONY: all deps build run test test-release test-debug test-fuzz fuzz bench format check-format schema clean

all: build

deps:
	@scripts/install-deps

build: deps
	@cmake --preset $(PRESET) > /dev/null
	@cmake --build --preset $(PRESET)

run: build
	$(CLI) run scenarios/quickstart.yaml -o build/quickstart.h5

test: deps
	@$(MAKE) --no-print-directory test-release
	@$(MAKE) --no-print-directory test-debug
	@$(MAKE) --no-print-directory test-fuzz

test-release:
	@$(MAKE) --no-print-directory build PRESET=release
	ctest --preset release -j 2

test-debug:
	@$(MAKE) --no-print-directory build PRESET=debug
	ctest --preset debug -j 2 -L unit

test-fuzz:
	@$(MAKE) --no-print-directory build PRESET=fuzz
	ctest --preset fuzz

# Each target for FUZZ_SECONDS on its seed corpus and what earlier runs found (build/fuzz/
# fuzz-corpus/<target>); a crash leaves its input as crash-* in the current directory.
fuzz: deps
	@$(MAKE) --no-print-directory build PRESET=fuzz
	@for t in fuzz_scenario fuzz_nccl_tests_log fuzz_measured_dataset fuzz_calibration_file; do \
	  echo "== $$t ($(FUZZ_SECONDS) s)"; \
	  scripts/run-fuzz $$t $(FUZZ_SECONDS) || exit 1; \
	done

bench:
	@scripts/install-deps --bench
	@$(MAKE) --no-print-directory build PRESET=release
	bench/run-benchmarks

format:
	clang-format -i $$(git ls-files '*.cpp' '*.hpp')

check-format:
	clang-format --dry-run --Werror $$(git ls-files '*.cpp' '*.hpp')

schema: build
	$(CLI) schema > docs/scenario.md

clean:
	rm -rf build
