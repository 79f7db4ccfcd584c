// SPDX-License-Identifier: GPL-2.0
/* Pod and container names from OCI bundles: both runtimes' annotations and layouts, and every
 * way a bundle is refused (too big, too deep, not JSON, a value that is no name, a symlink, not
 * a regular file), in hand-made bundle directories; the cache's retries and its bound. */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>

#include "host/oci.h"

#define ID_A "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
#define ID_B "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"

static const char containerd_config[] =
	"{\"ociVersion\":\"1.1.0\",\"process\":{\"args\":[\"/pause\"]},"
	"\"annotations\":{\"io.kubernetes.cri.container-type\":\"container\","
	"\"io.kubernetes.cri.sandbox-name\":\"trainer-7d9f-x2x\","
	"\"io.kubernetes.cri.sandbox-namespace\":\"ml\","
	"\"io.kubernetes.cri.container-name\":\"cuda\"}}\n";
static const char crio_config[] =
	"{\"ociVersion\":\"1.0.2-dev\",\"linux\":{\"resources\":{\"devices\":[{\"allow\":false}]}},"
	"\"annotations\":{\"io.kubernetes.pod.name\":\"infer-0\","
	"\"io.kubernetes.pod.namespace\":\"serving\","
	"\"io.kubernetes.container.name\":\"server\"}}";

static char dir[] = "/tmp/gpumem-oci-XXXXXX";

static int parse(const char *text, struct oci_names *out)
{
	return oci_parse_config(text, strlen(text), out);
}

/* A config.json whose annotations object is exactly `ann`. */
static int parse_annotations(const char *ann, struct oci_names *out)
{
	char text[4096];

	snprintf(text, sizeof(text), "{\"ociVersion\":\"1.0.0\",\"annotations\":%s}", ann);
	return parse(text, out);
}

static void assert_no_names(const struct oci_names *n)
{
	assert_string_equal(n->pod_name, "");
	assert_string_equal(n->pod_namespace, "");
	assert_string_equal(n->container_name, "");
}

/* dir/rel, its parent directories made. */
static void path_of(char *buf, size_t len, const char *rel)
{
	char *slash;

	snprintf(buf, len, "%s/%s", dir, rel);
	for (slash = strchr(buf + strlen(dir) + 1, '/'); slash; slash = strchr(slash + 1, '/')) {
		*slash = '\0';
		mkdir(buf, 0755);
		*slash = '/';
	}
}

static void write_at(const char *rel, const char *text, size_t len)
{
	char path[512];
	FILE *f;

	path_of(path, sizeof(path), rel);
	f = fopen(path, "w");
	assert_non_null(f);
	assert_int_equal(fwrite(text, 1, len, f), len);
	fclose(f);
}

static void write_text(const char *rel, const char *text)
{
	write_at(rel, text, strlen(text));
}

static void clean(void)
{
	char cmd[128];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'/*", dir);
	assert_int_equal(system(cmd), 0);
}

static void test_containerd_annotations_give_the_names(void **state)
{
	struct oci_names n;

	(void)state;
	assert_int_equal(parse(containerd_config, &n), 0);
	assert_string_equal(n.pod_name, "trainer-7d9f-x2x");
	assert_string_equal(n.pod_namespace, "ml");
	assert_string_equal(n.container_name, "cuda");
}

static void test_crio_annotations_give_the_names(void **state)
{
	struct oci_names n;

	(void)state;
	assert_int_equal(parse(crio_config, &n), 0);
	assert_string_equal(n.pod_name, "infer-0");
	assert_string_equal(n.pod_namespace, "serving");
	assert_string_equal(n.container_name, "server");
}

static void test_missing_annotations_are_no_names_not_an_error(void **state)
{
	struct oci_names n;

	(void)state;
	assert_int_equal(parse("{\"ociVersion\":\"1.0.0\",\"process\":{}}", &n), 0);
	assert_no_names(&n);
	assert_int_equal(parse_annotations("{}", &n), 0);
	assert_no_names(&n);
	/* a sandbox: pod names, no container name; an empty value is a name not given */
	assert_int_equal(parse_annotations("{\"io.kubernetes.cri.sandbox-name\":\"p\","
					   "\"io.kubernetes.cri.sandbox-namespace\":\"\"}", &n), 0);
	assert_string_equal(n.pod_name, "p");
	assert_string_equal(n.pod_namespace, "");
	assert_string_equal(n.container_name, "");
	/* each name from containerd's key when there is one, else CRI-O's */
	assert_int_equal(parse_annotations("{\"io.kubernetes.pod.name\":\"crio\","
					   "\"io.kubernetes.cri.sandbox-name\":\"cd\","
					   "\"io.kubernetes.container.name\":\"c\"}", &n), 0);
	assert_string_equal(n.pod_name, "cd");
	assert_string_equal(n.container_name, "c");
}

