// SPDX-License-Identifier: GPL-2.0
/* The metrics endpoint over real sockets: 503 until a snapshot is published, routes and
 * methods under eight concurrent clients while the publisher swaps snapshots, slow clients
 * that hold nobody up, and the addresses and ports it refuses. */
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>

#include "open_fds.h"

#include "probes/table.h"
#include "export/prometheus.h"

#define CLIENTS 8
#define ROUNDS 10
#define CONTENT_TYPE "text/plain; version=0.0.4; charset=utf-8"

/* A snapshot as publish.c makes them (on the heap, freed by snapshot_put): one process with
 * one site holding bytes. */
static struct snapshot *heap_snapshot(uint64_t bytes)
{
	struct snapshot *s = calloc(1, sizeof(*s));
	struct snap_proc *p;

	assert_non_null(s);
	s->refs = 1;
	s->procs = p = calloc(1, sizeof(*p));
	s->nprocs = 1;
	assert_non_null(p);
	p->pid = 4242;
	p->alive = true;
	p->valid = SP_STATS | SP_COMM;
	snprintf(p->comm, sizeof(p->comm), "serve\"test");
	p->st.by_kind[GM_KIND_DEVICE] = p->st.current_bytes = bytes;
	p->sites = calloc(1, sizeof(*p->sites));
	assert_non_null(p->sites);
	p->nsites = 1;
	p->sites[0].api = (uint32_t)probe_find("cudaMalloc");
	p->sites[0].kind = GM_KIND_DEVICE;
	p->sites[0].st.current_bytes = bytes;
	return s;
}

/* ---- a raw HTTP/1.1 client ---- */

struct reply {
	int status;
	char *raw;		/* status line, headers, body */
	size_t len;
	const char *body;
	size_t body_len;
};

static int connect_to(int family, uint16_t port)
{
	struct timeval tv = { .tv_sec = 5 };
	struct sockaddr_in6 in6 = { .sin6_family = AF_INET6, .sin6_port = htons(port),
				    .sin6_addr = IN6ADDR_LOOPBACK_INIT };
	struct sockaddr_in in4 = { .sin_family = AF_INET, .sin_port = htons(port),
				   .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	int fd = socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0);

	if (fd < 0)
		return -1;
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	if (family == AF_INET6 ? connect(fd, (struct sockaddr *)&in6, sizeof(in6))
			       : connect(fd, (struct sockaddr *)&in4, sizeof(in4))) {
		close(fd);
		return -1;
	}
	return fd;
}

static int read_all(int fd, struct reply *r)
{
	size_t cap = 4096;
	ssize_t n;

	r->raw = malloc(cap);
	r->len = 0;
	if (!r->raw)
		return -1;
	while ((n = read(fd, r->raw + r->len, cap - r->len - 1)) > 0) {
		r->len += (size_t)n;
		if (r->len + 1 == cap) {
			char *more = realloc(r->raw, cap *= 2);

			if (!more)
				return -1;
			r->raw = more;
		}
	}
	r->raw[r->len] = '\0';
	return n < 0 ? -1 : 0;
}

/* One request on a connection of its own; 0 and *r (free r->raw), or -1. */
static int http(int family, uint16_t port, const char *method, const char *path, struct reply *r)
{
	bool post = !strcmp(method, "POST");
	char req[512];
	const char *end;
	int fd, len, err;

	memset(r, 0, sizeof(*r));
	fd = connect_to(family, port);
	if (fd < 0)
		return -1;
	len = snprintf(req, sizeof(req),
		       "%s %s HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n%s\r\n%s",
		       method, path, post ? "Content-Length: 5\r\n" : "", post ? "hello" : "");
	err = write(fd, req, (size_t)len) == len ? read_all(fd, r) : -1;
	close(fd);
	if (err || sscanf(r->raw, "HTTP/1.%*d %d", &r->status) != 1)
		return -1;
	end = strstr(r->raw, "\r\n\r\n");
	if (!end)
		return -1;
	r->body = end + 4;
	r->body_len = r->len - (size_t)(r->body - r->raw);
	return 0;
}

