/* SPDX-License-Identifier: MIT */
/*
 * flamesvg.c - a flame graph (flame.h) as one static SVG document:
 * `perfctl snapshot --format svg` (through encode/svg.c) and `perfctl diff
 * --format svg` (cli/diff_flame.c).  For where the page's script cannot
 * run or is not wanted: an <img> in a README or a bug report, an image
 * viewer.  No script, no external reference.
 *
 * Design: the picture the page draws first, fixed at FLAME_SVG_WIDTH
 * pixels: root at the top ("all", then one root per process, or a
 * differential graph's root frames), a row of 16 pixels a level, each
 * frame a <g> of a <rect> in its colour (flame.h: by kind and name, or by
 * change), its name as far as it fits and a <title> that browsers show on
 * hover: the name, its kind and module, its total and self value and
 * share (both sides and the change, for a differential graph, and the
 * frames below it that only BEFORE has).  Frames under half a pixel were
 * left out when the flame was built (FLAME_SVG_MIN_SHARE) and a line of
 * the header counts them, so a 100k-stack profile is a few thousand
 * rectangles, not a million.  The header says what the profile is, and for
 * a differential graph what the colours mean.
 *
 * Escaping: every name and path goes through put_xml(): the five XML
 * specials as entities, and what XML 1.0 cannot hold at all (control
 * bytes but tab and newline, U+FFFE and U+FFFF, bytes that are not UTF-8)
 * as U+FFFD, so any name makes a well-formed document.  Cost: one pass
 * over the kept nodes for the depth, one to draw.
 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/kindtab.h"
#include "base/utf8.h"
#include "encode/flame.h"
#include "perfd/macro.h"

#define PAD 10
#define ROW 16
#define HEADER_LINE 17
#define CHAR_WIDTH 6.6 /* of the 11 px monospace the labels use */
#define GONE_LISTED 3  /* frames of BEFORE only named in their caller's title */

struct svg {
	const struct flame *f;
	const struct flame_out *out;
	double scale; /* pixels a unit of value */
	double top;   /* of the row of depth 0 */
};

_printf_(2, 3) static void putf(const struct svg *s, const char *fmt, ...)
{
	char buf[256];
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	if (n > 0)
		s->out->put(s->out->ctx, buf, MIN((size_t)n, sizeof(buf) - 1));
}

static void put(const struct svg *s, const char *text)
{
	s->out->put(s->out->ctx, text, strlen(text));
}

/* Text for XML content or an attribute; at most max_chars characters of
 * it, ".." ending a cut (max_chars SIZE_MAX: all). */
static void put_xml(const struct svg *s, const char *text, size_t n, size_t max_chars)
{
	const unsigned char *p = (const unsigned char *)text;
	size_t chars = 0, i = 0, start = 0;

	while (i < n) {
		uint32_t cp = 0;
		size_t k = utf8_len(p + i, n - i, &cp);
		const char *esc = NULL;

		if (chars == max_chars) {
			s->out->put(s->out->ctx, text + start, i - start);
			put(s, "..");
			return;
		}
		if (k == 0 || (cp < 0x20 && cp != '\t' && cp != '\n') || cp == 0xfffe || cp == 0xffff)
			esc = "\xef\xbf\xbd"; /* U+FFFD */
		else if (cp == '&')
			esc = "&amp;";
		else if (cp == '<')
			esc = "&lt;";
		else if (cp == '>')
			esc = "&gt;";
		else if (cp == '"')
			esc = "&quot;";
		else if (cp == '\'')
			esc = "&apos;";
		if (esc) {
			s->out->put(s->out->ctx, text + start, i - start);
			put(s, esc);
		}
		i += k ? k : 1;
		if (esc)
			start = i;
		chars++;
	}
	s->out->put(s->out->ctx, text + start, n - start);
}

static size_t chars_of(const char *text, size_t n)
{
	size_t c = 0;

	for (size_t i = 0; i < n; i++)
		c += ((unsigned char)text[i] & 0xc0) != 0x80;
	return c;
}

/* "1,234,567" */
static char *grouped(uint64_t v, char buf[static 32])
{
	char digits[24];
	int n = snprintf(digits, sizeof(digits), "%" PRIu64, v), at = 0;

	for (int i = 0; i < n; i++) {
		if (i > 0 && (n - i) % 3 == 0)
			buf[at++] = ',';
		buf[at++] = digits[i];
	}
	buf[at] = '\0';
	return buf;
}

