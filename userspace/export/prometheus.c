// SPDX-License-Identifier: GPL-2.0
/* The Prometheus endpoint: a libmicrohttpd daemon on a socket of its own, and the snapshot
 * the publisher swaps under a mutex that a scrape holds only to take a reference. */
#include <arpa/inet.h>
#include <errno.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "base/util.h"
#include "export/prometheus.h"

#define PROM_CONTENT_TYPE "text/plain; version=0.0.4; charset=utf-8"
#define LISTEN_BACKLOG 64
#define GUARD_PERIOD_NS 250000000ull	/* how often the guard looks at the connections */

/* A connection as the guard sees it: when its request began, and whether it is answered. A
 * client that trickles its request a byte at a time is never idle, so MHD's idle timeout never
 * closes it: the guard does, after PROM_REQUEST_S, and at once when half-read requests fill
 * more than PROM_SERVER_MAX_CONNS - PROM_SERVER_SPARE_CONNS (the oldest first). */
struct guarded {
	int fd;
	uint64_t start_ns;	/* of its current request */
	bool answered;		/* its request is in: the guard leaves it alone */
	bool cut;		/* shut down by the guard (once) */
	struct guarded *next;
};

struct prom_server {
	struct MHD_Daemon *daemon;
	pthread_mutex_t lock;
	struct snapshot *current;	/* under lock; NULL before the first publish */
	uint64_t beat_ns;	/* the agent's loop ran then (atomic); 0: no beat yet */
	pthread_mutex_t guard_lock;
	struct guarded *conns;	/* under guard_lock */
	pthread_t guard;
	bool guard_running, guard_stop;
	uint64_t cut_total;	/* connections the guard closed (for -v) */
	struct prom_opts opts;
	int fd;		/* the listening socket, ours: closed by prom_server_stop */
	uint16_t port;
	char where[80];	/* the address as given, for messages */
};

/* ---- the address ---- */

static int parse_port(const char *s, uint16_t *port)
{
	unsigned long v = 0;

	if (!*s)
		return -EINVAL;
	for (; *s; s++) {
		if (*s < '0' || *s > '9')
			return -EINVAL;
		v = v * 10 + (unsigned long)(*s - '0');
		if (v > 65535)
			return -EINVAL;
	}
	*port = (uint16_t)v;
	return 0;
}

/* "ADDR:PORT" (IPv4) or "[ADDR]:PORT" (IPv6) into sa. */
static int parse_listen(const char *where, struct sockaddr_storage *sa, socklen_t *len)
{
	struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)sa;
	struct sockaddr_in *in4 = (struct sockaddr_in *)sa;
	char addr[INET6_ADDRSTRLEN + 1];
	const char *colon, *start = where;
	size_t alen;
	uint16_t port;

	memset(sa, 0, sizeof(*sa));
	if (*where == '[') {
		start = where + 1;
		colon = strstr(start, "]:");
		alen = colon ? (size_t)(colon - start) : 0;
		colon = colon ? colon + 1 : NULL;
	} else {
		colon = strrchr(where, ':');
		alen = colon ? (size_t)(colon - where) : 0;
	}
	if (!colon || !alen || alen >= sizeof(addr) || parse_port(colon + 1, &port))
		return -EINVAL;
	memcpy(addr, start, alen);
	addr[alen] = '\0';
	if (start != where && inet_pton(AF_INET6, addr, &in6->sin6_addr) == 1) {
		in6->sin6_family = AF_INET6;
		in6->sin6_port = htons(port);
		*len = sizeof(*in6);
		return 0;
	}
	if (start == where && inet_pton(AF_INET, addr, &in4->sin_addr) == 1) {
		in4->sin_family = AF_INET;
		in4->sin_port = htons(port);
		*len = sizeof(*in4);
		return 0;
	}
	return -EINVAL;
}

static const char *bind_hint(int err)
{
	switch (err) {
	case EADDRINUSE:
		return " (another program, or another gpumem serve, listens there: choose another "
		       "port)";
	case EACCES:
		return " (a port below 1024 needs root or CAP_NET_BIND_SERVICE)";
	case EADDRNOTAVAIL:
		return " (no interface of this host has that address)";
	default:
		return "";
	}
}

