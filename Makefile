# Makefile — everyday commands over the CMake build. `make help` lists them.
#
#   make deps    install the Debian packages the project needs (scripts/install-deps.sh)
#   make build   configure and build in build/
#   make check   deps + build + the whole test suite through ctest (benchmarks aside: ctest -L bench)
#   make test    the quick suite (no slow tests, no benchmarks), for the edit-compile-test loop
#   make asan    the whole suite under AddressSanitizer + UndefinedBehaviorSanitizer (build-asan/)
#   make fuzz    build the libFuzzer targets (clang, build-fuzz/) and run each FUZZ_SECONDS seconds
#   make demo    the main job (see README)
#   make format  rewrite the C sources with clang-format 14 (.clang-format; ctest format_check checks)
#   make clean   remove the build directories
#   make install the library, headers, reclayer.pc, programs and man pages into PREFIX (default
#                /usr/local; DESTDIR too), libfdb_c.so into PREFIX/lib/reclayer (cmake/install.cmake)
#   make uninstall remove what the last install wrote (build/install_manifest.txt)

BUILD      ?= build
JOBS       ?= 2
FUZZ_SECONDS ?= 20
CTEST_ARGS ?=
# -Werror whenever CI is set (CI=true in .ci/run), or when WERROR=ON is given.
WERROR     ?= $(if $(CI),ON,OFF)
CMAKE_FLAGS ?=
PREFIX     ?= /usr/local
DESTDIR    ?=

.PHONY: all deps build check test test-all asan fuzz demo clean help install uninstall format

all: build

help:
	@sed -n '3,15p' Makefile

deps:
	@bash scripts/install-deps.sh
	@bash scripts/install-node-binding.sh

$(BUILD)/CMakeCache.txt:
	cmake -S . -B $(BUILD) -DRL_WERROR=$(WERROR) $(CMAKE_FLAGS)

build: $(BUILD)/CMakeCache.txt
	cmake --build $(BUILD) -j$(JOBS)

check: deps
	$(MAKE) build
	cd $(BUILD) && ctest -j$(JOBS) --output-on-failure -LE bench $(CTEST_ARGS)

test: build
	cd $(BUILD) && ctest -j$(JOBS) --output-on-failure -LE 'slow|bench' $(CTEST_ARGS)

test-all: check

asan: deps
	cmake -S . -B build-asan -DRL_SANITIZE=ON -DRL_WERROR=$(WERROR) -DCMAKE_BUILD_TYPE=Debug $(CMAKE_FLAGS)
	cmake --build build-asan -j$(JOBS)
	cd build-asan && ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
	  ctest -j$(JOBS) --output-on-failure -LE bench $(CTEST_ARGS)

fuzz: deps
	CC=clang cmake -S . -B build-fuzz -DRL_FUZZ=ON -DCMAKE_BUILD_TYPE=Debug $(CMAKE_FLAGS)
	cmake --build build-fuzz -j$(JOBS)
	@bash scripts/run-fuzz.sh build-fuzz $(FUZZ_SECONDS)

demo: deps
	$(MAKE) build
	@bash scripts/demo.sh $(BUILD)

clean:
	rm -rf build build-asan build-fuzz

# Run ldconfig afterwards for a system prefix (not needed with DESTDIR, for packaging).
install: build
	DESTDIR="$(DESTDIR)" cmake --install $(BUILD) --prefix $(PREFIX)

# The manifest lists paths without DESTDIR; give the same DESTDIR as the install.
uninstall:
	@test -f $(BUILD)/install_manifest.txt || { echo "uninstall: nothing installed from $(BUILD)"; exit 1; }
	sed 's|^|$(DESTDIR)|' $(BUILD)/install_manifest.txt | xargs -d '\n' rm -f
	rm -f $(BUILD)/install_manifest.txt

format:
	find src include tools tests examples -name '*.[ch]' -not -path '*/node_modules/*' | xargs clang-format-14 -i
