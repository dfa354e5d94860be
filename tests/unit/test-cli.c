/* SPDX-License-Identifier: MIT */
/*
 * test-cli.c - perfctl's pure helpers (number parsing, human sizes and
 * durations, escaping) and its wire client, exercised over real sockets.
 *
 * The peer is a thread on the other end of a socketpair or a listening Unix
 * socket that writes canned bytes (whole, split into tiny writes, broken,
 * truncated, 20 MB, nothing at all), so the client is tested against the
 * same kernel paths it meets with perfd.  The subcommand tests run
 * do_snapshot()/do_ps() end to end against such a peer.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <criterion/criterion.h>
#include <criterion/redirect.h>
#include <json-c/json.h>

/* By path: the build puts daemon/ before cli/ on the include path, and the
 * daemon may one day have a header of the same name. */
#include "../../cli/call.h"
#include "../../cli/client.h"
#include "../../cli/format.h"
#include "../../cli/output.h"
#include "../../cli/selection.h"
#include "../../cli/perfctl.h"
#include "../../cli/top.h"
#include "perfd/protocol.h"

/* ---- number parsing ------------------------------------------------ */

Test(parse, int64_accepts_plain_decimals)
{
	int64_t v = 0;

	cr_expect_eq(ctl_parse_int64("42", 1, 100, &v), 0);
	cr_expect_eq(v, 42);
	cr_expect_eq(ctl_parse_int64("-7", -10, 10, &v), 0);
	cr_expect_eq(v, -7);
	cr_expect_eq(ctl_parse_int64("2147483647", 1, INT32_MAX, &v), 0);
	cr_expect_eq(v, INT32_MAX);
	cr_expect_eq(ctl_parse_int64("007", 1, 10, &v), 0);
	cr_expect_eq(v, 7);
}

Test(parse, int64_rejects_junk_and_range)
{
	static const char *const invalid[] = { "", "12abc", "abc", " 1", "1 ", "+1", "0x10",
					       "1.5", "1e3", "--1", "-", "\n1" };
	int64_t v = 99;

	for (size_t i = 0; i < ELEMENTSOF(invalid); i++)
		cr_expect_eq(ctl_parse_int64(invalid[i], INT64_MIN, INT64_MAX, &v), -EINVAL,
			     "'%s' accepted", invalid[i]);
	cr_expect_eq(ctl_parse_int64(NULL, 0, 1, &v), -EINVAL);
	cr_expect_eq(ctl_parse_int64("0", 1, 60, &v), -ERANGE);
	cr_expect_eq(ctl_parse_int64("61", 1, 60, &v), -ERANGE);
	cr_expect_eq(ctl_parse_int64("-1", 1, INT32_MAX, &v), -ERANGE);
	cr_expect_eq(ctl_parse_int64("2147483648", 1, INT32_MAX, &v), -ERANGE);
	cr_expect_eq(ctl_parse_int64("99999999999999999999", INT64_MIN, INT64_MAX, &v), -ERANGE);
	cr_expect_eq(ctl_parse_int64("-99999999999999999999", INT64_MIN, INT64_MAX, &v), -ERANGE);
	cr_expect_eq(v, 99, "output written on failure");
}

Test(parse, seconds)
{
	static const char *const invalid[] = { "", "5s", "abc", " 5", "5 ", "nan", "inf",
					       "-inf", "0x10", "1,5", "5\n" };
	static const char *const out_of_range[] = { "0", "0.0", "-1", "-0", "3600.0001",
						    "3601", "1e9", "1e999", "1e-999" };
	double d = -1;

	cr_expect_eq(ctl_parse_seconds("5", 0, 3600, &d), 0);
	cr_expect_float_eq(d, 5.0, 1e-12);
	cr_expect_eq(ctl_parse_seconds("0.25", 0, 3600, &d), 0);
	cr_expect_float_eq(d, 0.25, 1e-12);
	cr_expect_eq(ctl_parse_seconds(".5", 0, 3600, &d), 0);
	cr_expect_eq(ctl_parse_seconds("1e2", 0, 3600, &d), 0);
	cr_expect_float_eq(d, 100.0, 1e-12);
	cr_expect_eq(ctl_parse_seconds("3600", 0, 3600, &d), 0);

	d = -1;
	for (size_t i = 0; i < ELEMENTSOF(invalid); i++)
		cr_expect_eq(ctl_parse_seconds(invalid[i], 0, 3600, &d), -EINVAL,
			     "'%s' accepted", invalid[i]);
	for (size_t i = 0; i < ELEMENTSOF(out_of_range); i++)
		cr_expect_eq(ctl_parse_seconds(out_of_range[i], 0, 3600, &d), -ERANGE,
			     "'%s' not out of range", out_of_range[i]);
	cr_expect_float_eq(d, -1.0, 1e-12, "output written on failure");
}

/* ---- human formatting ---------------------------------------------- */

