/* SPDX-License-Identifier: GPL-2.0 */
/* Pod and container names without the API server: the annotations that containerd and CRI-O
 * write into each container's OCI bundle (config.json), read as untrusted input and cached per
 * container id. */
#ifndef GPUMEM_OCI_H
#define GPUMEM_OCI_H

#include <stddef.h>
#include <stdint.h>
#include "host/container.h"

#define OCI_CONFIG_MAX_BYTES (1u << 20)	/* a bigger config.json is refused unread */
#define OCI_JSON_MAX_DEPTH 64		/* real ones nest about 7 deep */
#define OCI_MAX_ROOTS 16		/* --bundle-dir given at most this often */
#define OCI_MAX_NAMESPACES 64		/* containerd namespaces looked into under one root */
#define OCI_CACHE_MAX 1024		/* container ids remembered; all go when it is full */
#define OCI_RETRY_NS (10ull * 1000000000ull)	/* a bundle not found or refused: asked again */

/* Where containerd and CRI-O keep their bundles (without --bundle-dir). */
#define OCI_ROOT_CONTAINERD "/run/containerd/io.containerd.runtime.v2.task"
#define OCI_ROOT_CRIO "/run/containers/storage/overlay-containers"

/* "" when the bundle does not say. */
struct oci_names {
	char pod_name[CONTAINER_NAME_LEN + 1];
	char pod_namespace[CONTAINER_LABEL_LEN + 1];
	char container_name[CONTAINER_LABEL_LEN + 1];
};

/*
 * The names in the annotations of a config.json of len bytes (no NUL needed): containerd's
 * io.kubernetes.cri.sandbox-name, .sandbox-namespace, .container-name, else CRI-O's
 * io.kubernetes.pod.name, .pod.namespace, io.kubernetes.container.name. Returns 0 with the
 * names found (all "" for a bundle without them), or why the file is refused, with every name
 * "": -EFBIG larger than OCI_CONFIG_MAX_BYTES; -ERANGE nested deeper than OCI_JSON_MAX_DEPTH;
 * -EBADMSG not one JSON object (or its "annotations" not an object); -EILSEQ a name annotation
 * that is not a string of 1 to its field's length of printable ASCII (no space, no control
 * character, no NUL): Kubernetes names are DNS names, so anything else was not written by it.
 */
int oci_parse_config(const char *text, size_t len, struct oci_names *out);

/*
 * The names of container id (64 lowercase hex digits) from the first bundle found below root,
 * in any of the layouts: root/<id>/config.json, root/<id>/userdata/config.json (CRI-O) and
 * root/<namespace>/<id>/config.json (containerd). root itself may be a symlink; nothing below
 * it may. Returns 0, -ENOENT when no bundle of that id is there, -EINVAL for a bad id, or why
 * the one found is refused: -ELOOP a symlink on its way, -EINVAL not a regular file,
 * -ENOTDIR, oci_parse_config()'s errors, or another -errno from opening or reading it.
 */
int oci_lookup(const char *root, const char *id, struct oci_names *out);

struct oci_cache;

/*
 * roots: the bundle roots to look in, in order (NULL or none: OCI_ROOT_CONTAINERD and
 * OCI_ROOT_CRIO); retry_ns: how long a bundle not found or refused is believed so (0:
 * OCI_RETRY_NS). A bundle found is believed for as long as its id is cached.
 */
struct oci_cache *oci_cache_new(const char *const *roots, size_t nroots, uint64_t retry_ns);
void oci_cache_free(struct oci_cache *c);
/* Fills ci's names from its container's bundle when ci names a container and has none yet;
 * now_ns is CLOCK_MONOTONIC. c NULL: nothing is done. */
void oci_fill(struct oci_cache *c, struct container_info *ci, uint64_t now_ns);
/* Bundles refused (malformed, too big, too deep, a symlink, not a regular file, a bad name):
 * each container's once while it is cached. */
uint64_t oci_rejected(const struct oci_cache *c);

#endif
