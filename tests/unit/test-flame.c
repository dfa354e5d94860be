/* SPDX-License-Identifier: MIT */
/*
 * test-flame.c - the flame graph both writers draw (daemon/encode/flame.c)
 * and its SVG writer (flamesvg.c), on call trees built by hand with
 * calltree_node(), as perfctl builds its differential one: which nodes are
 * kept (roots always, the rest by share, of either side in a differential
 * graph) and what was left out, the frames only BEFORE has, the colours
 * (a family per kind and a shade per name; growth red, shrinkage blue,
 * paler for less), and an SVG that holds any name well-formed and draws
 * each frame as wide as its share.  The page's data is tested through
 * html_encode in test-html.c and through perfctl's diff in test-diff.c;
 * both are opened in Chromium by the integration tests.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/utf8.h"
#include "encode/flame.h"
#include "flametest.h"

static const char *const kinds[] = { "native", "kernel", "python" };

struct tree {
	struct calltree t;
	struct flame_before before[128];
};

/* Adds a stack of frames (root first, ending at 0) worth v (after) and w
 * (before) to the tree. */
static void add(struct tree *tr, const uint32_t *frames, uint64_t v, uint64_t w)
{
	int64_t at = CALLTREE_NO_PARENT;

	for (; *frames; frames++) {
		at = calltree_node(&tr->t, (uint32_t)at, *frames);
		cr_assert_geq(at, 0);
		cr_assert_lt(at, 128);
		tr->t.nodes[at].total += v;
		tr->before[at].total += w;
	}
	tr->t.nodes[at].self += v;
	tr->before[at].self += w;
}

static int64_t node_of(const struct tree *tr, uint32_t parent, uint32_t frame)
{
	for (size_t i = 0; i < tr->t.n; i++)
		if (tr->t.nodes[i].parent == parent && tr->t.nodes[i].frame == frame)
			return (int64_t)i;
	return -1;
}

/* Names every kept node "fN" after its frame, kind by frame % 3. */
static void name_all(struct flame *f)
{
	for (uint32_t i = 0; i < f->t->n; i++) {
		char buf[16];
		int64_t k;

		if (!flame_kept(f, i))
			continue;
		snprintf(buf, sizeof(buf), "f%u", f->t->nodes[i].frame);
		cr_assert_eq(flame_text(f, buf, strlen(buf)), 0);
		k = flame_name_end(f, f->t->nodes[i].frame % 3, 0);
		cr_assert_geq(k, 0);
		f->node_name[i] = (uint32_t)k;
	}
	cr_assert_eq(flame_finish(f), 0);
}

static struct flame_opts opts(uint64_t total, double min_share)
{
	return (struct flame_opts){ .kind = "cpu", .unit = "samples", .total = total, .kinds = kinds,
				    .n_kinds = 3, .min_share = min_share };
}

Test(flame, roots_kept_narrow_nodes_left_out_and_counted)
{
	struct tree tr;
	struct flame f;
	const uint32_t hot[] = { 1, 2, 3, 0 }, rare[] = { 1, 4, 5, 0 }, tiny_root[] = { 9, 0 };

	calltree_init(&tr.t);
	add(&tr, hot, 9990, 0);
	add(&tr, rare, 9, 0); /* 9/10000: under 1/1000, with its child */
	add(&tr, tiny_root, 1, 0);
	cr_assert_eq(calltree_link(&tr.t), 0);
	cr_assert_eq(tr.t.n_roots, 2);
	cr_assert_eq(tr.t.nodes[calltree_root(&tr.t, 0)].frame, 1, "roots largest first");
	cr_assert_eq(flame_init(&f, &tr.t, (struct flame_opts[]){ opts(10000, 1.0 / 1000) }), 0);
	cr_expect(flame_kept(&f, (uint32_t)node_of(&tr, CALLTREE_NO_PARENT, 9)), "a root, however small");
	cr_expect_not(flame_kept(&f, (uint32_t)node_of(&tr, (uint32_t)node_of(&tr, 0, 4), 5)));
	cr_expect_eq(f.kept, 4);
	cr_expect_eq(f.pruned_nodes, 2);
	cr_expect_eq(f.pruned_value, 9, "the outermost node left out, once");
	cr_expect_eq(flame_finish(&f), -EINVAL, "kept nodes without names");
	name_all(&f);
	cr_expect_str_eq(flame_name_text(&f, f.node_name[node_of(&tr, 0, 2)]), "f2");
	flame_done(&f);
	calltree_done(&tr.t);
}

