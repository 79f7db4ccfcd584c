# Symbolization workloads, built into $(BUILD)/tests/sym by `make test-progs`: the same three
# call levels with and without frame pointers and with split debug info, a library loaded with
# dlopen, and C++. Included by tests/tests.mk, whose TESTS_* variables it uses.

SYM_SRC := tests/workloads/sym
SYM_OUT := $(TESTS_OUT)/sym
# -O2 like real code; noipa in the sources keeps each level a frame of its own.
SYM_CFLAGS := -O2 -g $(WARN) -D_GNU_SOURCE $(TESTS_CUDA_FLAGS) -Itests/mock
SYM_FP := -fno-omit-frame-pointer -mno-omit-leaf-frame-pointer
SYM_NOFP := -fomit-frame-pointer
SYM_LINK := -L$(TESTS_LIB) -lcudart -Wl,-rpath,'$$ORIGIN/../lib'
SYM_DEPS := $(TESTS_MOCK_HEADERS) $(TESTS_MOCK_LIBS)
SYM_SPLIT_DEBUG := $(TESTS_OUT)/sym-debug/sym_split.debug

SYM_PROGS := $(SYM_OUT)/sym_fp $(SYM_OUT)/sym_nofp $(SYM_OUT)/sym_split \
	$(SYM_SPLIT_DEBUG) $(SYM_OUT)/sym_dl $(SYM_OUT)/libsymdl.so $(SYM_OUT)/sym_cpp

test-progs: $(SYM_PROGS)

$(SYM_OUT)/sym_fp: $(SYM_SRC)/sym_levels.c $(SYM_DEPS)
	@mkdir -p $(@D)
	$(CC) $(SYM_CFLAGS) -std=gnu11 $(SYM_FP) -o $@ $< $(SYM_LINK)

$(SYM_OUT)/sym_nofp: $(SYM_SRC)/sym_levels.c $(SYM_DEPS)
	@mkdir -p $(@D)
	$(CC) $(SYM_CFLAGS) -std=gnu11 $(SYM_NOFP) -o $@ $< $(SYM_LINK)

# Frame pointers, a build-id, then every symbol and all debug info moved into sym_split.debug,
# which the tests place under a debug root as .build-id/xx/yyyy.debug (no .gnu_debuglink). It is
# kept out of sym/: libdw also tries FILE.debug beside FILE, which would prove nothing.
$(SYM_SPLIT_DEBUG): $(SYM_SRC)/sym_levels.c $(SYM_DEPS)
	@mkdir -p $(@D) $(SYM_OUT)
	$(CC) $(SYM_CFLAGS) -std=gnu11 $(SYM_FP) -Wl,--build-id=sha1 -o $(SYM_OUT)/sym_split.full \
		$< $(SYM_LINK)
	objcopy --only-keep-debug $(SYM_OUT)/sym_split.full $@

$(SYM_OUT)/sym_split: $(SYM_SPLIT_DEBUG)
	objcopy --strip-all $(SYM_OUT)/sym_split.full $@

$(SYM_OUT)/libsymdl.so: $(SYM_SRC)/symdl.c $(SYM_DEPS)
	@mkdir -p $(@D)
	$(CC) $(SYM_CFLAGS) -std=gnu11 $(SYM_FP) -fPIC -shared -o $@ $< $(SYM_LINK)

# Links neither mock: libcudart arrives with the library it dlopens.
$(SYM_OUT)/sym_dl: $(SYM_SRC)/sym_dl.c
	@mkdir -p $(@D)
	$(CC) $(SYM_CFLAGS) -std=gnu11 $(SYM_FP) -o $@ $< -ldl

$(SYM_OUT)/sym_cpp: $(SYM_SRC)/sym_cpp.cc $(TESTS_MOCK_LIBS)
	@mkdir -p $(@D)
	$(CXX) -O2 -g $(WARN) -std=gnu++17 $(SYM_FP) -o $@ $< $(SYM_LINK)
