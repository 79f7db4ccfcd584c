# gpumem build. `make` builds build/gpumem; `make test` runs every test; `make bench` measures.
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
ALL_CFLAGS := $(CFLAGS) $(WARN) -std=gnu11 -D_GNU_SOURCE -Ibpf -Iuserspace -I$(BUILD)
LIBS := -lbpf -ldw -lelf -lz -lncursesw -ldl -lm

USER_SRCS := $(wildcard userspace/*.c userspace/views/*.c)
USER_OBJS := $(patsubst %.c,$(BUILD)/%.o,$(USER_SRCS))

.PHONY: all deps run test unit-test unit-test-asan integration bench bench-discovery clean
all: $(BUILD)/gpumem

deps:
	@scripts/deps.sh

$(BUILD)/gpumem.bpf.o: bpf/gpumem.bpf.c bpf/gpumem.h vmlinux/vmlinux.h
	@mkdir -p $(@D)
	$(CLANG) -g -O2 -target bpf -mcpu=v3 -D__TARGET_ARCH_$(ARCH) -Ivmlinux -Ibpf \
		-Wall -Werror -c $< -o $@

$(BUILD)/gpumem.skel.h: $(BUILD)/gpumem.bpf.o
	$(BPFTOOL) gen skeleton $< name gpumem_bpf > $@.tmp && mv $@.tmp $@

$(BUILD)/userspace/%.o: userspace/%.c $(BUILD)/gpumem.skel.h $(wildcard userspace/*.h) bpf/gpumem.h
	@mkdir -p $(@D)
	$(CC) $(ALL_CFLAGS) -c $< -o $@

$(BUILD)/gpumem: $(USER_OBJS)
	$(CC) $(LDFLAGS) -o $@ $^ $(LIBS)

run: deps all
	$(BUILD)/gpumem $(ARGS)

include tests/tests.mk
include tests/unit/unit.mk
-include bench/bench.mk

integration: all test-progs
	$(PYTHON) -m pytest -ra -v tests/integration

# The unit tests again under AddressSanitizer and UBSan, in a build tree of their own.
unit-test-asan:
	$(MAKE) --no-print-directory BUILD=$(BUILD)/asan SANITIZE=1 unit-test

test: deps all test-progs unit-test unit-test-asan integration

bench: deps all test-progs
	bench/run.sh

# Discovery alone: late-attach latency and start-up cost on a busy host (bench/discovery.sh).
bench-discovery: deps all test-progs bench-progs
	bench/discovery.sh

clean:
	rm -rf $(BUILD)
