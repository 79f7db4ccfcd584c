# The real-GPU check in one folder: `make gpu-bundle` writes build/gpu-bundle/ (tests/gpu/bundle.sh),
# which runs on a bare GPU machine as `build/gpu-bundle/run.sh`; `make gpu-check` builds and runs
# it here. `make gpu-bundle-check` (in make test) proves the folder stands alone, no GPU needed.
# Included by the top-level Makefile.

GPU_BUNDLE := $(BUILD)/gpu-bundle

.PHONY: gpu-bundle gpu-bundle-check gpu-check

# gpumem again, with an RPATH (not RUNPATH: the loader searches it for the libraries' own
# libraries too) of $ORIGIN/lib: the bundle's copies are found whatever the machine has, and
# no LD_LIBRARY_PATH reaches the programs gpumem runs.
$(BUILD)/gpu-bundle.gpumem: $(USER_OBJS)
	$(CC) $(LDFLAGS) -Wl,--disable-new-dtags -Wl,-rpath,'$$ORIGIN/lib' -o $@ $^ $(LIBS)

gpu-bundle: $(BUILD)/gpu-bundle.gpumem $(TESTS_OUT)/workload $(TESTS_MOCK_LIBS)
	tests/gpu/bundle.sh $< $(TESTS_OUT) $(GPU_BUNDLE)

gpu-bundle-check: gpu-bundle
	tests/gpu/bundle_check.sh $(GPU_BUNDLE)

gpu-check: gpu-bundle
	$(GPU_BUNDLE)/run.sh