Test(flame, a_name_keeps_its_colour_and_kinds_their_families)
{
	struct tree tr;
	struct flame f;
	uint32_t frames[3] = { 0, 0, 0 }, colours[60];
	size_t distinct = 0;

	/* 60 roots f3, f6, ... (native), each with a child f1 (kernel) */
	calltree_init(&tr.t);
	for (uint32_t i = 0; i < 60; i++) {
		frames[0] = 3 * (i + 1);
		frames[1] = 1;
		add(&tr, frames, 1, 0);
	}
	cr_assert_eq(calltree_link(&tr.t), 0);
	cr_assert_eq(flame_init(&f, &tr.t, (struct flame_opts[]){ opts(60, 0) }), 0);
	name_all(&f);
	for (uint32_t i = 0; i < 60; i++) {
		uint32_t root = (uint32_t)node_of(&tr, CALLTREE_NO_PARENT, 3 * (i + 1));
		uint32_t child = (uint32_t)node_of(&tr, root, 1);
		uint32_t first = (uint32_t)node_of(&tr, (uint32_t)node_of(&tr, CALLTREE_NO_PARENT, 3), 1);

		colours[i] = flame_colour(&f, root);
		cr_expect_eq(flame_colour(&f, child), flame_colour(&f, first), "one name, one colour");
		/* native is a red family, kernel a yellow-orange one: green apart */
		cr_expect_lt(colours[i] >> 8 & 0xff, flame_colour(&f, child) >> 8 & 0xff, "%06x %06x",
			     colours[i], flame_colour(&f, child));
		distinct++;
		for (uint32_t k = 0; k < i; k++)
			if (colours[k] == colours[i]) {
				distinct--;
				break;
			}
	}
	cr_expect_geq(distinct, 40, "a shade per name: %zu colours of 60 names", distinct);
	cr_expect_neq(flame_kind_colour("kernel"), flame_kind_colour("python"));
	cr_expect_eq(flame_kind_colour("user"), flame_kind_colour("native"));
	flame_done(&f);
	calltree_done(&tr.t);
}

/* 4:1 before, 1:1 after; gone only before, fresh only after; the rest
 * equal.  After's total 1000, before's 2000. */
static void build_diff(struct tree *tr, struct flame *f, double min_share)
{
	const uint32_t hot[] = { 1, 2, 0 }, other[] = { 1, 3, 0 }, gone[] = { 1, 4, 5, 0 },
		       fresh[] = { 1, 6, 0 }, same[] = { 1, 7, 0 };
	struct flame_opts o = opts(1000, min_share);

	memset(tr->before, 0, sizeof(tr->before));
	calltree_init(&tr->t);
	add(tr, hot, 400, 1280);
	add(tr, other, 400, 320);
	add(tr, gone, 0, 200);
	add(tr, fresh, 100, 0);
	add(tr, same, 100, 200);
	cr_assert_eq(calltree_link(&tr->t), 0);
	o.before = tr->before;
	o.before_total = 2000;
	o.before_source = "before.pb.gz";
	o.after_source = "after.folded";
	cr_assert_eq(flame_init(f, &tr->t, &o), 0);
	name_all(f);
}

static uint32_t channel(uint32_t c, int shift)
{
	return c >> shift & 0xff;
}

