# The overhead benchmark, built into $(BUILD)/bench and run by `make bench` (bench/run.sh): the
# workload, and the bare-probe loader it compares gpumem with. Included by the top-level Makefile.

BENCH_OUT := $(BUILD)/bench

$(BENCH_OUT)/bare.bpf.o: bench/bare.bpf.c vmlinux/vmlinux.h
	@mkdir -p $(@D)
	$(CLANG) -g -O2 -target bpf -mcpu=v3 -D__TARGET_ARCH_$(ARCH) -Ivmlinux \
		-Wall -Werror -c $< -o $@

$(BENCH_OUT)/bare.skel.h: $(BENCH_OUT)/bare.bpf.o
	$(BPFTOOL) gen skeleton $< name bare_bpf > $@.tmp && mv $@.tmp $@

# Symbols are found by gpumem's own ELF walker, so both attach at the same offsets.
# Probes go where gpumem puts them (discover/probe_place.c), or at the symbols (--at symbol).
BENCH_BARE_SRCS := bench/bare.c userspace/symbols/elf_syms.c userspace/loader/uprobe_multi.c \
	userspace/discover/probe_place.c
$(BENCH_OUT)/bare: $(BENCH_BARE_SRCS) userspace/symbols/elf_syms.h \
		userspace/discover/probe_place.h $(BENCH_OUT)/bare.skel.h
	$(CC) $(CFLAGS) $(WARN) -std=gnu11 -D_GNU_SOURCE $(USER_INC) -I$(BENCH_OUT) $(LDFLAGS) \
		-o $@ $(BENCH_BARE_SRCS) $(LIBS)

# Copies of the mock libraries, with inodes of their own: uprobes are per inode, so probes that
# tests or other tools put on $(TESTS_LIB) never fire in the benchmark's workload. The files are
# named unlike CUDA libraries (the sonames are symlinks to them), so that no system-wide gpumem
# another user runs on this machine attaches to them when the workload opens them either.
BENCH_LIB := $(BENCH_OUT)/lib
BENCH_MOCK_LIBS := $(BENCH_LIB)/libcuda.so.1 $(BENCH_LIB)/libcudart.so.13

$(BENCH_LIB)/lib%: $(TESTS_LIB)/lib%
	@mkdir -p $(@D)
	rm -f $@
	cp $< $(@D)/bench-mock-$*
	ln -s bench-mock-$* $@

# Linked like tests/workloads (frame pointers, the mock runtime found through RUNPATH), to the
# copies beside it.
$(BENCH_OUT)/loop: bench/loop.c $(TESTS_MOCK_HEADERS) $(BENCH_MOCK_LIBS)
	@mkdir -p $(@D)
	$(CC) $(TESTS_CFLAGS) $(TESTS_CUDA_FLAGS) -Itests/mock -o $@ $< \
		-L$(BENCH_LIB) -l:libcudart.so.13 -Wl,-rpath,'$$ORIGIN/lib'

# The agent benchmark's holders (bench/serve.sh): N allocations over up to 10 call sites, held.
$(BENCH_OUT)/holder: bench/holder.c $(TESTS_MOCK_HEADERS) $(BENCH_MOCK_LIBS)
	@mkdir -p $(@D)
	$(CC) $(TESTS_CFLAGS) $(TESTS_CUDA_FLAGS) -Itests/mock -o $@ $< \
		-L$(BENCH_LIB) -l:libcudart.so.13 -Wl,-rpath,'$$ORIGIN/lib'

.PHONY: bench-progs
bench-progs: $(BENCH_OUT)/bare $(BENCH_OUT)/loop $(BENCH_OUT)/holder $(BENCH_MOCK_LIBS)

# The driver-probe benchmark (bench/probeplace.sh) runs $(TESTS_OUT)/driver_loop on NVIDIA's
# driver or on a copy of the stub-shaped mock (an inode of its own, named unlike a CUDA library).
BENCH_STUB_LIB := $(BENCH_LIB)/bench-mock-stub-cuda.so.1
$(BENCH_STUB_LIB): $(TESTS_OUT)/lib-stub/libcuda.so.1
	@mkdir -p $(@D)
	cp $< $@

ifeq ($(TESTS_ARCH),x86_64)
bench-progs: $(TESTS_OUT)/driver_loop $(BENCH_STUB_LIB)
endif

# Probes on the driver's stubs, at the symbol against past the cmpl (bench/probeplace.sh).
.PHONY: bench-probeplace
bench-probeplace: all test-progs bench-progs
	bench/probeplace.sh

# The tensor benchmark's loop (bench/tensors.sh): PyTorch-style tensor pairs through copies of
# the mock caching allocator (dlopen()ed), where <sys/sdt.h> built it; the runtime linked in
# though no symbol of it is called here, the one every copy's dependency then resolves to.
ifeq ($(TESTS_HAVE_SDT),1)
$(BENCH_OUT)/tensor_loop: bench/tensor_loop.c $(BENCH_LIB)/libc10_cuda.so $(BENCH_MOCK_LIBS)
	@mkdir -p $(@D)
	$(CC) $(TESTS_CFLAGS) -o $@ $< -L$(BENCH_LIB) -Wl,--no-as-needed \
		-l:libcudart.so.13 -Wl,--as-needed -ldl \
		-Wl,-rpath,'$$ORIGIN/lib'

bench-progs: $(BENCH_OUT)/tensor_loop
endif

bench: bench-progs

# Symbolization throughput (frames/s, cold and warm) over a real binary: gpumem itself.
BENCH_SYM_SRCS := userspace/symbols/symbolize.c userspace/symbols/elf_syms.c \
	userspace/symbols/debuginfo.c userspace/host/procs.c userspace/base/untrusted.c \
	userspace/base/util.c userspace/base/bus_guard.c
$(BENCH_OUT)/symbench: bench/symbench.c $(BENCH_SYM_SRCS) $(wildcard userspace/*/*.h)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) $(WARN) -std=gnu11 -D_GNU_SOURCE $(USER_INC) $(LDFLAGS) -o $@ \
		bench/symbench.c $(BENCH_SYM_SRCS) \
		-ldw -lelf -lz -ldl

bench-progs: $(BENCH_OUT)/symbench

# The busy host of bench/discovery.sh: idle processes, half of them with a CUDA runtime mapped.
$(BENCH_OUT)/idle_procs: bench/idle_procs.c
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) $(WARN) -std=gnu11 -D_GNU_SOURCE -o $@ $< -ldl

bench-progs: $(BENCH_OUT)/idle_procs

# What a long-running system-wide gpumem keeps per ended process: its RSS after CHURN_BASE and
# after CHURN_N short-lived workloads, for top, snapshot and leaks (bench/churn.sh). Numbers
# only; `make bench-churn CHURN_ARGS=--check` fails where RSS doubled.
.PHONY: bench-churn
bench-churn: all test-progs
	bench/churn.sh $(CHURN_ARGS)

# What the agent costs (bench/serve.sh): its CPU with 100 processes x 10,000 live allocations
# scraped every 5 s, the scrapes' latency, and its RSS across 2,000 short-lived processes.
# Numbers only; `make bench-serve SERVE_ARGS=--check` fails where a target is missed.
.PHONY: bench-serve
bench-serve: all test-progs bench-progs
	bench/serve.sh $(SERVE_ARGS)

# The flight recorder (bench/record.sh): events a second written with nothing dropped, bytes an
# event on disk, and an hour of a training-like loop extrapolated from a shorter run.
.PHONY: bench-record
bench-record: all test-progs
	bench/record.sh
