# zmem build.
#
# Plain GNU make: the tree is small, every layer is one folder of C files, and a
# newcomer can read this file top to bottom in a minute.  Each configuration
# (release, tests at ZM_DEBUG=2, ASan+UBSan, TSan) builds into its own
# directory, so they never mix objects.
#
#   make            build/libzmem.a, build/libzmem.so, build/zmem, build/zmem.pc
#                   (and build/libzmem-install.a, the static library installed,
#                   and build/libzmem-workload.a, the test data, not installed)
#   make demo       install missing packages, build, run the main job
#   make check      install missing packages, run every test in every build,
#                   each randomized one with a fixed seed (the same steps and
#                   output every run; a test's --seed N replays another);
#                   the builds side by side, then the stages, two tests at
#                   a time in all (see "tests" below)
#   make check-quick  the debug build's C unit tests, two at a time: the
#                   inner loop
#   make soak       the randomized tests (models, stress tests) in the debug
#                   build with random seeds and SOAK (10) times their steps,
#                   SOAK_ROUNDS (3) times over, the whole structure checked
#                   after every step; each prints its seed and steps, so a
#                   failure replays with --seed N --steps N
#   make install    honours PREFIX and DESTDIR; LIBDIR, INCDIR, BINDIR, MANDIR
#                   and BASHCOMPDIR follow PREFIX unless given

PREFIX   ?= /usr/local
LIBDIR   ?= $(PREFIX)/lib
INCDIR   ?= $(PREFIX)/include
BINDIR   ?= $(PREFIX)/bin
MANDIR   ?= $(PREFIX)/share/man
BASHCOMPDIR ?= $(PREFIX)/share/bash-completion/completions
DESTDIR  ?=
BUILD    ?= build
CC       ?= cc
OPT      ?= -O2
ZM_DEBUG ?= 0
SAN      ?=
# The version is the headers' (include/zmem/common.h), never written here,
# and its major number is the ABI's: ZMEM_VERSION_MAJOR goes up whenever
# a release breaks programs linked against the previous one, and only
# then (MINOR: calls added; PATCH: fixes).  So SOVERSION, the soname's
# number (libzmem.so.SOVERSION), is that major number, and the installed
# file, libzmem.so.MAJOR.MINOR.PATCH, starts with it: two ABIs never
# share a file name, and installing one leaves the other's programs
# their library.  Before this rule 0.2.0 was libzmem.so.1 in the file
# libzmem.so.0.2.0 (0.1: libzmem.so.0); 2.0.0 is the first version under
# it: its soname is libzmem.so.2 (the workload calls left the library,
# docs/api.md).
ZM_VER_PART = $(shell sed -n 's/^\#define ZMEM_VERSION_$(1)  *\([0-9][0-9]*\).*/\1/p' include/zmem/common.h)
VERSION  := $(call ZM_VER_PART,MAJOR).$(call ZM_VER_PART,MINOR).$(call ZM_VER_PART,PATCH)
SOVERSION := $(call ZM_VER_PART,MAJOR)
LD       ?= ld
OBJCOPY  ?= objcopy

# -Werror in CI (CI=true is set there) or when asked for.
ifeq ($(CI),true)
WERROR ?= 1
endif
WERROR ?= 0

WARN   := -Wall -Wextra -Wshadow -Wpointer-arith -Wstrict-prototypes \
          -Wmissing-prototypes -Wno-unused-parameter
ifeq ($(WERROR),1)
WARN   += -Werror
endif
CPPFLAGS_ZM := -Iinclude -Isrc -DZM_DEBUG=$(ZM_DEBUG) -D_GNU_SOURCE
CFLAGS_ZM   := -std=gnu11 $(OPT) -g -fPIC -fvisibility=hidden -pthread $(WARN)
ifneq ($(SAN),)
CFLAGS_ZM   += -fsanitize=$(SAN) -fno-omit-frame-pointer -fno-sanitize-recover=all
LDFLAGS_ZM  += -fsanitize=$(SAN)
endif
LDLIBS_ZM   := -pthread -lm

# Codecs: liblz4 and libzstd always; liblzo2 (GPL) only when ZM_WITH_LZO is
# 1, or auto (the default) and pkg-config finds it.  See include/zmem/codec.h.
ZM_WITH_LZO ?= auto
ifeq ($(ZM_WITH_LZO),auto)
override ZM_WITH_LZO := $(shell pkg-config --exists lzo2 2>/dev/null && echo 1 || echo 0)
endif
ZM_CODEC_PKGS := liblz4 libzstd
ifeq ($(ZM_WITH_LZO),1)
ZM_CODEC_PKGS += lzo2
CPPFLAGS_ZM += -DZM_HAVE_LZO=1
endif
CPPFLAGS_ZM += $(shell pkg-config --cflags $(ZM_CODEC_PKGS) 2>/dev/null)
LDLIBS_ZM   += $(shell pkg-config --libs $(ZM_CODEC_PKGS) 2>/dev/null || \
                 echo -llz4 -lzstd $(if $(filter lzo2,$(ZM_CODEC_PKGS)),-llzo2))
