/* The mock driver shaped like NVIDIA's libcuda.so.1 (535.261.03): each allocation API is an
 * exported stub that tests a flag word, returns CUDA_ERROR_DEINITIALIZED (4) when it is set,
 * else jumps through a table into the C implementation (tests/mock/cuda.c, its export renamed
 * gm_impl_<api> by objcopy). GM_STUB_SHAPE picks the entry instructions:
 *   1  cmpl $imm32,flag(%rip) (81 3d); je rel8 (74)      NVIDIA's: the probe moves to +10
 *   2  cmpl $imm8,flag(%rip) (83 3d); je rel32 (0f 84)   the probe moves to +7
 *   3  mov flag(%rip),%eax; cmp $imm32,%eax; je          a register write first: the symbol
 */
#ifndef GM_STUB_SHAPE
#error "GM_STUB_SHAPE must be 1, 2 or 3"
#endif
#if GM_STUB_SHAPE == 2
#define GM_STUB_DEINIT 0x7f
#else
#define GM_STUB_DEINIT 0x321cba00
#endif

	.text
.macro stub name, index
	.globl \name
	.type \name, @function
	.p2align 5
\name:
	.cfi_startproc
#if GM_STUB_SHAPE == 3
	mov gm_stub_state(%rip), %eax
	cmp $GM_STUB_DEINIT, %eax
	je 1f
#elif GM_STUB_SHAPE == 2
	cmpl $GM_STUB_DEINIT, gm_stub_state(%rip)
	{disp32} je 1f
#else
	cmpl $GM_STUB_DEINIT, gm_stub_state(%rip)
	je 1f
#endif
	jmp *gm_stub_table + 8 * \index(%rip)
1:	mov $4, %eax
	ret
	.cfi_endproc
	.size \name, . - \name
.endm

.macro impl name
	.quad gm_impl_\name
.endm

/* The stubbed APIs, one a line (tests/tests.mk reads the names from these lines). */
#define GM_STUB_APIS(X) \
	X(cuMemAlloc_v2, 0) \
	X(cuMemAllocPitch_v2, 1) \
	X(cuMemAllocManaged, 2) \
	X(cuMemAllocHost_v2, 3) \
	X(cuMemHostAlloc, 4) \
	X(cuMemAllocAsync, 5) \
	X(cuMemAllocAsync_ptsz, 6) \
	X(cuMemAllocFromPoolAsync, 7) \
	X(cuMemAllocFromPoolAsync_ptsz, 8) \
	X(cuMemFree_v2, 9) \
	X(cuMemFreeHost, 10) \
	X(cuMemFreeAsync, 11) \
	X(cuMemFreeAsync_ptsz, 12) \
	X(cuMemCreate, 13) \
	X(cuMemRelease, 14)

#define GM_STUB(name, index) stub name, index;
#define GM_IMPL(name, index) impl name;
	GM_STUB_APIS(GM_STUB)

	.section .data.rel.ro, "aw"
	.p2align 3
gm_stub_table:
	GM_STUB_APIS(GM_IMPL)

	.data
	.p2align 2
	.globl gm_stub_state
	.hidden gm_stub_state
gm_stub_state:
	.long 0

	.section .note.GNU-stack, "", @progbits