/* Whether the reply has header name with exactly value. */
static bool has_header(const struct reply *r, const char *name, const char *value)
{
	size_t n = strlen(name), v = strlen(value);

	for (const char *p = strstr(r->raw, "\r\n"); p && p < r->body; p = strstr(p + 2, "\r\n")) {
		const char *h = p + 2;

		if (!strncasecmp(h, name, n) && h[n] == ':' && h[n + 1] == ' ' &&
		    !strncmp(h + n + 2, value, v) && !strncmp(h + n + 2 + v, "\r\n", 2))
			return true;
	}
	return false;
}

static bool has_header_named(const struct reply *r, const char *name)
{
	size_t n = strlen(name);

	for (const char *p = strstr(r->raw, "\r\n"); p && p < r->body; p = strstr(p + 2, "\r\n"))
		if (!strncasecmp(p + 2, name, n) && p[2 + n] == ':')
			return true;
	return false;
}

/* status, and that the body is body (NULL: not checked). */
static bool got(int family, uint16_t port, const char *method, const char *path, int status,
		const char *body)
{
	struct reply r;
	bool ok = http(family, port, method, path, &r) == 0 && r.status == status &&
		  (!body || (r.body_len == strlen(body) && !memcmp(r.body, body, r.body_len)));

	free(r.raw);
	return ok;
}

static bool metrics_ok(uint16_t port)
{
	struct reply r;
	bool ok = http(AF_INET, port, "GET", "/metrics", &r) == 0 && r.status == 200 &&
		  has_header(&r, "Content-Type", CONTENT_TYPE) &&
		  strstr(r.body, "gpumem_build_info{version=\"" GPUMEM_VERSION "\"} 1\n") &&
		  strstr(r.body, "gpumem_process_memory_bytes{pid=\"4242\",comm=\"serve\\\"test\"");

	free(r.raw);
	return ok;
}

/* HEAD is GET without the body. */
static bool head_ok(uint16_t port)
{
	struct reply r;
	bool ok = http(AF_INET, port, "HEAD", "/metrics", &r) == 0 && r.status == 200 &&
		  r.body_len == 0 && has_header(&r, "Content-Type", CONTENT_TYPE) &&
		  has_header_named(&r, "Content-Length");

	free(r.raw);
	return ok;
}

static bool not_allowed_ok(uint16_t port)
{
	struct reply r;
	bool ok = http(AF_INET, port, "POST", "/metrics", &r) == 0 && r.status == 405 &&
		  has_header(&r, "Allow", "GET, HEAD");

	free(r.raw);
	return ok;
}

static struct prom_server *start_on_loopback(void)
{
	struct prom_server *srv = NULL;

	assert_int_equal(prom_server_start("127.0.0.1:0", NULL, &srv), 0);
	assert_non_null(srv);
	assert_true(prom_server_port(srv) != 0);
	return srv;
}

static void publish_new(struct prom_server *srv, uint64_t bytes)
{
	struct snapshot *s = heap_snapshot(bytes);

	prom_server_publish(srv, s);
	snapshot_put(s);	/* the server keeps its own reference */
}

static void test_healthz_and_metrics_answer_503_until_a_snapshot_is_published(void **state)
{
	struct prom_server *srv = start_on_loopback();
	uint16_t port = prom_server_port(srv);

	(void)state;
	assert_true(got(AF_INET, port, "GET", "/healthz", 503, NULL));
	assert_true(got(AF_INET, port, "GET", "/metrics", 503, NULL));
	publish_new(srv, 1024);
	assert_true(got(AF_INET, port, "GET", "/healthz", 200, "ok\n"));
	assert_true(metrics_ok(port));
	prom_server_publish(srv, NULL);
	assert_true(got(AF_INET, port, "GET", "/healthz", 503, NULL));
	prom_server_stop(srv);
}

struct client {
	pthread_t thread;
	uint16_t port;
	int failures;
	int *done;
};

/* No cmocka assertion off the main thread: a client counts what went wrong. */
static void *client_main(void *arg)
{
	struct client *c = arg;

	for (int i = 0; i < ROUNDS; i++) {
		c->failures += !metrics_ok(c->port);
		c->failures += !head_ok(c->port);
		c->failures += !got(AF_INET, c->port, "GET", "/healthz", 200, "ok\n");
		c->failures += !got(AF_INET, c->port, "GET", "/nope", 404, NULL);
		c->failures += !got(AF_INET, c->port, "HEAD", "/nope", 404, NULL);
		c->failures += !not_allowed_ok(c->port);
		c->failures += !got(AF_INET, c->port, "DELETE", "/healthz", 405, NULL);
	}
	__atomic_add_fetch(c->done, 1, __ATOMIC_RELEASE);
	return NULL;
}

