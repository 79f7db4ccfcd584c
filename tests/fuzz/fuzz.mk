# libFuzzer harnesses for the parsers of untrusted input: ELF files, /proc text, cgroup paths,
# mountinfo, OCI bundles' config.json, the JSON writer fed arbitrary bytes, and the decoder of
# functions' first instructions that places probes. Included by the top-level Makefile (after
# unit.mk, whose libsyms.so fixture seeds the ELF harness). Each
# harness compiles the userspace modules it needs from source with clang into $(BUILD)/fuzz/.
#
#   make fuzz-build                  the harnesses, and the generated ELF seeds
#   make fuzz FUZZ_SECONDS=600       each harness for that long, one after another
#   make fuzz-smoke                  each for $(FUZZ_SMOKE_SECONDS) s; part of `make test`
#   make fuzz FUZZ_HARNESSES=json    one harness only
#   make fuzz FUZZ_CORPUS_OUT=DIR    keeps each grown corpus in DIR/<harness>/
#
# Each run fuzzes a copy of tests/fuzz/corpus/<harness>/ in a temporary folder: new inputs are
# never written into the repository. A crash fails the target and is kept in
# $(BUILD)/fuzz/artifacts/<harness>/ with the command that reproduces it. Without clang or its
# libFuzzer runtime the targets say "fuzz: skipped: <reason>" and succeed.

FUZZ_CC ?= clang
FUZZ_SECONDS ?= 60
FUZZ_SMOKE_SECONDS ?= 10
FUZZ_DIR := tests/fuzz
FUZZ_OUT := $(BUILD)/fuzz
FUZZ_HARNESSES ?= elf_syms procs container json oci probe_place gpu_map

# The sanitizers as `make SANITIZE=1` has them, with libFuzzer's coverage; the project's
# warnings, as an error, for the harnesses and the modules alike.
FUZZ_CFLAGS := -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all \
	-fno-omit-frame-pointer $(WARN) -std=gnu11 -D_GNU_SOURCE -Ibpf $(USER_INC) -I$(BUILD) \
	-I$(FUZZ_DIR)

# The userspace modules each harness links, and the libraries they need.
fuzz_mods_elf_syms := symbols/elf_syms
fuzz_mods_procs := host/procs
fuzz_mods_gpu_map := host/gpu_map host/procs
fuzz_mods_container := host/container
fuzz_mods_json := output/json
fuzz_mods_oci := host/oci base/untrusted base/util
fuzz_mods_probe_place := discover/probe_place
fuzz_libs_elf_syms := -lelf -lz
fuzz_libs_oci := $(JSONC_LIBS)

fuzz_src = userspace/$(1).c
FUZZ_BINS := $(patsubst %,$(FUZZ_OUT)/fuzz_%,$(FUZZ_HARNESSES))

.SECONDEXPANSION:
$(FUZZ_OUT)/mod/%.o: $$(call fuzz_src,$$*)
	@mkdir -p $(@D)
	$(FUZZ_CC) $(FUZZ_CFLAGS) $(DEPFLAGS) -c $< -o $@

$(FUZZ_OUT)/obj/fuzz_%.o: $(FUZZ_DIR)/fuzz_%.c
	@mkdir -p $(@D)
	$(FUZZ_CC) $(FUZZ_CFLAGS) $(DEPFLAGS) -c $< -o $@

define fuzz_link_rule
$(FUZZ_OUT)/fuzz_$(1): $(FUZZ_OUT)/obj/fuzz_$(1).o \
		$(patsubst %,$(FUZZ_OUT)/mod/%.o,$(fuzz_mods_$(1)))
	$$(FUZZ_CC) -fsanitize=fuzzer,address,undefined -o $$@ $$^ $$(fuzz_libs_$(1))
endef
$(foreach h,$(FUZZ_HARNESSES),$(eval $(call fuzz_link_rule,$(h))))

# ELF seeds, generated rather than committed: the unit tests' libsyms.so (versioned symbols,
# build-id, text vaddr != file offset), and a tiny library as a shared object, stripped to
# .dynsym only, as a relocatable object and as a static executable. Each is a few KB.
FUZZ_ELF_SEEDS := $(FUZZ_OUT)/seeds/elf_syms
FUZZ_TINY_FLAGS := $(WARN) -O1 -g0 -fno-asynchronous-unwind-tables -nostdlib -Wl,--build-id=sha1 \
	-Wl,-z,noseparate-code -Wl,-z,norelro
FUZZ_SEED_FILES := $(addprefix $(FUZZ_ELF_SEEDS)/,libsyms.so tiny.so tiny-stripped.so tiny.o \
	tiny-exec)

$(FUZZ_ELF_SEEDS)/libsyms.so: $(UNIT_LIBSYMS)
	@mkdir -p $(@D)
	cp $< $@

$(FUZZ_ELF_SEEDS)/tiny.so: $(FUZZ_DIR)/elf_seed.c
	@mkdir -p $(@D)
	$(CC) $(FUZZ_TINY_FLAGS) -fPIC -shared -o $@ $<

$(FUZZ_ELF_SEEDS)/tiny-stripped.so: $(FUZZ_ELF_SEEDS)/tiny.so
	objcopy --strip-all $< $@

$(FUZZ_ELF_SEEDS)/tiny.o: $(FUZZ_DIR)/elf_seed.c
	@mkdir -p $(@D)
	$(CC) $(WARN) -O1 -g0 -fno-asynchronous-unwind-tables -c -o $@ $<

$(FUZZ_ELF_SEEDS)/tiny-exec: $(FUZZ_DIR)/elf_seed.c
	@mkdir -p $(@D)
	$(CC) $(FUZZ_TINY_FLAGS) -static -no-pie -Wl,-e,seed_entry -o $@ $<

.PHONY: fuzz-bins fuzz-build fuzz fuzz-smoke
fuzz-bins: $(FUZZ_BINS) $(FUZZ_SEED_FILES)

# Whether clang can build a fuzzer here; if not, the reason, and success.
fuzz_probe = reason=$$($(FUZZ_DIR)/run.sh probe "$(FUZZ_CC)" "$(FUZZ_OUT)") || \
	{ echo "fuzz: skipped: $$reason"; exit 0; }
fuzz_run = FUZZ_ARGS='$(FUZZ_ARGS)' FUZZ_CORPUS_OUT='$(FUZZ_CORPUS_OUT)' \
	$(FUZZ_DIR)/run.sh fuzz $(1) "$(FUZZ_OUT)" $(FUZZ_HARNESSES)

fuzz-build:
	@$(fuzz_probe); $(MAKE) --no-print-directory fuzz-bins

fuzz:
	@$(fuzz_probe); $(MAKE) --no-print-directory fuzz-bins && \
		$(call fuzz_run,$(FUZZ_SECONDS))

fuzz-smoke:
	@$(fuzz_probe); $(MAKE) --no-print-directory fuzz-bins && \
		$(call fuzz_run,$(FUZZ_SMOKE_SECONDS))

test: fuzz-smoke

-include $(wildcard $(FUZZ_OUT)/mod/*/*.d $(FUZZ_OUT)/obj/*.d)
