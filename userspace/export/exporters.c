// SPDX-License-Identifier: GPL-2.0
/* The table of export formats, and the names every format gives frames and processes. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include "base/util.h"
#include "export/exporters.h"
#include "output/json.h"

static const struct exporter_ops *const formats[] = {
	&pprof_exporter,
	&folded_exporter,
	&chrome_exporter,
	&memviz_exporter,
};

const struct exporter_ops *exporter_find(const char *name)
{
	for (size_t i = 0; name && i < ARRAY_SIZE(formats); i++)
		if (!strcmp(formats[i]->name, name))
			return formats[i];
	return NULL;
}

const char *exporter_names(void)
{
	return "pprof, folded, chrome or memviz";
}

static const char *base_name(const char *path)
{
	const char *slash = strrchr(path, '/');

	return slash ? slash + 1 : path;
}

const char *export_frame_name(const struct snap_frame *f, char *buf, size_t len)
{
	char raw[512];

	if (f->symbol)
		snprintf(raw, sizeof(raw), "%s", f->symbol);
	else if (f->module)
		snprintf(raw, sizeof(raw), "%s+0x%" PRIx64, base_name(f->module), f->offset);
	else
		snprintf(raw, sizeof(raw), "0x%" PRIx64, f->addr);
	text_sanitize(buf, len, raw);
	return buf;
}

/* Mappings, reservations and imports are no memory: left out as host memory is. */
bool export_kind_is_gpu(uint32_t kind)
{
	return gm_kind_is_gpu(kind);
}

void export_process_name(char *buf, size_t len, const char *comm, int pid,
			 const struct container_info *ci)
{
	char clean[GM_COMM_LEN + 1];

	text_sanitize(clean, sizeof(clean), comm && comm[0] ? comm : "?");
	if (ci && ci->has_id)
		snprintf(buf, len, "%s (%d) [%.12s]", clean, pid, ci->id);
	else
		snprintf(buf, len, "%s (%d)", clean, pid);
}