static void test_eight_concurrent_clients_get_every_route_while_snapshots_change(void **state)
{
	struct prom_server *srv = start_on_loopback();
	struct timespec ms = { .tv_nsec = 1000000 };
	struct client c[CLIENTS];
	uint64_t publishes = 0;
	int done = 0;

	(void)state;
	publish_new(srv, 1);
	for (int i = 0; i < CLIENTS; i++) {
		c[i] = (struct client){ .port = prom_server_port(srv), .done = &done };
		assert_int_equal(pthread_create(&c[i].thread, NULL, client_main, &c[i]), 0);
	}
	while (__atomic_load_n(&done, __ATOMIC_ACQUIRE) < CLIENTS) {
		publish_new(srv, ++publishes);
		nanosleep(&ms, NULL);
	}
	for (int i = 0; i < CLIENTS; i++) {
		pthread_join(c[i].thread, NULL);
		assert_int_equal(c[i].failures, 0);
	}
	assert_true(publishes > 0);
	prom_server_stop(srv);
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void test_slow_clients_hold_up_no_one_and_stop_closes_them(void **state)
{
	struct prom_server *srv = start_on_loopback();
	uint16_t port = prom_server_port(srv);
	int slow[CLIENTS];
	double t0;
	char b;

	(void)state;
	publish_new(srv, 4096);
	for (int i = 0; i < CLIENTS; i++) {
		slow[i] = connect_to(AF_INET, port);
		assert_true(slow[i] >= 0);
		assert_int_equal(write(slow[i], "GET /metr", 9), 9);	/* and no more */
	}
	t0 = now_s();
	assert_true(metrics_ok(port));
	assert_true(got(AF_INET, port, "GET", "/healthz", 200, "ok\n"));
	assert_true(now_s() - t0 < 2.0);
	prom_server_stop(srv);
	for (int i = 0; i < CLIENTS; i++) {
		ssize_t n = read(slow[i], &b, 1);

		/* Closed by the server, not left to the client's 5 s receive timeout. */
		assert_true(n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK));
		close(slow[i]);
	}
}

/* 64 clients that each send a byte of their request now and then are never idle: the guard
 * cuts the oldest when they fill the spare room, and every one after PROM_REQUEST_S, so that
 * a scrape and a health check still get in at once (they held all 64 slots for 40 s before). */
struct trickle {
	int fd[PROM_SERVER_MAX_CONNS];
	uint16_t port;
	bool stop;
};

static void *trickle_main(void *arg)
{
	struct trickle *t = arg;

	while (!__atomic_load_n(&t->stop, __ATOMIC_RELAXED)) {
		for (int i = 0; i < PROM_SERVER_MAX_CONNS; i++) {
			if (t->fd[i] < 0 || send(t->fd[i], "x", 1, MSG_NOSIGNAL) != 1) {
				if (t->fd[i] >= 0)
					close(t->fd[i]);
				t->fd[i] = connect_to(AF_INET, t->port);	/* and again */
				if (t->fd[i] >= 0 && send(t->fd[i], "GET /", 5, MSG_NOSIGNAL) != 5) {
					close(t->fd[i]);
					t->fd[i] = -1;
				}
			}
		}
		usleep(500000);
	}
	return NULL;
}