static char *duration(double ns, char buf[static 32])
{
	if (ns >= 1e9)
		(void)snprintf(buf, 32, "%.*f s", ns >= 1e11 ? 0 : 2, ns / 1e9);
	else if (ns >= 1e6)
		(void)snprintf(buf, 32, "%.1f ms", ns / 1e6);
	else if (ns >= 1e3)
		(void)snprintf(buf, 32, "%.1f us", ns / 1e3);
	else
		(void)snprintf(buf, 32, "%.0f ns", ns);
	return buf;
}

/* A value in the graph's unit, as the page says it. */
static char *value(const struct flame *f, uint64_t v, char buf[static 64])
{
	static const char *const units[] = { "B", "KiB", "MiB", "GiB", "TiB" };
	char a[32], b[32];

	if (strcmp(f->o.unit, "bytes") == 0) {
		double x = (double)v;
		size_t u = 0;

		while (x >= 1024 && u + 1 < ELEMENTSOF(units)) {
			x /= 1024;
			u++;
		}
		if (u == 0)
			(void)snprintf(buf, 64, "%s B", grouped(v, a));
		else
			(void)snprintf(buf, 64, "%.1f %s", x, units[u]);
	} else if (strcmp(f->o.unit, "nanoseconds") == 0) {
		(void)duration((double)v, buf);
	} else if (f->o.period_ns) {
		(void)snprintf(buf, 64, "%s sample%s (%s)", grouped(v, a), v == 1 ? "" : "s",
			       duration((double)v * (double)f->o.period_ns, b));
	} else {
		(void)snprintf(buf, 64, "%s sample%s", grouped(v, a), v == 1 ? "" : "s");
	}
	return buf;
}

/* --- the frames ------------------------------------------------------------ */

static uint32_t deepest(const struct flame *f, uint32_t id, uint32_t depth)
{
	const struct calltree_node *n = &f->t->nodes[id];
	uint32_t d = depth;

	for (uint32_t i = 0; i < n->n_children; i++) {
		uint32_t c = f->t->children[n->first_child + i];

		if (flame_kept(f, c) && f->t->nodes[c].total > 0)
			d = MAX(d, deepest(f, c, depth + 1));
	}
	return d;
}

/* The frames below node that BEFORE only has, for its title. */
static void put_gone(const struct svg *s, const struct calltree_node *n)
{
	const struct flame *f = s->f;
	size_t count = 0, listed = 0;
	uint64_t sum = 0;
	char buf[32];

	for (uint32_t i = 0; i < n->n_children; i++) {
		uint32_t c = f->t->children[n->first_child + i];

		if (flame_kept(f, c) && f->t->nodes[c].total == 0) {
			count++;
			sum += f->o.before[c].total;
		}
	}
	if (!count)
		return;
	putf(s, "\nin BEFORE only, below it: %zu frame%s, %.2f%% of BEFORE:", count,
	     count == 1 ? "" : "s", flame_share(sum, f->o.before_total));
	for (uint32_t i = 0; i < n->n_children && listed < GONE_LISTED; i++) {
		uint32_t c = f->t->children[n->first_child + i];
		uint32_t name = f->node_name[c];

		if (!flame_kept(f, c) || f->t->nodes[c].total > 0)
			continue;
		put(s, listed++ ? ", " : " ");
		put_xml(s, flame_name_text(f, name), f->names[name].len, SIZE_MAX);
		(void)snprintf(buf, sizeof(buf), " (%.2f%%)", flame_share(f->o.before[c].total,
									  f->o.before_total));
		put(s, buf);
	}
	if (count > listed)
		put(s, ", ...");
}

static void put_title(const struct svg *s, uint32_t id)
{
	const struct flame *f = s->f;
	const struct calltree_node *n = &f->t->nodes[id];
	const struct flame_name *nm = &f->names[f->node_name[id]];
	const char *module = f->text + f->modules[nm->module];
	char a[64], b[64];

	put(s, "<title>");
	put_xml(s, flame_name_text(f, f->node_name[id]), nm->len, SIZE_MAX);
	put(s, "\n");
	put(s, f->o.kinds[nm->kind]);
	if (*module) {
		put(s, "  ");
		put_xml(s, module, strlen(module), SIZE_MAX);
	}
	if (!f->o.before) {
		putf(s, "\ntotal: %s, %.2f%% of all\nself:  %s, %.2f%% of all", value(f, n->total, a),
		     flame_share(n->total, f->o.total), value(f, n->self, b),
		     flame_share(n->self, f->o.total));
	} else {
		const struct flame_before *p = &f->o.before[id];

		putf(s, "\nafter:  total %s (%.2f%%), ", value(f, n->total, a),
		     flame_share(n->total, f->o.total));
		putf(s, "self %s (%.2f%%)", value(f, n->self, b), flame_share(n->self, f->o.total));
		putf(s, "\nbefore: total %s (%.2f%%), ", value(f, p->total, a),
		     flame_share(p->total, f->o.before_total));
		putf(s, "self %s (%.2f%%)", value(f, p->self, b), flame_share(p->self, f->o.before_total));
		putf(s, "\nchange: total %+.2f points, self %+.2f points", flame_change(f, id),
		     flame_share(n->self, f->o.total) - flame_share(p->self, f->o.before_total));
		put_gone(s, n);
	}
	put(s, "</title>");
}