static void test_a_file_over_the_size_limit_is_refused(void **state)
{
	size_t len = OCI_CONFIG_MAX_BYTES + 1;
	char *big = malloc(len + 1);
	struct oci_names n;

	(void)state;
	assert_non_null(big);
	/* valid JSON, one byte too long */
	memset(big, ' ', len);
	memcpy(big, crio_config, sizeof(crio_config) - 1);
	big[len] = '\0';
	assert_int_equal(oci_parse_config(big, len, &n), -EFBIG);
	assert_no_names(&n);
	assert_int_equal(oci_parse_config(big, len - 1, &n), 0);	/* at the limit: read */
	assert_string_equal(n.pod_name, "infer-0");
	free(big);
}

static void test_deep_nesting_is_refused(void **state)
{
	size_t depth = 100000, i;
	char *deep = malloc(2 * depth + 64), *p;
	struct oci_names n;

	(void)state;
	assert_non_null(deep);
	p = deep + sprintf(deep, "{\"annotations\":{\"io.kubernetes.pod.name\":\"x\"},\"a\":");
	for (i = 0; i < depth; i++)
		*p++ = '[';
	for (i = 0; i < depth; i++)
		*p++ = ']';
	strcpy(p, "}");
	assert_int_equal(parse(deep, &n), -ERANGE);
	assert_no_names(&n);
	/* within the limit: read */
	p = deep + sprintf(deep, "{\"annotations\":{\"io.kubernetes.pod.name\":\"x\"},\"a\":");
	for (i = 0; i < OCI_JSON_MAX_DEPTH - 2; i++)
		*p++ = '[';
	for (i = 0; i < OCI_JSON_MAX_DEPTH - 2; i++)
		*p++ = ']';
	strcpy(p, "}");
	assert_int_equal(parse(deep, &n), 0);
	assert_string_equal(n.pod_name, "x");
	free(deep);
}

static void test_what_is_not_one_json_object_is_refused(void **state)
{
	static const char *const bad[] = {
		"", "   ", "not json", "{\"annotations\":{\"io.kubernetes.pod.name\":\"x\"}",
		"{\"annotations\":{}} trailing", "{}{}", "[1,2]", "\"a string\"", "null", "42",
		"{\"annotations\":{},}", "{\"annotations\":\"io.kubernetes.pod.name=x\"}",
		"{\"annotations\":[\"x\"]}", "{\"annotations\":null}",
		"{\"annotations\":{\"io.kubernetes.pod.name\":\"\xff\xfe\"}}",
	};
	struct oci_names n;

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		int err = parse(bad[i], &n);

		if (err != -EBADMSG)
			fail_msg("'%s' gave %d, not -EBADMSG", bad[i], err);
		assert_no_names(&n);
	}
	/* a NUL byte in the text, outside any string */
	assert_int_equal(oci_parse_config("{\"annotations\":{}}\0{}", 20, &n), -EBADMSG);
	assert_int_equal(oci_parse_config(NULL, 0, &n), -EINVAL);
}

static void test_non_string_values_are_refused(void **state)
{
	static const char *const bad[] = {
		"{\"io.kubernetes.pod.name\":42}", "{\"io.kubernetes.pod.name\":null}",
		"{\"io.kubernetes.cri.sandbox-namespace\":true}",
		"{\"io.kubernetes.container.name\":[\"a\"]}",
		"{\"io.kubernetes.cri.container-name\":{\"a\":\"b\"}}",
	};
	struct oci_names n;

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		int err = parse_annotations(bad[i], &n);

		if (err != -EILSEQ)
			fail_msg("%s gave %d, not -EILSEQ", bad[i], err);
		assert_no_names(&n);
	}
	/* other annotations may be anything */
	assert_int_equal(parse_annotations("{\"x\":42,\"io.kubernetes.pod.name\":\"p\"}", &n), 0);
	assert_string_equal(n.pod_name, "p");
}

