// SPDX-License-Identifier: GPL-2.0
/* Rates and growth of one series: what top's ALLOC/s, FREE/s and GROW/min columns show. */
#include "analysis/analysis.h"

struct trend trend_of(const struct history *h, const struct hist_key *key, uint64_t now_ns,
		      double rate_window_s, double growth_window_s)
{
	const struct hist_series *s = history_find(h, key);
	struct hist_fit rate, growth;
	struct trend t = { 0 };

	if (!s)
		return t;
	history_fit(s, now_ns, rate_window_s, &rate);
	history_fit(s, now_ns, growth_window_s, &growth);
	t.alloc_rate = rate.alloc_rate;
	t.free_rate = rate.free_rate;
	t.growth_per_s = growth.slope;
	return t;
}
