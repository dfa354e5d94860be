/* SPDX-License-Identifier: MIT */
/* rss.c - see rss.h. */
#include <math.h>

#include "base/clock.h"
#include "perfd/macro.h"
#include "profile/history.h"
#include "profile/rss.h"

size_t rss_timeline(const struct process *p, uint64_t from_ns, uint64_t to_ns,
		    const struct owner_filter *owners, struct rss_point *out, size_t cap)
{
	struct history_iter it;
	struct history_window w;
	size_t n = 0;

	/* oldest first: from the oldest window that ends after from_ns */
	history_iter_init(&it, &p->history);
	while (n < cap && history_iter_next(&it, &w)) {
		uint64_t ws = w.start_s * NSEC_PER_SEC, we = ws + w.span_s * NSEC_PER_SEC;
		const struct window_rss *r = &w.rss;
		struct rss_point *pt;

		if (we <= from_ns || !r->page_size || !owner_filter_takes(owners, w.owner))
			continue;
		if (ws >= to_ns)
			break;
		pt = &out[n++];
		pt->start_ns = ws;
		pt->end_ns = we;
		pt->total_bytes = 0;
		for (int k = 0; k < PERFD_RSS_COUNTERS; k++) {
			pt->bytes[k] = r->last_pages[k] * r->page_size;
			pt->total_bytes += pt->bytes[k];
		}
		pt->max_bytes = MAX(r->max_pages * r->page_size, pt->total_bytes);
	}
	return n;
}

void rss_trend(const struct rss_point *pts, size_t n, struct rss_trend *ret)
{
	double sx = 0, sy = 0, sxx = 0, sxy = 0, syy = 0, t0;

	*ret = (struct rss_trend){ .points = n };
	if (n < 2)
		return;
	t0 = (double)pts[0].end_ns;
	for (size_t i = 0; i < n; i++) {
		double x = ((double)pts[i].end_ns - t0) / NSEC_PER_SEC, y = (double)pts[i].total_bytes;

		sx += x;
		sy += y;
		sxx += x * x;
		sxy += x * y;
		syy += y * y;
	}
	{
		double vx = sxx - sx * sx / n, vy = syy - sy * sy / n, cxy = sxy - sx * sy / n;

		if (vx <= 0)
			return;
		ret->bytes_per_second = cxy / vx;
		/* a flat line explains a flat series perfectly, but is no rise */
		ret->r2 = vy > 0 ? cxy * cxy / (vx * vy) : 0;
	}
	ret->rise_bytes = (int64_t)pts[n - 1].total_bytes - (int64_t)pts[0].total_bytes;
	ret->growing = n >= RSS_GROWING_MIN_POINTS && ret->bytes_per_second >= RSS_GROWING_MIN_RATE &&
		       ret->r2 >= RSS_GROWING_MIN_R2 && ret->rise_bytes >= (int64_t)RSS_GROWING_MIN_BYTES;
}

bool rss_changed(const struct process *p, uint64_t from_ns, uint64_t to_ns,
		 const struct owner_filter *owners)
{
	struct history_iter it;
	struct history_window w;
	uint64_t first = 0;
	bool have = false;

	/* walk the windows in the range, oldest first, comparing readings */
	history_iter_init(&it, &p->history);
	while (history_iter_next(&it, &w)) {
		uint64_t ws = w.start_s * NSEC_PER_SEC, we = ws + w.span_s * NSEC_PER_SEC;
		uint64_t total = 0;

		if (ws >= to_ns)
			break;
		if (we <= from_ns || !w.rss.page_size || !owner_filter_takes(owners, w.owner))
			continue;
		for (int k = 0; k < PERFD_RSS_COUNTERS; k++)
			total += w.rss.last_pages[k];
		if (w.rss.max_pages != total)
			return true; /* it moved within one window */
		if (have && total != first)
			return true;
		first = total;
		have = true;
	}
	return false;
}