static void test_control_characters_and_long_names_are_refused(void **state)
{
	static const char *const bad[] = {
		"\"a\\nb\"", "\"a\\u0000b\"", "\"\\u001b[2J\"", "\"a\\u007fb\"", "\"a b\"",
		"\"caf\\u00e9\"", "\"\xc3\xa9t\xc3\xa9\"", "\"\\u0085\"",
	};
	char ann[1024], name[CONTAINER_NAME_LEN + 2];
	struct oci_names n;

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		int err;

		snprintf(ann, sizeof(ann), "{\"io.kubernetes.pod.name\":\"ok\","
			 "\"io.kubernetes.container.name\":%s}", bad[i]);
		err = parse_annotations(ann, &n);
		if (err != -EILSEQ)
			fail_msg("%s gave %d, not -EILSEQ", bad[i], err);
		assert_no_names(&n);	/* the whole bundle, not only the bad name */
	}
	/* a pod name of 253 characters fits; 254 do not; a container name of 64 does not */
	memset(name, 'p', CONTAINER_NAME_LEN);
	name[CONTAINER_NAME_LEN] = '\0';
	snprintf(ann, sizeof(ann), "{\"io.kubernetes.pod.name\":\"%s\"}", name);
	assert_int_equal(parse_annotations(ann, &n), 0);
	assert_int_equal(strlen(n.pod_name), CONTAINER_NAME_LEN);
	strcat(name, "p");
	snprintf(ann, sizeof(ann), "{\"io.kubernetes.pod.name\":\"%s\"}", name);
	assert_int_equal(parse_annotations(ann, &n), -EILSEQ);
	name[CONTAINER_LABEL_LEN + 1] = '\0';
	snprintf(ann, sizeof(ann), "{\"io.kubernetes.container.name\":\"%s\"}", name);
	assert_int_equal(parse_annotations(ann, &n), -EILSEQ);
	name[CONTAINER_LABEL_LEN] = '\0';
	snprintf(ann, sizeof(ann), "{\"io.kubernetes.container.name\":\"%s\"}", name);
	assert_int_equal(parse_annotations(ann, &n), 0);
	assert_int_equal(strlen(n.container_name), CONTAINER_LABEL_LEN);
}

static void test_lookup_finds_each_layout(void **state)
{
	char root[512];
	struct oci_names n;

	(void)state;
	clean();
	write_text("containerd/k8s.io/" ID_A "/config.json", containerd_config);
	write_text("containerd/moby/" ID_B "/config.json", "{\"ociVersion\":\"1.0.0\"}");
	assert_int_equal(oci_lookup("/nonexistent", ID_A, &n), -ENOENT);
	snprintf(root, sizeof(root), "%s/containerd", dir);
	assert_int_equal(oci_lookup(root, ID_A, &n), 0);
	assert_string_equal(n.pod_name, "trainer-7d9f-x2x");
	assert_string_equal(n.container_name, "cuda");
	/* docker's containers in containerd: a bundle without names */
	assert_int_equal(oci_lookup(root, ID_B, &n), 0);
	assert_no_names(&n);

	write_text("crio/" ID_B "/userdata/config.json", crio_config);
	snprintf(root, sizeof(root), "%s/crio", dir);
	assert_int_equal(oci_lookup(root, ID_B, &n), 0);
	assert_string_equal(n.pod_namespace, "serving");
	assert_int_equal(oci_lookup(root, ID_A, &n), -ENOENT);

	/* a root that is one namespace of containerd's */
	snprintf(root, sizeof(root), "%s/containerd/k8s.io", dir);
	assert_int_equal(oci_lookup(root, ID_A, &n), 0);
	assert_string_equal(n.pod_namespace, "ml");
	assert_int_equal(oci_lookup(dir, "../../etc", &n), -EINVAL);
	assert_int_equal(oci_lookup(dir, "AAAA", &n), -EINVAL);
}

