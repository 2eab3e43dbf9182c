# The front door. On a fresh Debian 12 machine:
#   make run     install missing packages, build (release), simulate scenarios/quickstart.yaml
#   make test    install missing packages, build, run the whole test suite (release, then the
#                debug build with AddressSanitizer and UndefinedBehaviorSanitizer)
#   make bench   build and run the benchmarks (figures: docs/performance.md)
# Other targets: build, format, check-format, schema, clean.

PRESET ?= release
CLI := build/$(PRESET)/rocesim

.PHONY: all deps build run test test-release test-debug bench format check-format schema clean

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

test-release:
	@$(MAKE) --no-print-directory build PRESET=release
	ctest --preset release -j 2

test-debug:
	@$(MAKE) --no-print-directory build PRESET=debug
	ctest --preset debug -j 2 -L unit

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
