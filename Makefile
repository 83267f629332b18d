# Thin wrapper over CMake/CTest.
#   make            the library, the tool and the examples (cmake and a C
#                   compiler; installs nothing)
#   make install    the same, into PREFIX (default /usr/local); `make
#                   uninstall` takes it out again
#   make run        installs what the benchmark's peers need (as root, on
#                   Debian), then runs cpuhog bench --quick
#   make check      installs what the tests need (the same way), builds
#                   the tests and runs the verdicts: every test but those
#                   labelled timing
#   make check-timing  the timing tests (ctest -L timing): figures of how
#                   long things take, asserting only hangs
#   make check-smp  the same tests inside emulated QEMU guests with SMP
#                   vCPUs each (default 8; SMP="4 16 64" for several)
#   make check-arm64  the library and its tests cross-built for arm64 and
#                   run under qemu-aarch64-static, then the rseq fence's
#                   example and test in an emulated arm64 system guest
#   make soak-smp   the reliability storms, longer, in a 16-vCPU guest
BUILD    ?= build
PREFIX   ?= /usr/local
JOBS     ?= $(shell nproc)
CMAKE_FLAGS ?=

.PHONY: all deps build run check check-timing check-asan check-tsan check-smp check-arm64 soak soak-smp install uninstall clean format

all: build

deps:
	@sh scripts/deps.sh

# Configured once; PREFIX goes in at install time.
$(BUILD)/CMakeCache.txt:
	cmake -S . -B $(BUILD) $(CMAKE_FLAGS)

build: $(BUILD)/CMakeCache.txt
	cmake --build $(BUILD) -j$(JOBS)

run: deps
	$(MAKE) build
	$(BUILD)/tools/cpuhog bench --quick

# Tests hold CPUs at top priority: run them one at a time.  Then each
# skipped test with the reason it printed (tests/skips.sh reads ctest's
# JUnit file); the exit status is ctest's.  make check holds the verdicts
# (invariants and counts, which a busy machine does not change); claims
# about time are the timing label's (make check-timing).  A slow runner
# says so with CPUHOG_TEST_SLOW (a multiplier of every timeout and
# hang-catcher of the tests, tests/harness.h), not by skips.
JUNIT = $(BUILD)/Testing/ctest-junit.xml
check: deps
	cmake -S . -B $(BUILD) -DCPUHOG_TESTS=ON $(CMAKE_FLAGS)
	cmake --build $(BUILD) -j$(JOBS)
	@rm -f $(JUNIT); rc=0; \
	ctest --test-dir $(BUILD) --output-on-failure -j1 -LE timing \
	  --output-junit $(abspath $(JUNIT)) || rc=$$?; \
	sh tests/skips.sh $(JUNIT); exit $$rc

check-timing: deps
	cmake -S . -B $(BUILD) -DCPUHOG_TESTS=ON $(CMAKE_FLAGS)
	cmake --build $(BUILD) -j$(JOBS)
	@rm -f $(JUNIT); rc=0; \
	ctest --test-dir $(BUILD) --output-on-failure -j1 -L timing -V \
	  --output-junit $(abspath $(JUNIT)) >$(BUILD)/timing.log 2>&1 || rc=$$?; \
	grep -hE 'figure|max gap|tests passed' $(BUILD)/timing.log; \
	sh tests/skips.sh $(JUNIT); exit $$rc

# The same tests under ASan+UBSan and under TSan.  Children forked from a
# process with hogs start threads (the library again): TSan must allow it.
check-asan:
	CPUHOG_SOAK_SECONDS=15 ASAN_OPTIONS=detect_leaks=1:abort_on_error=0 \
	UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
	$(MAKE) check BUILD=build-asan CMAKE_FLAGS="-DCPUHOG_SANITIZE=address"

check-tsan:
	TSAN_OPTIONS=die_after_fork=0:halt_on_error=1:second_deadlock_stack=1 \
	$(MAKE) check BUILD=build-tsan CMAKE_FLAGS="-DCPUHOG_SANITIZE=thread"

# The suite in software-emulated guests with more CPUs than this machine
# has (scripts/smp-guest.sh: installs QEMU, busybox and a Debian kernel
# into a cache; nothing into /boot).
SMP ?= 8
check-smp: deps
	cmake -S . -B $(BUILD) -DCPUHOG_TESTS=ON $(CMAKE_FLAGS)
	cmake --build $(BUILD) -j$(JOBS)
	bash scripts/smp-guest.sh $(BUILD) $(SMP)

# The reliability storms (hotplug, cpuset, fork, soak, offline under
# multi-CPU calls, each also in poll mode) in a 16-vCPU guest, longer
# than check-smp runs them, with the canary, the stop invariant and the
# guest kernel's log watched (SOAK_SMP="16 32" for more guests).
SOAK_SMP ?= 16
soak-smp: deps
	cmake -S . -B $(BUILD) -DCPUHOG_TESTS=ON $(CMAKE_FLAGS)
	cmake --build $(BUILD) -j$(JOBS)
	CPUHOG_SMP_FILTER='^test_reliability\.|stale_hog' CPUHOG_SMP_TEST_TIMEOUT=600 \
	CPUHOG_SMP_ENV="CPUHOG_SOAK_SECONDS=120 CPUHOG_HOTPLUG_CYCLES=100 CPUHOG_OFFLINE_SECONDS=10" \
	bash scripts/smp-guest.sh $(BUILD) $(SOAK_SMP)

# The same library for arm64: Debian's cross compiler, the tests run one by
# one under qemu-aarch64-static (CMAKE_CROSSCOMPILING_EMULATOR).  That has
# no rseq: the fence's example and test run again in an arm64 system guest
# (scripts/arm64-guest.sh: Debian's arm64 kernel under qemu-system-aarch64,
# about a minute here).
check-arm64:
	@sh scripts/deps.sh arm64
	cmake -S . -B build-arm64 -DCPUHOG_TESTS=ON \
	  -DCMAKE_TOOLCHAIN_FILE=cmake/aarch64-linux-gnu.cmake $(CMAKE_FLAGS)
	cmake --build build-arm64 -j$(JOBS)
	ctest --test-dir build-arm64 --output-on-failure -j1 -LE timing
	bash scripts/arm64-guest.sh build-arm64

# The long reliability run: minutes of soak, hundreds of hotplug cycles,
# 30 s of CPU offline per multi-CPU call kind.
soak: check
	CPUHOG_SOAK_SECONDS=300 CPUHOG_HOTPLUG_CYCLES=200 \
	CPUHOG_OFFLINE_SECONDS=30 CPUHOG_KMSG_WAIT_MS=22000 \
	ctest --test-dir $(BUILD) --output-on-failure -R test_reliability

# GNUInstallDirs picks the libdir from the prefix (lib/x86_64-linux-gnu
# for /usr on Debian): configure with it.
install: $(BUILD)/CMakeCache.txt
	cmake -S . -B $(BUILD) -DCMAKE_INSTALL_PREFIX=$(PREFIX)
	cmake --build $(BUILD) -j$(JOBS)
	cmake --install $(BUILD) --prefix $(PREFIX)

uninstall:
	cmake --build $(BUILD) --target uninstall

format:
	clang-format -i include/*.h src/*.[ch] tools/*.[ch] tests/*.[ch] \
		examples/*.c bench/*.[ch]

clean:
	rm -rf build build-asan build-tsan
