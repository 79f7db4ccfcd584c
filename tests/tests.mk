# Test programs, built into $(BUILD)/tests by `make test-progs`: the mock libcuda.so.1 and
# libcudart.so.13, the workloads linked against them, and, where a CUDA Toolkit is installed,
# programs that use NVIDIA's real runtime. Included by the top-level Makefile.

TESTS_CUDA ?= /usr/local/cuda
TESTS_OUT := $(BUILD)/tests
TESTS_LIB := $(TESTS_OUT)/lib
TESTS_ARCH := $(shell uname -m)
TESTS_CC_IS_CLANG := $(shell $(CC) --version 2>/dev/null | grep -q clang && echo 1)

# Frame pointers everywhere, leaf functions included, as NVIDIA builds its libraries and as the
# tracer unwinds.
TESTS_CFLAGS := -O2 -g -fno-omit-frame-pointer -mno-omit-leaf-frame-pointer $(WARN) -std=gnu11 \
	-D_GNU_SOURCE
ifeq ($(TESTS_ARCH),x86_64)
# NVIDIA's entry points begin with push %rbp, not endbr64.
TESTS_CFLAGS += -fcf-protection=none
endif

# Prototypes checked against NVIDIA's headers when the Toolkit is there, else our own copy.
ifneq ($(wildcard $(TESTS_CUDA)/include/cuda_runtime_api.h),)
TESTS_CUDA_FLAGS := -I$(TESTS_CUDA)/include -DGM_HAVE_CUDA_HEADERS
endif
TESTS_MOCK_HEADERS := tests/mock/mock_cuda.h tests/mock/cuda_mock_types.h

# Every export must begin exactly `push %rbp; mov %rsp,%rbp`: gcc must neither schedule other
# instructions into the prologue nor shrink-wrap it past an early return. And no identical-code
# folding: one export must never become a jump to another, nor a private entry point an alias
# of an export.
TESTS_MOCK_CFLAGS := $(TESTS_CFLAGS) $(TESTS_CUDA_FLAGS) -fPIC
ifneq ($(TESTS_CC_IS_CLANG),1)
TESTS_MOCK_CFLAGS += -fno-schedule-insns2 -fno-shrink-wrap -fno-ipa-icf
endif

TESTS_MOCK_LIBS := $(TESTS_LIB)/libcuda.so.1 $(TESTS_LIB)/libcudart.so.13
TESTS_PROGS := $(TESTS_MOCK_LIBS) $(TESTS_OUT)/workload $(TESTS_OUT)/workload_dl \
	$(TESTS_OUT)/samepid $(TESTS_OUT)/apis $(TESTS_OUT)/real_nvidia $(TESTS_OUT)/driver_loop \
	$(TESTS_OUT)/maplock
# <sys/sdt.h> where the compiler finds it (Debian puts it in the multiarch directory).
# The mock NVML (tests/mock/nvml.c), alone in its directory: LD_LIBRARY_PATH=$(TESTS_NVML_DIR)
# makes gpumem's dlopen("libnvidia-ml.so.1") load it instead of NVIDIA's ($(BUILD)/nvidia).
TESTS_NVML_DIR := $(TESTS_OUT)/lib-nvml
TESTS_PROGS += $(TESTS_NVML_DIR)/libnvidia-ml.so.1
TESTS_HAVE_SDT := $(shell echo '\#include <sys/sdt.h>' | $(CC) -E -x c - >/dev/null 2>&1 && echo 1)
ifeq ($(TESTS_HAVE_SDT),1)
TESTS_PROGS += $(TESTS_LIB)/libc10_cuda.so
endif

ifneq ($(wildcard $(TESTS_CUDA)/include/cuda_runtime_api.h $(TESTS_CUDA)/lib64/libcudart.so.13),)
TESTS_PROGS += $(TESTS_OUT)/real_cudart
endif
ifneq ($(wildcard $(TESTS_CUDA)/bin/nvcc),)
TESTS_PROGS += $(TESTS_OUT)/static_cuda
endif

# Libraries named like NCCL, cuBLASLt, cuDNN and TensorRT, each holding memory of its own,
# and the program that opens them (test_owners.py).
TESTS_OWNER_LIBS := $(patsubst %,$(TESTS_OUT)/owners/%,libnccl.so.2 libcublasLt.so.13 \
	libcudnn.so.9 libnvinfer.so.10)