/* A bound, listening socket of our own, so that bind's error reaches the user as it is. */
static int open_listener(const char *where, int *out, uint16_t *port)
{
	struct sockaddr_storage sa, got;
	socklen_t len, glen = sizeof(got);
	int fd, one = 1, err;

	if (parse_listen(where, &sa, &len)) {
		p_err("cannot listen on '%s': expected ADDR:PORT (IPv4) or [ADDR]:PORT (IPv6) with "
		      "a numeric address and a port up to 65535, such as 127.0.0.1:9400", where);
		return -EINVAL;
	}
	fd = socket(sa.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		err = -errno;
		p_err("cannot listen on %s: socket: %s", where, strerror(-err));
		return err;
	}
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(fd, (struct sockaddr *)&sa, len) || listen(fd, LISTEN_BACKLOG)) {
		err = -errno;
		p_err("cannot listen on %s: %s%s", where, strerror(-err), bind_hint(-err));
		close(fd);
		return err;
	}
	if (getsockname(fd, (struct sockaddr *)&got, &glen) == 0)
		*port = ntohs(got.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&got)->sin6_port
							: ((struct sockaddr_in *)&got)->sin_port);
	*out = fd;
	return 0;
}

/* ---- requests ---- */

/* Answers with body (freed by MHD when must_free). MHD_NO closes the connection. */
static enum MHD_Result reply(struct MHD_Connection *c, unsigned int status, const char *type,
			     void *body, size_t len, bool must_free)
{
	struct MHD_Response *r;
	enum MHD_Result ret;

	r = MHD_create_response_from_buffer(len, body, must_free ? MHD_RESPMEM_MUST_FREE
								  : MHD_RESPMEM_PERSISTENT);
	if (!r) {
		if (must_free)
			free(body);
		return MHD_NO;
	}
	MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, type);
	if (status == MHD_HTTP_METHOD_NOT_ALLOWED)
		MHD_add_response_header(r, MHD_HTTP_HEADER_ALLOW, "GET, HEAD");
	ret = MHD_queue_response(c, status, r);
	MHD_destroy_response(r);
	return ret;
}

static enum MHD_Result reply_text(struct MHD_Connection *c, unsigned int status, const char *text)
{
	return reply(c, status, "text/plain; charset=utf-8", (void *)text, strlen(text), false);
}

/* The snapshot published last, with a reference for the caller, or NULL. */
static struct snapshot *current_snapshot(struct prom_server *srv)
{
	struct snapshot *s;

	pthread_mutex_lock(&srv->lock);
	s = snapshot_get(srv->current);
	pthread_mutex_unlock(&srv->lock);
	return s;
}

/* Rendered outside the lock: a slow render never holds up the publisher. */
static enum MHD_Result metrics(struct prom_server *srv, struct MHD_Connection *c)
{
	struct snapshot *s = current_snapshot(srv);
	char *buf = NULL;
	size_t len = 0;
	FILE *f;
	int err;

	if (!s)
		return reply_text(c, MHD_HTTP_SERVICE_UNAVAILABLE, "no snapshot published yet\n");
	f = open_memstream(&buf, &len);
	err = f ? prom_write(f, s, &srv->opts) : -ENOMEM;
	if (f && fclose(f) && !err)
		err = -ENOMEM;
	snapshot_put(s);
	if (err) {
		free(buf);
		return reply_text(c, MHD_HTTP_INTERNAL_SERVER_ERROR, "cannot render the metrics\n");
	}
	return reply(c, MHD_HTTP_OK, PROM_CONTENT_TYPE, buf, len, true);
}

static enum MHD_Result healthz(struct prom_server *srv, struct MHD_Connection *c)
{
	struct snapshot *s = current_snapshot(srv);
	uint64_t beat = __atomic_load_n(&srv->beat_ns, __ATOMIC_RELAXED), now = now_ns();
	char msg[96];

	snapshot_put(s);
	if (!s)
		return reply_text(c, MHD_HTTP_SERVICE_UNAVAILABLE, "no snapshot published yet\n");
	if (beat && now > beat + PROM_STALL_S * 1000000000ull) {
		snprintf(msg, sizeof(msg), "stalled: the agent's loop has not run for %.0f s\n",
			 (double)(now - beat) / 1e9);
		return reply_text(c, MHD_HTTP_SERVICE_UNAVAILABLE, msg);
	}
	return reply_text(c, MHD_HTTP_OK, "ok\n");
}

/* ---- slow clients ---- */

