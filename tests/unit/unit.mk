# Unit tests (cmocka). Included by the top-level Makefile, which defines BUILD, CC, WARN,
# ALL_CFLAGS and LDFLAGS. Each test compiles the userspace modules it needs from source into
# $(BUILD)/unit/, so it never depends on the tracer's objects; only probes.c needs the BPF
# skeleton's header, built by the top-level rule.

UNIT_DIR := tests/unit
UNIT_OUT := $(BUILD)/unit
UNIT_LIBS := -lcmocka -lbpf -ldw -lelf -lz -ldl -lm $(JSONC_LIBS)
UNIT_TESTS := json site_text procs gpu_map environ alloc_table slot_table elf symbolize probes state container analysis untrusted oci prom pycode \
	prom_server protobuf pickle record timeline probe_place
UNIT_BINS := $(patsubst %,$(UNIT_OUT)/test_%,$(UNIT_TESTS))
UNIT_LIBSYMS := $(UNIT_OUT)/libsyms.so

# The userspace modules each test links.
unit_mods_json := output/json
unit_mods_pycode := symbols/pycode host/procs base/util
unit_mods_procs := host/procs
unit_mods_gpu_map := host/gpu_map host/procs
unit_mods_environ := symbols/environ symbols/elf_syms symbols/symbolize symbols/debuginfo host/procs base/untrusted \
	base/util base/bus_guard
unit_mods_alloc_table := model/alloc_table model/slot_table
unit_mods_slot_table := model/slot_table
unit_mods_elf := symbols/elf_syms
unit_mods_symbolize := symbols/symbolize symbols/debuginfo symbols/elf_syms symbols/unwind host/procs base/untrusted \
	base/util base/bus_guard
unit_mods_probes := probes/table loader/attach discover/probe_place loader/pin symbols/elf_syms \
	loader/uprobe_multi base/util
unit_mods_probe_place := discover/probe_place
unit_mods_state := model/state model/alloc_table model/slot_table model/stacks model/python \
	symbols/environ \
	symbols/pycode model/publish model/snapshot model/owners model/retention host/cgroups host/nvml host/amdgpu host/gpu_map \
	symbols/symbolize symbols/debuginfo symbols/elf_syms host/procs symbols/unwind host/container host/oci probes/table \
	loader/attach discover/probe_place loader/pin model/purge loader/uprobe_multi base/untrusted \
	base/util base/bus_guard
unit_mods_container := host/container
unit_mods_analysis := analysis/history analysis/leak_verdicts analysis/forecast analysis/trends \
	analysis/failure_context analysis/cost model/snapshot host/gpu_map host/procs probes/table base/util
unit_mods_untrusted := base/untrusted
unit_mods_site_text := output/site_text output/report model/snapshot model/owners host/gpu_map host/procs probes/table loader/attach \
	discover/probe_place loader/pin symbols/elf_syms loader/uprobe_multi output/units output/json \
	base/util
unit_mods_prom := output/prom output/prom_sites output/prom_libraries output/site_text host/gpu_map host/procs \
	output/prom_writer output/report model/owners output/units output/json model/snapshot probes/table \
	loader/attach discover/probe_place loader/pin symbols/elf_syms loader/uprobe_multi base/util
unit_mods_prom_server := export/prometheus $(unit_mods_prom)
unit_mods_record := recording/rec_time recording/idmap recording/writer recording/writer_rows \
	recording/writer_samples recording/writer_retention recording/schema recording/reader \
	recording/reader_events recording/reader_series recording/reader_snap recording/reader_state \
	analysis/history host/container model/snapshot host/gpu_map host/procs output/report model/owners output/units output/json \
	probes/table loader/attach discover/probe_place symbols/elf_syms loader/uprobe_multi loader/pin \
	base/util
# Libraries a test needs beyond UNIT_LIBS.
unit_libs_prom_server := -lmicrohttpd -lpthread
unit_mods_oci := host/oci base/untrusted base/util
unit_mods_protobuf := export/protobuf base/util
unit_mods_pickle := export/pickle output/json base/util
unit_mods_timeline := export/timeline export/intern model/snapshot host/gpu_map host/procs probes/table \
	base/util
unit_libs_record := -lsqlite3

# A module is named by its path under userspace/, without .c: model/state.
unit_src = userspace/$(1).c

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
		LSAN_OPTIONS=suppressions=$(UNIT_DIR)/lsan.supp $$t $(UNIT_LIBSYMS) || \
			failed="$$failed $$(basename $$t)"; \
	done; \
	if [ -n "$$failed" ]; then echo "unit tests FAILED:$$failed"; exit 1; fi; \
	echo "unit tests passed"

# Modules sit in their layer's folder (mod/output/json.d): their header dependencies too.
-include $(wildcard $(UNIT_OUT)/mod/*/*.d $(UNIT_OUT)/obj/*.d)