# TensorRT's name again, built without frame pointers as real libraries are: only its stack
# copies, unwound with its CFI, name its frames.
TESTS_OWNER_NOFP := $(TESTS_OUT)/owners/nofp/libnvinfer.so.10
TESTS_PROGS += $(TESTS_OUT)/owners/owners $(TESTS_OWNER_LIBS) $(TESTS_OWNER_NOFP)

# AMD's HIP runtime: a mock for the success paths, alone in its directory, and the program that
# opens a HIP runtime by path (test_hip.py).
TESTS_HIP_LIB := $(TESTS_OUT)/lib-hip/libamdhip64.so.5
TESTS_PROGS += $(TESTS_HIP_LIB) $(TESTS_OUT)/lib-hip/libc10_hip.so $(TESTS_OUT)/hip

.PHONY: test-progs
test-progs: $(TESTS_PROGS)
ifeq ($(TESTS_ARCH),x86_64)
	tests/mock/check_prologues.sh $(TESTS_MOCK_LIBS) $(TESTS_HIP_LIB)
	tests/mock/check_prologues.sh --stubs 'cmpl $$0x321cba00,0x*(%rip)* ; je *' \
		$(TESTS_OUT)/lib-stub/libcuda.so.1
	tests/mock/check_prologues.sh --stubs 'cmpl $$0x7f,0x*(%rip)* ; je *' \
		$(TESTS_OUT)/lib-stub83/libcuda.so.1
	tests/mock/check_prologues.sh --stubs 'mov 0x*(%rip),%eax* ; cmp $$0x321cba00,%eax' \
		$(TESTS_OUT)/lib-stubmov/libcuda.so.1
endif

$(TESTS_LIB)/libcuda.so.1: tests/mock/cuda.c tests/mock/libcuda.map $(TESTS_MOCK_HEADERS)
	@mkdir -p $(@D)
	$(CC) $(TESTS_MOCK_CFLAGS) -shared -Wl,-soname,libcuda.so.1 \
		-Wl,--version-script,tests/mock/libcuda.map -o $@ $< -lpthread
	ln -sf libcuda.so.1 $(@D)/libcuda.so

# The mock driver shaped like NVIDIA's (tests/mock/cuda_stubs.S): its allocation APIs are asm
# stubs into cuda.c's functions, renamed gm_impl_<api>. One directory per entry shape, each
# with only libcuda.so.1: LD_LIBRARY_PATH=$(TESTS_OUT)/lib-stub makes a workload (and the mock
# runtime's dlopen) load it. stub: cmpl;je (NVIDIA's), stub83: cmpl $imm8;je rel32, stubmov:
# a RIP-relative mov first (its probes stay at the symbols).
TESTS_STUB_APIS := $(shell sed -n 's/^[[:space:]]*X(\([A-Za-z0-9_]*\), [0-9]*).*/\1/p' \
	tests/mock/cuda_stubs.S)
TESTS_STUB_SHAPE_stub := 1
TESTS_STUB_SHAPE_stub83 := 2
TESTS_STUB_SHAPE_stubmov := 3
TESTS_STUB_LIBS := $(patsubst %,$(TESTS_OUT)/lib-%/libcuda.so.1,stub stub83 stubmov)
ifeq ($(TESTS_ARCH),x86_64)
test-progs: $(TESTS_STUB_LIBS)
endif

$(TESTS_OUT)/stubbed/cuda.o: tests/mock/cuda.c tests/mock/cuda_stubs.S $(TESTS_MOCK_HEADERS)
	@mkdir -p $(@D)
	$(CC) $(TESTS_MOCK_CFLAGS) -c -o $@.tmp $<
	objcopy $(foreach a,$(TESTS_STUB_APIS),--redefine-sym $(a)=gm_impl_$(a)) $@.tmp $@
	rm -f $@.tmp

