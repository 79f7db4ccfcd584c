# Unit tests (cmocka). Included by the top-level Makefile, which defines BUILD, CC, WARN,
# ALL_CFLAGS and LDFLAGS. Each test compiles the userspace modules it needs from source into
# $(BUILD)/unit/, so it never depends on the tracer's objects; only probes.c needs the BPF
# skeleton's header, built by the top-level rule.

UNIT_DIR := tests/unit
UNIT_OUT := $(BUILD)/unit
UNIT_LIBS := -lcmocka -lbpf -ldw -lelf -lz -ldl -lm $(JSONC_LIBS)
UNIT_TESTS := json site_text procs gpu_map alloc_table slot_table elf symbolize probes state container analysis untrusted oci prom pycode \
	prom_server protobuf pickle record timeline probe_place
UNIT_BINS := $(patsubst %,$(UNIT_OUT)/test_%,$(UNIT_TESTS))
UNIT_LIBSYMS := $(UNIT_OUT)/libsyms.so

# The userspace modules each test links.
unit_mods_json := json
unit_mods_pycode := pycode util
unit_mods_procs := procs
unit_mods_gpu_map := gpu_map procs
unit_mods_alloc_table := alloc_table slot_table
unit_mods_slot_table := slot_table
unit_mods_elf := elf_syms
unit_mods_symbolize := symbolize elf_syms procs untrusted
unit_mods_probes := probes probe_place pin elf_syms uprobe_multi util
unit_mods_probe_place := probe_place
unit_mods_state := state alloc_table slot_table stacks python pycode publish snapshot retention cgroups nvml gpu_map symbolize elf_syms procs unwind \
	container oci probes probe_place pin purge uprobe_multi untrusted util
unit_mods_container := container
unit_mods_analysis := history leaks trends oom snapshot util
unit_mods_untrusted := untrusted
unit_mods_site_text := site_text report snapshot probes probe_place pin elf_syms uprobe_multi units json util
unit_mods_prom := prom prom_sites site_text gpu_map procs prom_writer report units json snapshot probes probe_place pin elf_syms uprobe_multi util
unit_mods_prom_server := prometheus $(unit_mods_prom)
unit_mods_record := rec_time idmap sqlite sqlite_rows sqlite_samples sqlite_retention sqlite_schema \
	recording recording_events recording_series recording_snap recording_state history \
	container snapshot report units json probes probe_place elf_syms uprobe_multi pin util
# Libraries a test needs beyond UNIT_LIBS.
unit_libs_prom_server := -lmicrohttpd -lpthread
unit_mods_oci := oci untrusted util
unit_mods_protobuf := protobuf util
unit_mods_pickle := pickle json util
unit_mods_timeline := timeline intern snapshot util
unit_libs_record := -lsqlite3

# A module is named by its file's base name, wherever it lives under userspace/.
unit_src = $(firstword $(wildcard userspace/$(1).c userspace/*/$(1).c userspace/*/*/$(1).c))

.SECONDEXPANSION:
$(UNIT_OUT)/mod/%.o: $$(call unit_src,$$*) | $(BUILD)/gpumem.skel.h
	@mkdir -p $(@D)
	$(CC) $(ALL_CFLAGS) $(DEPFLAGS) -c $< -o $@

$(UNIT_OUT)/obj/test_%.o: $(UNIT_DIR)/test_%.c | $(BUILD)/gpumem.skel.h
	@mkdir -p $(@D)
	$(CC) $(ALL_CFLAGS) $(DEPFLAGS) -c $< -o $@

define unit_link_rule
$(UNIT_OUT)/test_$(1): $(UNIT_OUT)/obj/test_$(1).o $(patsubst %,$(UNIT_OUT)/mod/%.o,$(unit_mods_$(1)))
	$$(CC) $$(LDFLAGS) -o $$@ $$^ $$(UNIT_LIBS) $$(unit_libs_$(1))
endef
$(foreach t,$(UNIT_TESTS),$(eval $(call unit_link_rule,$(t))))

# The ELF fixture: versioned symbols (a version script and .symver), a build-id, and a text
# segment whose addresses differ from its file offsets. Built without sanitizers: it is data.
$(UNIT_LIBSYMS): $(UNIT_DIR)/fixtures/libsyms.c $(UNIT_DIR)/fixtures/libsyms.map
	@mkdir -p $(@D)
	$(CC) $(WARN) -std=gnu11 -O1 -g -fPIC -fno-omit-frame-pointer -shared \
		-Wl,--version-script=$(UNIT_DIR)/fixtures/libsyms.map -Wl,--build-id=sha1 \
		-Wl,-Ttext-segment=0x400000 -o $@ $<

.PHONY: unit-test
unit-test: $(UNIT_BINS) $(UNIT_LIBSYMS)
	@failed=""; \
	for t in $(UNIT_BINS); do \
		echo "== $$t"; \
		$$t $(UNIT_LIBSYMS) || failed="$$failed $$(basename $$t)"; \
	done; \
	if [ -n "$$failed" ]; then echo "unit tests FAILED:$$failed"; exit 1; fi; \
	echo "unit tests passed"

-include $(wildcard $(UNIT_OUT)/mod/*.d $(UNIT_OUT)/obj/*.d)