/* The longest extension wins: ".speedscope.json" is not ".json". */
Test(format, by_extension)
{
	static const struct {
		const char *path, *format;
	} cases[] = {
		{ "out.folded", "folded" },
		{ "out.json", "json" },
		{ "/tmp/a.b/out.pb.gz", "pprof" },
		{ "out.speedscope.json", "speedscope" },
		{ "dir.speedscope.json/out.json", "json" },
		{ "x.speedscope.json.json", "json" },
		{ "speedscope.json", "json" }, /* ".json" ends it with a stem */
		{ ".speedscope.json", "json" },
		{ "flame.html", "html" },
		{ "flame.svg", "svg" },
		{ ".json", NULL },             /* an extension alone names none */
		{ "out.gz", NULL },
		{ "out", NULL },
		{ "", NULL },
	};

	for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
		const char *f = ctl_format_by_extension(cases[i].path);

		if (cases[i].format)
			cr_expect(f && strcmp(f, cases[i].format) == 0, "%s: %s, not %s",
				  cases[i].path, f ? f : "none", cases[i].format);
		else
			cr_expect_null(f, "%s: %s", cases[i].path, f);
	}
}

Test(format, clock)
{
	char buf[CTL_CLOCK_MAX];

	cr_expect_str_eq(ctl_format_clock(0, buf), "-");
	cr_expect_str_eq(ctl_format_clock(-5, buf), "-");
	cr_expect_str_eq(ctl_format_clock(NAN, buf), "-");
	(void)ctl_format_clock(1700000000.5, buf);
	cr_expect(strlen(buf) == 8 && buf[2] == ':' && buf[5] == ':', "%s", buf);
}

/* ---- top's refresh clock ------------------------------------------- */

Test(top, a_late_refresh_is_not_made_up_for)
{
	/* on time: the next one delay after the one due */
	cr_expect_float_eq(top_next_due(10.0, 10.0, 2.0), 12.0, 1e-9);
	cr_expect_float_eq(top_next_due(10.0, 10.5, 2.0), 12.5, 1e-9, "a late start counts");
	/* a refresh that started 5 s late: the next one 2 s after it, not
	 * the three missed ones at once (due at 12, 14, 16) */
	cr_expect_float_eq(top_next_due(10.0, 15.0, 2.0), 17.0, 1e-9);
}

Test(format, sizes)
{
	static const struct {
		uint64_t bytes;
		const char *text;
	} cases[] = {
		{ 0, "0B" },
		{ 1, "1B" },
		{ 1023, "1023B" },
		{ 1024, "1.0K" },
		{ 1536, "1.5K" },
		{ 1048524, "1023.9K" },
		{ 1048525, "1.0M" },
		{ 12897485, "12.3M" },
		{ 1073741824, "1.0G" },
		{ 5ull << 40, "5.0T" },
		{ UINT64_MAX, "16.0E" },
	};
	char buf[CTL_SIZE_MAX];

	for (size_t i = 0; i < ELEMENTSOF(cases); i++)
		cr_expect_str_eq(ctl_format_size(cases[i].bytes, buf), cases[i].text,
				 "%llu", (unsigned long long)cases[i].bytes);
}

Test(format, durations)
{
	char buf[CTL_DURATION_MAX];

	cr_expect_str_eq(ctl_format_duration(0, buf), "0s");
	cr_expect_str_eq(ctl_format_duration(59.9, buf), "59s");
	cr_expect_str_eq(ctl_format_duration(60, buf), "1m 00s");
	cr_expect_str_eq(ctl_format_duration(187, buf), "3m 07s");
	cr_expect_str_eq(ctl_format_duration(3725, buf), "1h 02m");
	cr_expect_str_eq(ctl_format_duration(90061, buf), "1d 01h");
	cr_expect_str_eq(ctl_format_duration(-1, buf), "-");
	cr_expect_str_eq(ctl_format_duration(NAN, buf), "-");
	cr_expect_str_eq(ctl_format_duration(INFINITY, buf), "-");
	cr_expect_str_eq(ctl_format_duration(1e300, buf), "-");
}

/* ---- escaping ------------------------------------------------------ */

static void expect_escape(const char *in, size_t len, const char *want)
{
	char *got = ctl_escape(in, len);

	cr_assert_not_null(got);
	cr_expect_str_eq(got, want);
	free(got);
}

Test(escape, printable_and_utf8_pass_through)
{
	expect_escape("stress-ng", 9, "stress-ng");
	expect_escape("", 0, "");
	expect_escape("h\xc3\xa9llo \xe2\x82\xac \xf0\x9f\x94\xa5", 15,
		      "h\xc3\xa9llo \xe2\x82\xac \xf0\x9f\x94\xa5");
	expect_escape("\xc2\xa0", 2, "\xc2\xa0"); /* first character after C1 */
}

Test(escape, control_bytes_and_backslash)
{
	expect_escape("a\nb", 3, "a\\x0ab");
	expect_escape("\x1b[31mred", 8, "\\x1b[31mred");
	expect_escape("tab\there\r", 9, "tab\\x09here\\x0d");
	expect_escape("a\0b", 3, "a\\x00b");
	expect_escape("\x7f", 1, "\\x7f");
	expect_escape("back\\slash", 10, "back\\\\slash");
	/* C1 controls (CSI is U+009B) act on some terminals: escaped. */
	expect_escape("\xc2\x9b" "2J", 4, "\\xc2\\x9b2J");
	expect_escape("\xc2\x80", 2, "\\xc2\\x80");
}