$(TESTS_OUT)/lib-%/libcuda.so.1: $(TESTS_OUT)/stubbed/cuda.o tests/mock/cuda_stubs.S \
		tests/mock/cuda_stubs_init.c tests/mock/libcuda.map
	@mkdir -p $(@D)
	$(CC) $(TESTS_MOCK_CFLAGS) -DGM_STUB_SHAPE=$(TESTS_STUB_SHAPE_$*) -shared \
		-Wl,-soname,libcuda.so.1 -Wl,--version-script,tests/mock/libcuda.map -o $@ \
		$< tests/mock/cuda_stubs.S tests/mock/cuda_stubs_init.c -lpthread

$(TESTS_NVML_DIR)/libnvidia-ml.so.1: tests/mock/nvml.c
	@mkdir -p $(@D)
	$(CC) $(TESTS_CFLAGS) -fPIC -shared -Wl,-soname,libnvidia-ml.so.1 -o $@ $<

# RUNPATH $ORIGIN: the runtime's dlopen("libcuda.so.1") finds the mock driver beside it.
$(TESTS_LIB)/libcudart.so.13: tests/mock/cudart.c tests/mock/libcudart.map $(TESTS_MOCK_HEADERS)
	@mkdir -p $(@D)
	$(CC) $(TESTS_MOCK_CFLAGS) -shared -Wl,-soname,libcudart.so.13 \
		-Wl,--version-script,tests/mock/libcudart.map -Wl,-rpath,'$$ORIGIN' \
		-o $@ $< -ldl -lpthread
	ln -sf libcudart.so.13 $(@D)/libcudart.so

# PyTorch's caching allocator with its USDT probes (<sys/sdt.h>: systemtap-sdt-dev).
$(TESTS_LIB)/libc10_cuda.so: tests/mock/c10_cuda.c $(TESTS_LIB)/libcudart.so.13
	$(CC) $(TESTS_CFLAGS) -fPIC -shared -Wl,-soname,libc10_cuda.so -o $@ $< \
		-L$(TESTS_LIB) -l:libcudart.so.13 -Wl,-rpath,'$$ORIGIN'

$(TESTS_OUT)/workload: tests/workloads/workload.c $(TESTS_MOCK_HEADERS) $(TESTS_MOCK_LIBS)
	$(CC) $(TESTS_CFLAGS) $(TESTS_CUDA_FLAGS) -Itests/mock -o $@ $< \
		-L$(TESTS_LIB) -lcudart -lcuda -lpthread -Wl,-rpath,'$$ORIGIN/lib'

# Arrays, registered host memory, VMM mappings and reservations, IPC (test_apis.py).
$(TESTS_OUT)/apis: tests/workloads/apis.c $(TESTS_MOCK_HEADERS) $(TESTS_MOCK_LIBS)
	$(CC) $(TESTS_CFLAGS) $(TESTS_CUDA_FLAGS) -Itests/mock -o $@ $< \
		-L$(TESTS_LIB) -lcudart -lcuda -lpthread -Wl,-rpath,'$$ORIGIN/lib'

$(TESTS_OUT)/owners/lib%: tests/workloads/owner_lib.c $(TESTS_MOCK_HEADERS) $(TESTS_MOCK_LIBS)
	@mkdir -p $(@D)
	$(CC) $(TESTS_CFLAGS) $(TESTS_CUDA_FLAGS) -Itests/mock -fPIC -shared -Wl,-soname,$(@F) \
		-o $@ $< -L$(TESTS_LIB) -lcudart -Wl,-rpath,'$$ORIGIN/../lib'

$(TESTS_OWNER_NOFP): tests/workloads/owner_lib.c $(TESTS_MOCK_HEADERS) $(TESTS_MOCK_LIBS)
	@mkdir -p $(@D)
	$(CC) $(TESTS_CFLAGS) -fomit-frame-pointer $(TESTS_CUDA_FLAGS) -Itests/mock -fPIC -shared \
		-Wl,-soname,$(@F) -o $@ $< -L$(TESTS_LIB) -lcudart -Wl,-rpath,'$$ORIGIN/../../lib'

$(TESTS_OUT)/owners/owners: tests/workloads/owners.c $(TESTS_MOCK_HEADERS) $(TESTS_MOCK_LIBS)
	@mkdir -p $(@D)
	$(CC) $(TESTS_CFLAGS) $(TESTS_CUDA_FLAGS) -Itests/mock -o $@ $< \
		-L$(TESTS_LIB) -lcudart -ldl -Wl,-rpath,'$$ORIGIN/../lib'

