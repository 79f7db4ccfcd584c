/* SPDX-License-Identifier: GPL-2.0 */
/* Arrays, cudaMalloc3D and cuMemCreate: the size is the one the caller's descriptor asks for,
 * read at entry. */
#ifndef GPUMEM_ARRAYS_BPF_H
#define GPUMEM_ARRAYS_BPF_H

#include "entry.bpf.h"

/* acc *= v, false past GM_MAX_ARRAY_BYTES: what a traced process passes is never trusted. */
static __always_inline bool mul_bounded(__u64 *acc, __u64 v)
{
	if (v && *acc > GM_MAX_ARRAY_BYTES / v)
		return false;
	*acc *= v;
	return true;
}

/* Bytes of an element of a cudaChannelFormatDesc: its channels' bits, each 0..64. */
static __always_inline __u64 channel_desc_bytes(__u64 desc)
{
	__s32 d[5] = {};
	__u32 bits = 0;

	if (!desc || bpf_probe_read_user(d, GM_CHAN_DESC_BYTES, (void *)desc))
		return 0;
	for (int i = 0; i < 4; i++) {
		if (d[i] < 0 || d[i] > 64)
			return 0;
		bits += d[i];
	}
	return bits % 8 ? 0 : bits / 8;
}

/* Bytes of an element of a driver array: its CUarray_format's size times NumChannels (1, 2, 4).
 * Formats of other sizes (block-compressed, YUV planar...) are not sized. */
static __always_inline __u64 driver_element_bytes(__u32 format, __u32 channels)
{
	__u64 bytes;

	switch (format) {
	case 0x01: case 0x08:			/* UNSIGNED_INT8, SIGNED_INT8 */
		bytes = 1;
		break;
	case 0x02: case 0x09: case 0x10:	/* UNSIGNED_INT16, SIGNED_INT16, HALF */
		bytes = 2;
		break;
	case 0x03: case 0x0a: case 0x20:	/* UNSIGNED_INT32, SIGNED_INT32, FLOAT */
		bytes = 4;
		break;
	default:
		return 0;
	}
	if (channels != 1 && channels != 2 && channels != 4)
		return 0;
	return bytes * channels;
}

/* The rule: every mip level l holds max(1, width >> l) x max(1, height >> l) x
 * max(1, depth >> l) elements (a layered array keeps its depth, its layer count, at every
 * level); height and depth 0 are 1 (1D, 2D arrays). 0: not sized. */
static __always_inline __u64 array_bytes(__u64 elem, __u64 width, __u64 height, __u64 depth,
					 __u32 levels, bool layered)
{
	__u64 total = 0;

	if (!elem || !width || !levels || levels > GM_MAX_MIP_LEVELS)
		return 0;
	height = height ? height : 1;
	depth = depth ? depth : 1;
	for (__u32 l = 0; l < GM_MAX_MIP_LEVELS; l++) {
		__u64 level = elem, w = width >> l, h = height >> l, d = layered ? depth : depth >> l;

		if (l >= levels)
			break;
		if (!mul_bounded(&level, w ? w : 1) || !mul_bounded(&level, h ? h : 1) ||
		    !mul_bounded(&level, d ? d : 1))
			return 0;
		total += level;
		if (total > GM_MAX_ARRAY_BYTES)
			return 0;
	}
	return total;
}

/* A cudaExtent {width, height, depth} passed by value: in memory, above the return address. */
static __always_inline bool read_extent(struct pt_regs *ctx, __u64 ext[3])
{
	return bpf_probe_read_user(ext, 3 * sizeof(__u64), (void *)(PT_REGS_SP(ctx) + 8)) == 0;
}

/* Every array shape (and cudaMalloc3D) has its own descriptor: sized here, at entry, while the
 * caller's descriptor is what it passed. For arrays, height says whether the descriptor was
 * sized (1) or not (0: held with 0 bytes, counted at a successful return). */
static __always_inline int array_enter(struct pt_regs *ctx, void *out, void *desc, __u64 a2,
				       __u64 a3, __u64 a4)
{
	__u32 shape = GM_COOKIE_SHAPE(bpf_get_attach_cookie(ctx));
	__u64 d[5] = {}, ext[3] = {}, bytes = 0, elem;

	(void)a4;
	switch (shape) {
	case GM_SHAPE_VMM_CREATE: {
		/* cuMemCreate(out, size, prop, flags): the device is the one prop->location
		 * names (a CUmemLocation {type, id} at offset 8; type 1: a device), not the
		 * thread's; passed on as that device + 1 (0: the thread's). */
		__s32 loc[2] = {};
		__u64 device = 0;

		if (a2 && !bpf_probe_read_user(loc, sizeof(loc), (void *)(a2 + 8)) && loc[0] == 1 &&
		    loc[1] >= 0 && loc[1] < GM_MAX_GPUS)
			device = (__u64)loc[1] + 1;
		return call_enter(ctx, (__u64)out, device, (__u64)desc, 1);
	}
	case GM_SHAPE_MALLOC3D: {
		__u64 rows;

		if (!read_extent(ctx, ext))
			ext[0] = 0;
		rows = ext[1] ? ext[1] : 1;
		if (!mul_bounded(&rows, ext[2] ? ext[2] : 1))
			rows = 0;
		/* pitch (offset 8 of the cudaPitchedPtr) x rows, read at return */
		return call_enter(ctx, (__u64)out, (__u64)out + 8, ext[0], rows);
	}
	case GM_SHAPE_ARRAY_RT:
		bytes = array_bytes(channel_desc_bytes((__u64)desc), (__u64)a2, a3, 0, 1, false);
		break;
	case GM_SHAPE_ARRAY3D_RT:
		if (read_extent(ctx, ext))
			bytes = array_bytes(channel_desc_bytes((__u64)desc), ext[0], ext[1], ext[2],
					    1, a2 & GM_ARRAY_LAYERED);
		break;
	case GM_SHAPE_MIPMAP_RT:
		if (read_extent(ctx, ext))
			bytes = array_bytes(channel_desc_bytes((__u64)desc), ext[0], ext[1], ext[2],
					    (__u32)a2, a3 & GM_ARRAY_LAYERED);
		break;
	case GM_SHAPE_ARRAY_DRV:
		if (desc && !bpf_probe_read_user(d, GM_ARRAY_DESC_BYTES, desc)) {
			elem = driver_element_bytes((__u32)d[2], (__u32)(d[2] >> 32));
			bytes = array_bytes(elem, d[0], d[1], 0, 1, false);
		}
		break;
	case GM_SHAPE_ARRAY3D_DRV:
	case GM_SHAPE_MIPMAP_DRV:
		if (desc && !bpf_probe_read_user(d, GM_ARRAY3D_DESC_BYTES, desc)) {
			elem = driver_element_bytes((__u32)d[3], (__u32)(d[3] >> 32));
			bytes = array_bytes(elem, d[0], d[1], d[2],
					    shape == GM_SHAPE_MIPMAP_DRV ? (__u32)a2 : 1,
					    d[4] & GM_ARRAY_LAYERED);
		}
		break;
	default:
		return 0;
	}
	return call_enter(ctx, (__u64)out, 0, bytes, bytes ? 1 : 0);
}

static __always_inline bool is_array_shape(__u32 shape)
{
	return shape >= GM_SHAPE_ARRAY_RT && shape <= GM_SHAPE_MIPMAP_DRV;
}

#endif /* GPUMEM_ARRAYS_BPF_H */