/* One box: a <rect> in colour and its label where it fits. */
static void put_box(const struct svg *s, double x, uint32_t depth, double w, uint32_t colour,
		    const char *label, size_t len)
{
	double y = s->top + depth * ROW;
	size_t fit = w > 3 * CHAR_WIDTH ? (size_t)((w - 6) / CHAR_WIDTH) : 0;

	putf(s, "<rect x=\"%.2f\" y=\"%.0f\" width=\"%.2f\" height=\"%d\" fill=\"#%06x\" rx=\"2\"/>",
	     x, y, MAX(w - 0.5, 0.5), ROW - 1, colour);
	if (!fit)
		return;
	putf(s, "<text x=\"%.2f\" y=\"%.0f\">", x + 3, y + ROW - 4);
	put_xml(s, label, len, chars_of(label, len) > fit ? MAX(fit, 3) - 2 : SIZE_MAX);
	put(s, "</text>");
}

static void put_node(const struct svg *s, uint32_t id, double x, uint32_t depth)
{
	const struct flame *f = s->f;
	const struct calltree_node *n = &f->t->nodes[id];
	uint32_t name = f->node_name[id];

	put(s, "<g>");
	put_title(s, id);
	put_box(s, x, depth, (double)n->total * s->scale, flame_colour(f, id),
		flame_name_text(f, name), f->names[name].len);
	put(s, "</g>\n");
	for (uint32_t i = 0; i < n->n_children; i++) {
		uint32_t c = f->t->children[n->first_child + i];

		if (!flame_kept(f, c) || f->t->nodes[c].total == 0)
			continue;
		put_node(s, c, x, depth + 1);
		x += (double)f->t->nodes[c].total * s->scale;
	}
}

/* --- the header ------------------------------------------------------------ */

static void put_line(const struct svg *s, int *line, const char *cls)
{
	putf(s, "<text x=\"%d\" y=\"%d\" class=\"%s\">", PAD, PAD + 14 + HEADER_LINE * (*line)++, cls);
}