static void test_lookup_refuses_symlinks(void **state)
{
	char root[512], target[512], link[512];
	struct oci_names n;

	(void)state;
	clean();
	snprintf(root, sizeof(root), "%s/r", dir);
	/* config.json a symlink to a good file */
	write_text("elsewhere/config.json", crio_config);
	path_of(target, sizeof(target), "elsewhere/config.json");
	path_of(link, sizeof(link), "r/k8s.io/" ID_A "/config.json");
	assert_int_equal(symlink(target, link), 0);
	assert_int_equal(oci_lookup(root, ID_A, &n), -ELOOP);
	assert_no_names(&n);
	/* the bundle directory a symlink */
	path_of(target, sizeof(target), "elsewhere");
	path_of(link, sizeof(link), "r/" ID_B);
	assert_int_equal(symlink(target, link), 0);
	assert_int_equal(oci_lookup(root, ID_B, &n), -ELOOP);
	/* CRI-O's userdata a symlink */
	clean();
	write_text("elsewhere/config.json", crio_config);
	path_of(target, sizeof(target), "elsewhere");
	path_of(link, sizeof(link), "r/" ID_A "/userdata");
	assert_int_equal(symlink(target, link), 0);
	assert_int_equal(oci_lookup(root, ID_A, &n), -ELOOP);
	/* a symlinked namespace is not looked into */
	clean();
	write_text("elsewhere/" ID_A "/config.json", crio_config);
	path_of(target, sizeof(target), "elsewhere");
	path_of(link, sizeof(link), "r/k8s.io");
	assert_int_equal(symlink(target, link), 0);
	assert_int_equal(oci_lookup(root, ID_A, &n), -ENOENT);
	/* the root itself may be a symlink: it is configuration */
	path_of(link, sizeof(link), "root-link");
	snprintf(target, sizeof(target), "%s/elsewhere", dir);
	assert_int_equal(symlink(target, link), 0);
	assert_int_equal(oci_lookup(link, ID_A, &n), 0);
	assert_string_equal(n.pod_name, "infer-0");
}

static void test_lookup_refuses_what_is_not_a_regular_file(void **state)
{
	char path[512], root[512];
	struct oci_names n;

	(void)state;
	clean();
	snprintf(root, sizeof(root), "%s/r", dir);
	path_of(path, sizeof(path), "r/" ID_A "/config.json");
	assert_int_equal(mkfifo(path, 0600), 0);
	alarm(5);	/* a blocking open would hang: SIGALRM fails the test instead */
	assert_int_equal(oci_lookup(root, ID_A, &n), -EINVAL);
	alarm(0);
	path_of(path, sizeof(path), "r/" ID_B "/config.json/x");
	assert_int_equal(oci_lookup(root, ID_B, &n), -EINVAL);	/* a directory */
}

static void test_lookup_refuses_a_huge_file_unread(void **state)
{
	char path[512], root[512];
	struct oci_names n;

	(void)state;
	clean();
	snprintf(root, sizeof(root), "%s/r", dir);
	write_text("r/" ID_A "/config.json", crio_config);
	path_of(path, sizeof(path), "r/" ID_A "/config.json");
	assert_int_equal(truncate(path, 5 << 20), 0);	/* 5 MiB, the rest zeros */
	assert_int_equal(oci_lookup(root, ID_A, &n), -EFBIG);
	assert_no_names(&n);
	assert_int_equal(truncate(path, sizeof(crio_config) - 1), 0);
	assert_int_equal(oci_lookup(root, ID_A, &n), 0);
}

static struct container_info in_container(const char *id)
{
	struct container_info ci = { .has_id = true };

	snprintf(ci.id, sizeof(ci.id), "%s", id);
	return ci;
}

static void test_cache_fills_names_and_retries_what_it_did_not_find(void **state)
{
	const char *roots[2];
	char crio[512], cd[512], path[512];
	struct container_info ci, none = { 0 };
	struct oci_cache *c;

	(void)state;
	clean();
	snprintf(crio, sizeof(crio), "%s/crio", dir);
	snprintf(cd, sizeof(cd), "%s/containerd", dir);
	roots[0] = cd;
	roots[1] = crio;
	mkdir(crio, 0755);
	c = oci_cache_new(roots, 2, 100);
	ci = in_container(ID_A);
	oci_fill(c, &ci, 1000);
	assert_string_equal(ci.pod_name, "");
	/* the bundle appears after the cgroup: believed absent until retry_ns have passed */
	write_text("crio/" ID_A "/userdata/config.json", crio_config);
	oci_fill(c, &ci, 1050);
	assert_string_equal(ci.pod_name, "");
	oci_fill(c, &ci, 1100);
	assert_string_equal(ci.pod_name, "infer-0");
	assert_string_equal(ci.pod_namespace, "serving");
	assert_string_equal(ci.container_name, "server");
	/* found is believed: the bundle's removal changes nothing */
	path_of(path, sizeof(path), "crio/" ID_A "/userdata/config.json");
	unlink(path);
	ci = in_container(ID_A);
	oci_fill(c, &ci, 5000);
	assert_string_equal(ci.container_name, "server");
	/* no container, no lookup; a NULL cache does nothing */
	oci_fill(c, &none, 5000);
	assert_string_equal(none.pod_name, "");
	ci = in_container(ID_B);
	oci_fill(NULL, &ci, 5000);
	assert_string_equal(ci.pod_name, "");
	assert_int_equal(oci_rejected(c), 0);
	assert_int_equal(oci_rejected(NULL), 0);
	oci_cache_free(c);
}

