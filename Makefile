# make run  : install what is missing, build the library and the tidemark program (not the
#             tests), run a short demo workload; one line per step, build output in a log
# make test : install what is missing, build, run every test
# make test-unit : the unit tests alone (ctest -L unit), well under a minute
# make test-sanitize : the same tests under AddressSanitizer + UBSan (shorter crash loops,
#                      one cycle of each standby and failover loop, shorter tree property
#                      test: memory errors show in the first cycles; make test runs them all)
# make test-tsan : the unit tests (actors included) under ThreadSanitizer (shorter tree
#                  property test, standby bad-read loops and table stress test, as in
#                  make test-sanitize)
# make settings-doc : docs/settings.md from tidemark settings --markdown (a test compares them)

BUILD ?= build
BUILD_SAN ?= build-sanitize
BUILD_TSAN ?= build-tsan
JOBS ?= $(shell nproc)
# ON compiles the libraries, the tool and the tests as unity builds (faster from scratch;
# .ci/run).
UNITY_BUILD ?= OFF
PACKAGES = libcaf-dev liburing-dev liblz4-dev libboost-dev doctest-dev cmake g++ python3 pkg-config make
SUDO = $(shell [ "$$(id -u)" = 0 ] || echo sudo)
# CMake's build as a make of its own: nested in this one, its makes would print
# "gmake[3]: Entering directory ..." for every step.
CMAKE_BUILD = env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL cmake --build

.PHONY: all deps build run test test-unit test-sanitize test-tsan settings-doc clean

all: build

# apt's output goes to $(BUILD)/deps.log; its end is shown when it fails.
deps:
	@missing=""; for p in $(PACKAGES); do \
	  dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q "install ok installed" || missing="$$missing $$p"; \
	done; \
	if [ -n "$$missing" ]; then \
	  echo "installing:$$missing (log: $(BUILD)/deps.log)"; \
	  mkdir -p $(BUILD); \
	  { $(SUDO) apt-get update -qq && DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq $$missing; } \
	    >$(BUILD)/deps.log 2>&1 || { tail -n 30 $(BUILD)/deps.log; echo "installing$$missing failed"; exit 1; }; \
	fi

build: deps
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release -DTIDEMARK_UNITY_BUILD=$(UNITY_BUILD) >/dev/null
	$(CMAKE_BUILD) $(BUILD) -j $(JOBS)

# Only what the demo needs (the libraries and the tidemark program: minutes, where the
# tests take far longer). CMake's output goes to $(RUN_LOG); its end is shown on failure.
RUN_LOG = $(BUILD)/make-run.log
run:
	@echo "[1/4] checking the packages the build needs"
	@$(MAKE) --no-print-directory deps
	@mkdir -p $(BUILD); : >$(RUN_LOG)
	@printf '[2/4] configuring %s/ (log: %s) ... ' '$(BUILD)' '$(RUN_LOG)'; \
	if cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release >>$(RUN_LOG) 2>&1; then echo done; \
	else echo FAILED; tail -n 30 $(RUN_LOG); exit 1; fi
	@printf '[3/4] building the library and the tidemark program (minutes the first time) ... '; \
	start=$$(date +%s); \
	if $(CMAKE_BUILD) $(BUILD) -j $(JOBS) --target tidemark_cli >>$(RUN_LOG) 2>&1; then \
	  echo "done in $$(( $$(date +%s) - start )) s"; \
	else echo FAILED; tail -n 40 $(RUN_LOG); echo "the whole log: $(RUN_LOG)"; exit 1; fi
	@echo "[4/4] running the demo: init, 20 s of bench, verify"
	@./bench/demo.sh $(BUILD)/tidemark

test: build
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS)

test-unit: build
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS) -L unit

test-sanitize: deps
	cmake -S . -B $(BUILD_SAN) -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTIDEMARK_UNITY_BUILD=$(UNITY_BUILD) -DTIDEMARK_SANITIZE=ON -DTIDEMARK_CRASH_LOOPS=4 -DTIDEMARK_BAD_READ_CYCLES=10 -DTIDEMARK_STANDBY_BAD_READ_PROCESS_CYCLES=1 -DTIDEMARK_FAILOVER_DRILL_CYCLES=1 -DTIDEMARK_STANDBY_POWER_LOSS_CYCLES=1 -DTIDEMARK_TREE_PROPERTY_OPS=100000 -DTIDEMARK_TABLE_STRESS_SECONDS=10 >/dev/null
	$(CMAKE_BUILD) $(BUILD_SAN) -j $(JOBS)
	cd $(BUILD_SAN) && UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1:suppressions=$(CURDIR)/tests/ubsan.supp \
	  ASAN_OPTIONS=detect_leaks=1 LSAN_OPTIONS=suppressions=$(CURDIR)/tests/lsan.supp \
	  ctest --output-on-failure -j $(JOBS)

# The unit tests only (no tool, no example is built). ignore_noninstrumented_modules: the
# memory accesses of calls made from uninstrumented libraries (CAF freeing its own actors
# and messages) are not checked; their mutexes still count. tests/tsan.supp says why each
# suppression is there.
test-tsan: deps
	cmake -S . -B $(BUILD_TSAN) -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTIDEMARK_UNITY_BUILD=$(UNITY_BUILD) -DTIDEMARK_TSAN=ON \
	  -DTIDEMARK_BUILD_TOOLS=OFF -DTIDEMARK_BUILD_EXAMPLES=OFF -DTIDEMARK_TREE_PROPERTY_OPS=100000 \
	  -DTIDEMARK_BAD_READ_CYCLES=10 -DTIDEMARK_TABLE_STRESS_SECONDS=10 >/dev/null
	$(CMAKE_BUILD) $(BUILD_TSAN) -j $(JOBS)
	cd $(BUILD_TSAN) && TSAN_OPTIONS=ignore_noninstrumented_modules=1:second_deadlock_stack=1:suppressions=$(CURDIR)/tests/tsan.supp \
	  ctest --output-on-failure -j $(JOBS) -L unit

settings-doc: deps
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release >/dev/null
	$(CMAKE_BUILD) $(BUILD) -j $(JOBS) --target tidemark_cli
	$(BUILD)/tidemark settings --markdown > docs/settings.md

clean:
	rm -rf $(BUILD) $(BUILD_SAN) $(BUILD_TSAN)
