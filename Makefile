# A thin wrapper over Meson. Every target installs what it needs first
# (scripts/setup.sh): Debian packages when run as root, Python packages into
# .venv. PYTHON=/path/to/python3 picks the interpreter that makes .venv.

VENV    := .venv
VPY     := $(VENV)/bin/python
MESON   := $(VENV)/bin/meson
NINJA   := $(VENV)/bin/ninja
BUILD   := build
ASAN    := build-asan
ASANPY  := build-asan-py
# Warnings are errors in CI (CI=true) and when asked: make WERROR=true.
# It applies to the build folders set up by that run (and to the module's,
# reconfigured on each install); one set up before keeps its setting.
WERROR  ?= $(if $(CI),true,false)
export PATH := $(CURDIR)/$(VENV)/bin:$(PATH)

.PHONY: all deps deps-c build demo check test-c test-cli test-bench test-install test-asan \
        test-aarch64 test-python test-python-asan test-wheel test-docs docs python bench \
        clean test-fuzz-replay fuzz test-tsan test-valgrind test-gpu-dry coverage

all: build

deps-c:
	@./scripts/setup.sh c

deps:
	@./scripts/setup.sh python

$(BUILD)/build.ninja: | deps-c
	$(MESON) setup $(BUILD) -Dwerror=$(WERROR)

build: deps-c $(BUILD)/build.ninja
	$(NINJA) -C $(BUILD)

# The C tour, then the Python one with the module installed into .venv.
demo: build python
	$(BUILD)/examples/demo
	$(VPY) examples/tour.py

test-c: build
	$(BUILD)/tests/c/dlb_tests

test-cli: build
	tests/cli/test_cli.sh $(BUILD)

# The benchmark programs once each, quickly: they run, every case passes its
# own checks and the JSON is written (the GPU one against the emulated
# driver and without a driver).
test-bench: build
	$(MESON) test -C $(BUILD) --print-errorlogs bench_copy_runs \
	  bench_copy_refuses_reps bench_gpu_emulated bench_gpu_without_gpu \
	  bench_kernels_runs bench_import_counts bench_ab_runs bench_ab_refuses_reps

# The library, C suite, demo and command built for aarch64 and run under
# qemu-user (scripts/check-aarch64.sh): the build without SSE2.
AARCH64 := build-aarch64
test-aarch64: deps-c
	WERROR=$(WERROR) scripts/check-aarch64.sh $(AARCH64)

# Installs into a scratch folder and builds against it through pkg-config.
test-install: build
	tests/install/test_install.sh $(BUILD)

$(ASAN)/build.ninja: | deps-c
	$(MESON) setup $(ASAN) -Dwerror=$(WERROR) -Db_sanitize=address,undefined \
	  -Db_lundef=false -Dbuildtype=debug

# The whole C suite under AddressSanitizer (with leak checks) and
# UndefinedBehaviorSanitizer, then the command's tests; any report fails
# the run. Those tests preload libraries of their own (a failing fork, a
# file cut short), which then come before the sanitizer's runtime.
test-asan: deps-c $(ASAN)/build.ninja
	$(NINJA) -C $(ASAN)
	ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 \
	UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
	  $(ASAN)/tests/c/dlb_tests
	ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:verify_asan_link_order=0 \
	UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
	  tests/cli/test_cli.sh $(ASAN)

$(ASANPY)/build.ninja: | deps
	$(MESON) setup $(ASANPY) -Dwerror=$(WERROR) -Dpython=true \
	  -Dtest_extensions=true -Db_sanitize=address,undefined \
	  -Db_lundef=false -Dbuildtype=debug

# The Python suite against the module built with AddressSanitizer and
# UndefinedBehaviorSanitizer (tests that measure process memory or time
# skip themselves there).
test-python-asan: deps $(ASANPY)/build.ninja
	$(NINJA) -C $(ASANPY)
	tests/python/run_sanitized.sh $(ASANPY) $(VPY)

# Builds and installs the package into .venv exactly as `pip install .` does.
python: deps
	$(VPY) -m pip install -q --no-build-isolation --no-deps \
	  -Cbuild-dir=$(BUILD)/py -Csetup-args=-Dwerror=$(WERROR) \
	  -Csetup-args=-Dtest_extensions=true .

test-python: python
	$(VPY) -m pytest -q tests/python

# Builds the wheel as `pip wheel .` does, installs it into a fresh virtual
# environment and runs part of the Python tests and the command there.
test-wheel: python
	tests/install/test_wheel.sh $(VPY)

# The C API reference from the header comments (Doxygen; any warning
# fails): $(BUILD)/docs/html/index.html.
docs: build
	tests/docs/check_docs.py --build $(BUILD) --python $(VPY) --reference-only

# The reference as above, every C and Python block of README.md and docs/
# compiled and run, the dlbridge command lines of their shell blocks run,
# every public Python name in docs/python.md.
test-docs: build python
	tests/docs/check_docs.py --build $(BUILD) --python $(VPY)