Test(escape, invalid_utf8)
{
	expect_escape("\xff", 1, "\\xff");
	expect_escape("\xc0\xaf", 2, "\\xc0\\xaf");             /* overlong '/' */
	expect_escape("\xe0\x80\xaf", 3, "\\xe0\\x80\\xaf");    /* overlong */
	expect_escape("\xed\xa0\x80", 3, "\\xed\\xa0\\x80");    /* surrogate */
	expect_escape("\xf4\x90\x80\x80", 4, "\\xf4\\x90\\x80\\x80"); /* > U+10FFFF */
	expect_escape("\xe2\x82", 2, "\\xe2\\x82");             /* cut short */
	expect_escape("\xe2\x82x", 3, "\\xe2\\x82x");
}

Test(escape, no_byte_sequence_yields_a_control_byte)
{
	/* Every pair of bytes: the result holds no C0 control, no DEL and no
	 * C1 control in UTF-8 form. */
	for (int a = 0; a < 256; a++)
		for (int b = 0; b < 256; b++) {
			char in[2] = { (char)a, (char)b };
			char *out = ctl_escape(in, 2);

			cr_assert_not_null(out);
			for (const unsigned char *p = (const unsigned char *)out; *p; p++) {
				cr_assert(*p >= 0x20 && *p != 0x7f, "%02x %02x", a, b);
				cr_assert(!(p[0] == 0xc2 && p[1] >= 0x80 && p[1] < 0xa0),
					  "%02x %02x", a, b);
			}
			free(out);
		}
}

/* ---- JSON accessors ------------------------------------------------ */

Test(json, paths_and_counts)
{
	struct json_object *o = json_tokener_parse(
		"{\"a\":{\"b\":{\"c\":7}},\"d\":2.9,\"s\":\"x\\u001by\",\"n\":null,\"t\":\"str\"}");
	char buf[CTL_COUNT_MAX];
	int64_t v;
	double d;
	char *s;

	cr_assert_not_null(o);
	cr_expect_str_eq(ctl_json_count(o, "a.b.c", buf), "7");
	cr_expect_str_eq(ctl_json_count(o, "a.b.missing", buf), "-");
	cr_expect_str_eq(ctl_json_count(o, "a.b.c.deeper", buf), "-");
	cr_expect_str_eq(ctl_json_count(o, "t", buf), "-");
	cr_expect_str_eq(ctl_json_count(o, "n", buf), "-");
	cr_expect(ctl_json_int(o, "d", &v));
	cr_expect_eq(v, 2);
	cr_expect(ctl_json_double(o, "a.b.c", &d));
	cr_expect_float_eq(d, 7.0, 1e-12);
	cr_expect_not(ctl_json_double(o, "t", &d));
	s = ctl_json_string_escaped(o, "s");
	cr_expect_str_eq(s, "x\\x1by");
	free(s);
	s = ctl_json_string_escaped(o, "a");
	cr_expect_str_eq(s, "-");
	free(s);
	json_object_put(o);
}

/* ---- the wire ------------------------------------------------------ */

struct peer {
	int fd;           /* our end of a socketpair, or a listening socket */
	bool listening;   /* accept one connection first */
	bool read_line;   /* read the request line before answering */
	const char *reply;
	size_t reply_len;
	size_t chunk;     /* bytes per write; 0: all at once */
	unsigned hold_ms; /* keep the connection open this long after writing */
	char request[4096];
	pthread_t thread;
};

static void *peer_main(void *arg)
{
	struct peer *p = arg;
	int c = p->listening ? accept4(p->fd, NULL, NULL, SOCK_CLOEXEC) : p->fd;
	size_t off = 0;

	if (c < 0)
		return NULL;
	if (p->read_line) {
		size_t n = 0;

		while (n + 1 < sizeof(p->request)) {
			ssize_t k = read(c, p->request + n, 1);

			if (k <= 0 || p->request[n] == '\n')
				break;
			n++;
		}
		p->request[n] = '\0';
	}
	while (off < p->reply_len) {
		size_t want = p->chunk ? MIN(p->chunk, p->reply_len - off) : p->reply_len - off;
		ssize_t k = send(c, p->reply + off, want, MSG_NOSIGNAL);

		if (k <= 0)
			break;
		off += (size_t)k;
		if (p->chunk)
			(void)usleep(50);
	}
	if (p->hold_ms)
		(void)usleep(p->hold_ms * 1000);
	(void)close(c);
	return NULL;
}

/* Starts a peer on a socketpair; returns the client's end. */
static int peer_pair(struct peer *p, const char *reply, size_t len, size_t chunk)
{
	int sv[2];

	cr_assert_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
	p->fd = sv[1];
	p->reply = reply;
	p->reply_len = len;
	p->chunk = chunk;
	cr_assert_eq(pthread_create(&p->thread, NULL, peer_main, p), 0);
	return sv[0];
}

static void peer_join(struct peer *p)
{
	cr_assert_eq(pthread_join(p->thread, NULL), 0);
	if (p->listening)
		(void)close(p->fd);
}

