/* SPDX-License-Identifier: GPL-2.0 */
/* Detaching files' probes on a thread of its own: the kernel waits for a grace period per link
 * (a tenth of a second or more), which the agent's loop must not. */
#ifndef GPUMEM_LOADER_DETACHER_H
#define GPUMEM_LOADER_DETACHER_H

struct attached_file;
struct detacher;

/* NULL when no thread could be started: detacher_add then detaches at once. */
struct detacher *detacher_new(void);
/* f is detached (detach_file) on the thread, soon; it is the detacher's from now on. */
void detacher_add(struct detacher *d, struct attached_file *f);
/* Detaches what is still queued, then ends the thread. */
void detacher_free(struct detacher *d);

#endif
