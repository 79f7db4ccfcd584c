// SPDX-License-Identifier: GPL-2.0
/* A thread CPython never saw, for tests/integration/test_python.py: spawn_alloc(size) starts a
 * plain pthread that calls the runtime's cudaMalloc (resolved at load, like any library's
 * caller) and waits for it. Built by that test against the mock runtime. */
#include <pthread.h>
#include <stddef.h>

int cudaMalloc(void **ptr, size_t size);

struct job {
	size_t size;
	int rc;
};

static void *__attribute__((noinline)) native_thread_main(void *arg)
{
	struct job *job = arg;
	void *ptr = NULL;

	job->rc = cudaMalloc(&ptr, job->size);
	asm volatile("" ::: "memory");
	return NULL;
}

int spawn_alloc(size_t size)
{
	struct job job = { .size = size, .rc = -1 };
	pthread_t thread;

	if (pthread_create(&thread, NULL, native_thread_main, &job))
		return -1;
	pthread_join(thread, NULL);
	return job.rc;
}