# tests/gpu/run.sh, the check for a machine with a GPU, run whole against
# the emulated driver, so that it still builds and runs its programs when a
# GPU is at hand (peers without a CUDA build are skipped).
GPUDRY := build-gpu-dry
test-gpu-dry: build python
	rm -rf $(GPUDRY)
	DLB_GPU_DRY=1 DLBRIDGE_CUDA_LIBRARY=$(CURDIR)/$(BUILD)/tests/emu/libcuda.so.1 \
	  PYTHON=$(CURDIR)/$(VPY) tests/gpu/run.sh $(GPUDRY)

check: test-c test-cli test-bench test-aarch64 test-install test-asan test-python test-python-asan \
       test-wheel test-docs test-fuzz-replay test-tsan test-valgrind test-gpu-dry

# Every benchmark in one run (bench/run_bench.py): copy bandwidth against
# memcpy, NumPy and PyTorch; exchange cost through the module; the C-level
# import in ns and in instructions (valgrind); GPU bandwidth when there is a
# GPU. Tables on the terminal, JSON in bench/results/; under a minute here.
# Without valgrind (setup.sh installs it as root) only the instruction
# counts are skipped.
bench: python build
	-@./scripts/setup.sh bench
	DLBRIDGE_PYTHON=$(VPY) $(BUILD)/tools/dlbridge bench

clean:
	rm -rf $(BUILD) $(ASAN) $(ASANPY) $(FUZZ) $(TSAN) $(AARCH64) $(GPUDRY) build-cov build-cov-py

# ---- fuzzing (tests/fuzz, docs/reliability.md) ----------------------------
FUZZ         := build-fuzz
# FUZZ_TARGETS picks targets for both, e.g. make fuzz FUZZ_TARGETS=share_handle.
FUZZ_TARGETS ?= layout view copy names share_handle
FUZZ_SECONDS ?= 60

# Replays each target's checked-in corpus under ASan and UBSan (gcc is
# enough: the replay binaries have their own main()).
test-fuzz-replay: deps-c $(ASAN)/build.ninja
	$(NINJA) -C $(ASAN) $(foreach t,$(FUZZ_TARGETS),tests/fuzz/fuzz_$(t)_replay)
	@for t in $(FUZZ_TARGETS); do \
	  ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 \
	  UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
	    $(ASAN)/tests/fuzz/fuzz_$${t}_replay tests/fuzz/corpus/$$t || exit 1; \
	done

$(FUZZ)/build.ninja:
	@./scripts/setup.sh fuzz
	CC=clang $(MESON) setup $(FUZZ) -Dfuzz=true -Dbuildtype=debugoptimized \
	  -Db_sanitize=address,undefined -Db_lundef=false \
	  -Dc_args='-fsanitize=fuzzer-no-link -fno-sanitize-recover=all'

# Runs each libFuzzer target for FUZZ_SECONDS seconds, starting from the
# checked-in corpus; new inputs go to $(FUZZ)/corpus/<target>, findings to
# $(FUZZ)/findings/. Stops at the first finding.
fuzz: $(FUZZ)/build.ninja
	$(NINJA) -C $(FUZZ) $(foreach t,$(FUZZ_TARGETS),tests/fuzz/fuzz_$(t))
	@for t in $(FUZZ_TARGETS); do \
	  mkdir -p $(FUZZ)/corpus/$$t $(FUZZ)/findings; \
	  $(FUZZ)/tests/fuzz/fuzz_$$t -max_total_time=$(FUZZ_SECONDS) \
	    -artifact_prefix=$(FUZZ)/findings/$$t- -print_final_stats=1 \
	    $(FUZZ)/corpus/$$t tests/fuzz/corpus/$$t || exit 1; \
	done

# ---- tools: ThreadSanitizer, valgrind, coverage (docs/reliability.md) -----
TSAN := build-tsan

$(TSAN)/build.ninja: | deps-c
	$(MESON) setup $(TSAN) -Dwerror=$(WERROR) -Db_sanitize=thread \
	  -Db_lundef=false -Dbuildtype=debug

# The concurrency stress test, then the whole C suite, under ThreadSanitizer
# with no suppressions (die_after_fork=0: one test forks a process that
# starts threads, which TSan otherwise refuses).
test-tsan: deps-c $(TSAN)/build.ninja
	$(NINJA) -C $(TSAN)
	TSAN_OPTIONS=halt_on_error=1:exitcode=66 $(TSAN)/tests/tsan/tsan_stress
	TSAN_OPTIONS=halt_on_error=1:exitcode=66:die_after_fork=0 \
	  $(TSAN)/tests/c/dlb_tests

# valgrind memcheck over the whole C suite (every forked test, leaks
# included); VALGRIND_TESTS picks tests by name, as dlb_tests' argument
# does.
VALGRIND       := valgrind -q --trace-children=yes --error-exitcode=99 \
                  --leak-check=full --errors-for-leak-kinds=definite,indirect \
                  --show-leak-kinds=definite,indirect
VALGRIND_TESTS ?=
test-valgrind: build
	@./scripts/setup.sh tools
	$(VALGRIND) $(BUILD)/tests/c/dlb_tests $(VALGRIND_TESTS)

# Line and branch coverage of src/ and python/src/ (scripts/coverage.sh).
coverage: deps
	@./scripts/setup.sh tools
	./scripts/coverage.sh $(VPY)
