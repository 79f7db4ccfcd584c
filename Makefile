# gpumem build. `make` builds build/gpumem; `make test` runs every test; `make bench` measures;
# `make install` installs the binary, the systemd unit and the man page (deploy/install.mk).
# Missing Debian packages are installed by `make deps` (called by run/test/bench).

BUILD ?= build
CLANG ?= clang
BPFTOOL ?= bpftool
CC ?= gcc
PYTHON ?= /usr/bin/python3

ARCH := $(shell uname -m | sed -e 's/x86_64/x86/' -e 's/aarch64/arm64/')
WARN := -Wall -Wextra -Werror
CFLAGS ?= -O2 -g
ifeq ($(SANITIZE),1)
CFLAGS += -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer
LDFLAGS += -fsanitize=address,undefined
endif
# One folder a layer (docs/design.md, scripts/layers.py): includes name their folder,
# "model/state.h", from the one root.
USER_INC := -Iuserspace
# -MMD -MP: the compiler lists each object's headers, so editing one rebuilds what uses it.
DEPFLAGS := -MMD -MP
# The version gpumem reports (gpumem_build_info).
VERSION := 0.1.0
ALL_CFLAGS := $(CFLAGS) $(WARN) -std=gnu11 -D_GNU_SOURCE -Ibpf $(USER_INC) -I$(BUILD) \
	-DGPUMEM_VERSION='"$(VERSION)"'
# json-c reads the OCI bundles' config.json (model/oci.c).
JSONC_LIBS := $(shell pkg-config --libs json-c 2>/dev/null || echo -ljson-c)
LIBS := -lbpf -ldw -lelf -lz -lncursesw -lmicrohttpd -lsqlite3 -lpthread -ldl -lm $(JSONC_LIBS)

USER_SRCS := $(wildcard userspace/*.c userspace/*/*.c userspace/*/*/*.c)
USER_OBJS := $(patsubst %.c,$(BUILD)/%.o,$(USER_SRCS))

.PHONY: deploy-check all deps deps-build run test unit-test unit-test-asan integration bench bench-discovery bench-exit clean \
	demo docs docs-check layers
all: $(BUILD)/gpumem

deps:
	@scripts/deps.sh

# What `make run` needs: building and running gpumem, none of the test tools.
deps-build:
	@scripts/deps.sh build

# The multiarch headers for <asm/errno.h>, which libbpf's <bpf/usdt.bpf.h> includes.
BPF_SYS_INC := -I/usr/include/$(shell $(CC) -dumpmachine 2>/dev/null)

$(BUILD)/gpumem.bpf.o: bpf/gpumem.bpf.c $(wildcard bpf/*.bpf.h) bpf/gpumem.h vmlinux/vmlinux.h
	@mkdir -p $(@D)
	$(CLANG) -g -O2 -target bpf -mcpu=v3 -D__TARGET_ARCH_$(ARCH) -Ivmlinux -Ibpf $(BPF_SYS_INC) \
		-Wall -Werror -c $< -o $@

$(BUILD)/gpumem.skel.h: $(BUILD)/gpumem.bpf.o
	$(BPFTOOL) gen skeleton $< name gpumem_bpf > $@.tmp && mv $@.tmp $@

# The skeleton is generated: it must exist before the first compile lists it as a dependency.
$(BUILD)/userspace/%.o: userspace/%.c | $(BUILD)/gpumem.skel.h
	@mkdir -p $(@D)
	$(CC) $(ALL_CFLAGS) $(DEPFLAGS) -c $< -o $@

$(BUILD)/gpumem: $(USER_OBJS)
	$(CC) $(LDFLAGS) -o $@ $^ $(LIBS)

run: deps-build all
	$(BUILD)/gpumem $(ARGS)

include tests/tests.mk
include tests/gpu/gpu.mk
include tests/unit/unit.mk
-include bench/bench.mk
include deploy/install.mk

integration: all test-progs nvidia amd
	$(PYTHON) -m pytest -ra -v tests/integration

# The unit tests again under AddressSanitizer and UBSan, in a build tree of their own.
unit-test-asan:
	$(MAKE) --no-print-directory BUILD=$(BUILD)/asan SANITIZE=1 unit-test

test: deps all test-progs bench-progs nvidia amd unit-test unit-test-asan integration man-lint install-check deploy-check \
	gpu-bundle-check docs-check layers

# The structure drawn from the code's own includes (scripts/layers.py): no include that runs
# up a layer, at most one circle, no function over 80 lines, every file saying what it owns.
layers:
	$(PYTHON) scripts/layers.py

# What gpumem shows, on the mock CUDA libraries: no GPU needed (examples/, as root).
demo: deps-build all test-progs
	examples/demo.sh

# docs/options.md and the man page's options from the option table. (An example's fresh
# output is written into its page by tests/docs_check.py --update FILE.md: it drops the "..."
# lines, so read the diff and keep what the page meant.)
docs: all test-progs
	$(PYTHON) scripts/gen_docs.py

# The same, checked: fails where a page is not what the table and the examples make.
docs-check: all test-progs
	$(PYTHON) scripts/gen_docs.py --check
	$(PYTHON) tests/docs_check.py

# The Kubernetes manifests validated with no cluster, and each of the checker's rules made to
# fire on a broken copy (Node.js and npm packages, installed on first use).
deploy-check:
	deploy/check.sh
	deploy/check-test.sh

bench: deps all test-progs
	BENCH_SETUP=runtime-only BENCH_TAIL=0 bench/run.sh
	BENCH_SETUP=runtime-only BENCH_STACK_DEPTH=40 BENCH_TAIL=0 BENCH_PROFILE=0 bench/run.sh
	bench/run.sh

# Stopping alone: how long gpumem takes to exit with every CUDA file attached (bench/exit.sh).
bench-exit: deps all
	bench/exit.sh

# Discovery alone: late-attach latency and start-up cost on a busy host (bench/discovery.sh).
bench-discovery: deps all test-progs bench-progs
	bench/discovery.sh

-include tests/fuzz/fuzz.mk

clean:
	rm -rf $(BUILD)

-include $(USER_OBJS:.o=.d)
