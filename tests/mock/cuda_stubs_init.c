/* The stub-shaped mock driver's flag word (tests/mock/cuda_stubs.S): GPUMEM_MOCK_DEINIT=1 sets
 * it, and every stubbed API then returns CUDA_ERROR_DEINITIALIZED (4) from the stub itself, as
 * NVIDIA's do once the driver is torn down. */
#include <stdlib.h>

#if GM_STUB_SHAPE == 2
#define GM_STUB_DEINIT 0x7fu
#else
#define GM_STUB_DEINIT 0x321cba00u
#endif

extern unsigned int gm_stub_state __attribute__((visibility("hidden")));

__attribute__((constructor)) static void gm_stub_read_config(void)
{
	const char *deinit = getenv("GPUMEM_MOCK_DEINIT");

	if (deinit && deinit[0] == '1')
		gm_stub_state = GM_STUB_DEINIT;
}
