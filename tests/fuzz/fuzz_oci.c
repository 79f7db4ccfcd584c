// SPDX-License-Identifier: GPL-2.0
/*
 * Fuzzes the annotation reader of model/oci.c: the input is a whole config.json. Whatever it
 * holds, the result is one of those oci.h lists; a refusal leaves every name empty; a name is
 * NUL-terminated inside its field and printable ASCII without space; and the names found are
 * found again in a config.json that holds nothing else.
 */
#include <errno.h>

#include "fuzz.h"
#include "host/oci.h"

static void check_name(const char *name, size_t size, const char *what)
{
	size_t n = strnlen(name, size);

	fuzz_check(n < size, "%s is not NUL-terminated", what);
	for (size_t i = 0; i < n; i++)
		fuzz_check((unsigned char)name[i] > ' ' && (unsigned char)name[i] < 0x7f,
			   "%s has byte 0x%02x", what, (unsigned char)name[i]);
}

static bool no_names(const struct oci_names *n)
{
	return !n->pod_name[0] && !n->pod_namespace[0] && !n->container_name[0];
}

/* The names again, alone in CRI-O's annotations. */
static void check_round_trip(const struct oci_names *n)
{
	char text[1024];
	struct oci_names again;
	int len, err;

	len = snprintf(text, sizeof(text),
		       "{\"annotations\":{\"io.kubernetes.pod.name\":\"%s\","
		       "\"io.kubernetes.pod.namespace\":\"%s\","
		       "\"io.kubernetes.container.name\":\"%s\"}}",
		       n->pod_name, n->pod_namespace, n->container_name);
	fuzz_check(len > 0 && (size_t)len < sizeof(text), "round trip text does not fit");
	/* a name holding '"' or '\\' would need escaping: those are left out */
	if (strpbrk(n->pod_name, "\"\\") || strpbrk(n->pod_namespace, "\"\\") ||
	    strpbrk(n->container_name, "\"\\"))
		return;
	err = oci_parse_config(text, (size_t)len, &again);
	fuzz_check(err == 0, "the names found are refused alone: %d", err);
	fuzz_check(!strcmp(again.pod_name, n->pod_name) &&
			   !strcmp(again.pod_namespace, n->pod_namespace) &&
			   !strcmp(again.container_name, n->container_name),
		   "the names differ alone: \"%s\" \"%s\" \"%s\"", again.pod_name,
		   again.pod_namespace, again.container_name);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	/* exactly size bytes, no NUL after them: ASan sees any read past the end */
	char *text = malloc(size ? size : 1);
	struct oci_names n;
	int err;

	if (!text)
		abort();
	memcpy(text, data, size);
	memset(&n, 'x', sizeof(n));
	err = oci_parse_config(text, size, &n);
	fuzz_check(err == 0 || err == -EFBIG || err == -ERANGE || err == -EBADMSG ||
			   err == -EILSEQ || err == -ENOMEM,
		   "oci_parse_config: %d", err);
	fuzz_check(size <= OCI_CONFIG_MAX_BYTES || err == -EFBIG, "%zu bytes read", size);
	check_name(n.pod_name, sizeof(n.pod_name), "pod_name");
	check_name(n.pod_namespace, sizeof(n.pod_namespace), "pod_namespace");
	check_name(n.container_name, sizeof(n.container_name), "container_name");
	fuzz_check(!err || no_names(&n), "refused (%d) with names", err);
	if (!err && !no_names(&n))
		check_round_trip(&n);
	fuzz_check(oci_parse_config(NULL, 0, &n) == -EINVAL, "NULL text taken");
	fuzz_check(oci_parse_config(text, size, NULL) == -EINVAL, "NULL out taken");
	free(text);
	return 0;
}