Test(flame, differential_colours_say_the_change_of_share)
{
	struct tree tr;
	struct flame f;
	uint32_t hot, other, fresh, same, gone, root;

	build_diff(&tr, &f, 0);
	root = (uint32_t)node_of(&tr, CALLTREE_NO_PARENT, 1);
	hot = (uint32_t)node_of(&tr, root, 2);
	other = (uint32_t)node_of(&tr, root, 3);
	fresh = (uint32_t)node_of(&tr, root, 6);
	same = (uint32_t)node_of(&tr, root, 7);
	gone = (uint32_t)node_of(&tr, root, 4);
	cr_expect_float_eq(flame_change(&f, hot), 40.0 - 64.0, 1e-9);
	cr_expect_float_eq(flame_change(&f, other), 40.0 - 16.0, 1e-9);
	cr_expect_float_eq(f.full_change, 24.0, 1e-9, "the largest change: full colour");
	cr_expect_gt(channel(flame_colour(&f, hot), 0), channel(flame_colour(&f, hot), 16) + 100,
		     "shrinkage is blue: %06x", flame_colour(&f, hot));
	cr_expect_gt(channel(flame_colour(&f, other), 16), channel(flame_colour(&f, other), 0) + 100,
		     "growth is red: %06x", flame_colour(&f, other));
	cr_expect_eq(flame_colour(&f, same), 0xe8e8e8u, "no change: neutral");
	cr_expect_eq(flame_colour(&f, root), 0xe8e8e8u, "100 %% on both sides");
	/* fresh grew 10 points, under other's 24: red, but paler */
	cr_expect_gt(channel(flame_colour(&f, fresh), 16), channel(flame_colour(&f, fresh), 0));
	cr_expect_gt(channel(flame_colour(&f, fresh), 8), channel(flame_colour(&f, other), 8) + 40);
	/* gone: kept though 0 after, counted once (not its child) */
	cr_expect(flame_kept(&f, gone));
	cr_expect_eq(f.gone_nodes, 1);
	cr_expect_eq(f.gone_value, 200);
	cr_expect_gt(channel(flame_colour(&f, gone), 0), channel(flame_colour(&f, gone), 16));
	flame_done(&f);
	calltree_done(&tr.t);
}

Test(flame, differential_pruning_keeps_what_either_side_can_see)
{
	struct tree tr;
	struct flame f;

	/* 1/12: fresh (100 of 1000 after, 0 before) is kept by after's share,
	 * gone and its child (0 after, 200 of 2000 before) by before's; at 1/4
	 * only hot and other (400 after) stay */
	build_diff(&tr, &f, 1.0 / 12);
	cr_expect_eq(f.kept, 7);
	cr_expect_eq(f.pruned_nodes, 0);
	cr_expect_eq(f.gone_nodes, 1);
	flame_done(&f);
	calltree_done(&tr.t);
	build_diff(&tr, &f, 1.0 / 4);
	cr_expect_eq(f.kept, 3);
	cr_expect_eq(f.pruned_nodes, 4);
	cr_expect_eq(f.pruned_value, 200, "after's value of fresh and same");
	cr_expect_eq(f.pruned_before_value, 400, "before's of gone and same");
	cr_expect_eq(f.gone_nodes, 0, "gone is too narrow to be drawn at all");
	flame_done(&f);
	calltree_done(&tr.t);
}

/* --- the SVG ------------------------------------------------------------------ */

struct buf {
	char *s;
	size_t n;
};

static void put(void *ctx, const char *s, size_t n)
{
	struct buf *b = ctx;

	b->s = realloc(b->s, b->n + n + 1);
	cr_assert_not_null(b->s);
	memcpy(b->s + b->n, s, n);
	b->n += n;
	b->s[b->n] = '\0';
}

static char *svg_of(const struct flame *f)
{
	struct buf b = { 0 };

	cr_assert_eq(flame_svg_write(f, &(struct flame_out){ .put = put, .ctx = &b }), 0);
	cr_assert_not_null(b.s);
	return b.s;
}