# NBD as the backing store (backing_uri, src/store/backing_nbd.c): built
# with libnbd's header when pkg-config finds it (libnbd-dev), and the
# library loaded at run time by the first store that names an export (so
# not linked, and not in zmem.pc); without the header, backing_uri is
# -EOPNOTSUPP.
ZM_WITH_LIBNBD ?= auto
ifeq ($(ZM_WITH_LIBNBD),auto)
override ZM_WITH_LIBNBD := $(shell pkg-config --exists libnbd 2>/dev/null && echo 1 || echo 0)
endif
ifeq ($(ZM_WITH_LIBNBD),1)
CPPFLAGS_ZM += -DZM_HAVE_LIBNBD=1 $(shell pkg-config --cflags libnbd 2>/dev/null)
endif
# What zmem.pc asks of a program that links libzmem statically.  Users'
# `pkg-config --cflags zmem` must name zmem's headers and nothing else, and
# pkg-config hands every Requires.private package's cflags on: so only the
# codecs whose .pc has no cflags (liblz4, libzstd) are required there, and
# the others (lzo2: -I/usr/include/lzo) go into Libs.private as their libs.
ZM_PC_REQUIRES := $(foreach p,$(ZM_CODEC_PKGS),$(if $(strip $(shell \
                    pkg-config --cflags $(p) 2>/dev/null)),,$(p)))
ZM_PC_LIBS     := -pthread -lm $(foreach p,$(filter-out $(ZM_PC_REQUIRES),$(ZM_CODEC_PKGS)),\
                    $(shell pkg-config --libs $(p) 2>/dev/null))