static void put_summary(const struct svg *s, int *line)
{
	const struct flame *f = s->f;
	const struct kind_info *k = kind_by_name(f->o.kind);
	const char *kind = k ? k->title : f->o.kind;
	char a[64], when[32], d[32];

	put_line(s, line, "quiet");
	put_xml(s, kind, strlen(kind), SIZE_MAX);
	if (f->o.before) {
		putf(s, ": widths of AFTER, ");
		put_xml(s, f->o.after_source, strlen(f->o.after_source), SIZE_MAX);
		putf(s, " (%s), coloured by each frame's change of share since BEFORE, ",
		     value(f, f->o.total, a));
		put_xml(s, f->o.before_source, strlen(f->o.before_source), SIZE_MAX);
		putf(s, " (%s)</text>\n", value(f, f->o.before_total, a));
		put_line(s, line, "quiet");
		putf(s, "red: its share grew, blue: it shrank, in points of each side's total; full "
			"colour at %.2f points; white: no change</text>\n", f->full_change);
		if (f->gone_nodes) {
			put_line(s, line, "quiet");
			putf(s, "%zu frame%s in BEFORE only (together %.2f%% of BEFORE): no width here, "
				"their callers' titles name them</text>\n", f->gone_nodes,
			     f->gone_nodes == 1 ? " is" : "s are", flame_share(f->gone_value, f->o.before_total));
		}
		return;
	}
	putf(s, ": %s of ", value(f, f->o.total, a));
	for (uint32_t i = 0; i < f->t->n_roots && i < 6; i++) {
		uint32_t name = f->node_name[calltree_root(f->t, i)];

		put(s, i ? ", " : "");
		put_xml(s, flame_name_text(f, name), f->names[name].len, SIZE_MAX);
	}
	if (f->t->n_roots > 6)
		putf(s, " and %u more", f->t->n_roots - 6);
	if (f->o.time_unix_ns) {
		time_t t = (time_t)(f->o.time_unix_ns / 1000000000);
		struct tm tm;

		if (gmtime_r(&t, &tm) && strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%SZ", &tm))
			putf(s, "; from %s for %s", when, duration((double)f->o.duration_ns, d));
	}
	if (f->o.memory_sample_bytes)
		putf(s, "; one sample per %s of growth", value(f, f->o.memory_sample_bytes, a));
	put(s, "</text>\n");
}

/* The kinds the names have, each a swatch of its colour. */
static void put_legend(const struct svg *s, int *line)
{
	const struct flame *f = s->f;
	double x = PAD;
	bool seen[64] = { false };

	for (size_t i = 0; i < f->n_names; i++)
		if (f->names[i].kind < ELEMENTSOF(seen))
			seen[f->names[i].kind] = true;
	for (size_t k = 0; k < f->o.n_kinds && k < ELEMENTSOF(seen); k++) {
		const char *kind = f->o.kinds[k];
		double w = (double)strlen(kind) * CHAR_WIDTH + 8;

		if (!seen[k])
			continue;
		putf(s, "<rect x=\"%.1f\" y=\"%d\" width=\"%.1f\" height=\"14\" fill=\"#%06x\" rx=\"3\"/>",
		     x, PAD + 3 + HEADER_LINE * *line, w, flame_kind_colour(kind));
		putf(s, "<text x=\"%.1f\" y=\"%d\">", x + 4, PAD + 14 + HEADER_LINE * *line);
		put_xml(s, kind, strlen(kind), SIZE_MAX);
		put(s, "</text>");
		x += w + 6;
	}
	put(s, "\n");
	(*line)++;
}

static int header_lines(const struct flame *f)
{
	return 2 + (f->o.before ? 1 + (f->gone_nodes > 0) : 1) + (f->pruned_nodes > 0);
}

int flame_svg_write(const struct flame *f, const struct flame_out *out)
{
	struct svg s = { .f = f, .out = out };
	uint32_t depth = 0;
	double width = FLAME_SVG_WIDTH - 2 * PAD, height;
	uint64_t x = 0;
	int line = 0;

	for (uint32_t i = 0; i < f->t->n_roots; i++)
		depth = MAX(depth, deepest(f, calltree_root(f->t, i), 1));
	s.top = PAD + HEADER_LINE * header_lines(f) + 6;
	height = s.top + (depth + 1) * ROW + PAD;
	s.scale = f->o.total ? width / (double)f->o.total : 0;

	put(&s, "<?xml version=\"1.0\" encoding=\"UTF-8\" standalone=\"no\"?>\n");
	putf(&s, "<svg xmlns=\"http://www.w3.org/2000/svg\" version=\"1.1\" width=\"%d\" "
		 "height=\"%.0f\" viewBox=\"0 0 %d %.0f\">\n", FLAME_SVG_WIDTH, height, FLAME_SVG_WIDTH,
	     height);
	put(&s, "<style>text { font: 11px ui-monospace, Menlo, Consolas, monospace; fill: #111; }\n"
		"text.title { font: 600 15px system-ui, sans-serif; }\n"
		"text.quiet { font: 12px system-ui, sans-serif; fill: #555; }</style>\n");
	putf(&s, "<rect x=\"0\" y=\"0\" width=\"%d\" height=\"%.0f\" fill=\"#fbfbfb\"/>\n",
	     FLAME_SVG_WIDTH, height);
	put_line(&s, &line, "title");
	put(&s, f->o.before ? "perfd differential flame graph</text>\n" : "perfd flame graph</text>\n");
	put_summary(&s, &line);
	if (f->pruned_nodes) {
		char a[64];

		put_line(&s, &line, "quiet");
		putf(&s, "%zu frames under %.3f%% of the total each are left out (together %s, %.2f%% "
			 "of all, still counted in their callers' totals)</text>\n", f->pruned_nodes,
		     100 * f->o.min_share, value(f, f->pruned_value, a),
		     flame_share(f->pruned_value, f->o.total));
	}
	if (!f->o.before)
		put_legend(&s, &line);

	/* the "all" box, then the roots side by side under it */
	put(&s, "<g>");
	put(&s, "<title>all\n");
	if (f->o.before) {
		char a[64], b[64];

		putf(&s, "after: %s\nbefore: %s", value(f, f->o.total, a), value(f, f->o.before_total, b));
	} else {
		char a[64];

		putf(&s, "total: %s", value(f, f->o.total, a));
	}
	put(&s, "</title>");
	put_box(&s, PAD, 0, width, FLAME_ROOT_COLOUR, "all", 3);
	put(&s, "</g>\n");
	for (uint32_t i = 0; i < f->t->n_roots; i++) {
		uint32_t r = calltree_root(f->t, i);

		if (f->t->nodes[r].total == 0)
			continue;
		put_node(&s, r, PAD + (double)x * s.scale, 1);
		x += f->t->nodes[r].total;
	}
	put(&s, "</svg>\n");
	return 0;
}