static bool valid_utf8(const char *s)
{
	size_t n = strlen(s);

	for (size_t i = 0; i < n;) {
		uint32_t cp;
		size_t k = utf8_len((const unsigned char *)s + i, n - i, &cp);

		if (!k)
			return false;
		i += k;
	}
	return true;
}

/* The width of the <rect> after the first title that starts with prefix. */
static double rect_width(const char *svg, const char *prefix)
{
	char key[128];
	const char *at, *w;

	snprintf(key, sizeof(key), "<title>%s", prefix);
	at = strstr(svg, key);
	cr_assert_not_null(at, "no frame %s", prefix);
	w = strstr(at, "width=\"");
	cr_assert_not_null(w);
	return strtod(w + 7, NULL);
}

Test(flame, svg_holds_any_name_well_formed)
{
	/* XML specials, a script, a control byte, a stray byte, U+FFFE, and a
	 * long multibyte name its box must cut between characters */
	static const char evil[] = "</title><script>x()</script> a&b \"q\" 'q' \x01 \xff \xef\xbf\xbe <!-- ]]>";
	static const char wide[] = "\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9"
				   "\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9";
	struct tree tr;
	struct flame f;
	const uint32_t a[] = { 1, 2, 0 }, b[] = { 1, 3, 0 };
	char *svg;

	calltree_init(&tr.t);
	add(&tr, a, 970, 0);
	add(&tr, b, 30, 0); /* 30/1000 of 1180 px: 35.4, room for "\xc3\xa9\xc3\xa9.." */
	cr_assert_eq(calltree_link(&tr.t), 0);
	cr_assert_eq(flame_init(&f, &tr.t, (struct flame_opts[]){ opts(1000, FLAME_SVG_MIN_SHARE) }), 0);
	cr_assert_eq(flame_module(&f, "/opt/a&b/<lib>.so"), 1);
	for (uint32_t i = 0; i < tr.t.n; i++) {
		const char *name = tr.t.nodes[i].frame == 2 ? evil : tr.t.nodes[i].frame == 3 ? wide : "main";

		cr_assert_eq(flame_text(&f, name, strlen(name)), 0);
		f.node_name[i] = (uint32_t)flame_name_end(&f, 0, 1);
	}
	cr_assert_eq(flame_finish(&f), 0);
	svg = svg_of(&f);
	cr_expect(strncmp(svg, "<?xml version=\"1.0\" encoding=\"UTF-8\"", 36) == 0);
	cr_expect(strstr(svg, "<svg xmlns=\"http://www.w3.org/2000/svg\"") != NULL);
	cr_expect_eq(count(svg, "<script"), 0, "the name's script is text");
	cr_expect_eq(count(svg, "<!--"), 0);
	cr_expect_eq(count(svg, "</title><script"), 0);
	cr_expect(strstr(svg, "&lt;/title&gt;&lt;script&gt;x()&lt;/script&gt; a&amp;b &quot;q&quot; "
			      "&apos;q&apos; \xef\xbf\xbd \xef\xbf\xbd \xef\xbf\xbd &lt;!-- ]]&gt;") != NULL,
		  "the name, escaped, with U+FFFD for what XML cannot hold");
	cr_expect(strstr(svg, "/opt/a&amp;b/&lt;lib&gt;.so") != NULL, "the module, escaped");
	cr_expect(valid_utf8(svg), "a label cut inside a character");
	cr_expect_eq(strchr(svg, '\x01'), NULL);
	cr_expect(strstr(svg, ">\xc3\xa9\xc3\xa9..</text>") != NULL, "the label cut after 2 characters");
	/* main is the whole of all, the evil frame 97 % of it */
	cr_expect_float_eq(rect_width(svg, "main\n"), 1180 - 0.5, 0.01);
	cr_expect_float_eq(rect_width(svg, "&lt;/title&gt;&lt;script&gt;x()"), 0.97 * 1180 - 0.5, 0.01);
	cr_expect_eq(count(svg, "<g>"), 4, "all, main and its two callees");
	free(svg);
	flame_done(&f);
	calltree_done(&tr.t);
}

