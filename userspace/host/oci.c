// SPDX-License-Identifier: GPL-2.0
/* Pod and container names from the container runtime's OCI bundles: config.json found below
 * the bundle roots, opened as untrusted input, parsed with json-c within size and depth limits,
 * and cached per container id (bundles not found or refused are asked again later). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <json-c/json_object.h>
#include <json-c/json_tokener.h>
#include "base/untrusted.h"
#include "base/util.h"
#include "host/oci.h"

/* ---- config.json ---- */

/* The offset and size of field f of struct oci_names. */
#define NAME_FIELD(f) offsetof(struct oci_names, f), sizeof(((struct oci_names *)0)->f)

/* Each name, from containerd's annotation, else CRI-O's. */
static const struct {
	const char *keys[2];
	size_t offset, size;
} name_fields[] = {
	{ { "io.kubernetes.cri.sandbox-name", "io.kubernetes.pod.name" }, NAME_FIELD(pod_name) },
	{ { "io.kubernetes.cri.sandbox-namespace", "io.kubernetes.pod.namespace" },
	  NAME_FIELD(pod_namespace) },
	{ { "io.kubernetes.cri.container-name", "io.kubernetes.container.name" },
	  NAME_FIELD(container_name) },
};

/* A name annotation's value into dst (size bytes): printable ASCII without space, or refused.
 * An empty string is a name not given. */
static int take_name(struct json_object *v, char *dst, size_t size)
{
	const char *s;
	size_t n;

	if (!json_object_is_type(v, json_type_string))
		return -EILSEQ;
	s = json_object_get_string(v);
	n = (size_t)json_object_get_string_len(v);
	if (n >= size)
		return -EILSEQ;
	for (size_t i = 0; i < n; i++)
		if ((unsigned char)s[i] <= ' ' || (unsigned char)s[i] >= 0x7f)
			return -EILSEQ;	/* NUL and control characters too */
	memcpy(dst, s, n);
	dst[n] = '\0';
	return 0;
}

static int read_annotations(struct json_object *config, struct oci_names *out)
{
	struct json_object *ann, *v;
	int err;

	if (!json_object_object_get_ex(config, "annotations", &ann))
		return 0;
	if (!json_object_is_type(ann, json_type_object))
		return -EBADMSG;
	for (size_t i = 0; i < ARRAY_SIZE(name_fields); i++) {
		char *dst = (char *)out + name_fields[i].offset;

		for (size_t k = 0; k < ARRAY_SIZE(name_fields[i].keys); k++) {
			if (!json_object_object_get_ex(ann, name_fields[i].keys[k], &v))
				continue;
			err = take_name(v, dst, name_fields[i].size);
			if (err)
				return err;
			break;
		}
	}
	return 0;
}

int oci_parse_config(const char *text, size_t len, struct oci_names *out)
{
	struct json_tokener *tok;
	struct json_object *config;
	int err;

	if (!out)
		return -EINVAL;
	memset(out, 0, sizeof(*out));
	if (!text)
		return -EINVAL;
	if (len > OCI_CONFIG_MAX_BYTES)
		return -EFBIG;
	tok = json_tokener_new_ex(OCI_JSON_MAX_DEPTH);
	if (!tok)
		return -ENOMEM;
	json_tokener_set_flags(tok, JSON_TOKENER_STRICT | JSON_TOKENER_VALIDATE_UTF8);
	config = json_tokener_parse_ex(tok, text, (int)len);
	if (!config)
		err = json_tokener_get_error(tok) == json_tokener_error_depth ? -ERANGE : -EBADMSG;
	else if (json_tokener_get_parse_end(tok) != len ||
		 !json_object_is_type(config, json_type_object))
		err = -EBADMSG;	/* something after the object, or no object at all */
	else
		err = read_annotations(config, out);
	json_object_put(config);
	json_tokener_free(tok);
	if (err)
		memset(out, 0, sizeof(*out));
	return err;
}

/* ---- bundles ---- */

static bool valid_id(const char *id)
{
	size_t n = 0;

	for (; id[n]; n++)
		if (!((id[n] >= '0' && id[n] <= '9') || (id[n] >= 'a' && id[n] <= 'f')))
			return false;
	return n == CONTAINER_ID_LEN;
}