static int recv_from(const char *reply, size_t len, size_t chunk, int timeout_ms,
		     size_t max, struct json_object **ret)
{
	struct peer p = { 0 };
	int fd = peer_pair(&p, reply, len, chunk);
	int k = ctl_client_recv(fd, timeout_ms, max, ret);

	(void)close(fd);
	peer_join(&p);
	return k;
}

#define REPLY_OK "{\"version\":1,\"ok\":true,\"daemon_version\":\"0.1\",\"cpus\":2}\n"

Test(client, valid_reply)
{
	struct json_object *o = NULL;

	cr_assert_eq(recv_from(REPLY_OK, strlen(REPLY_OK), 0, 5000, 1 << 20, &o), 0);
	cr_expect_str_eq(json_object_get_string(ctl_json_path(o, "daemon_version")), "0.1");
	json_object_put(o);
}

Test(client, reply_split_into_single_bytes)
{
	struct json_object *o = NULL;

	cr_assert_eq(recv_from(REPLY_OK, strlen(REPLY_OK), 1, 5000, 1 << 20, &o), 0);
	cr_expect_eq(json_object_get_int(ctl_json_path(o, "cpus")), 2);
	json_object_put(o);
}

Test(client, bytes_after_the_newline_are_ignored)
{
	const char *reply = "{\"ok\":true}\r\n{\"ok\":false}\ngarbage";
	struct json_object *o = NULL;

	cr_assert_eq(recv_from(reply, strlen(reply), 0, 5000, 1 << 20, &o), 0);
	cr_expect(json_object_get_boolean(ctl_json_path(o, "ok")));
	json_object_put(o);
}

Test(client, broken_replies)
{
	static const struct {
		const char *bytes;
		int error;
	} cases[] = {
		{ "", -ENODATA },
		{ "{\"version\":1,\"ok\":tr", -EPROTO },
		{ "{\"version\":1,\"ok\":true}", -EPROTO }, /* no newline, then EOF */
		{ "{not json\n", -EBADMSG },
		{ "\n", -EBADMSG },
		{ "[1,2]\n", -EBADMSG },
		{ "\"ok\"\n", -EBADMSG },
		{ "42\n", -EBADMSG },
		{ "{}x\n", -EBADMSG },
		{ "{} {}\n", -EBADMSG },
		{ "{\"a\":1\n", -EBADMSG },
		{ "\x01\x02\x1b\xff\n", -EBADMSG },
	};

	for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
		struct json_object *o = NULL;
		int k = recv_from(cases[i].bytes, strlen(cases[i].bytes), 0, 5000, 1 << 20, &o);

		cr_expect_eq(k, cases[i].error, "reply '%s': got %d, want %d", cases[i].bytes,
			     k, cases[i].error);
		cr_expect_null(o);
	}
}

Test(client, nul_inside_the_line_is_rejected)
{
	static const char reply[] = "{\"ok\":true}\0\n";
	struct json_object *o = NULL;

	cr_expect_eq(recv_from(reply, sizeof(reply) - 1, 0, 5000, 1 << 20, &o), -EBADMSG);
}

/* A reply of about 20 MB (a long snapshot): read whole, in order. */
Test(client, reply_of_20_megabytes, .timeout = 60)
{
	const size_t profile_len = 20 * 1024 * 1024;
	const char *head = "{\"version\":1,\"ok\":true,\"profile\":\"";
	const char *tail = "\"}\n";
	size_t hl = strlen(head), tl = strlen(tail), len = hl + profile_len + tl;
	char *reply = malloc(len);
	struct json_object *o = NULL, *profile;
	const char *s;

	cr_assert_not_null(reply);
	memcpy(reply, head, hl);
	for (size_t i = 0; i < profile_len; i++)
		reply[hl + i] = (i % 64 == 63) ? ';' : (char)('a' + i % 26);
	memcpy(reply + hl + profile_len, tail, tl);

	cr_assert_eq(recv_from(reply, len, 64 * 1024 + 7, 30000, CTL_CLIENT_MAX_RESPONSE_BYTES,
			       &o), 0);
	profile = ctl_json_path(o, "profile");
	cr_assert(json_object_is_type(profile, json_type_string));
	cr_assert_eq((size_t)json_object_get_string_len(profile), profile_len);
	s = json_object_get_string(profile);
	cr_expect_eq(memcmp(s, reply + hl, profile_len), 0);
	json_object_put(o);
	free(reply);
}

Test(client, reply_over_the_cap)
{
	char reply[5001];
	struct json_object *o = NULL;

	memset(reply, ' ', sizeof(reply));
	reply[0] = '{';
	reply[sizeof(reply) - 2] = '}';
	reply[sizeof(reply) - 1] = '\n';
	/* 5000 bytes before the newline: one over the cap fails... */
	cr_expect_eq(recv_from(reply, sizeof(reply), 0, 5000, 4999, &o), -EMSGSIZE);
	/* ...and exactly at the cap passes. */
	cr_expect_eq(recv_from(reply, sizeof(reply), 0, 5000, 5000, &o), 0);
	json_object_put(o);
}