Test(flame, differential_svg_says_both_sides_and_what_before_alone_had)
{
	struct tree tr;
	struct flame f;
	char *svg, *title;

	build_diff(&tr, &f, 0);
	svg = svg_of(&f);
	cr_expect(strstr(svg, "perfd differential flame graph") != NULL);
	cr_expect(strstr(svg, "widths of AFTER, after.folded (1,000 samples)") != NULL, "%.600s", svg);
	cr_expect(strstr(svg, "since BEFORE, before.pb.gz (2,000 samples)") != NULL);
	cr_expect(strstr(svg, "full colour at 24.00 points") != NULL);
	cr_expect(strstr(svg, "1 frame is in BEFORE only (together 10.00% of BEFORE)") != NULL);
	title = strstr(svg, "<title>f2\n");
	cr_assert_not_null(title);
	cr_expect(strncmp(title, "<title>f2\npython\nafter:  total 400 samples (40.00%), self 400 samples "
				 "(40.00%)\nbefore: total 1,280 samples (64.00%), self 1,280 samples (64.00%)\n"
				 "change: total -24.00 points, self -24.00 points</title>", 180) == 0,
		  "%.300s", title);
	title = strstr(svg, "<title>f1\n");
	cr_assert_not_null(title);
	cr_expect(strstr(title, "in BEFORE only, below it: 1 frame, 10.00% of BEFORE: f4 (10.00%)</title>") != NULL,
		  "%.500s", title);
	cr_expect_null(strstr(svg, "<title>f4\n"), "a frame of width 0 is not drawn");
	cr_expect_null(strstr(svg, "<title>f5\n"));
	free(svg);
	flame_done(&f);
	calltree_done(&tr.t);
}

/* What a page writer asked to reserve and then put. */
struct sized {
	struct buf b;
	size_t reserved;
	unsigned reserves, puts_before;
};

static void sized_put(void *ctx, const char *s, size_t n)
{
	put(&((struct sized *)ctx)->b, s, n);
}

static bool sized_reserve(void *ctx, size_t n)
{
	struct sized *z = ctx;

	z->reserves++;
	z->reserved = n;
	z->puts_before += z->b.n > 0;
	return true;
}

Test(flame, the_page_reserves_its_size_once_before_writing)
{
	struct tree tr;
	struct flame f;
	struct sized z = { 0 };
	uint32_t frames[3] = { 0, 0, 0 };

	calltree_init(&tr.t);
	for (uint32_t i = 0; i < 60; i++) {
		frames[0] = i + 1;
		frames[1] = 1000 + i;
		add(&tr, frames, 1, 0);
	}
	cr_assert_eq(calltree_link(&tr.t), 0);
	cr_assert_eq(flame_init(&f, &tr.t, (struct flame_opts[]){ opts(60, 0) }), 0);
	name_all(&f);
	cr_assert_eq(flame_page_write(&f, &(struct flame_out){ sized_put, &z, sized_reserve }), 0);
	cr_expect_eq(z.reserves, 1, "one reserve for the page, not %u", z.reserves);
	cr_expect_eq(z.puts_before, 0, "the reserve comes before the first byte");
	/* only '<', '>' and '&' in the data grow, by 5 bytes each: none here */
	cr_expect_geq(z.reserved, z.b.n, "reserved %zu for a page of %zu", z.reserved, z.b.n);
	cr_expect_leq(z.reserved, z.b.n + z.b.n / 8, "reserved %zu for a page of %zu", z.reserved, z.b.n);
	free(z.b.s);
	flame_done(&f);
	calltree_done(&tr.t);
}
