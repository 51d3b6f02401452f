# castellan — set-up, build, run and test on Debian bookworm (as root).
#
#   make run    install what is missing, build, start the daemon, run example execs through it
#   make test   install what is missing, build, run every test (and the fuzzers briefly)
#   make asan   the same tests under AddressSanitizer + UndefinedBehaviorSanitizer
#   make bench  build and run the benchmarks

BUILD      ?= build
FUZZ_BUILD ?= build-fuzz
ASAN_BUILD ?= build-asan
JOBS       ?= $(shell nproc)
CMAKE_FLAGS ?=

DEB_PACKAGES := cmake make g++ clang libclang-rt-14-dev pkg-config python3 \
  libcaf-dev libasio-dev libhttp-parser-dev libseccomp-dev liburing-dev \
  nlohmann-json3-dev libvalijson-dev libspdlog-dev libcli11-dev libboost-dev \
  libtomlplusplus-dev libboost-test-dev libbenchmark-dev libssl-dev libpython3-dev prometheus \
  curl openssl python3-pip python3-setuptools python3-wheel systemd procps e2fsprogs \
  python3-numpy python3-pandas python3-matplotlib

.PHONY: all deps configure build run test fuzz asan bench clean

all: build

# Installs only the packages that are missing; a no-op when all are there.
deps:
	@missing=$$(for p in $(DEB_PACKAGES); do \
	  dpkg-query -W -f='$${Status}\n' $$p 2>/dev/null | grep -q '^install ok installed' || echo $$p; done); \
	if [ -n "$$missing" ]; then \
	  echo "installing:" $$missing; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null; \
	fi

$(BUILD)/CMakeCache.txt: | deps
	cmake -S . -B $(BUILD) -DCASTELLAN_WERROR=ON $(CMAKE_FLAGS)

configure: deps $(BUILD)/CMakeCache.txt

build: configure
	cmake --build $(BUILD) -j $(JOBS)

# The daemon with the default config (config/castellan.toml; its socket moved
# to a private directory), the CLI as its client, then a drain on SIGTERM.
run: build
	@set -e; dir=$$(mktemp -d /tmp/castellan-run-XXXXXX); sock=$$dir/castellan.sock; \
	  $(BUILD)/bin/castellan serve --config config/castellan.toml --listen unix:$$sock \
	    >$$dir/serve.log 2>&1 & pid=$$!; \
	  trap 'kill -TERM '$$pid' 2>/dev/null; wait '$$pid' 2>/dev/null; rm -rf '$$dir EXIT; \
	  for i in $$(seq 300); do grep -q 'listening on' $$dir/serve.log && break; \
	    kill -0 $$pid 2>/dev/null || { cat $$dir/serve.log; exit 1; }; sleep 0.1; done; \
	  echo "\$$ build/bin/castellan serve --config config/castellan.toml --listen unix:$$sock &"; \
	  cat $$dir/serve.log; \
	  export CASTELLAN_CONNECT=unix:$$sock; echo "\$$ export CASTELLAN_CONNECT=unix:$$sock"; \
	  echo '$$ build/bin/castellan exec "print(6*7)"'; \
	  $(BUILD)/bin/castellan exec 'print(6*7)'; \
	  echo '$$ build/bin/castellan exec --json "import sys; print(sys.version_info[:2]); raise ValueError(42)"'; \
	  $(BUILD)/bin/castellan exec --json 'import sys; print(sys.version_info[:2]); raise ValueError(42)' || true; \
	  echo '$$ echo world | build/bin/castellan exec --stdin -e GREETING=hello "import os, sys; print(os.environ[\"GREETING\"], sys.stdin.read().strip())"'; \
	  echo world | $(BUILD)/bin/castellan exec --stdin -e GREETING=hello 'import os, sys; print(os.environ["GREETING"], sys.stdin.read().strip())'; \
	  echo '$$ build/bin/castellan run -- /usr/bin/python3 -c "print(1 + 1)"'; \
	  $(BUILD)/bin/castellan run -- /usr/bin/python3 -c 'print(1 + 1)'; \
	  echo '$$ build/bin/castellan status'; \
	  $(BUILD)/bin/castellan status; \
	  echo '$$ kill -TERM %1   # drains: in-flight execs finish, then it exits'

fuzz: deps
	cmake -S . -B $(FUZZ_BUILD) -DCASTELLAN_FUZZ=ON -DCASTELLAN_WERROR=ON \
	  -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_BUILD_TYPE=RelWithDebInfo
	cmake --build $(FUZZ_BUILD) -j $(JOBS)
	cd $(FUZZ_BUILD) && ctest --output-on-failure

test: build
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS)
	$(MAKE) fuzz

asan: deps
	cmake -S . -B $(ASAN_BUILD) -DCASTELLAN_ASAN=ON -DCASTELLAN_UBSAN=ON -DCASTELLAN_WERROR=ON \
	  -DCASTELLAN_BUILD_BENCH=OFF -DCMAKE_BUILD_TYPE=Debug
	cmake --build $(ASAN_BUILD) -j $(JOBS)
	cd $(ASAN_BUILD) && ASAN_OPTIONS=detect_leaks=1 ctest --output-on-failure -j $(JOBS)

# bubblewrap is a baseline of bench_spawn only: nothing else needs it.
bench: build
	@dpkg-query -W -f='$${Status}\n' bubblewrap 2>/dev/null | grep -q '^install ok installed' || \
	  { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq bubblewrap >/dev/null; }
	@for b in $(BUILD)/bin/bench_*; do echo "== $$b"; $$b || exit 1; done

clean:
	rm -rf $(BUILD) $(FUZZ_BUILD) $(ASAN_BUILD)