Test(client, silent_peer_times_out)
{
	struct peer p = { .hold_ms = 1500 };
	struct json_object *o = NULL;
	int fd = peer_pair(&p, "", 0, 0);

	cr_expect_eq(ctl_client_recv(fd, 100, 1 << 20, &o), -ETIMEDOUT);
	(void)close(fd);
	peer_join(&p);
}

Test(client, strerror_words)
{
	cr_expect_str_eq(ctl_client_strerror(-ENODATA),
			 "perfd closed the connection without answering");
	cr_expect_str_eq(ctl_client_strerror(-ENOENT), strerror(ENOENT));
}

/* A listening socket in a fresh directory, served by one peer. */
struct server {
	char dir[64];
	char path[128];
	struct peer peer;
};

static void server_start(struct server *s, const char *reply)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int fd;

	strcpy(s->dir, "/tmp/perfctl-test-XXXXXX");
	cr_assert_not_null(mkdtemp(s->dir));
	(void)snprintf(s->path, sizeof(s->path), "%s/perfd.sock", s->dir);
	strcpy(sa.sun_path, s->path);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	cr_assert_geq(fd, 0);
	cr_assert_eq(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	cr_assert_eq(listen(fd, 4), 0);

	s->peer.fd = fd;
	s->peer.listening = true;
	s->peer.read_line = true;
	s->peer.reply = reply;
	s->peer.reply_len = strlen(reply);
	cr_assert_eq(pthread_create(&s->peer.thread, NULL, peer_main, &s->peer), 0);
}

static void server_stop(struct server *s)
{
	peer_join(&s->peer);
	(void)unlink(s->path);
	(void)rmdir(s->dir);
}

Test(client, round_trip_over_a_listening_socket)
{
	struct server s = { 0 };
	struct json_object *req = ctl_request_new("ps"), *o = NULL;
	int fd = -1, flags;

	server_start(&s, REPLY_OK);
	cr_assert_not_null(req);
	json_object_object_add(req, "interval", json_object_new_int(5));
	cr_assert_eq(ctl_client_connect(s.path, &fd), 0);
	flags = fcntl(fd, F_GETFD);
	cr_expect(flags & FD_CLOEXEC, "socket is not close-on-exec");
	cr_assert_eq(ctl_client_send(fd, req), 0);
	cr_assert_eq(ctl_client_recv(fd, 5000, 1 << 20, &o), 0);
	(void)close(fd);
	server_stop(&s);

	cr_expect_str_eq(s.peer.request, "{\"version\":1,\"command\":\"ps\",\"interval\":5}");
	json_object_put(o);
	json_object_put(req);
}

Test(client, connect_errors)
{
	char longpath[200];
	int fd = -1;
	struct server s = { 0 };

	cr_expect_eq(ctl_client_connect("/nonexistent/perfd.sock", &fd), -ENOENT);
	memset(longpath, 'a', sizeof(longpath) - 1);
	longpath[0] = '/';
	longpath[sizeof(longpath) - 1] = '\0';
	cr_expect_eq(ctl_client_connect(longpath, &fd), -ENAMETOOLONG);
	cr_expect_eq(ctl_client_connect("", &fd), -ENOENT);
	cr_expect_eq(fd, -1, "fd written on failure");

	/* A socket file nobody listens on any more. */
	server_start(&s, "");
	{
		int c = -1;

		cr_assert_eq(ctl_client_connect(s.path, &c), 0); /* lets the peer finish */
		(void)close(c);
	}
	peer_join(&s.peer);
	cr_expect_eq(ctl_client_connect(s.path, &fd), -ECONNREFUSED);
	(void)unlink(s.path);
	(void)rmdir(s.dir);
}

/* ---- ctl_call and subcommands, end to end ---------------------------- */

Test(call, cannot_connect_message_and_exit_code, .init = cr_redirect_stderr)
{
	struct ctl_env env = { .socket_path = "/nonexistent/perfd.sock" };
	struct json_object *req = ctl_request_new("status"), *o = NULL;

	cr_expect_eq(ctl_call(&env, req, 1000, &o), PERFCTL_EXIT_CONNECT);
	json_object_put(req);
	fflush(stderr);
	cr_expect_stderr_eq_str("perfctl: cannot connect to perfd at /nonexistent/perfd.sock: "
				"No such file or directory \u2014 is perfd running?\n");
}

Test(call, cannot_connect_in_json_mode, .init = cr_redirect_stdout)
{
	struct ctl_env env = { .socket_path = "/nonexistent/perfd.sock", .json = true };
	struct json_object *req = ctl_request_new("status"), *o = NULL;

	cr_expect_eq(ctl_call(&env, req, 1000, &o), PERFCTL_EXIT_CONNECT);
	json_object_put(req);
	fflush(stdout);
	cr_expect_stdout_eq_str("{\"ok\":false,\"error\":{\"code\":\"cannot_connect\",\"message\":"
				"\"cannot connect to perfd at /nonexistent/perfd.sock: No such file "
				"or directory \u2014 is perfd running?\"}}\n");
}

static enum perfctl_exit call_with_reply(const char *reply, struct json_object **ret)
{
	struct server s = { 0 };
	struct ctl_env env = { 0 };
	struct json_object *req = ctl_request_new("status");
	enum perfctl_exit rc;

