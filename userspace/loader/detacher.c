// SPDX-License-Identifier: GPL-2.0
/* Detaching files' probes on a thread of its own: a queue the loop appends to and the thread
 * empties, one file at a time. */
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include "base/util.h"
#include "loader/attach.h"
#include "loader/detacher.h"

struct detacher {
	pthread_t thread;
	pthread_mutex_t lock;
	pthread_cond_t wake;
	struct attached_file **queue;
	size_t n, cap;
	bool stop;
};

static void *run(void *arg)
{
	struct detacher *d = arg;

	pthread_mutex_lock(&d->lock);
	for (;;) {
		struct attached_file *f;

		while (!d->n && !d->stop)
			pthread_cond_wait(&d->wake, &d->lock);
		if (!d->n)
			break;
		f = d->queue[--d->n];
		pthread_mutex_unlock(&d->lock);
		detach_file(f);
		pthread_mutex_lock(&d->lock);
	}
	pthread_mutex_unlock(&d->lock);
	return NULL;
}

struct detacher *detacher_new(void)
{
	struct detacher *d = xcalloc(1, sizeof(*d));

	pthread_mutex_init(&d->lock, NULL);
	pthread_cond_init(&d->wake, NULL);
	if (pthread_create(&d->thread, NULL, run, d)) {
		pthread_cond_destroy(&d->wake);
		pthread_mutex_destroy(&d->lock);
		free(d);
		return NULL;
	}
	return d;
}

void detacher_add(struct detacher *d, struct attached_file *f)
{
	if (!d) {
		detach_file(f);
		return;
	}
	pthread_mutex_lock(&d->lock);
	if (d->n == d->cap) {
		d->cap = d->cap ? 2 * d->cap : 16;
		d->queue = xrealloc(d->queue, d->cap * sizeof(*d->queue));
	}
	d->queue[d->n++] = f;
	pthread_cond_signal(&d->wake);
	pthread_mutex_unlock(&d->lock);
}

void detacher_free(struct detacher *d)
{
	if (!d)
		return;
	pthread_mutex_lock(&d->lock);
	d->stop = true;
	pthread_cond_signal(&d->wake);
	pthread_mutex_unlock(&d->lock);
	pthread_join(d->thread, NULL);
	pthread_cond_destroy(&d->wake);
	pthread_mutex_destroy(&d->lock);
	free(d->queue);
	free(d);
}