static void test_trickling_clients_hold_up_no_one(void **state)
{
	struct prom_server *srv = start_on_loopback();
	struct trickle t = { .port = prom_server_port(srv) };
	pthread_t th;
	double t0;

	(void)state;
	publish_new(srv, 4096);
	for (int i = 0; i < PROM_SERVER_MAX_CONNS; i++)
		t.fd[i] = -1;
	assert_int_equal(pthread_create(&th, NULL, trickle_main, &t), 0);
	sleep(2);	/* every slot taken, a byte at a time */
	for (int round = 0; round < 4; round++) {
		t0 = now_s();
		assert_true(got(AF_INET, t.port, "GET", "/healthz", 200, "ok\n"));
		assert_true(metrics_ok(t.port));
		assert_true(now_s() - t0 < 2.0);
		sleep(2);
	}
	__atomic_store_n(&t.stop, true, __ATOMIC_RELAXED);
	pthread_join(th, NULL);
	for (int i = 0; i < PROM_SERVER_MAX_CONNS; i++)
		if (t.fd[i] >= 0)
			close(t.fd[i]);
	prom_server_stop(srv);
}

/* The agent's loop beats; once it stops beating for PROM_STALL_S, /healthz says so (503)
 * while /metrics still serves the last snapshot. */
static void test_healthz_says_when_the_loop_stalled(void **state)
{
	struct prom_server *srv = start_on_loopback();
	uint16_t port = prom_server_port(srv);

	(void)state;
	publish_new(srv, 4096);
	prom_server_beat(srv);
	assert_true(got(AF_INET, port, "GET", "/healthz", 200, "ok\n"));
	sleep(PROM_STALL_S + 1);
	assert_true(got(AF_INET, port, "GET", "/healthz", 503, NULL));
	assert_true(metrics_ok(port));
	prom_server_beat(srv);
	assert_true(got(AF_INET, port, "GET", "/healthz", 200, "ok\n"));
	prom_server_stop(srv);
}

static void test_listen_addresses_gpumem_cannot_read_are_refused(void **state)
{
	static const char *const bad[] = {
		"", "127.0.0.1", "127.0.0.1:", "127.0.0.1:65536", "127.0.0.1:-1", "127.0.0.1:80x",
		"localhost:9400", "::1:9400", "[::1]", "[::1]9400", "[127.0.0.1]:9400",
		"1.2.3:9400", ":9400", "[]:9400", "127.0.0.1:99999999999999999999",
	};

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct prom_server *srv = (struct prom_server *)&srv;

		assert_int_equal(prom_server_start(bad[i], NULL, &srv), -EINVAL);
		assert_null(srv);
	}
}

static void test_a_port_in_use_is_refused_and_stop_frees_it(void **state)
{
	int fds = open_fds();
	struct prom_server *a = start_on_loopback(), *b = (struct prom_server *)&b;
	char where[32];

	(void)state;
	snprintf(where, sizeof(where), "127.0.0.1:%u", prom_server_port(a));
	assert_int_equal(prom_server_start(where, NULL, &b), -EADDRINUSE);
	assert_null(b);
	prom_server_stop(a);
	assert_int_equal(prom_server_start(where, NULL, &b), 0);
	assert_true(got(AF_INET, prom_server_port(b), "GET", "/healthz", 503, NULL));
	prom_server_stop(b);
	prom_server_stop(NULL);
	assert_int_equal(open_fds(), fds);	/* sockets, epoll and wake-up descriptors */
}

static void test_ipv6_loopback_in_brackets_listens(void **state)
{
	struct prom_server *srv = NULL;
	int err = prom_server_start("[::1]:0", NULL, &srv);

	(void)state;
	if (err == -EADDRNOTAVAIL || err == -EAFNOSUPPORT) {
		fprintf(stderr, "skipped: this host has no IPv6 loopback\n");
		skip();
	}
	assert_int_equal(err, 0);
	publish_new(srv, 8);
	assert_true(got(AF_INET6, prom_server_port(srv), "GET", "/healthz", 200, "ok\n"));
	prom_server_stop(srv);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_healthz_and_metrics_answer_503_until_a_snapshot_is_published),
		cmocka_unit_test(test_eight_concurrent_clients_get_every_route_while_snapshots_change),
		cmocka_unit_test(test_slow_clients_hold_up_no_one_and_stop_closes_them),
		cmocka_unit_test(test_trickling_clients_hold_up_no_one),
		cmocka_unit_test(test_healthz_says_when_the_loop_stalled),
		cmocka_unit_test(test_listen_addresses_gpumem_cannot_read_are_refused),
		cmocka_unit_test(test_a_port_in_use_is_refused_and_stop_frees_it),
		cmocka_unit_test(test_ipv6_loopback_in_brackets_listens),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