	server_start(&s, reply);
	env.socket_path = s.path;
	rc = ctl_call(&env, req, 5000, ret);
	server_stop(&s);
	json_object_put(req);
	return rc;
}

Test(call, answers_map_to_exit_codes, .init = cr_redirect_stderr)
{
	static const struct {
		const char *reply;
		enum perfctl_exit rc;
	} cases[] = {
		{ REPLY_OK, PERFCTL_EXIT_OK },
		{ "{\"version\":1,\"ok\":false,\"error\":{\"code\":\"no_such_process\","
		  "\"message\":\"no process 42\"}}\n", PERFCTL_EXIT_NO_PROCESS },
		{ "{\"version\":1,\"ok\":false,\"error\":{\"code\":\"busy\",\"message\":\"busy\"}}\n",
		  PERFCTL_EXIT_FAILURE },
		{ "{\"version\":2,\"ok\":false,\"error\":{\"code\":\"no_such_process\"}}\n",
		  PERFCTL_EXIT_NO_PROCESS },
		{ "{\"version\":1,\"ok\":false}\n", PERFCTL_EXIT_FAILURE },
		{ "{\"version\":2,\"ok\":true}\n", PERFCTL_EXIT_FAILURE },
		{ "{\"ok\":true}\n", PERFCTL_EXIT_FAILURE },
		{ "{\"version\":1,\"ok\":\"yes\"}\n", PERFCTL_EXIT_FAILURE },
		{ "{\"version\":1}\n", PERFCTL_EXIT_FAILURE },
		{ "not json\n", PERFCTL_EXIT_FAILURE },
		{ "", PERFCTL_EXIT_FAILURE },
	};

	for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
		struct json_object *o = NULL;

		cr_expect_eq(call_with_reply(cases[i].reply, &o), cases[i].rc, "reply %s",
			     cases[i].reply);
		cr_expect_eq(o != NULL, cases[i].rc == PERFCTL_EXIT_OK);
		json_object_put(o);
	}
}

Test(call, daemon_error_is_printed_escaped, .init = cr_redirect_stderr)
{
	struct json_object *o = NULL;

	cr_expect_eq(call_with_reply("{\"version\":1,\"ok\":false,\"error\":{\"code\":"
				     "\"no_such_process\",\"message\":\"no process 42 \\u001b[2J\"}}\n",
				     &o),
		     PERFCTL_EXIT_NO_PROCESS);
	fflush(stderr);
	cr_expect_stderr_eq_str("perfctl: no process 42 \\x1b[2J\n");
}

#define SNAPSHOT_REPLY                                                                    \
	"{\"version\":1,\"ok\":true,\"pid\":42,\"comm\":\"burn\",\"duration_seconds\":0.5," \
	"\"samples\":3,\"exited\":false,\"note\":\"no kernel stacks\",\"format\":\"folded\","  \
	"\"profile\":\"burn;main;f 2\\nburn;main;g 1\\n\"}\n"

static enum perfctl_exit run_snapshot(struct server *s, const char *reply, const char *output,
				      bool json)
{
	struct ctl_env env = { .json = json };
	char *argv[] = { "snapshot", "--pid", "42", "--duration", "0.5", "-o", (char *)output,
			 NULL };
	int argc = output ? 7 : 5;
	enum perfctl_exit rc;

	server_start(s, reply);
	env.socket_path = s->path;
	rc = do_snapshot(&env, argc, argv);
	peer_join(&s->peer);
	(void)unlink(s->path);
	return rc;
}

Test(snapshot, profile_to_stdout, .init = cr_redirect_stdout)
{
	struct server s = { 0 };

	cr_redirect_stderr();
	cr_expect_eq(run_snapshot(&s, SNAPSHOT_REPLY, NULL, false), PERFCTL_EXIT_OK);
	(void)rmdir(s.dir);
	cr_expect_str_eq(s.peer.request, "{\"version\":1,\"command\":\"snapshot\",\"pid\":42,"
					 "\"duration\":0.5,\"format\":\"folded\"}");
	fflush(stdout);
	fflush(stderr);
	cr_expect_stdout_eq_str("burn;main;f 2\nburn;main;g 1\n");
	cr_expect_stderr_eq_str("perfctl: note: no kernel stacks\n"
				"perfctl: 3 samples of pid 42 (burn) over 0.5 s\n");
}

/* --lines, --no-lines and --threads become the request's booleans; only
 * the ones given are sent, so an older perfd keeps its defaults. */
Test(snapshot, line_and_thread_options_reach_the_request, .init = cr_redirect_stdout)
{
	struct server s = { 0 };
	struct ctl_env env = { 0 };
	char *argv[] = { "snapshot", "--pid", "42", "--duration", "0.5", "--no-lines",
			 "--threads", "--lines", NULL };

	cr_redirect_stderr();
	server_start(&s, SNAPSHOT_REPLY);
	env.socket_path = s.path;
	cr_expect_eq(do_snapshot(&env, 8, argv), PERFCTL_EXIT_OK);
	peer_join(&s.peer);
	(void)unlink(s.path);
	(void)rmdir(s.dir);
	cr_expect_str_eq(s.peer.request, "{\"version\":1,\"command\":\"snapshot\",\"pid\":42,"
					 "\"duration\":0.5,\"format\":\"folded\",\"lines\":true,"
					 "\"python_lines\":false,\"threads\":true}");
}