$(TESTS_HIP_LIB): tests/mock/hip.c
	@mkdir -p $(@D)
	$(CC) $(TESTS_MOCK_CFLAGS) -shared -Wl,-soname,libamdhip64.so.5 -o $@ $< -lpthread

# PyTorch's ROCm build: the mock caching allocator over the mock HIP runtime beside it.
$(TESTS_OUT)/lib-hip/libc10_hip.so: tests/mock/c10_cuda.c $(TESTS_HIP_LIB)
	$(CC) $(TESTS_CFLAGS) -DC10_HIP -fPIC -shared -Wl,-soname,libc10_hip.so -o $@ $< \
		-L$(@D) -l:libamdhip64.so.5 -Wl,-rpath,'$$ORIGIN'

$(TESTS_OUT)/hip: tests/workloads/hip.c
	@mkdir -p $(@D)
	$(CC) $(TESTS_CFLAGS) -o $@ $< -ldl

# AMD's real HIP runtime from Debian main, unpacked into $(BUILD)/amd (scripts/amd.sh); as
# with NVIDIA's, a fetch that fails leaves its reason in $(BUILD)/amd/unavailable.
.PHONY: amd
amd:
	-@scripts/amd.sh $(BUILD)/amd

# Links neither mock, so nothing CUDA is mapped until the dlopen scenario loads it.
$(TESTS_OUT)/workload_dl: tests/workloads/workload.c
	@mkdir -p $(@D)
	$(CC) $(TESTS_CFLAGS) -DGM_DLOPEN_ONLY -o $@ $< -ldl

# cuMemAlloc_v2 in a loop in the driver file it dlopens: NVIDIA's, or a mock.
$(TESTS_OUT)/driver_loop: tests/workloads/driver_loop.c
	@mkdir -p $(@D)
	$(CC) $(TESTS_CFLAGS) -o $@ $< -ldl

# Two processes on one pid, back to back.
$(TESTS_OUT)/samepid: tests/workloads/samepid.c
	@mkdir -p $(@D)
	$(CC) $(TESTS_CFLAGS) -o $@ $<

# A program run again and again while another task keeps locking its memory map.
$(TESTS_OUT)/maplock: tests/workloads/maplock.c
	@mkdir -p $(@D)
	$(CC) $(TESTS_CFLAGS) -o $@ $<

$(TESTS_OUT)/real_cudart: tests/workloads/real_cudart.c
	@mkdir -p $(@D)
	$(CC) $(TESTS_CFLAGS) -I$(TESTS_CUDA)/include -o $@ $< \
		-L$(TESTS_CUDA)/lib64 -l:libcudart.so.13 -Wl,-rpath,$(TESTS_CUDA)/lib64

# NVIDIA's real libraries, opened by path: built whether or not they are here.
$(TESTS_OUT)/real_nvidia: tests/workloads/real_nvidia.c
	@mkdir -p $(@D)
	$(CC) $(TESTS_CFLAGS) -o $@ $< -ldl

# NVIDIA's real driver, NVML and CUDA 11.8's runtime from Debian non-free, unpacked into
# $(BUILD)/nvidia (scripts/nvidia.sh). A fetch that fails is no build failure: it leaves its
# reason in $(BUILD)/nvidia/unavailable, and the tests that need the libraries skip with it.
.PHONY: nvidia
nvidia:
	-@scripts/nvidia.sh $(BUILD)/nvidia

# nvcc's default: libcudart linked statically into the executable.
$(TESTS_OUT)/static_cuda: tests/workloads/static_cuda.cu
	@mkdir -p $(@D)
	$(TESTS_CUDA)/bin/nvcc -O2 -g -cudart static -Xcompiler -fno-omit-frame-pointer \
		-o $@ $<

include tests/workloads/sym/sym.mk

# The integration suite while another system-wide gpumem and another CUDA program run on the
# host (tests/shared_host.sh): every test must assert on its own processes only.
.PHONY: test-shared
test-shared: all test-progs nvidia amd
	tests/shared_host.sh $(PYTEST_ARGS)