/* The file at rel below rootfd, read whole (at most OCI_CONFIG_MAX_BYTES) and parsed. */
static int read_config(int rootfd, const char *rel, struct oci_names *out)
{
	const size_t cap = OCI_CONFIG_MAX_BYTES + 1;
	struct stat st;
	size_t n = 0;
	char *buf;
	int fd, err = 0;

	fd = open_beneath(rootfd, rel, NULL);
	if (fd < 0)
		return fd;
	if (fstat(fd, &st)) {
		err = -errno;
		goto out_close;
	}
	if (st.st_size > (off_t)OCI_CONFIG_MAX_BYTES) {
		err = -EFBIG;	/* refused unread */
		goto out_close;
	}
	buf = malloc(cap);
	if (!buf) {
		err = -ENOMEM;
		goto out_close;
	}
	while (n < cap) {	/* it may have grown since fstat: read no more than cap */
		ssize_t r = read(fd, buf + n, cap - n);

		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			err = -errno;
			break;
		}
		if (r == 0)
			break;
		n += (size_t)r;
	}
	if (!err)
		err = n > OCI_CONFIG_MAX_BYTES ? -EFBIG : oci_parse_config(buf, n, out);
	free(buf);
out_close:
	close(fd);
	return err;
}

/* A directory entry that may be a containerd namespace: a directory (never a symlink to one)
 * whose name is no container id (those are CRI-O's bundles, beside it). */
