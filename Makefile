# perfd build.  `make` builds build/perfd and build/perfctl; `make run`
# starts the daemon on ./run/perfd.sock; `make test` runs every test.
# SANITIZE=1 builds everything with ASan+UBSan into build-san/.

.DELETE_ON_ERROR:
.SECONDARY:
.SUFFIXES:

ifeq ($(SANITIZE),1)
BUILD ?= build-san
SANFLAGS := -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined
else
BUILD ?= build
SANFLAGS :=
endif

CC ?= gcc
CLANG ?= clang
BPFTOOL ?= bpftool
PYTHON ?= /usr/bin/python3
ARCH := $(shell uname -m | sed -e 's/x86_64/x86/' -e 's/aarch64/arm64/')

PKGS := libbpf libdw libelf libsystemd json-c liblzma zlib libprotobuf-c libcurl
PKG_CFLAGS = $(shell pkg-config --cflags $(PKGS) 2>/dev/null)
PKG_LIBS = $(shell pkg-config --libs $(PKGS) 2>/dev/null) -liberty -lpthread

CFLAGS ?= -O2 -g
override CFLAGS += -MMD -MP -std=gnu11 -Wall -Wextra -Werror -Wshadow -Wno-unused-parameter \
	-Wmissing-prototypes -D_GNU_SOURCE -Iinclude -Idaemon -I$(BUILD) -I$(BUILD)/proto $(PKG_CFLAGS) $(SANFLAGS)
override LDFLAGS += $(SANFLAGS)

BPF_CFLAGS := -g -O2 -target bpf -D__TARGET_ARCH_$(ARCH) -Wall -Werror -I$(BUILD) -Iinclude -MMD -MP

# daemon/ is a tree of folders by concern (see README, Architecture); every
# .c below it is one module.  Objects record the headers they include
# (-MMD), so an edited header rebuilds exactly what uses it.
DAEMON_SRCS := $(sort $(shell find daemon -name '*.c'))
# The C code of each .proto under proto/ (pprof's profile.proto, and the
# OTLP profiles schema under proto/opentelemetry/ at the paths its imports
# name), generated into the build folder and linked with the daemon's
# modules.
PROTO_SRCS := $(sort $(shell find proto -name '*.proto'))
PROTO_OBJS := $(patsubst proto/%.proto,$(BUILD)/proto/%.pb-c.o,$(PROTO_SRCS))
DAEMON_LIB_OBJS := $(patsubst daemon/%.c,$(BUILD)/daemon/%.o,$(filter-out daemon/main.c,$(DAEMON_SRCS))) \
	$(PROTO_OBJS)
