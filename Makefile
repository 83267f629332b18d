# Thin wrapper over CMake/CTest.  `make run`: build and run the main job;
# `make check`: build and run every test.
BUILD    ?= build
PREFIX   ?= /usr/local
JOBS     ?= $(shell nproc)
CMAKE_FLAGS ?=

.PHONY: all deps build run check check-asan check-tsan soak install clean format

all: build

deps:
	@sh scripts/deps.sh

$(BUILD)/CMakeCache.txt:
	cmake -S . -B $(BUILD) $(CMAKE_FLAGS)

build: deps $(BUILD)/CMakeCache.txt
	cmake --build $(BUILD) -j$(JOBS)

run: build
	$(BUILD)/tools/cpuhog bench --quick

# Tests hold CPUs at top priority: run them one at a time.
check: build
	ctest --test-dir $(BUILD) --output-on-failure -j1

# The same tests under ASan+UBSan and under TSan.  Children forked from a
# process with hogs start threads (the library again): TSan must allow it.
check-asan:
	CPUHOG_SOAK_SECONDS=15 ASAN_OPTIONS=detect_leaks=1:abort_on_error=0 \
	UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
	$(MAKE) check BUILD=build-asan CMAKE_FLAGS="-DCPUHOG_SANITIZE=address"

check-tsan:
	TSAN_OPTIONS=die_after_fork=0:halt_on_error=1:second_deadlock_stack=1 \
	$(MAKE) check BUILD=build-tsan CMAKE_FLAGS="-DCPUHOG_SANITIZE=thread"

# The long reliability run: minutes of soak, hundreds of hotplug cycles.
soak: build
	CPUHOG_SOAK_SECONDS=300 CPUHOG_HOTPLUG_CYCLES=200 \
	CPUHOG_OFFLINE_SECONDS=30 CPUHOG_KMSG_WAIT_MS=22000 \
	ctest --test-dir $(BUILD) --output-on-failure -R test_reliability

install: build
	cmake --install $(BUILD) --prefix $(PREFIX)

format:
	clang-format -i include/*.h src/*.[ch] tools/*.[ch] tests/*.[ch] \
		examples/*.c bench/*.[ch]

clean:
	rm -rf build build-asan build-tsan
