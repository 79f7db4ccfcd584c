// SPDX-License-Identifier: GPL-2.0
/* Fuzzes the probe placement decoder (discover/probe_place.c) with a function's first bytes,
 * copied to a buffer of exactly their length: a read past them is a crash. */
#include "discover/probe_place.h"
#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct probe_place where;
	uint8_t *code;

	if (size > PROBE_PLACE_BYTES)
		size = PROBE_PLACE_BYTES;
	code = malloc(size ? size : 1);
	if (!code)
		return 0;
	memcpy(code, data, size);
	probe_place_decode(code, size, &where);
	if (where.offset) {
		/* past one instruction, onto a whole one that ends inside the bytes */
		fuzz_check(where.offset < size, "moved %u bytes of %zu", where.offset, size);
		fuzz_check(where.offset <= 12, "moved past %u bytes: longer than any cmp/test",
			   where.offset);
		fuzz_check(where.skipped && where.landing, "moved without naming the instructions");
	} else {
		fuzz_check(!where.skipped && !where.landing, "kept but named instructions");
	}
	free(code);
	return 0;
}