static void on_connection(void *cls, struct MHD_Connection *c, void **socket_ctx,
			  enum MHD_ConnectionNotificationCode code)
{
	struct prom_server *srv = cls;
	const union MHD_ConnectionInfo *info;
	struct guarded *g, **pp;

	if (code == MHD_CONNECTION_NOTIFY_STARTED) {
		info = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
		g = calloc(1, sizeof(*g));
		if (!g || !info) {
			free(g);
			return;
		}
		*g = (struct guarded){ .fd = info->connect_fd, .start_ns = now_ns() };
		pthread_mutex_lock(&srv->guard_lock);
		g->next = srv->conns;
		srv->conns = g;
		pthread_mutex_unlock(&srv->guard_lock);
		*socket_ctx = g;
		return;
	}
	g = *socket_ctx;	/* closed: it goes */
	if (!g)
		return;
	pthread_mutex_lock(&srv->guard_lock);
	for (pp = &srv->conns; *pp && *pp != g; pp = &(*pp)->next)
		;
	if (*pp)
		*pp = g->next;
	pthread_mutex_unlock(&srv->guard_lock);
	free(g);
	*socket_ctx = NULL;
}

/* Its request is in (answered), or the next one on a kept-alive connection begins. */
static void mark_request(struct MHD_Connection *c, struct prom_server *srv, bool answered)
{
	const union MHD_ConnectionInfo *info =
		MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
	struct guarded *g = info ? info->socket_context : NULL;

	if (!g)
		return;
	pthread_mutex_lock(&srv->guard_lock);
	g->answered = answered;
	if (!answered)
		g->start_ns = now_ns();
	pthread_mutex_unlock(&srv->guard_lock);
}

static void on_completed(void *cls, struct MHD_Connection *c, void **con_cls,
			 enum MHD_RequestTerminationCode code)
{
	(void)con_cls;
	(void)code;
	mark_request(c, cls, false);
}

/* Shuts down what the guard closes: MHD sees the socket end and lets the connection go. */
static void cut(struct prom_server *srv, struct guarded *g)
{
	g->cut = true;
	shutdown(g->fd, SHUT_RDWR);
	srv->cut_total++;
}

static void guard_once(struct prom_server *srv)
{
	uint64_t now = now_ns(), limit = (uint64_t)PROM_REQUEST_S * 1000000000ull;
	unsigned int pending = 0, room = PROM_SERVER_MAX_CONNS - PROM_SERVER_SPARE_CONNS;
	struct guarded *g, *oldest;

	pthread_mutex_lock(&srv->guard_lock);
	for (g = srv->conns; g; g = g->next) {
		if (g->answered || g->cut)
			continue;
		if (now - g->start_ns > limit)
			cut(srv, g);
		else
			pending++;
	}
	while (pending > room) {	/* the oldest half-read requests go */
		oldest = NULL;
		for (g = srv->conns; g; g = g->next)
			if (!g->answered && !g->cut && (!oldest || g->start_ns < oldest->start_ns))
				oldest = g;
		cut(srv, oldest);
		pending--;
	}
	pthread_mutex_unlock(&srv->guard_lock);
}

static void *guard_main(void *arg)
{
	struct prom_server *srv = arg;
	struct timespec ts = { 0, (long)GUARD_PERIOD_NS };

	while (!__atomic_load_n(&srv->guard_stop, __ATOMIC_RELAXED)) {
		guard_once(srv);
		nanosleep(&ts, NULL);
	}
	return NULL;
}

/* Answered at the first call, once the headers are in: no route reads a body (MHD closes a
 * connection whose body it did not read). HEAD is GET, and MHD leaves the body out. */
static enum MHD_Result answer(void *cls, struct MHD_Connection *c, const char *url,
			      const char *method, const char *version, const char *upload_data,
			      size_t *upload_data_size, void **con_cls)
{
	struct prom_server *srv = cls;
	bool metrics_url = !strcmp(url, "/metrics"), health_url = !strcmp(url, "/healthz");

	(void)version;
	(void)upload_data;
	(void)upload_data_size;
	(void)con_cls;
	mark_request(c, srv, true);
	if (!metrics_url && !health_url)
		return reply_text(c, MHD_HTTP_NOT_FOUND, "not found: try /metrics or /healthz\n");
	if (strcmp(method, MHD_HTTP_METHOD_GET) && strcmp(method, MHD_HTTP_METHOD_HEAD))
		return reply_text(c, MHD_HTTP_METHOD_NOT_ALLOWED, "method not allowed\n");
	return metrics_url ? metrics(srv, c) : healthz(srv, c);
}