# Every layer is a folder; every .c in it belongs to the library, and so
# does every .c one folder down (a layer's parts with several files: the
# pool's backends, src/pool/zsmalloc/ and the others).
LAYERS   := base pages pool codec store tmem region
LIB_SRC  := $(foreach l,$(LAYERS),$(wildcard src/$(l)/*.c src/$(l)/*/*.c))
ifneq ($(ZM_WITH_LZO),1)
LIB_SRC  := $(filter-out src/codec/lzo.c,$(LIB_SRC))
endif
# The test data (src/workload: generated pages, process capture) is a
# library of its own, libzmem-workload.a, for the zmem command and the
# tests; it is not part of libzmem and is not installed (docs/api.md).
WORKLOAD_SRC := $(wildcard src/workload/*.c)
WORKLOAD_OBJ := $(WORKLOAD_SRC:%.c=$(BUILD)/%.o)
# The front ends: the zmem command (its user commands in src/cli, its
# benchmarks in src/bench) and the NBD server it runs (zmem serve).
SERVE_SRC := $(wildcard src/serve/*.c)
CLI_SRC  := $(wildcard src/cli/*.c src/bench/*.c src/tool/*.c) $(SERVE_SRC)
LIB_OBJ  := $(LIB_SRC:%.c=$(BUILD)/%.o)
SERVE_OBJ := $(SERVE_SRC:%.c=$(BUILD)/%.o)
CLI_OBJ  := $(CLI_SRC:%.c=$(BUILD)/%.o)
# The preload library of zmem run (src/run/, docs/run.md): libzmem's
# objects and its own in one shared library, loaded into programs with
# LD_PRELOAD, exporting only the calls it interposes (src/run/exports.map).
# It loads Debian's libmimalloc (libmimalloc2.0; libmimalloc-dev for its
# header) at run time.
RUN_SRC  := $(wildcard src/run/*.c)
RUN_OBJ  := $(RUN_SRC:%.c=$(BUILD)/%.o)
# Header dependencies are the compiler's (-MMD -MP: a .d file beside each
# object), so that editing one header rebuilds only what includes it.
DEPS     = $(LIB_OBJ:.o=.d) $(RUN_OBJ:.o=.d) $(WORKLOAD_OBJ:.o=.d) $(CLI_OBJ:.o=.d) $(TESTS:=.d)

# Tests: tests/test_*.c, one binary each, linked with cmocka.
# Threaded tests are named test_*_stress.c; TSan runs only those, but for
# test_fork_stress: ThreadSanitizer turns itself off in the child of a
# multi-threaded fork, which then checks nothing, and its runtime's own
# locks, held by another thread at the fork, can leave that child hung
# (it did, now and then, in test_fork_while_busy).  The debug and ASan
# builds run it.
TEST_SRC := $(wildcard tests/test_*.c)
TESTS    := $(TEST_SRC:tests/%.c=$(BUILD)/tests/%)
# test_region_stress is left out too: a region's writes are ordered with
# its eviction by the kernel (write-protection through userfaultfd, the
# faulting thread's SIGBUS), which ThreadSanitizer cannot see, so it
# reports the compressor reading a page a writer wrote as a race (and
# under it the ZM_REGION_WAIT case ran past 5 minutes).  The debug and
# ASan builds run it.
TSAN_TESTS := $(filter-out %/test_fork_stress %/test_region_stress,$(filter %_stress,$(TESTS)))
# Interop tests: tests/interop/test_*.sh run zmem serve with real clients
# (qemu-io, qemu-img, nbdcopy, nbdinfo, fio, valgrind), copied beside the
# build's test binaries with their shared lib.sh as interop.sh.
INTEROP  := $(patsubst tests/interop/%,$(BUILD)/tests/%,$(wildcard tests/interop/test_*.sh))
TESTS    += $(INTEROP)
# Library tests: tests/lib/test_*.sh check the built library as users link
# it (its exported symbols, an install into a prefix).
LIBTESTS := $(patsubst tests/lib/%,$(BUILD)/tests/%,$(wildcard tests/lib/test_*.sh))
TESTS    += $(LIBTESTS)
# Command tests: tests/cli/test_*.sh run the zmem command as users do (bad
# input, help, --json, progress), copied beside the build's test binaries.
CLITESTS := $(patsubst tests/cli/%,$(BUILD)/tests/%,$(wildcard tests/cli/test_*.sh))
TESTS    += $(CLITESTS)
# Preload tests: tests/run/test_*.sh run the programs of tests/run/ (plain
# C programs that check their own heap) under libzmem-run.so.
RUNTESTS := $(patsubst tests/run/%,$(BUILD)/tests/%,$(wildcard tests/run/test_*.sh))
RUN_PROGS := $(BUILD)/tests/run/heap $(BUILD)/tests/run/board
TESTS    += $(RUNTESTS)
# The programs `zmem runbench` runs (and the run tests may): bench/run/,
# the scripts copied and the C program built beside the zmem binary, in
# $(BUILD)/bench/run/, where runbench looks for them.
RUNPROGS := $(BUILD)/bench/run/dict.py $(BUILD)/bench/run/objects.js $(BUILD)/bench/run/arrays

.PHONY: all lib deps demo check check-quick check-debug check-asan check-tsan check-fuzz \
        check-memcheck check-arm64 check-build-debug check-build-asan check-build-tsan \
        check-build-fuzz check-build-arm64 check-layers fuzz test-run test-build soak install uninstall clean FORCE
all: lib $(BUILD)/zmem $(BUILD)/zmem.pc $(BUILD)/libzmem-run.so $(RUNPROGS)
lib: $(BUILD)/libzmem.a $(BUILD)/libzmem.so $(BUILD)/libzmem-install.a

# Objects also depend on this file: its flags are theirs, and an object
# built before the .d files existed has none to say what it includes.
$(BUILD)/%.o: %.c Makefile
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS_ZM) $(CPPFLAGS) $(CFLAGS_ZM) $(CFLAGS) -MMD -MP -c $< -o $@

$(BUILD)/libzmem.a: $(LIB_OBJ)
	rm -f $@ && ar rcs $@ $^

# The static library that is installed: every object linked into one
# relocatable object whose hidden symbols are then made local, so that a
# program linking libzmem statically sees the calls the headers declare
# (ZM_API) and nothing else, as with the shared library.  The tests and
# the zmem command link the plain archive above: they call internals.
$(BUILD)/libzmem-install.a: $(LIB_OBJ)
	$(LD) -r -o $(BUILD)/libzmem-install.o $^
	$(OBJCOPY) --localize-hidden $(BUILD)/libzmem-install.o
	rm -f $@ && ar rcs $@ $(BUILD)/libzmem-install.o

$(BUILD)/libzmem.so: $(LIB_OBJ)
	$(CC) -shared -Wl,-soname,libzmem.so.$(SOVERSION) $(LDFLAGS_ZM) $(LDFLAGS) -o $@ $^ $(LDLIBS_ZM)

$(BUILD)/libzmem-run.so: $(RUN_OBJ) $(LIB_OBJ) src/run/exports.map
	$(CC) -shared -Wl,--version-script=src/run/exports.map $(LDFLAGS_ZM) $(LDFLAGS) \
	    -o $@ $(RUN_OBJ) $(LIB_OBJ) $(LDLIBS_ZM) -ldl

$(BUILD)/libzmem-workload.a: $(WORKLOAD_OBJ)
	rm -f $@ && ar rcs $@ $^

$(BUILD)/zmem: $(CLI_OBJ) $(BUILD)/libzmem-workload.a $(BUILD)/libzmem.a
	$(CC) $(LDFLAGS_ZM) $(LDFLAGS) -o $@ $(CLI_OBJ) $(BUILD)/libzmem-workload.a \
	    $(BUILD)/libzmem.a $(LDLIBS_ZM)

# zmem.pc names the directories of the make that writes it, so it is
# written again whenever they change, whatever was built before: zmem.pc.vars
# holds the values it was made from and is rewritten only when they differ
# (`make; make install PREFIX=/opt/zmem` installs a zmem.pc naming /opt/zmem).
ZM_PC_VARS := prefix=$(PREFIX) libdir=$(LIBDIR) includedir=$(INCDIR) \
              version=$(VERSION) requires=$(strip $(ZM_PC_REQUIRES)) libs=$(strip $(ZM_PC_LIBS))
$(BUILD)/zmem.pc.vars: FORCE
	@mkdir -p $(dir $@)
	@printf '%s\n' '$(ZM_PC_VARS)' | cmp -s - $@ || printf '%s\n' '$(ZM_PC_VARS)' > $@

$(BUILD)/zmem.pc: zmem.pc.in $(BUILD)/zmem.pc.vars Makefile
	sed -e 's|@PREFIX@|$(PREFIX)|' -e 's|@LIBDIR@|$(LIBDIR)|' \
	    -e 's|@INCDIR@|$(INCDIR)|' -e 's|@VERSION@|$(VERSION)|' \
	    -e 's|@REQUIRES_PRIVATE@|$(strip $(ZM_PC_REQUIRES))|' \
	    -e 's|@LIBS_PRIVATE@|$(strip $(ZM_PC_LIBS))|' $< > $@

# the server's objects, for the tests that run it in-process
$(BUILD)/libzmem-serve.a: $(SERVE_OBJ)
	rm -f $@ && ar rcs $@ $^

$(BUILD)/tests/%: tests/%.c $(BUILD)/libzmem.a $(BUILD)/libzmem-serve.a $(BUILD)/libzmem-workload.a
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS_ZM) $(CPPFLAGS) $(CFLAGS_ZM) $(CFLAGS) $(LDFLAGS_ZM) $(LDFLAGS) \
	    -MMD -MP -MF $@.d \
	    -o $@ $< $(BUILD)/libzmem-serve.a $(BUILD)/libzmem-workload.a $(BUILD)/libzmem.a \
	    -lcmocka $(LDLIBS_ZM)

$(BUILD)/tests/interop.sh: tests/interop/lib.sh
	@mkdir -p $(dir $@)
	cp $< $@

# the shell tests' TAP report, sourced by every one of them
$(BUILD)/tests/tap.sh: tests/tap.sh
	@mkdir -p $(dir $@)
	cp $< $@

$(BUILD)/tests/%.sh: tests/interop/%.sh $(BUILD)/tests/interop.sh $(BUILD)/tests/tap.sh $(BUILD)/zmem
	cp $< $@ && chmod +x $@

$(BUILD)/tests/%.sh: tests/lib/%.sh $(BUILD)/tests/tap.sh $(BUILD)/libzmem.so $(BUILD)/zmem.pc
	@mkdir -p $(dir $@)
	cp $< $@ && chmod +x $@

$(BUILD)/tests/%.sh: tests/cli/%.sh $(BUILD)/tests/tap.sh $(BUILD)/zmem
	@mkdir -p $(dir $@)
	cp $< $@ && chmod +x $@

# zmem run's tests: a stand-in for the preload library that speaks the
# board (the launcher's side tested apart from the library), and a C
# program of large malloc arrays.  Built without the sanitizers: they run
# under LD_PRELOAD, and a sanitizer's runtime must come first there.
$(BUILD)/tests/run-fake.so: tests/run/fake_preload.c src/run/board.h Makefile
	@mkdir -p $(dir $@)
	$(CC) -std=gnu11 -O1 -g -fPIC -shared -pthread $(WARN) -Isrc -o $@ $<
$(BUILD)/tests/run-malloc: tests/run/malloc_work.c Makefile
	@mkdir -p $(dir $@)
	$(CC) -std=gnu11 -O1 -g $(WARN) -o $@ $<
$(BUILD)/tests/test_run.sh: $(BUILD)/tests/run-fake.so $(BUILD)/tests/run-malloc \
                            $(BUILD)/libzmem-run.so

$(BUILD)/tests/%.sh: tests/run/%.sh $(BUILD)/tests/tap.sh $(BUILD)/libzmem-run.so $(RUN_PROGS)
	@mkdir -p $(dir $@)
	cp $< $@ && chmod +x $@

# the programs run under the preload: not linked with libzmem
$(BUILD)/tests/run/heap: tests/run/heap.c
	@mkdir -p $(dir $@)
	$(CC) -std=gnu11 $(OPT) -g -pthread $(WARN) -o $@ $< -pthread
$(BUILD)/tests/run/board: tests/run/board.c src/run/board.c src/run/run.h src/run/board.h
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS_ZM) -std=gnu11 $(OPT) -g $(WARN) -o $@ tests/run/board.c src/run/board.c

$(BUILD)/bench/run/%: bench/run/%
	@mkdir -p $(dir $@)
	cp $< $@

# a plain program as users build theirs: no library, no sanitizer (a
# sanitizer's allocator would stand where zmem run puts its own), -O2 in
# every build so its times compare
$(BUILD)/bench/run/arrays: bench/run/arrays.c Makefile
	@mkdir -p $(dir $@)
	$(CC) -std=gnu11 -O2 -g $(WARN) -o $@ $<

$(BUILD)/tests/test_runbench.sh: $(RUNPROGS)

# test_benchmarks runs the zmem command of the same build.
$(BUILD)/tests/test_benchmarks: $(BUILD)/zmem

# ---- set-up -------------------------------------------------------------
deps:
	@sh scripts/deps.sh

# ---- the main job -------------------------------------------------------
demo: deps
	$(MAKE) all
	$(BUILD)/zmem pagebench --max-size 64M
	$(BUILD)/zmem bench

# ---- tests -------------------------------------------------------------
# test-run runs the tests of one configuration and appends their counts
# (and seconds) to $(RESULTS); check runs every configuration and prints
# the total.
RESULTS ?= $(BUILD)/results
RUN_TESTS ?= $(TESTS)
# The C unit tests, the test binaries: what check-quick runs.
UNIT_TESTS = $(filter-out %.sh,$(TESTS))
# Tests at a time in test-run (tests/run.sh -j): two for two CPUs.  Each
# test keeps its output and prints it whole, in the order of the list.
TEST_JOBS ?= 2
# Tests that run with nothing else beside them, in any stage: those whose
# checks are on elapsed time (the server's time limits; qemu-img map's
# bound; test_policy's compactor within its grace window, a second), and
# test_serve_access.sh, which plays another user in the fixed folder
# /tmp/zmem-65534 (its debug and ASan runs would meet there).  They run
# last in their stage.
TESTS_ALONE := test_nbd_limits test_serve_qemu.sh test_serve_access.sh test_policy
# The slowest tests start first, in this order, so that a stage does not
# end with one of them running by itself.
SLOW_TESTS := test_commands.sh test_install.sh test_benchmarks test_serve_tiering.sh \
              test_pool_model test_mixed_stress test_nbd
test_order = $(foreach t,$(SLOW_TESTS),$(filter %/$(t),$(1))) \
             $(filter-out $(addprefix %/,$(SLOW_TESTS) $(TESTS_ALONE)),$(1)) \
             $(foreach t,$(TESTS_ALONE),$(filter %/$(t),$(1)))
# A test that builds and checks a configuration of its own (the release
# build, installed) does the same work in every stage: the debug stage
# runs it, the sanitizer stages do not.
TESTS_ONCE := test_install.sh
ASAN_TESTS  = $(filter-out $(addprefix %/,$(TESTS_ONCE)),$(TESTS))
# The tests are built with -k first: a build that fails counts as one
# failure, and each test it left out of date is removed (an earlier
# build's binary would run in its place) and counts as another
# (tests/run.sh); the tests that were built still run.  Two lines: make
# -n runs the first (it names $(MAKE)), not the tests.
test-run:
	@$(MAKE) -k $(RUN_TESTS) || { echo "== $(BUILD): the build failed (errors above)"; \
	  mkdir -p $(dir $(RESULTS)); echo "$(BUILD)/build 0 1" >> $(RESULTS); \
	  for t in $(RUN_TESTS); do $(MAKE) -s -q $$t 2>/dev/null || rm -f $$t; done; }
	@ZMEM=$(abspath $(BUILD)/zmem) ZM_SAN=$(SAN) ZM_TESTS_ALONE='$(TESTS_ALONE)' \
	  sh tests/run.sh -j $(TEST_JOBS) $(RESULTS) $(TEST_WRAP) -- $(call test_order,$(RUN_TESTS))
# test-build: the same tests built, nothing run (check builds every
# configuration first, side by side; a failure is counted by test-run).
test-build:
	$(MAKE) -k $(RUN_TESTS)

# The configurations, each in its own folder.
DEBUG_VARS := BUILD=build/check ZM_DEBUG=2 OPT=-O1
ASAN_VARS  := BUILD=build/asan ZM_DEBUG=2 OPT=-O1 SAN=address,undefined
TSAN_VARS  := BUILD=build/tsan ZM_DEBUG=1 OPT=-O1 SAN=thread

# make check, on two CPUs: first every configuration's build, two jobs at
# a time (CHECK_BUILDS); then the stages, CHECK_JOBS at a time, whose
# tests share TEST_JOBS slots (tests/run.sh, ZM_TEST_SLOTS): two tests run
# at a time in all, whichever stage they belong to, and a test in
# TESTS_ALONE runs by itself.  A stage runs its tests with test-run (or
# tests/run.sh) and appends their counts to build/results; the last line
# of make check is the total, "N passed, N failed", and make check fails
# if anything failed.  The longest stage comes first.
CHECK_STAGES := check-asan check-debug check-tsan check-fuzz check-memcheck check-arm64
CHECK_BUILDS := check-build-asan check-build-debug check-build-tsan check-build-fuzz \
                check-build-arm64
CHECK_JOBS   ?= 2
CHECK_BUILD_JOBS ?= 2
# Every #include goes down the layers or stays in its folder (the table is
# in the script and in docs/hacking.md): a grep, run first by make check.
check-layers:
	@sh scripts/check-layers.sh

check: deps check-layers
	@rm -rf build/results build/slots && mkdir -p build/slots
	@echo "== building every configuration (build/check-build.log)"
	@$(MAKE) -k -j$(CHECK_BUILD_JOBS) $(CHECK_BUILDS) > build/check-build.log 2>&1 || \
	  echo "check: a build failed (build/check-build.log; its stage counts it)"
	@ZM_TEST_SLOTS=$(CURDIR)/build/slots $(MAKE) -k -j$(CHECK_JOBS) $(CHECK_STAGES); st=$$?; \
	  sh tests/run.sh --times build/results | head -11; \
	  sh tests/run.sh --total build/results; st2=$$?; \
	  [ $$st -eq 0 ] && [ $$st2 -eq 0 ]

check-build-debug:
	$(MAKE) $(DEBUG_VARS) test-build
check-build-asan:
	$(MAKE) $(ASAN_VARS) RUN_TESTS='$$(ASAN_TESTS)' test-build
check-build-tsan:
	$(MAKE) $(TSAN_VARS) RUN_TESTS='$$(TSAN_TESTS)' test-build
check-build-fuzz:
	@if command -v clang >/dev/null 2>&1; then $(MAKE) fuzz; fi

check-debug:
	$(MAKE) $(DEBUG_VARS) RESULTS=$(CURDIR)/build/results test-run
check-asan:
	$(MAKE) $(ASAN_VARS) RUN_TESTS='$$(ASAN_TESTS)' RESULTS=$(CURDIR)/build/results test-run
# TSan needs a fixed address layout on kernels with high mmap entropy.
check-tsan:
	$(MAKE) $(TSAN_VARS) TEST_WRAP="setarch -R" \
	    RUN_TESTS='$$(TSAN_TESTS)' RESULTS=$(CURDIR)/build/results test-run

# The inner loop: the debug build's C unit tests, two at a time.
check-quick:
	@rm -f build/quick-results
	@$(MAKE) --no-print-directory $(DEBUG_VARS) RESULTS=$(CURDIR)/build/quick-results \
	    RUN_TESTS='$$(UNIT_TESTS)' test-run; st=$$?; \
	  sh tests/run.sh --total build/quick-results && [ $$st -eq 0 ]

# memcheck: a store test and tmem tests of the debug build under valgrind
# (uninitialised reads, which the sanitizer builds do not see); ZM_TESTS
# picks the cases (tests/testutil.h), about a minute in all.
MEMCHECK_CASES = test_limit_auto_compact,test_roundtrip,test_flush
check-memcheck:
	ZM_TEST_TAG=memcheck $(MAKE) $(DEBUG_VARS) RESULTS=$(CURDIR)/build/results \
	    RUN_TESTS='$$(BUILD)/tests/test_store $$(BUILD)/tests/test_tmem' \
	    TEST_WRAP="env ZM_TESTS=$(MEMCHECK_CASES) valgrind --tool=memcheck \
	    --error-exitcode=1 --track-origins=yes -q" test-run

# The randomized tests: the models and stress tests, and the allocators'
# suites, which run a model after their unit tests.  Under
# ZM_SOAK=N (testutil.h) each draws a new seed, runs N times its steps
# and checks the whole structure after every step in every build.
SOAK ?= 10
SOAK_ROUNDS ?= 3
SOAK_TESTS = $(filter %_model %_stress %/test_xvmalloc %/test_xcfmalloc %/test_zbud,$(TESTS))
soak:
	@rm -f build/soak-results
	@r=1; while [ $$r -le $(SOAK_ROUNDS) ]; do echo "== soak round $$r of $(SOAK_ROUNDS), ZM_SOAK=$(SOAK)"; \
	    ZM_SOAK=$(SOAK) $(MAKE) --no-print-directory $(DEBUG_VARS) \
	        RESULTS=$(CURDIR)/build/soak-results RUN_TESTS='$$(SOAK_TESTS)' test-run || break; \
	    r=$$((r + 1)); done; sh tests/run.sh --total build/soak-results

# libFuzzer harnesses (tests/fuzz/*.c), built with clang and its runtime;
# check-fuzz runs each for FUZZ_SECONDS, two at a time like the tests
# (tests/run.sh), when clang is there, and says so when it is not.
FUZZ_SECONDS ?= 30
FUZZ_SRC := $(wildcard tests/fuzz/*.c)
FUZZ_BIN := $(FUZZ_SRC:tests/%.c=build/%)
fuzz:
	$(MAKE) BUILD=build/fuzz CC=clang ZM_DEBUG=2 OPT=-O1 WERROR=0 \
	    SAN=address,undefined,fuzzer-no-link build/fuzz/libzmem.a
	$(MAKE) $(FUZZ_BIN)
$(FUZZ_BIN): build/fuzz/%: tests/fuzz/%.c build/fuzz/libzmem.a $(SERVE_SRC) \
             $(wildcard src/serve/*.h include/zmem/*.h)
	clang $(CPPFLAGS_ZM) -g -O1 -fsanitize=fuzzer,address,undefined \
	    -o $@ $< $(SERVE_SRC) build/fuzz/libzmem.a $(LDLIBS_ZM)
check-fuzz:
	@if command -v clang >/dev/null 2>&1; then \
	    if ! $(MAKE) fuzz; then echo "build/fuzz/build 0 1" >> $(CURDIR)/build/results; exit 1; fi; \
	    FUZZ_SECONDS=$(FUZZ_SECONDS) sh tests/run.sh -j $(TEST_JOBS) \
	        $(CURDIR)/build/results -- $(FUZZ_BIN); \
	else echo "check-fuzz: clang not found, fuzzing skipped"; fi

# ---- arm64 --------------------------------------------------------------
# check-arm64 cross-builds the library, the zmem command and the C unit
# tests for arm64 with Debian's aarch64-linux-gnu cross compiler, against
# the arm64 codec and cmocka libraries that multiarch installs beside the
# host's (scripts/deps.sh), and runs the tests under qemu-user, counting
# them in $(RESULTS) as test-run does.  They run on that arm64 C library
# (/lib/ld-linux-aarch64.so.1), not under `qemu -L /usr/aarch64-linux-gnu`:
# the cross compiler's loader there is another build of glibc than the
# libc.so.6 it then finds through ld.so.cache, and the pair loops in
# pthread_create.  ZM_TEST_EMULATED tells the tests that bound what
# happens within a time that their clock runs many times faster than
# the code (they skip those checks).  Left out (figures:
# docs/results/2026-12-04-check-arm64.md):
#   the shell tests (interop, cli, lib): servers, real clients and
#     installs, none of it arm64 code;
#   %_stress: threads racing for seconds, for interleavings that qemu on
#     an x86 host cannot make arm64's (the host orders memory);
#   test_pool_model: 17 s of CPU natively, unfinished after 5 minutes
#     under qemu;
#   test_nbd_limits: the server's deadlines, in seconds;
#   test_fixed_cost: resident memory, which under qemu is the emulator's;
#   test_benchmarks: runs the zmem command, an arm64 program the host
#     cannot start without binfmt_misc;
#   test_pool_ids: 65,000 pool creations, each reserving its tables'
#     address space; qemu-user kept what the pools gave back and grew to
#     the machine's 24 GiB, where the kernel killed it.
ARM64_CROSS ?= aarch64-linux-gnu-
ARM64_QEMU  ?= qemu-aarch64
ARM64_SKIP  := %_stress %/test_pool_model %/test_nbd_limits %/test_fixed_cost \
               %/test_benchmarks %/test_pool_ids
ARM64_TESTS  = $(filter-out $(ARM64_SKIP),$(filter-out %.sh,$(TESTS)))
ARM64_MAKE   = PKG_CONFIG_LIBDIR=/usr/lib/aarch64-linux-gnu/pkgconfig:/usr/share/pkgconfig \
               $(MAKE) BUILD=build/arm64 ZM_DEBUG=2 OPT=-O1 CC=$(ARM64_CROSS)gcc \
               LD=$(ARM64_CROSS)ld OBJCOPY=$(ARM64_CROSS)objcopy
check-build-arm64:
	$(ARM64_MAKE) all
	$(ARM64_MAKE) RUN_TESTS='$$(ARM64_TESTS)' test-build
# The zmem command runs once too (density: every backend and lz4 on 4 MiB
# of the system's files), counted as one test.
check-arm64:
	@sh scripts/deps.sh
	@mkdir -p build; r=$(CURDIR)/build/results; \
	  if ! $(ARM64_MAKE) all; then echo "== build/arm64: the build failed (errors above)"; \
	      echo "build/arm64/zmem 0 1" >> $$r; \
	  elif $(ARM64_QEMU) build/arm64/zmem density -q -s 4M > build/arm64/zmem.log 2>&1; then \
	      echo "== build/arm64/zmem density -s 4M: ran"; echo "build/arm64/zmem 1 0" >> $$r; \
	  else cat build/arm64/zmem.log; echo "build/arm64/zmem 0 1" >> $$r; fi
	@ZM_TEST_EMULATED=$(ARM64_QEMU) $(ARM64_MAKE) TEST_WRAP=$(ARM64_QEMU) \
	    RUN_TESTS='$$(ARM64_TESTS)' RESULTS=$(CURDIR)/build/results test-run

# ---- install ------------------------------------------------------------
# libzmem.so.VERSION is the file, libzmem.so.SOVERSION (the soname, what
# programs look for at run time) and libzmem.so (what -lzmem finds) link to
# it; VERSION starts with SOVERSION, so another ABI's files (an older
# libzmem.so.1 and its file) stay, and uninstall removes only this one's.
# The static library installed is libzmem-install.a (public symbols
# only), under the usual name.
install: all
	install -d $(DESTDIR)$(LIBDIR)/pkgconfig $(DESTDIR)$(INCDIR)/zmem $(DESTDIR)$(BINDIR) \
	    $(DESTDIR)$(MANDIR)/man1 $(DESTDIR)$(MANDIR)/man3 $(DESTDIR)$(BASHCOMPDIR)
	install -m 644 $(BUILD)/libzmem-install.a $(DESTDIR)$(LIBDIR)/libzmem.a
	install -m 755 $(BUILD)/libzmem.so $(DESTDIR)$(LIBDIR)/libzmem.so.$(VERSION)
	ln -sf libzmem.so.$(VERSION) $(DESTDIR)$(LIBDIR)/libzmem.so.$(SOVERSION)
	ln -sf libzmem.so.$(SOVERSION) $(DESTDIR)$(LIBDIR)/libzmem.so
	install -m 644 include/zmem/*.h $(DESTDIR)$(INCDIR)/zmem/
	install -m 644 $(BUILD)/zmem.pc $(DESTDIR)$(LIBDIR)/pkgconfig/
	install -m 755 $(BUILD)/zmem $(DESTDIR)$(BINDIR)/
	install -d $(DESTDIR)$(LIBDIR)/zmem
	install -m 755 $(BUILD)/libzmem-run.so $(DESTDIR)$(LIBDIR)/zmem/
	install -m 644 docs/libzmem.3 $(DESTDIR)$(MANDIR)/man3/
	install -m 644 docs/zmem.1 $(DESTDIR)$(MANDIR)/man1/
	install -m 644 scripts/zmem.bash $(DESTDIR)$(BASHCOMPDIR)/zmem

uninstall:
	rm -f $(DESTDIR)$(LIBDIR)/libzmem.a $(DESTDIR)$(LIBDIR)/libzmem.so \
	      $(DESTDIR)$(LIBDIR)/libzmem.so.$(SOVERSION) $(DESTDIR)$(LIBDIR)/libzmem.so.$(VERSION) \
	      $(DESTDIR)$(LIBDIR)/pkgconfig/zmem.pc $(DESTDIR)$(BINDIR)/zmem \
	      $(DESTDIR)$(MANDIR)/man3/libzmem.3 $(DESTDIR)$(MANDIR)/man1/zmem.1 \
	      $(DESTDIR)$(BASHCOMPDIR)/zmem $(DESTDIR)$(LIBDIR)/zmem/libzmem-run.so
	rmdir $(DESTDIR)$(LIBDIR)/zmem 2>/dev/null || true
	rm -rf $(DESTDIR)$(INCDIR)/zmem

clean:
	rm -rf build

-include $(DEPS)