static bool namespace_dir(int dfd, const struct dirent *de)
{
	struct stat st;

	if (de->d_name[0] == '.' || valid_id(de->d_name))
		return false;
	if (de->d_type != DT_UNKNOWN)
		return de->d_type == DT_DIR;
	return fstatat(dfd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(st.st_mode);
}

/* root/<namespace>/<id>/config.json, containerd's layout. */
static int read_in_namespaces(int rootfd, const char *id, struct oci_names *out)
{
	char rel[NAME_MAX + CONTAINER_ID_LEN + sizeof("//config.json")];
	struct dirent *de;
	unsigned int seen = 0;
	int dfd, err = -ENOENT;
	DIR *d;

	dfd = openat(rootfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0)
		return -ENOENT;
	d = fdopendir(dfd);
	if (!d) {
		close(dfd);
		return -ENOENT;
	}
	while (err == -ENOENT && seen < OCI_MAX_NAMESPACES && (de = readdir(d))) {
		if (!namespace_dir(dfd, de))
			continue;
		seen++;
		snprintf(rel, sizeof(rel), "%s/%s/config.json", de->d_name, id);
		err = read_config(rootfd, rel, out);
	}
	closedir(d);
	return err;
}

int oci_lookup(const char *root, const char *id, struct oci_names *out)
{
	char rel[CONTAINER_ID_LEN + sizeof("/userdata/config.json")];
	int rootfd, err;

	if (!out)
		return -EINVAL;
	memset(out, 0, sizeof(*out));
	if (!root || !id || !valid_id(id))
		return -EINVAL;
	/* The root is configuration, not input: it may be a symlink. */
	rootfd = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (rootfd < 0)
		return -ENOENT;
	snprintf(rel, sizeof(rel), "%s/config.json", id);
	err = read_config(rootfd, rel, out);
	if (err == -ENOENT) {
		snprintf(rel, sizeof(rel), "%s/userdata/config.json", id);
		err = read_config(rootfd, rel, out);
	}
	if (err == -ENOENT)
		err = read_in_namespaces(rootfd, id, out);
	close(rootfd);
	return err;
}

/* ---- the cache ---- */

enum oci_entry_state { OCI_EMPTY, OCI_FOUND, OCI_ABSENT, OCI_REFUSED };

struct oci_entry {
	char id[CONTAINER_ID_LEN + 1];
	enum oci_entry_state state;
	uint64_t checked_ns;
	struct oci_names *names;	/* OCI_FOUND with a name; NULL: none */
};

#define OCI_SLOTS (2 * OCI_CACHE_MAX)	/* open addressing, at most half full */

struct oci_cache {
	char **roots;
	size_t nroots;
	uint64_t retry_ns;
	struct oci_entry *slots;
	size_t used;
	uint64_t rejected;
};

struct oci_cache *oci_cache_new(const char *const *roots, size_t nroots, uint64_t retry_ns)
{
	static const char *const defaults[] = { OCI_ROOT_CONTAINERD, OCI_ROOT_CRIO };
	struct oci_cache *c = xcalloc(1, sizeof(*c));

	if (!roots || !nroots) {
		roots = defaults;
		nroots = ARRAY_SIZE(defaults);
	}
	c->nroots = nroots < OCI_MAX_ROOTS ? nroots : OCI_MAX_ROOTS;
	c->roots = xcalloc(c->nroots, sizeof(*c->roots));
	for (size_t i = 0; i < c->nroots; i++)
		c->roots[i] = xstrdup(roots[i]);
	c->retry_ns = retry_ns ? retry_ns : OCI_RETRY_NS;
	c->slots = xcalloc(OCI_SLOTS, sizeof(*c->slots));
	return c;
}

static void forget_all(struct oci_cache *c)
{
	for (size_t i = 0; i < OCI_SLOTS; i++) {
		free(c->slots[i].names);
		c->slots[i] = (struct oci_entry){ 0 };
	}
	c->used = 0;
}

void oci_cache_free(struct oci_cache *c)
{
	if (!c)
		return;
	forget_all(c);
	free(c->slots);
	for (size_t i = 0; i < c->nroots; i++)
		free(c->roots[i]);
	free(c->roots);
	free(c);
}

static size_t slot_of(const char *id)
{
	uint64_t h = 1469598103934665603ull;	/* FNV-1a */

	for (; *id; id++)
		h = (h ^ (unsigned char)*id) * 1099511628211ull;
	return (size_t)(h % OCI_SLOTS);
}

/* id's entry, a new empty one when it has none. */
static struct oci_entry *entry_of(struct oci_cache *c, const char *id)
{
	size_t i = slot_of(id);

	for (; c->slots[i].state != OCI_EMPTY; i = (i + 1) % OCI_SLOTS)
		if (!strcmp(c->slots[i].id, id))
			return &c->slots[i];
	if (c->used == OCI_CACHE_MAX) {
		forget_all(c);
		i = slot_of(id);
	}
	snprintf(c->slots[i].id, sizeof(c->slots[i].id), "%s", id);
	c->used++;
	return &c->slots[i];
}

static const char *refusal(int err)
{
	switch (err) {
	case -ELOOP:
		return "a symlink on its way";
	case -EINVAL:
		return "not a regular file";
	case -EFBIG:
		return "larger than 1 MiB";
	case -ERANGE:
		return "nested too deep";
	case -EBADMSG:
		return "not a JSON object";
	case -EILSEQ:
		return "a name that Kubernetes would not write";
	default:
		return strerror(-err);
	}
}

static void look_up(struct oci_cache *c, struct oci_entry *e, uint64_t now)
{
	struct oci_names names;
	size_t i;
	int err = -ENOENT;

	for (i = 0; i < c->nroots && err == -ENOENT; i++)
		err = oci_lookup(c->roots[i], e->id, &names);
	e->checked_ns = now;
	free(e->names);
	e->names = NULL;
	if (err == -ENOENT) {
		e->state = OCI_ABSENT;
		return;
	}
	if (err) {
		if (e->state != OCI_REFUSED) {
			c->rejected++;
			p_debug("OCI bundle of container %.12s under %s refused: %s", e->id,
				c->roots[i - 1], refusal(err));
		}
		e->state = OCI_REFUSED;
		return;
	}
	e->state = OCI_FOUND;
	if (names.pod_name[0] || names.pod_namespace[0] || names.container_name[0]) {
		e->names = xcalloc(1, sizeof(*e->names));
		*e->names = names;
	}
}

void oci_fill(struct oci_cache *c, struct container_info *ci, uint64_t now_ns)
{
	struct oci_entry *e;

	if (!c || !ci || !ci->has_id || ci->pod_name[0] || ci->pod_namespace[0] ||
	    ci->container_name[0])
		return;
	e = entry_of(c, ci->id);
	if (e->state == OCI_EMPTY ||
	    (e->state != OCI_FOUND && now_ns > e->checked_ns &&
	     now_ns - e->checked_ns >= c->retry_ns))
		look_up(c, e, now_ns);
	if (!e->names)
		return;
	memcpy(ci->pod_name, e->names->pod_name, sizeof(ci->pod_name));
	memcpy(ci->pod_namespace, e->names->pod_namespace, sizeof(ci->pod_namespace));
	memcpy(ci->container_name, e->names->container_name, sizeof(ci->container_name));
}

uint64_t oci_rejected(const struct oci_cache *c)
{
	return c ? c->rejected : 0;
}