static void test_cache_counts_each_refused_bundle_once(void **state)
{
	const char *roots[1];
	char root[512];
	struct container_info ci;
	struct oci_cache *c;

	(void)state;
	clean();
	snprintf(root, sizeof(root), "%s/r", dir);
	roots[0] = root;
	write_text("r/k8s.io/" ID_A "/config.json", "not json");
	write_text("r/k8s.io/" ID_B "/config.json",
		   "{\"annotations\":{\"io.kubernetes.pod.name\":\"a\\u0000b\"}}");
	c = oci_cache_new(roots, 1, 100);
	for (uint64_t t = 1000; t < 2000; t += 100) {
		ci = in_container(ID_A);
		oci_fill(c, &ci, t);
		assert_string_equal(ci.pod_name, "");
		ci = in_container(ID_B);
		oci_fill(c, &ci, t);
		assert_string_equal(ci.pod_name, "");
	}
	assert_int_equal(oci_rejected(c), 2);
	/* mended: found at the next retry */
	write_text("r/k8s.io/" ID_A "/config.json", containerd_config);
	ci = in_container(ID_A);
	oci_fill(c, &ci, 3000);
	assert_string_equal(ci.pod_name, "trainer-7d9f-x2x");
	assert_int_equal(oci_rejected(c), 2);
	oci_cache_free(c);
}

static void test_cache_is_bounded(void **state)
{
	const char *roots[1];
	char root[512], path[512];
	struct container_info ci;
	struct oci_cache *c;

	(void)state;
	clean();
	snprintf(root, sizeof(root), "%s/r", dir);
	roots[0] = root;
	write_text("r/" ID_A "/config.json", crio_config);
	c = oci_cache_new(roots, 1, 0);
	ci = in_container(ID_A);
	oci_fill(c, &ci, 1);
	assert_string_equal(ci.pod_name, "infer-0");
	path_of(path, sizeof(path), "r/" ID_A "/config.json");
	unlink(path);
	/* OCI_CACHE_MAX other containers: the first is forgotten, and read again */
	for (unsigned int i = 0; i < OCI_CACHE_MAX; i++) {
		ci = in_container(ID_B);
		snprintf(ci.id + CONTAINER_ID_LEN - 8, 9, "%08x", i);
		oci_fill(c, &ci, 1);
	}
	ci = in_container(ID_A);
	oci_fill(c, &ci, 1);
	assert_string_equal(ci.pod_name, "");
	oci_cache_free(c);
}

static int setup(void **state)
{
	(void)state;
	return mkdtemp(dir) ? 0 : -1;
}

static int teardown(void **state)
{
	(void)state;
	clean();
	return rmdir(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_containerd_annotations_give_the_names),
		cmocka_unit_test(test_crio_annotations_give_the_names),
		cmocka_unit_test(test_missing_annotations_are_no_names_not_an_error),
		cmocka_unit_test(test_a_file_over_the_size_limit_is_refused),
		cmocka_unit_test(test_deep_nesting_is_refused),
		cmocka_unit_test(test_what_is_not_one_json_object_is_refused),
		cmocka_unit_test(test_non_string_values_are_refused),
		cmocka_unit_test(test_control_characters_and_long_names_are_refused),
		cmocka_unit_test(test_lookup_finds_each_layout),
		cmocka_unit_test(test_lookup_refuses_symlinks),
		cmocka_unit_test(test_lookup_refuses_what_is_not_a_regular_file),
		cmocka_unit_test(test_lookup_refuses_a_huge_file_unread),
		cmocka_unit_test(test_cache_fills_names_and_retries_what_it_did_not_find),
		cmocka_unit_test(test_cache_counts_each_refused_bundle_once),
		cmocka_unit_test(test_cache_is_bounded),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