/* libmicrohttpd's own diagnostics, shown with -v. */
static void mhd_log(void *cls, const char *fmt, va_list ap)
{
	char msg[256];

	(void)cls;
	vsnprintf(msg, sizeof(msg), fmt, ap);
	msg[strcspn(msg, "\n")] = '\0';
	p_debug("metrics endpoint: %s", msg);
}

/* ---- the server ---- */

int prom_server_start(const char *listen, const struct prom_opts *o, struct prom_server **out)
{
	struct prom_server *srv;
	int err;

	*out = NULL;
	srv = calloc(1, sizeof(*srv));
	if (!srv)
		return -ENOMEM;
	snprintf(srv->where, sizeof(srv->where), "%s", listen);
	srv->opts = o ? *o : PROM_OPTS_DEFAULT;
	err = open_listener(listen, &srv->fd, &srv->port);
	if (err)
		goto out_free;
	pthread_mutex_init(&srv->lock, NULL);
	pthread_mutex_init(&srv->guard_lock, NULL);
	srv->daemon = MHD_start_daemon(
		MHD_USE_AUTO_INTERNAL_THREAD | MHD_USE_ITC | MHD_USE_ERROR_LOG, 0, NULL, NULL,
		answer, srv, MHD_OPTION_EXTERNAL_LOGGER, mhd_log, NULL, MHD_OPTION_LISTEN_SOCKET,
		srv->fd, MHD_OPTION_THREAD_POOL_SIZE, (unsigned int)PROM_SERVER_THREADS,
		MHD_OPTION_CONNECTION_LIMIT, (unsigned int)PROM_SERVER_MAX_CONNS,
		MHD_OPTION_CONNECTION_TIMEOUT, (unsigned int)PROM_SERVER_TIMEOUT_S,
		MHD_OPTION_NOTIFY_CONNECTION, on_connection, srv,
		MHD_OPTION_NOTIFY_COMPLETED, on_completed, srv, MHD_OPTION_END);
	if (!srv->daemon) {
		/* Whether MHD closed the socket on failure is not said: leave it to the exit. */
		p_err("cannot start the metrics endpoint on %s (libmicrohttpd refused; -v says why)",
		      listen);
		err = -EIO;
		goto out_lock;
	}
	srv->guard_running = !pthread_create(&srv->guard, NULL, guard_main, srv);
	if (!srv->guard_running)
		p_err("warning: cannot start the metrics endpoint's guard: slow clients are closed "
		      "only when idle");
	p_debug("metrics endpoint on %s (port %u)", listen, srv->port);
	*out = srv;
	return 0;

out_lock:
	pthread_mutex_destroy(&srv->guard_lock);
	pthread_mutex_destroy(&srv->lock);
out_free:
	free(srv);
	return err;
}

void prom_server_publish(struct prom_server *srv, struct snapshot *s)
{
	struct snapshot *old;

	s = snapshot_get(s);
	pthread_mutex_lock(&srv->lock);
	old = srv->current;
	srv->current = s;
	pthread_mutex_unlock(&srv->lock);
	snapshot_put(old);
}

void prom_server_beat(struct prom_server *srv)
{
	__atomic_store_n(&srv->beat_ns, now_ns(), __ATOMIC_RELAXED);
}

uint16_t prom_server_port(const struct prom_server *srv)
{
	return srv->port;
}

void prom_server_stop(struct prom_server *srv)
{
	int fd;

	if (!srv)
		return;
	if (srv->guard_running) {
		__atomic_store_n(&srv->guard_stop, true, __ATOMIC_RELAXED);
		pthread_join(srv->guard, NULL);
	}
	fd = MHD_quiesce_daemon(srv->daemon);	/* the socket is ours again */
	MHD_stop_daemon(srv->daemon);	/* every connection closed: on_connection freed each */
	if (fd != MHD_INVALID_SOCKET)
		close(fd);
	snapshot_put(srv->current);
	pthread_mutex_destroy(&srv->lock);
	pthread_mutex_destroy(&srv->guard_lock);
	p_debug("metrics endpoint on %s stopped (%llu slow connections closed)", srv->where,
		(unsigned long long)srv->cut_total);
	free(srv);
}