Test(snapshot, profile_to_file_is_atomic)
{
	struct server s = { 0 };
	char out[256], tmp[260], buf[128] = { 0 };
	FILE *f;

	cr_redirect_stderr();
	/* Success: the file holds exactly the profile, no .tmp is left. */
	strcpy(s.dir, "");
	{
		char dir[] = "/tmp/perfctl-out-XXXXXX";

		cr_assert_not_null(mkdtemp(dir));
		(void)snprintf(out, sizeof(out), "%s/profile.folded", dir);
		(void)snprintf(tmp, sizeof(tmp), "%s.tmp", out);
		cr_expect_eq(run_snapshot(&s, SNAPSHOT_REPLY, out, false), PERFCTL_EXIT_OK);
		(void)rmdir(s.dir);
		f = fopen(out, "re");
		cr_assert_not_null(f);
		cr_expect_eq(fread(buf, 1, sizeof(buf) - 1, f), 28);
		fclose(f);
		cr_expect_str_eq(buf, "burn;main;f 2\nburn;main;g 1\n");
		cr_expect_eq(access(tmp, F_OK), -1, ".tmp left behind");

		/* Failure: the old file stays as it was and no .tmp appears. */
		memset(&s, 0, sizeof(s));
		cr_expect_eq(run_snapshot(&s, "{\"version\":1,\"ok\":false,\"error\":{\"code\":"
					      "\"no_such_process\",\"message\":\"gone\"}}\n",
					  out, false),
			     PERFCTL_EXIT_NO_PROCESS);
		(void)rmdir(s.dir);
		f = fopen(out, "re");
		cr_assert_not_null(f);
		memset(buf, 0, sizeof(buf));
		cr_expect_eq(fread(buf, 1, sizeof(buf) - 1, f), 28);
		fclose(f);
		cr_expect_eq(access(tmp, F_OK), -1, ".tmp left behind");

		/* A connection closed without an answer: nothing new either. */
		memset(&s, 0, sizeof(s));
		(void)unlink(out);
		cr_expect_eq(run_snapshot(&s, "", out, false), PERFCTL_EXIT_FAILURE);
		(void)rmdir(s.dir);
		cr_expect_eq(access(out, F_OK), -1, "half file created");
		cr_expect_eq(access(tmp, F_OK), -1, ".tmp left behind");
		(void)rmdir(dir);
	}
}

/* -o FILE.pb.gz asks perfd for pprof, as a frame of raw bytes after the
 * answer's line (a text format's request does not say "frame"). */
Test(snapshot, a_binary_format_asks_for_a_frame)
{
	struct server s = { 0 };
	char dir[] = "/tmp/perfctl-out-XXXXXX", out[256];

	cr_redirect_stderr();
	cr_assert_not_null(mkdtemp(dir));
	(void)snprintf(out, sizeof(out), "%s/profile.pb.gz", dir);
	(void)run_snapshot(&s, SNAPSHOT_REPLY, out, false);
	(void)rmdir(s.dir);
	cr_expect_str_eq(s.peer.request, "{\"version\":1,\"command\":\"snapshot\",\"pid\":42,"
					 "\"duration\":0.5,\"format\":\"pprof\",\"frame\":true}");
	(void)unlink(out);
	(void)rmdir(dir);
}

/* -o FILE.speedscope.json asks perfd for speedscope, not json. */
Test(snapshot, output_extension_picks_the_format)
{
	struct server s = { 0 };
	char dir[] = "/tmp/perfctl-out-XXXXXX", out[256];

	cr_redirect_stderr();
	cr_assert_not_null(mkdtemp(dir));
	(void)snprintf(out, sizeof(out), "%s/profile.speedscope.json", dir);
	cr_expect_eq(run_snapshot(&s, SNAPSHOT_REPLY, out, false), PERFCTL_EXIT_OK);
	(void)rmdir(s.dir);
	cr_expect_str_eq(s.peer.request, "{\"version\":1,\"command\":\"snapshot\",\"pid\":42,"
					 "\"duration\":0.5,\"format\":\"speedscope\"}");
	(void)unlink(out);
	(void)rmdir(dir);
}

Test(snapshot, json_prints_the_whole_answer, .init = cr_redirect_stdout)
{
	struct server s = { 0 };

	cr_expect_eq(run_snapshot(&s, SNAPSHOT_REPLY, NULL, true), PERFCTL_EXIT_OK);
	(void)rmdir(s.dir);
	fflush(stdout);
	/* json-c keeps key order and the numbers' original text. */
	cr_expect_stdout_eq_str(SNAPSHOT_REPLY);
}