CLI_SRCS := $(sort $(wildcard cli/*.c))
# perfctl reads pprof files (cli/profile_read.c) with the daemon's own
# generated profile.proto code, and draws diff's flame graphs with the
# daemon's model-free flame graph code (encode/flame.h).
FLAME_OBJS := $(addprefix $(BUILD)/daemon/,encode/calltree.o encode/flame.o encode/flamepage.o \
	encode/flamesvg.o base/jsonw.o)
CLI_LIB_OBJS := $(patsubst cli/%.c,$(BUILD)/cli/%.o,$(filter-out cli/perfctl.c,$(CLI_SRCS))) $(BUILD)/daemon/base/duration.o \
	$(BUILD)/daemon/base/base64.o $(BUILD)/daemon/base/u64map.o $(FLAME_OBJS) $(PROTO_OBJS)
UNIT_SRCS := $(sort $(wildcard tests/unit/test-*.c))
UNIT_BINS := $(patsubst tests/unit/%.c,$(BUILD)/tests/%,$(UNIT_SRCS))
WORKLOAD_SRCS := $(sort $(wildcard tests/workloads/*.c))
WORKLOAD_BINS := $(patsubst tests/workloads/%.c,$(BUILD)/workloads/%,$(WORKLOAD_SRCS))
SOCKET ?= $(CURDIR)/run/perfd.sock

.PHONY: all deps deps-test run test unit unit-bins integration workloads clean test-kernels soak
all: $(BUILD)/perfd $(BUILD)/perfctl

deps:
	@packaging/install-deps.sh build
deps-test:
	@PERFD_NPM_DIR=$(CURDIR)/$(BUILD)/npm packaging/install-deps.sh test

# --- BPF ---------------------------------------------------------------
$(BUILD)/vmlinux.h:
	@mkdir -p $(@D)
	$(BPFTOOL) btf dump file /sys/kernel/btf/vmlinux format c > $@

$(BUILD)/%.bpf.o: bpf/%.bpf.c $(BUILD)/vmlinux.h
	$(CLANG) $(BPF_CFLAGS) -MF $@.d -MT $@ -c $< -o $@.tmp.o
	$(BPFTOOL) gen object $@ $@.tmp.o
	@rm -f $@.tmp.o

$(BUILD)/%.skel.h: $(BUILD)/%.bpf.o
	$(BPFTOOL) gen skeleton $< > $@

# --- user space --------------------------------------------------------
# protoc-c writes the .pb-c.c and .pb-c.h of a .proto under the same path
# below $(BUILD)/proto (so the generated files include each other as the
# .proto files import each other), and a dependency file (like -MMD)
# naming what the .proto imports.
PROTOC_C ?= protoc-c
$(BUILD)/proto/%.pb-c.c $(BUILD)/proto/%.pb-c.h: proto/%.proto
	@mkdir -p $(@D)
	$(PROTOC_C) -Iproto --c_out=$(BUILD)/proto --dependency_out=$(BUILD)/proto/$*.proto.d $<

# A generated file includes the headers of what its .proto imports.
$(BUILD)/proto/%.pb-c.o: $(BUILD)/proto/%.pb-c.c $(PROTO_OBJS:.o=.h)
	$(CC) $(CFLAGS) -c $< -o $@

# Every daemon object waits for the skeleton (sampler.c includes it) and
# the generated protobuf headers (the encoders include them; the
# dependency files know which, but only after a first build).
$(BUILD)/daemon/%.o: daemon/%.c $(BUILD)/perfd.skel.h $(PROTO_OBJS:.o=.h)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -c $< -o $@

# The flame graph page (daemon/encode/flamegraph.html) as a C array for
# encode/flamepage.c, so perfd and perfctl carry its template: od and sed only.
$(BUILD)/gen/flamegraph_html.h: daemon/encode/flamegraph.html
	@mkdir -p $(@D)
	{ echo '/* generated from $< by the Makefile */'; \
	  echo 'static const unsigned char flamegraph_html[] = {'; \
	  od -An -v -tx1 $< | sed -e 's/\([0-9a-f][0-9a-f]\)/0x\1,/g'; \
	  echo '};'; } > $@

$(BUILD)/daemon/encode/flamepage.o: $(BUILD)/gen/flamegraph_html.h

$(BUILD)/cli/%.o: cli/%.c
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) $(CLI_EXTRA_CFLAGS) -Icli -c $< -o $@

$(BUILD)/cli/top_screen.o: CLI_EXTRA_CFLAGS = $(shell pkg-config --cflags ncursesw)

$(BUILD)/cli/profile_read.o: $(PROTO_OBJS:.o=.h)

$(BUILD)/perfd: $(BUILD)/daemon/main.o $(DAEMON_LIB_OBJS)
	$(CC) $(LDFLAGS) -o $@ $^ $(PKG_LIBS) -lm

# perfctl top draws its screen with ncurses (wide-character build).
CLI_PKGS := json-c zlib libprotobuf-c ncursesw
$(BUILD)/perfctl: $(BUILD)/cli/perfctl.o $(CLI_LIB_OBJS)
	$(CC) $(LDFLAGS) -o $@ $^ $(shell pkg-config --libs $(CLI_PKGS)) -lm

# --- tests -------------------------------------------------------------
# Each unit suite links the daemon's and the CLI's modules (not their main).
# Their shared helpers (tests/unit/*.h) are tracked like any header (-MMD).
$(BUILD)/tests/test-%: tests/unit/test-%.c $(DAEMON_LIB_OBJS) $(CLI_LIB_OBJS)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -Icli -o $@ $^ $(PKG_LIBS) $(shell pkg-config --libs criterion ncursesw) -lm

# Workloads have known hot paths; frame pointers, leaf functions included,
# keep their stacks whole under the frame-pointer walk.  Their splits are
# the same code run 3 times as often, which is 3 times the time only if
# the copies sit alike in the cache lines: coordinator's leaf_a loop
# straddled one and leaf_b's did not, and perf read 77:23 on an AMD EPYC.
WORKLOAD_ALIGN := -falign-functions=64 -falign-loops=64
$(BUILD)/workloads/%: tests/workloads/%.c tests/workloads/workload.h
	@mkdir -p $(@D)
	$(CC) -O1 -g -fno-omit-frame-pointer -mno-omit-leaf-frame-pointer -fno-inline $(WORKLOAD_ALIGN) -Wall -Wextra -Werror -o $@ $< -lm -lpthread

# Workloads that prove table unwinding are built the way distributions
# build code: optimized, without frame pointers, some of it in a library.
NOFP_CFLAGS := -O2 -g -fomit-frame-pointer -Wall -Wextra -Werror
$(BUILD)/workloads/libnofplib.so: tests/workloads/lib/nofplib.c tests/workloads/workload.h
	@mkdir -p $(@D)
	$(CC) $(NOFP_CFLAGS) -fPIC -shared -o $@ $<

$(BUILD)/workloads/nofp: tests/workloads/nofp.c tests/workloads/workload.h $(BUILD)/workloads/libnofplib.so
	$(CC) $(NOFP_CFLAGS) -o $@ $< -L$(@D) -lnofplib -Wl,-rpath,'$$ORIGIN'

# fpmix keeps frame pointers, its library does not (and misleads a
# frame-pointer walk): where perfd's frame-pointer shortcut must stop.
$(BUILD)/workloads/libfpmixlib.so: tests/workloads/lib/fpmixlib.c tests/workloads/workload.h
	@mkdir -p $(@D)
	$(CC) $(NOFP_CFLAGS) -fPIC -shared -o $@ $<

$(BUILD)/workloads/fpmix: tests/workloads/fpmix.c tests/workloads/workload.h $(BUILD)/workloads/libfpmixlib.so
	$(CC) -O1 -g -fno-omit-frame-pointer -mno-omit-leaf-frame-pointer -fno-inline -Wall -Wextra -Werror -o $@ $< -L$(@D) -lfpmixlib -Wl,-rpath,'$$ORIGIN'

$(BUILD)/workloads/bigframes: tests/workloads/bigframes.c tests/workloads/workload.h
	@mkdir -p $(@D)
	$(CC) $(NOFP_CFLAGS) -o $@ $<

# entry has its own _start and no libc, so that a frame-pointer walk of
# it reaches its entry (Debian's libc keeps no frame pointers).
$(BUILD)/workloads/entry: tests/workloads/entry.c
	@mkdir -p $(@D)
	$(CC) -O0 -g -fno-omit-frame-pointer -fno-stack-protector -fcf-protection=none \
		-nostdlib -static -Wall -Wextra -Werror -o $@ $<

$(BUILD)/workloads/threads: tests/workloads/threads.c tests/workloads/workload.h
	@mkdir -p $(@D)
	$(CC) $(NOFP_CFLAGS) -o $@ $< -lpthread

# Symbolization workloads: C++ templates, and Rust in its default (legacy)
# mangling and in v0.
RUSTC ?= $(shell command -v rustc 2>/dev/null || echo $(HOME)/.cargo/bin/rustc)
$(BUILD)/workloads/templates: tests/workloads/cxx/templates.cpp
	@mkdir -p $(@D)
	$(CXX) -O1 -g -fno-omit-frame-pointer -Wall -Wextra -Werror -o $@ $<

$(BUILD)/workloads/rust-spin-legacy: tests/workloads/rust/spin.rs
	@mkdir -p $(@D)
	env -u MAKEFLAGS $(RUSTC) -O -C force-frame-pointers=yes -o $@ $<

$(BUILD)/workloads/rust-spin-v0: tests/workloads/rust/spin.rs
	@mkdir -p $(@D)
	env -u MAKEFLAGS $(RUSTC) -O -C force-frame-pointers=yes -C symbol-mangling-version=v0 -o $@ $<

# A raw pthread for a Python process to start through ctypes
# (tests/workloads/python/native_thread.py).
$(BUILD)/workloads/libnativethread.so: tests/workloads/lib/nativethread.c tests/workloads/workload.h
	@mkdir -p $(@D)
	$(CC) -O1 -g -fno-omit-frame-pointer -fPIC -shared -Wall -Wextra -Werror -o $@ $< -lpthread

# Links Debian's libpython3.11 (the libpython3.11 package: what `perf`
# links) without starting Python.
$(BUILD)/workloads/pylinked: tests/workloads/pylinked.c tests/workloads/workload.h
	@mkdir -p $(@D)
	$(CC) -O1 -g -fno-omit-frame-pointer -Wall -Wextra -Werror -o $@ $< -l:libpython3.11.so.1.0

# A native recursion deeper than the unwinder's limit, called from Python
# through ctypes (tests/workloads/python/deep_native.py).
$(BUILD)/workloads/libdeeprec.so: tests/workloads/lib/deeprec.c tests/workloads/workload.h
	@mkdir -p $(@D)
	$(CC) -O1 -g -fno-omit-frame-pointer -fPIC -shared -Wall -Wextra -Werror -o $@ $<

# Issue 27's files: a tiny shared object that manymaps copies thousands of
# times, and one program built twice under one build-id with hot
# functions of other names (a modified copy claiming to be the real one).
$(BUILD)/workloads/libtiny.so: tests/workloads/lib/tiny.c
	@mkdir -p $(@D)
	$(CC) -O1 -fPIC -shared -nostdlib -Wall -Wextra -Werror -o $@ $<

$(BUILD)/workloads/manymaps: tests/workloads/manymaps.c tests/workloads/workload.h
	@mkdir -p $(@D)
	$(CC) -O1 -g -fno-omit-frame-pointer -Wall -Wextra -Werror -o $@ $<

TWIN_BUILD_ID := 0x5eed27a11ce0b0b5eed27a11ce0b0b5eed27a11c
$(BUILD)/workloads/twin-genuine: tests/workloads/twin/twin.c tests/workloads/workload.h
	@mkdir -p $(@D)
	$(CC) -O1 -g -fno-omit-frame-pointer -Wall -Wextra -Werror -DHOT=genuine_hot_loop \
		-Wl,--build-id=$(TWIN_BUILD_ID) -o $@ $<

$(BUILD)/workloads/twin-poison: tests/workloads/twin/twin.c tests/workloads/workload.h
	@mkdir -p $(@D)
	$(CC) -O1 -g -fno-omit-frame-pointer -Wall -Wextra -Werror -DHOT=poisond_hot_loop \
		-Wl,--build-id=$(TWIN_BUILD_ID) -o $@ $<

WORKLOAD_BINS += $(BUILD)/workloads/libtiny.so $(BUILD)/workloads/manymaps \
	$(BUILD)/workloads/twin-genuine $(BUILD)/workloads/twin-poison

WORKLOAD_BINS += $(BUILD)/workloads/templates $(BUILD)/workloads/rust-spin-legacy \
	$(BUILD)/workloads/rust-spin-v0 $(BUILD)/workloads/libnativethread.so \
	$(BUILD)/workloads/libdeeprec.so

workloads: $(WORKLOAD_BINS)

unit: deps-test $(UNIT_BINS)
	@set -e; for t in $(UNIT_BINS); do echo "== $$t"; \
		LSAN_OPTIONS=suppressions=$(CURDIR)/tests/unit/lsan.supp $$t --jobs 2; done

INTEGRATION_TESTS ?= tests/integration
# Under ASan+UBSan the daemon runs the suites that attack its input paths
# and those that drive its unwinding and symbolization code, and the
# speedscope suite (its encoder walks every sample of the model), and top's
# (its trees of callers and callees, and perfctl's screen).
SANITIZED_INTEGRATION_TESTS := tests/integration/test_protocol.py \
	tests/integration/test_cli.py tests/integration/test_daemon.py \
	tests/integration/test_symbols.py tests/integration/test_unwind.py \
	tests/integration/test_hostile.py tests/integration/test_auth.py \
	tests/integration/test_history.py tests/integration/test_memory.py \
	tests/integration/test_speedscope.py tests/integration/test_top.py \
	tests/integration/test_trust.py tests/integration/test_files.py \
	tests/integration/test_state.py tests/integration/test_metrics.py
# ... and the Python frames of one version per frame layout (3.8: frame
# objects, 3.11: is_entry, 3.13: shim frames), Debian's static build and the
# unsupported ones: the daemon reads other processes' memory there.
# test_memory's Python cases run those frame layouts only.  Not there: the
# workloads' checks of themselves (no daemon in them), and the tests of
# rates and counts (a leak's growth rate, the daemon's wake-ups busy and at
# rest, the RSS of a flooded daemon: ASan's quarantine and shadow memory
# are most of it), whose daemon paths the others run and which
# instrumentation only slows.
PLAIN_ONLY_K := (test_grow_faults_in_what_it_says or test_bad_arguments_are_usage_errors \
	or test_leak_grows_at_its_rate or test_flat_stays_flat \
	or test_blocked_grower_grows_while_blocked or test_a_slow_leak_is_marked_growing \
	or test_short_commands_do_not_wake_the_daemon or test_a_daemon_at_rest_wakes_about_once_a_second \
	or test_pipelining_client_that_never_reads_is_bounded or test_huge_perf_map_is_bounded)
SANITIZED_PYTHON_K := (pyenv-3.8 or pyenv-3.11 or pyenv-3.13 or debian or unsupported or installed)
SANITIZED_MEMORY_TESTS := -k "not $(PLAIN_ONLY_K)"
SANITIZED_PYTHON_TESTS := -k "$(SANITIZED_PYTHON_K)"
# test_soak.py runs in both builds, at a short scale (test_soak.py's
# PERFD_SOAK_SCALE default): the plain one checks perfd's RSS against its
# bound, the sanitized one that nothing per pid leaks (LSan, at perfd's
# exit).  `make soak` runs it plain at full scale: 20,000 processes, 1 M
# unique stacks, 10,000 threads.
#
# `make test` runs each integration test once, in the build that checks the
# most: the plain build runs what the sanitized one does not (the whole
# suite ran in both took 23.5 min here, over the 20 allowed; `make
# integration` still runs everything on one build).
empty :=
space := $(empty) $(empty)
SANITIZED_FILES_K := ($(subst $(space), or ,$(strip $(notdir $(SANITIZED_INTEGRATION_TESTS)))))
PLAIN_TESTS := -k "not ($(SANITIZED_FILES_K) and not $(PLAIN_ONLY_K)) \
	and not (test_python.py and $(SANITIZED_PYTHON_K))"

integration: deps-test all workloads
	PERFD_BUILD=$(CURDIR)/$(BUILD) $(PYTHON) -m pytest -v -p no:cacheprovider --durations=15 $(INTEGRATION_TESTS) $(PYTEST_ARGS)

soak: deps-test all workloads
	PERFD_SOAK_SCALE=1 PERFD_BUILD=$(CURDIR)/$(BUILD) $(PYTHON) -m pytest -v -s -p no:cacheprovider \
		--durations=5 tests/integration/test_soak.py $(PYTEST_ARGS)

# Builds run on every CPU; tests run one suite at a time (they measure
# shares of the CPUs).
NPROC := $(shell nproc)
unit-bins: $(UNIT_BINS)

# The unit suites run once too, under ASan+UBSan: the same assertions,
# with the sanitizers' checks on top.
test: deps-test
	$(MAKE) -j$(NPROC) all workloads
	$(MAKE) integration PYTEST_ARGS='$(PLAIN_TESTS)'
	$(MAKE) -j$(NPROC) SANITIZE=1 all unit-bins
	$(MAKE) SANITIZE=1 unit
	$(MAKE) SANITIZE=1 integration INTEGRATION_TESTS="$(SANITIZED_INTEGRATION_TESTS)" \
		PYTEST_ARGS='$(SANITIZED_MEMORY_TESTS)'
	$(MAKE) SANITIZE=1 integration INTEGRATION_TESTS=tests/integration/test_python.py \
		PYTEST_ARGS='$(SANITIZED_PYTHON_TESTS)'
	$(MAKE) SANITIZE=1 integration INTEGRATION_TESTS=tests/integration/test_soak.py
	$(MAKE) fuzz FUZZ_SECONDS=10
	$(MAKE) test-kernels

# --- fuzzing ------------------------------------------------------------
# libFuzzer harnesses (tests/fuzz/fuzz-*.c) over the parsers of what a
# client, a config file, a process or a file on disk hands perfd and
# perfctl.  `make fuzz-bins` builds the daemon's and the CLI's modules with
# clang into build-fuzz/ (the same rules, instrumented for coverage and with
# ASan+UBSan); `make fuzz` runs each target for FUZZ_SECONDS on a copy of
# its seed corpus (tests/fuzz/corpus/TARGET/), prints its executions and
# fails on the first crash, leak or timeout, naming the input that did it.
FUZZ_BUILD := build-fuzz
FUZZ_SECONDS ?= 60
FUZZ_SRCS := $(sort $(wildcard tests/fuzz/fuzz-*.c))
FUZZ_TARGETS := $(patsubst tests/fuzz/fuzz-%.c,%,$(FUZZ_SRCS))
FUZZ_SANFLAGS := -fsanitize=fuzzer-no-link,address,undefined -fno-omit-frame-pointer \
	-fno-sanitize-recover=undefined

.PHONY: fuzz fuzz-bins fuzz-harnesses
fuzz-bins:
	$(MAKE) -j$(NPROC) BUILD=$(FUZZ_BUILD) CC=$(CLANG) CFLAGS='-O1 -g' \
		SANFLAGS='$(FUZZ_SANFLAGS)' fuzz-harnesses

fuzz-harnesses: $(patsubst %,$(BUILD)/fuzz/fuzz-%,$(FUZZ_TARGETS))

# fuzz-state reads segments with no writer thread (its header says why).
$(BUILD)/fuzz/fuzz-state: FUZZ_LDFLAGS := -Wl,--wrap=state_writer_new,--wrap=state_writer_free

$(BUILD)/fuzz/fuzz-%: tests/fuzz/fuzz-%.c tests/fuzz/fuzz.h $(DAEMON_LIB_OBJS) $(CLI_LIB_OBJS)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -fsanitize=fuzzer -Icli -o $@ $(filter %.c %.o,$^) $(FUZZ_LDFLAGS) $(PKG_LIBS) \
		$(shell pkg-config --libs ncursesw) -lm

# Each target runs alone on one core (-jobs would share the cores with the
# other targets' builds and runs); -rss_limit_mb keeps a runaway allocation
# a finding rather than the host's problem.
fuzz: fuzz-bins
	@set -e; for t in $(FUZZ_TARGETS); do \
		dir=$(FUZZ_BUILD)/fuzz/run/$$t; rm -rf $$dir; mkdir -p $$dir/corpus $$dir/crashes; \
		cp tests/fuzz/corpus/$$t/* $$dir/corpus/ 2>/dev/null || true; \
		if ! $(FUZZ_BUILD)/fuzz/fuzz-$$t -max_total_time=$(FUZZ_SECONDS) -print_final_stats=1 \
			-rss_limit_mb=2048 -timeout=10 -artifact_prefix=$$dir/crashes/ \
			$$dir/corpus > $$dir/log 2>&1; then \
			tail -n 60 $$dir/log; echo "fuzz-$$t: FAILED, input: $$(ls $$dir/crashes/*)"; exit 1; fi; \
		printf 'fuzz-%-12s %12s executions in %ss, 0 crashes\n' $$t \
			"$$(sed -n 's/^stat::number_of_executed_units: *//p' $$dir/log)" $(FUZZ_SECONDS); \
	done

# The kernel matrix (tests/kernels/): Debian's 6.1, 6.12 and newest cloud
# kernels booted under QEMU's TCG, perfd checked in each; kernels and QEMU
# are downloaded once into $(BUILD)/kernels/ (KERNELS_REFRESH=1: again),
# figures in $(BUILD)/kernels/results.json.  Its workloads are the plain
# build's.
test-kernels: deps-test all workloads
	PERFD_BUILD=$(CURDIR)/$(BUILD) $(PYTHON) -m pytest -v -p no:cacheprovider tests/kernels $(PYTEST_ARGS)

run: deps all
	@mkdir -p run
	@echo "perfd: listening on $(SOCKET); in another shell:"
	@echo "  PERFD_SOCKET=$(SOCKET) $(BUILD)/perfctl status"
	@echo "  PERFD_SOCKET=$(SOCKET) $(BUILD)/perfctl ps"
	@echo "  PERFD_SOCKET=$(SOCKET) $(BUILD)/perfctl snapshot --pid PID --duration 5"
	exec $(BUILD)/perfd --socket $(SOCKET)

clean:
	rm -rf build build-san build-fuzz run

-include $(shell find $(BUILD) -name '*.d' 2>/dev/null)

# --- benchmarks (not part of `make test`) ------------------------------
# `make bench` measures perfd next to perf record and bpftrace and writes
# $(BUILD)/bench.json; `make bench-compare OLD=a.json NEW=b.json` prints the
# changes between two such files.  See docs/PERFORMANCE.md.
BENCH_WORKLOAD_SRCS := $(sort $(wildcard tests/bench/workloads/*.c))
BENCH_WORKLOAD_BINS := $(patsubst tests/bench/workloads/%.c,$(BUILD)/bench/%,$(BENCH_WORKLOAD_SRCS))
BENCH_ARGS ?=

# Like the test workloads: frame pointers everywhere, leaves included, so
# the frame-pointer walks of all three profilers see whole stacks.
$(BUILD)/bench/%: tests/bench/workloads/%.c tests/workloads/workload.h
	@mkdir -p $(@D)
	$(CC) -O1 -g -fno-omit-frame-pointer -mno-omit-leaf-frame-pointer -fno-inline -Wall -Wextra -Werror -o $@ $< -lm -lpthread

# Naming frames: perfd's symbolizer against eu-addr2line and addr2line on
# 10k addresses of a large library (issue: symbolization cost).
SYMBENCH_LIBRARY ?= $(firstword $(wildcard /usr/lib/x86_64-linux-gnu/libLLVM-*.so.1) \
	/usr/lib/x86_64-linux-gnu/libc.so.6)
$(BUILD)/bench/symbench: tests/bench/symbench.c $(DAEMON_LIB_OBJS)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -o $@ $^ $(PKG_LIBS) -lm

# Naming Python frames: the daemon's code-object reader and line tables on
# thousands of code objects of a live CPython (bench.py's phase
# python_symbolize_cost runs it).
$(BUILD)/bench/pybench: tests/bench/pybench.c $(DAEMON_LIB_OBJS)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -o $@ $^ $(PKG_LIBS) -lm

# The profile store over a simulated hour: synthetic samples of 500
# processes fed to the daemon's aggregator (bench.py's phase store_memory).
$(BUILD)/bench/storebench: tests/bench/storebench.c $(DAEMON_LIB_OBJS)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -o $@ $(filter %.c %.o,$^) $(PKG_LIBS) -lm

# What the profile store phases run besides perfd: the test workload that
# makes a new stack at nearly every sample, and storebench.
BENCH_STORE_BINS := $(BUILD)/workloads/unique_stacks $(BUILD)/bench/storebench

.PHONY: bench bench-compare bench-symbols bench-python bench-store
bench:
	@packaging/install-deps.sh bench
	$(MAKE) all $(BENCH_WORKLOAD_BINS) $(BUILD)/bench/pybench $(BENCH_STORE_BINS)
	$(PYTHON) tests/bench/bench.py --build $(BUILD) --big-library $(SYMBENCH_LIBRARY) $(BENCH_ARGS)
	$(MAKE) bench-symbols

# Only the profile store's figures (issue 10), into $(BUILD)/bench-store.*.
bench-store:
	@packaging/install-deps.sh bench
	$(MAKE) all $(BENCH_WORKLOAD_BINS) $(BENCH_STORE_BINS)
	$(PYTHON) tests/bench/bench.py --build $(BUILD) --phases store_snapshot,store_first_binary,store_memory \
		--big-library $(SYMBENCH_LIBRARY) \
		--out $(BUILD)/bench-store.json --markdown $(BUILD)/bench-store.md $(BENCH_ARGS)

# Only the Python-frame figures, into their own files ($(BUILD)/bench-python.*).
bench-python:
	@packaging/install-deps.sh bench
	$(MAKE) all $(BENCH_WORKLOAD_BINS) $(BUILD)/bench/pybench
	$(PYTHON) tests/bench/bench.py --build $(BUILD) --phases python_kernel_cost,python_symbolize_cost \
		--out $(BUILD)/bench-python.json --markdown $(BUILD)/bench-python.md $(BENCH_ARGS)

bench-symbols: $(BUILD)/bench/symbench
	$(BUILD)/bench/symbench $(SYMBENCH_LIBRARY) 10000 3 | tee $(BUILD)/bench-symbols.json

bench-compare:
	@test -n "$(OLD)" -a -n "$(NEW)" || { echo "usage: make bench-compare OLD=old.json NEW=new.json" >&2; exit 2; }
	$(PYTHON) tests/bench/bench.py --compare $(OLD) $(NEW)
