# TorchNeuron build. Two user-facing commands: `make run` and `make test`.
# Everything a clean machine needs is installed from here.

# bash for pipefail: a failed step piped through a filter must still fail.
SHELL := /bin/bash

PYTHON_SYS ?= python3
VENV       := .venv
PY         := $(VENV)/bin/python
PIP        := $(PY) -m pip
STAMP      := $(VENV)/.deps-stamp
JOBS       ?= 2

CC      ?= cc
CFLAGS_COMMON := -std=c11 -D_GNU_SOURCE -Wall -Wextra -Wno-unused-parameter -Werror=implicit-function-declaration \
                 -fPIC -pthread -fno-math-errno \
                 -Iruntime/include -Iruntime/src
CFLAGS  := $(CFLAGS_COMMON) -O2 -g -march=x86-64-v2 -mtune=native
ASAN_FLAGS := $(CFLAGS_COMMON) -O1 -g -fsanitize=address,undefined -fno-omit-frame-pointer \
              -fno-sanitize-recover=undefined

RT_SRCS  := $(sort $(shell find runtime/src -name "*.c"))
RT_OBJS  := $(patsubst runtime/src/%.c,build/rt/%.o,$(RT_SRCS))
RT_AOBJS := $(patsubst runtime/src/%.c,build/rt-asan/%.o,$(RT_SRCS))
RT_HDRS  := $(wildcard runtime/include/nrt/*.h runtime/include/nrt/ops/*.h) $(shell find runtime/src -name "*.h")
CTESTS   := $(patsubst runtime/tests/%.c,%,$(sort $(wildcard runtime/tests/test_*.c)))

.PHONY: all run test ctest ctest-bins asan asan-bins pytest layers docs-check build lib install bench bench-dist conformance fuzz clean venv

all: build

# ---- C runtime (no PyTorch dependency) ----------------------------------
lib: build/libnrt.a

build/rt/%.o: runtime/src/%.c $(RT_HDRS)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -c $< -o $@

build/rt-asan/%.o: runtime/src/%.c $(RT_HDRS)
	@mkdir -p $(dir $@)
	$(CC) $(ASAN_FLAGS) -c $< -o $@

build/libnrt.a: $(RT_OBJS)
	@rm -f $@
	ar rcs $@ $^

build/libnrt-asan.a: $(RT_AOBJS)
	@rm -f $@
	ar rcs $@ $^

build/ctest/%: runtime/tests/%.c runtime/tests/testing.h build/libnrt.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -Iruntime/tests $< build/libnrt.a -lm -o $@

build/ctest-asan/%: runtime/tests/%.c runtime/tests/testing.h build/libnrt-asan.a
	@mkdir -p $(dir $@)
	$(CC) $(ASAN_FLAGS) -Iruntime/tests $< build/libnrt-asan.a -lm -o $@

# The objects and test binaries compile $(JOBS) at a time even under a plain
# `make test` (a serial runtime and ASan build took most of a fresh clone's
# 28 minutes on a 2-core host); the tests themselves run one after another.
ctest-bins:
	@$(MAKE) --no-print-directory -j$(JOBS) $(addprefix build/ctest/,$(CTESTS))

asan-bins:
	@$(MAKE) --no-print-directory -j$(JOBS) $(addprefix build/ctest-asan/,$(CTESTS))

ctest: ctest-bins
	@set -e; for t in $(addprefix build/ctest/,$(CTESTS)); do echo "== $$t"; $$t; done

asan: asan-bins
	@set -e; for t in $(addprefix build/ctest-asan/,$(CTESTS)); do echo "== $$t (asan+ubsan)"; \
	  ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 $$t; done

# The graph compiler's driver (runtime/tools/nrtc.c): compile a saved graph,
# --dump an artifact, --check against -O0, --time.
build/nrtc: runtime/tools/nrtc.c build/libnrt.a
	@mkdir -p build
	$(CC) $(CFLAGS) $< build/libnrt.a -lm -o $@

# ---- Python environment and the extension -------------------------------
$(STAMP): pyproject.toml Makefile
	test -x $(PY) || $(PYTHON_SYS) -m venv $(VENV)
	# matplotlib: the plots of `make bench` (docs/perf/*.png), the field-standard plotting library.
	# tqdm: the evaluation's progress bars (torch_neuronx.evaluate; matplotlib draws its plots).
	$(PIP) install -q torch==2.13.0 numpy pytest ninja setuptools wheel expecttest matplotlib tqdm
	# transformers: real-model tests (tests/models); it does not depend on torch,
	# so the CPU torch above stays.
	$(PIP) install -q transformers
	touch $@

venv: $(STAMP)

# The C++ glue is compiled by setup.py (torch's cpp_extension with ninja,
# incremental); setup.py first runs `make lib` for the C runtime.
build: $(STAMP)
	@$(MAKE) --no-print-directory -j$(JOBS) build/libnrt.a
	@mkdir -p build
	# flock: two builds in one checkout at once would race on build/ext.
	set -o pipefail; TORCH_DEVICE_BACKEND_AUTOLOAD=0 flock build/.ext-lock $(PIP) install -q --no-build-isolation --no-deps -e . 2>&1 \
	  | { grep -v "^WARNING: Location" || true; }
	$(PY) -c "import torch_neuronx" 

install: build

# The main job: evaluate a small GPT-2-config model for the device (ops, numerics
# against the CPU, eager and compiled step times, recompiles, memory) and write
# the report (build/evaluate/report.html, .json, summary.txt).
# examples/train.py (the earlier MLP comparison) still runs on its own.
run: build
	$(PY) -m torch_neuronx.evaluate examples/evaluate_gpt2.py:small_gpt2 --dtype float32,bfloat16 \
	  --steps 8 --shapes 4x32,4x64,4x128 --out build/evaluate

pytest: build
	$(PY) -m pytest -q tests

# The tree's rules: no include or call of a higher layer or another op
# family (tools/check_layers.py), and docs generated from code are current.
layers: lib
	python3 tools/check_layers.py --objects build/rt

docs-check: build
	$(PY) tools/gen_env_docs.py --check

test: build layers docs-check ctest asan pytest

build/triad: benchmarks/triad.c
	@mkdir -p build
	$(CC) -O2 -pthread $< -o $@

# The memory-bound kernels against a triad timed in the same run
# (benchmarks/bench_bandwidth.c); a tool, not part of `make test`.
build/bench_bandwidth: benchmarks/bench_bandwidth.c build/libnrt.a
	@mkdir -p build
	$(CC) $(CFLAGS) $< build/libnrt.a -lm -o $@

# The convolution kernels against an FMA peak timed in the same run
# (benchmarks/bench_conv.c); a tool, not part of `make test`.
build/bench_conv: benchmarks/bench_conv.c build/libnrt.a
	@mkdir -p build
	$(CC) $(CFLAGS) $< build/libnrt.a -lm -o $@

# Baseline x86-64 build: the AVX2/AVX-512/AVX512_BF16 loops carry target
# attributes and run only where the CPU has them.
build/peak: benchmarks/peak.c
	@mkdir -p build
	$(CC) -O2 -pthread -Wall -Wextra $< -o $@

# The GEMM kernel's rates against build/peak in the same run (not part of `make test`).
build/bench_gemm: benchmarks/bench_gemm.c build/libnrt.a build/peak
	$(CC) $(CFLAGS) $< build/libnrt.a -lm -o $@

# The full OpInfo sweep, then every ModuleInfo of module_db and the training-
# utilities table: each writes docs/op-support.md and docs/op-support.json.
# (Bounded subsets run inside `make test`, tests/conformance.)
conformance: build
	$(PY) tests/conformance/opinfo_sweep.py --full
	$(PY) tests/conformance/moduleinfo_sweep.py --full
	$(PY) tests/conformance/utilities_sweep.py --full

# Differential fuzz, CPU against neuron (tools/fuzz/fuzz.py): SECONDS= budget
# (default 1200), SEED= (default random, printed). Results in build/fuzz/.
# A seeded short run is part of `make pytest` (tests/fuzz/test_fuzz_smoke.py).
SECONDS ?= 1200
SEED    ?=
fuzz: build
	$(PY) tools/fuzz/fuzz.py --seconds $(SECONDS) $(if $(SEED),--seed $(SEED))

# The benchmark suite and report (benchmarks/README.md): writes
# benchmarks/results.json, docs/performance.md and docs/perf/*.png; then
# torch.compile(backend="neuron") against eager, CPU eager and Inductor:
# benchmarks/compile_results.json, docs/compile-performance.md.
# QUICK=1: fewer repeats and sizes, under 3 minutes.
bench: build build/triad build/peak
	$(PY) benchmarks/run.py $(if $(QUICK),--quick)
	$(PY) benchmarks/bench_compile.py $(if $(QUICK),--quick)

# The torch.distributed backend "neuron" against Gloo in the same run, nccl-tests
# style (benchmarks/bench_dist.py): 2 and 4 ranks on this machine, then 4 ranks
# as 2 simulated machines (shared memory within, Gloo between).
bench-dist: build build/triad
	$(PY) benchmarks/bench_dist.py --worlds 2,4 --ddp 2
	$(PY) benchmarks/bench_dist.py --worlds 4 --machines 2

clean:
	rm -rf build torch_neuronx/*.so *.egg-info