Test(snapshot, bad_arguments_are_usage_errors, .init = cr_redirect_stderr)
{
	static const char *const cases[][6] = {
		{ "snapshot", "--pid", "12abc", "--duration", "5", NULL },
		{ "snapshot", "--pid", "0", "--duration", "5", NULL },
		{ "snapshot", "--pid", "42", "--duration", "0", NULL },
		{ "snapshot", "--pid", "42", "--duration", "3601", NULL },
		{ "snapshot", "--pid", "42", "--duration", "1h30", NULL }, /* 5s is taken */
		{ "snapshot", "--pid", "42", NULL },
		{ "snapshot", "--duration", "5", NULL },
		{ "snapshot", "--pid", "42", "--duration", NULL },
		{ "snapshot", "--bogus", NULL },
		{ "snapshot", "--pid", "42", "--duration", "5", "extra" },
	};

	for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
		struct ctl_env env = { .socket_path = "/nonexistent/perfd.sock" };
		int argc = 0;

		while (argc < 6 && cases[i][argc])
			argc++;
		cr_expect_eq(do_snapshot(&env, argc, (char **)cases[i]), PERFCTL_EXIT_USAGE,
			     "case %zu", i);
	}
}

Test(ps, table_escapes_comm, .init = cr_redirect_stdout)
{
	struct server s = { 0 };
	struct ctl_env env = { 0 };
	char *argv[] = { "ps", "--interval", "5", NULL };
	const char *reply =
		"{\"version\":1,\"ok\":true,\"interval_seconds\":5,\"processes\":["
		"{\"pid\":1234,\"comm\":\"stress-ng\",\"samples\":490,\"cpu_percent\":98.99,"
		"\"rss_bytes\":12897485,\"peak_rss_bytes\":15000000,\"exited\":false,"
		"\"growing\":true,\"rss_growth_bytes_per_second\":2097152.0,"
		"\"wait_percent\":41.25,\"waits\":{\"page fault\":30.0,\"lock\":11.25},"
		"\"runtime\":\"CPython 3.11.7\"},"
		"{\"pid\":7,\"comm\":\"ev\\u001b[2J\\nil\",\"samples\":1,\"cpu_percent\":0.2,"
		"\"rss_bytes\":512,\"exited\":true,\"growing\":false,"
		"\"rss_growth_bytes_per_second\":99999.0}]}\n";

	server_start(&s, reply);
	env.socket_path = s.path;
	cr_expect_eq(do_ps(&env, 3, argv), PERFCTL_EXIT_OK);
	server_stop(&s);
	cr_expect_str_eq(s.peer.request, "{\"version\":1,\"command\":\"ps\",\"interval\":5}");
	fflush(stdout);
	/* a steady rise is marked with its rate; an unmarked one is not; the
	 * first wait is what it waited for, in one word */
	cr_expect_stdout_eq_str("    PID COMM               SAMPLES   %CPU  %WAIT WAITING         RSS     PEAK   GROWTH/s  RUNTIME\n"
				"   1234 stress-ng              490   99.0   41.2 page-fault    12.3M    14.3M     +2.0M!  CPython 3.11.7\n"
				"      7 ev\\x1b[2J\\x0ail          1    0.2      - -              512B        -          -  -  (exited)\n");
}

/* --from/--to: RFC 3339, Unix seconds, local time (here UTC) and a time
 * ago, each to the second it means; what is none of them is refused. */
Test(selection, times_as_people_write_them)
{
	struct tm day = { .tm_year = 2026 - 1900, .tm_mon = 11, .tm_mday = 5, .tm_hour = 15 };
	double now, t = 0;

	setenv("TZ", "UTC", 1);
	tzset();
	now = (double)timegm(&day); /* 2026-12-05 15:00:00 UTC */

	cr_expect_eq(ctl_parse_time("-15m", &t, now), 0);
	cr_expect_float_eq(t, now - 900, 1e-6);
	cr_expect_eq(ctl_parse_time("-1h30m", &t, now), 0);
	cr_expect_float_eq(t, now - 5400, 1e-6);
	cr_expect_eq(ctl_parse_time("2026-12-05 14:03", &t, now), 0);
	cr_expect_float_eq(t, now - 57 * 60, 1e-6);
	cr_expect_eq(ctl_parse_time("2026-12-05T14:03:30Z", &t, now), 0);
	cr_expect_float_eq(t, now - 57 * 60 + 30, 1e-6);
	cr_expect_eq(ctl_parse_time("2026-12-05T15:03:30+01:00", &t, now), 0);
	cr_expect_float_eq(t, now - 57 * 60 + 30, 1e-6);
	/* a time of day: today's, or yesterday's when today's is to come */
	cr_expect_eq(ctl_parse_time("14:03", &t, now), 0);
	cr_expect_float_eq(t, now - 57 * 60, 1e-6);
	cr_expect_eq(ctl_parse_time("16:00:00", &t, now), 0);
	cr_expect_float_eq(t, now + 3600 - 86400, 1e-6);
	cr_expect_eq(ctl_parse_time("1764946980", &t, now), 0);
	cr_expect_float_eq(t, 1764946980, 1e-6);

	t = 7;
	static const char *const bad[] = { "-", "-x", "-1h30", "14:03Z", "2026-12-05 14:03 x",
					   "yesterday", "", "-15m ago" };
	for (size_t i = 0; i < ELEMENTSOF(bad); i++)
		cr_expect_eq(ctl_parse_time(bad[i], &t, now), -EINVAL, "'%s' taken", bad[i]);
	cr_expect_eq(t, 7, "a refusal wrote its output");
}
