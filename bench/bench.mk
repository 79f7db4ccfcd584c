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
$(BENCH_OUT)/bare: bench/bare.c userspace/elf_syms.c userspace/elf_syms.h $(BENCH_OUT)/bare.skel.h
	$(CC) $(CFLAGS) $(WARN) -std=gnu11 -D_GNU_SOURCE -Iuserspace -I$(BENCH_OUT) $(LDFLAGS) \
		-o $@ bench/bare.c userspace/elf_syms.c $(LIBS)

# Linked like tests/workloads: frame pointers, the mock runtime found through RUNPATH.
$(BENCH_OUT)/loop: bench/loop.c $(TESTS_MOCK_HEADERS) $(TESTS_MOCK_LIBS)
	@mkdir -p $(@D)
	$(CC) $(TESTS_CFLAGS) $(TESTS_CUDA_FLAGS) -Itests/mock -o $@ $< \
		-L$(TESTS_LIB) -lcudart -Wl,-rpath,'$$ORIGIN/../tests/lib'

.PHONY: bench-progs
bench-progs: $(BENCH_OUT)/bare $(BENCH_OUT)/loop

bench: bench-progs
