/* SPDX-License-Identifier: MIT */
/* config.c - see config.h for the design: one table, every source. */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/duration.h"
#include "base/jsonw.h"
#include "collect/sampler.h"
#include "collect/tiers.h"
#include "config.h"
#include "export/http.h"
#include "perfd/macro.h"
#include "perfd/protocol.h"

enum row_type {
	T_STRING,   /* a non-empty text */
	T_UINT,     /* a whole number in [min, max] */
	T_BYTES,    /* a size: a whole number with K, M or G, in [min, max] bytes */
	T_DURATION, /* 30s, 10m, 1h, 7d: whole seconds in [min, max] */
	T_BOOL,     /* a flag on the command line, yes/no in the file */
	T_LABEL,    /* KEY=VALUE, one more each time */
	T_REFUSE,   /* feature names, comma-separated, as PERFD_REFUSE_* bits */
	/* the command line only */
	T_CONFIG,
	T_HELP,
	T_VERSION,
};

enum {
	R_RELOAD = 1 << 0, /* SIGHUP applies a new value */
	R_SECRET = 1 << 1, /* status says "(set)", never the value */
	R_POW2 = 1 << 2,   /* a power of two */
	R_URL = 1 << 3,    /* status shows it without user:password@ */
	R_CMDLINE = 1 << 4, /* the command line only: not in the file, nor in status */
	R_PRIVATE = 1 << 5, /* status shows it to root only */
};

struct row {
	const char *name;
	const char *arg; /* the value's name in --help; NULL: a flag */
	enum row_type type;
	size_t offset;   /* into struct config */
	uint64_t min, max;
	unsigned flags;
	const char *def; /* the default, as it would be written; NULL: unset */
	const char *help;
};

/* The labels perfd puts on every exported profile itself (exporter.c,
 * and the pprof and OTLP encoders' per-sample labels): a label of the same
 * key would give the profile two values for it, so it is refused.
 * service_name is not one of them: it names the service, and setting it is
 * how a user renames one. */
static const char *const builtin_labels[] = { "hostname", "pid", "tid", "comm", "unit", "cgroup" };
#define BUILTIN_LABELS_TEXT "hostname, pid, tid, comm, unit or cgroup"

#define OFF(field) offsetof(struct config, field)
#define EXP(field) offsetof(struct config, export.field)
#define MIB_MAX 65536

/* The options of an HTTP exporter (struct export_http): PREFIX-url and
 * its tenant, credentials, TLS and timeout, for the backend WHO. */
#define HTTP_ROWS(prefix, field, who, url_help)                                                     \
	{ prefix "-url", "URL", T_STRING, EXP(field.url), 0, 0, R_RELOAD | R_URL, NULL, url_help }, \
	{ prefix "-tenant", "ID", T_STRING, EXP(field.tenant), 0, 0, R_RELOAD | R_PRIVATE, NULL,    \
	  "send X-Scope-OrgID: ID to " who },                                                       \
	{ prefix "-bearer-token", "TOKEN", T_STRING, EXP(field.bearer_token), 0, 0,                 \
	  R_RELOAD | R_SECRET, NULL, "send Authorization: Bearer TOKEN to " who },                  \
	{ prefix "-basic-auth", "USER:PASSWORD", T_STRING, EXP(field.basic_auth), 0, 0,             \
	  R_RELOAD | R_SECRET, NULL, "authenticate to " who " with HTTP basic auth" },              \
	{ prefix "-ca-file", "PATH", T_STRING, EXP(field.ca_file), 0, 0, R_RELOAD, NULL,            \
	  "verify the certificate of " who " against PATH" },                                       \
	{ prefix "-insecure", NULL, T_BOOL, EXP(field.insecure), 0, 0, R_RELOAD, NULL,              \
	  "do not verify the certificate of " who },                                                \
	{ prefix "-timeout", "DURATION", T_DURATION, EXP(field.timeout_s), 1, 300, R_RELOAD, "10s", \
	  "give up on one request to " who " after DURATION (it is retried)" }

static const struct row rows[] = {
	{ "config", "PATH", T_CONFIG, 0, 0, 0, 0, NULL,
	  "read options from PATH (default " PERFD_DEFAULT_CONFIG ", if it exists)" },
	{ "socket", "PATH", T_STRING, OFF(socket_path), 0, 0, 0, NULL,
	  "listen on PATH (default $" PERFD_SOCKET_ENV " or " PERFD_DEFAULT_SOCKET ")" },
	{ "frequency", "HZ", T_UINT, OFF(frequency_hz), 1, 10000000, R_RELOAD, "99",
	  "samples per second per CPU, at random instants: one in each period of 1/HZ" },
	{ "fixed-period", NULL, T_BOOL, OFF(fixed_period), 0, 0, 0, NULL,
	  "sample at a fixed period of 1/HZ instead (a workload repeating at that period is then "
	  "seen at one phase)" },
	{ "max-processes", "N", T_UINT, OFF(max_processes), 1, 1ULL << 32, 0, "4096", "processes kept" },
	{ "max-stacks", "N", T_UINT, OFF(max_stacks), 1, 1ULL << 32, 0, "200000", "unique stacks kept" },
	{ "max-frames", "N", T_UINT, OFF(max_frames), 1, 1ULL << 32, 0, "8000000",
	  "frames kept in all stacks" },
	{ "retention", "DURATION", T_DURATION, OFF(retention_s), 1, PERFD_MAX_RETENTION_SECONDS, 0, "1h",
	  "how long profiles are kept: 30s, 10m, 1h" },
	{ "max-memory", "MIB", T_UINT, OFF(max_memory_mib), 4, MIB_MAX, 0, "64",
	  "cap on everything the profile store holds" },
	{ "memory-sample-bytes", "SIZE", T_BYTES, OFF(memory_sample_bytes), 4096, 1ULL << 30, 0, "4M",
	  "mean resident-memory growth between two memory samples, e.g. 512K" },
	{ "no-memory", NULL, T_BOOL, OFF(no_memory), 0, 0, 0, NULL, "do not sample memory growth" },
	{ "offcpu-rate", "N", T_UINT, OFF(offcpu_rate), 1, 1000000, 0, "500",
	  "off-CPU stacks taken per CPU per second, about; more blocks are sampled (an unbiased estimate)" },
	{ "no-offcpu", NULL, T_BOOL, OFF(no_offcpu), 0, 0, 0, NULL, "do not record off-CPU time" },
	{ "ringbuf-mib", "N", T_UINT, OFF(ringbuf_mib), 1, 1024, R_POW2, NULL,
	  "BPF ring buffer size, a power of two (default: 1 KiB x frequency x CPUs, 1 to 64)" },
	{ "unwind-mib", "N", T_UINT, OFF(unwind_mib), 0, 1024, 0, "16",
	  "kernel memory for unwind tables, 0 for frame pointers only" },
	{ "unwind-build-cpu-ms", "MS", T_UINT, OFF(unwind_build_cpu_ms), 100, 3600000, 0, "10000",
	  "CPU time one binary's unwind table may take to build before it is given up" },
	{ "no-demangle", NULL, T_BOOL, OFF(no_demangle), 0, 0, 0, NULL,
	  "print C++ and Rust symbols as they are mangled" },
	{ "no-python", NULL, T_BOOL, OFF(no_python), 0, 0, 0, NULL,
	  "do not read Python frames (CPython processes show their native frames only)" },
	{ "debug-dir", "DIR", T_STRING, OFF(debug_dir), 0, 0, 0, NULL,
	  "separate debug files (default /usr/lib/debug)" },
	{ "symbol-cache-mib", "N", T_UINT, OFF(symbol_cache_mib), 1, MIB_MAX, 0, NULL,
	  "parsed symbol tables kept in memory (default 256)" },
	{ "state-dir", "DIR", T_STRING, OFF(state_dir), 0, 0, R_PRIVATE, NULL,
	  "keep the profile store on disk in DIR, read back at start (default /var/lib/perfd)" },
	{ "state-max-bytes", "SIZE", T_BYTES, OFF(state_max_bytes), 1ULL << 20, 1ULL << 50, 0, "256M",
	  "disk the state directory may take; each 5-minute segment a share of it, and each "
	  "user a share of a segment" },
	{ "no-state", NULL, T_BOOL, OFF(no_state), 0, 0, 0, NULL,
	  "keep profiles in memory only: a restart loses them" },
	{ "max-modules", "N", T_UINT, OFF(max_modules), 16, 65532, 0, "65532",
	  "binaries and JIT maps known at once; ids nothing refers to any more are given back" },
	{ "max-module-fds", "N", T_UINT, OFF(max_module_fds), 16, 65536, 0, "512",
	  "descriptors of binaries, debug files and JIT maps open at once (the least recently "
	  "used are closed, and opened again when needed)" },
	{ "client-idle-timeout", "DURATION", T_DURATION, OFF(client_idle_timeout_s), 1, 86400, 0, "2m",
	  "close a connection with no request in flight that neither asked nor read for DURATION" },
	{ "metrics-address", "HOST:PORT", T_STRING, OFF(metrics_address), 0, 0, 0, NULL,
	  "serve perfd's own counters at http://HOST:PORT/metrics in the Prometheus format "
	  "(:PORT: every address; off by default)" },
	{ "verbose", NULL, T_BOOL, OFF(verbose), 0, 0, R_RELOAD, NULL,
	  "log debug messages, libbpf's included" },
	{ "interval", "DURATION", T_DURATION, EXP(interval_s), 1, 3600, R_RELOAD, "60s",
	  "export each process's profiles every DURATION" },
	{ "output-dir", "DIR", T_STRING, EXP(output_dir), 0, 0, R_RELOAD | R_PRIVATE, NULL,
	  "write each interval's profiles there as pprof files" },
	{ "output-max-age", "DURATION", T_DURATION, EXP(output_max_age_s), 0, 366 * 86400ULL, R_RELOAD,
	  "1d", "remove files older than DURATION, 0 to keep them" },
	{ "output-max-bytes", "SIZE", T_BYTES, EXP(output_max_bytes), 0, 1ULL << 50, R_RELOAD, "1G",
	  "remove the oldest files past SIZE in all, 0 for no limit" },
	HTTP_ROWS("push", push, "Pyroscope",
		  "push each interval's profiles to Pyroscope at URL (http://host:4040)"),
	HTTP_ROWS("otlp", otlp, "the OTLP receiver",
		  "send each interval's profiles as OTLP to URL/v1development/profiles (http://collector:4318)"),
	{ "export-queue-bytes", "SIZE", T_BYTES, EXP(queue_max_bytes), 4096, 1ULL << 30, R_RELOAD, "16M",
	  "profiles waiting for each exporter, past which the oldest are dropped" },
	{ "label", "KEY=VALUE", T_LABEL, 0, 0, 0, R_RELOAD, NULL,
	  "add a label to every exported profile (repeatable; not " BUILTIN_LABELS_TEXT ")" },
	{ "check", NULL, T_BOOL, OFF(check), 0, 0, R_CMDLINE, NULL,
	  "load the BPF programs as perfd would, unload them and say which features this kernel "
	  "allows and what each program costs the verifier (exit 0: all of them)" },
	/* Test-only, so not in --help: makes the verifier refuse the programs
	 * loaded with these features (tables, python, memory, frame-pointers),
	 * to drive the loader down its ladder (collect/tiers.h) on any kernel. */
	{ "test-refuse", "FEATURES", T_REFUSE, OFF(test_refuse), 0, 0, R_CMDLINE, NULL, NULL },
	{ "help", NULL, T_HELP, 0, 0, 0, 0, NULL, NULL },
	{ "version", NULL, T_VERSION, 0, 0, 0, 0, NULL, NULL },
};

static bool row_in_file(const struct row *r)
{
	return r->type < T_CONFIG && !(r->flags & R_CMDLINE);
}

#define FIELD(c, r, type) ((type *)((char *)(c) + (r)->offset))
#define CFIELD(c, r, type) ((const type *)((const char *)(c) + (r)->offset))

/* --- values ------------------------------------------------------------ */

static int fail(char *err, size_t len, const char *fmt, ...) _printf_(3, 4);
static int fail(char *err, size_t len, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(err, len, fmt, ap);
	va_end(ap);
	return -EINVAL;
}

/* "4096", "512K", "1G" as a byte count. */
static int parse_size(const char *s, uint64_t *ret)
{
	uint64_t v;
	char *end;

	if (!isdigit((unsigned char)s[0]))
		return -EINVAL;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno)
		return -ERANGE;
	for (const char *u = "KMG"; *u; u++) {
		if (toupper((unsigned char)*end) != *u)
			continue;
		unsigned shift = 10 * (unsigned)(u - "KMG" + 1);

		if (v > (UINT64_MAX >> shift))
			return -ERANGE;
		v <<= shift;
		end++;
		break;
	}
	if (*end)
		return -EINVAL;
	*ret = v;
	return 0;
}

static int parse_bool(const char *s, bool *ret)
{
	static const char *const yes[] = { "yes", "true", "on", "1" }, *const no[] = { "no", "false", "off", "0" };

	for (size_t i = 0; i < ELEMENTSOF(yes); i++) {
		if (!strcasecmp(s, yes[i])) {
			*ret = true;
			return 0;
		}
		if (!strcasecmp(s, no[i])) {
			*ret = false;
			return 0;
		}
	}
	return -EINVAL;
}

static bool label_key_builtin(const char *k, size_t n)
{
	for (size_t i = 0; i < ELEMENTSOF(builtin_labels); i++)
		if (strlen(builtin_labels[i]) == n && !strncmp(builtin_labels[i], k, n))
			return true;
	return false;
}

static bool label_key_ok(const char *k, size_t n)
{
	if (n == 0 || n > EXPORT_LABEL_KEY_MAX || isdigit((unsigned char)k[0]))
		return false;
	for (size_t i = 0; i < n; i++)
		if (!isalnum((unsigned char)k[i]) && k[i] != '_')
			return false;
	return true;
}

/* Label values go into Pyroscope's "name{k=v,...}" as they are. */
static bool label_value_ok(const char *v)
{
	size_t n = strlen(v);

	if (n == 0 || n > EXPORT_LABEL_VALUE_MAX)
		return false;
	for (size_t i = 0; i < n; i++)
		if ((unsigned char)v[i] < 0x20 || v[i] == 0x7f || strchr(",{}=\"", v[i]))
			return false;
	return true;
}

static int set_label(struct export_opts *e, const char *value, char *err, size_t len)
{
	const char *eq = strchr(value, '=');
	struct export_label *l;
	size_t i;

	if (!eq || !label_key_ok(value, (size_t)(eq - value)))
		return fail(err, len, "takes KEY=VALUE with a KEY of letters, digits and '_' (at most %d), not '%s'",
			    EXPORT_LABEL_KEY_MAX, value);
	if (label_key_builtin(value, (size_t)(eq - value)))
		return fail(err, len, "takes a KEY other than " BUILTIN_LABELS_TEXT ", which perfd sets itself, not '%.*s'",
			    (int)(eq - value), value);
	if (!label_value_ok(eq + 1))
		return fail(err, len, "takes a VALUE of 1 to %d printable characters without , { } = or \", not '%s'",
			    EXPORT_LABEL_VALUE_MAX, eq + 1);
	for (i = 0; i < e->n_labels; i++)
		if (strlen(e->labels[i].key) == (size_t)(eq - value) &&
		    !strncmp(e->labels[i].key, value, (size_t)(eq - value)))
			break;
	if (i == e->n_labels) {
		if (e->n_labels == EXPORT_MAX_LABELS)
			return fail(err, len, "is given more than %d times", EXPORT_MAX_LABELS);
		e->n_labels++;
	}
	l = &e->labels[i];
	snprintf(l->key, sizeof(l->key), "%.*s", (int)(eq - value), value);
	snprintf(l->value, sizeof(l->value), "%s", eq + 1);
	return 0;
}

/* Sets row r of c from text.  err gets what is wrong, to follow the
 * option's name ("takes ..."). */
static int row_set(const struct row *r, struct config *c, const char *value, char *err, size_t len)
{
	uint64_t v;
	double secs;
	char *end;

	switch (r->type) {
	case T_STRING: {
		char *s;

		if (!value[0])
			return fail(err, len, "needs a value");
		s = strdup(value);
		if (!s)
			return -ENOMEM;
		free(*FIELD(c, r, char *));
		*FIELD(c, r, char *) = s;
		return 0;
	}
	case T_UINT:
		errno = 0;
		v = isdigit((unsigned char)value[0]) ? strtoull(value, &end, 10) : 0;
		if (!isdigit((unsigned char)value[0]) || errno || *end || v < r->min || v > r->max ||
		    ((r->flags & R_POW2) && (v & (v - 1))))
			return fail(err, len, "takes a%s number from %" PRIu64 " to %" PRIu64 ", not '%s'",
				    r->flags & R_POW2 ? " power-of-two" : " whole", r->min, r->max, value);
		*FIELD(c, r, uint64_t) = v;
		return 0;
	case T_BYTES:
		if (parse_size(value, &v) < 0 || v < r->min || v > r->max)
			return fail(err, len, "takes a size from %" PRIu64 " to %" PRIu64 " bytes (512K, 4M, 1G), not '%s'",
				    r->min, r->max, value);
		*FIELD(c, r, uint64_t) = v;
		return 0;
	case T_DURATION:
		if (!strcmp(value, "0"))
			secs = 0;
		else if (parse_duration_seconds(value, &secs) < 0)
			secs = -1;
		if (secs < (double)r->min || secs > (double)r->max || secs != (double)(uint64_t)secs)
			return fail(err, len, "takes whole seconds from %" PRIu64 " to %" PRIu64 " (30s, 10m, 1h, 7d), not '%s'",
				    r->min, r->max, value);
		*FIELD(c, r, uint64_t) = (uint64_t)secs;
		return 0;
	case T_BOOL: {
		bool b;

		if (parse_bool(value, &b) < 0)
			return fail(err, len, "takes yes or no, not '%s'", value);
		*FIELD(c, r, bool) = b;
		return 0;
	}
	case T_LABEL:
		return set_label(&c->export, value, err, len);
	case T_REFUSE:
		if (tier_parse_refuse(value, FIELD(c, r, uint32_t)) < 0)
			return fail(err, len, "takes tables, python, memory or frame-pointers, comma-separated, "
				    "not '%s'", value);
		return 0;
	default:
		return fail(err, len, "can only be given on the command line");
	}
}

/* --- the command line -------------------------------------------------- */

struct config_arg {
	const struct row *row;
	const char *value;
};

struct config_args {
	const char *config_path; /* --config; NULL: the default, if it exists */
	struct config_arg *list;
	size_t n;
};

struct config_args *config_args_free(struct config_args *a)
{
	if (a) {
		free(a->list);
		free(a);
	}
	return NULL;
}

int config_args_parse(int argc, char **argv, struct config_args **ret, char *err, size_t errlen)
{
	_cleanup_free_ struct option *options = calloc(ELEMENTSOF(rows) + 1, sizeof(*options));
	struct config_args *a = calloc(1, sizeof(*a));
	int c;

	if (!options || !a || !(a->list = calloc((size_t)argc + 1, sizeof(*a->list)))) {
		config_args_free(a);
		return fail(err, errlen, "out of memory");
	}
	for (size_t i = 0; i < ELEMENTSOF(rows); i++)
		options[i] = (struct option){ rows[i].name, rows[i].arg ? required_argument : no_argument,
					      NULL, (int)i + 256 };
	optind = 0;
	opterr = 0;
	while ((c = getopt_long(argc, argv, ":", options, NULL)) >= 0) {
		const struct row *r;

		if (c == '?' || c == ':') {
			const char *what = optopt >= 256 ? rows[optopt - 256].name : argv[optind - 1];

			config_args_free(a);
			return fail(err, errlen, c == ':' ? "--%s needs a value" : "unknown option '%s'",
				    what);
		}
		r = &rows[c - 256];
		if (r->type == T_HELP || r->type == T_VERSION) {
			config_args_free(a);
			return r->type == T_HELP ? CONFIG_ARGS_HELP : CONFIG_ARGS_VERSION;
		}
		if (r->type == T_CONFIG) {
			if (!optarg[0]) {
				config_args_free(a);
				return fail(err, errlen, "--config needs a path");
			}
			a->config_path = optarg;
			continue;
		}
		a->list[a->n++] = (struct config_arg){ r, r->arg ? optarg : "yes" };
	}
	if (optind < argc) {
		config_args_free(a);
		return fail(err, errlen, "unexpected argument '%s'", argv[optind]);
	}
	*ret = a;
	return CONFIG_ARGS_RUN;
}

void config_help(FILE *f)
{
	for (size_t i = 0; i < ELEMENTSOF(rows); i++) {
		const struct row *r = &rows[i];
		char left[64];

		if (!r->help)
			continue;
		snprintf(left, sizeof(left), "--%s%s%s", r->name, r->arg ? " " : "", r->arg ? r->arg : "");
		fprintf(f, "  %-28s %s", left, r->help);
		if (r->def)
			fprintf(f, " (default %s)", r->def);
		fputc('\n', f);
	}
	fprintf(f, "  %-28s %s\n", "--help, --version", "");
}

/* --- the file ---------------------------------------------------------- */

static const struct row *row_find(const char *name)
{
	for (size_t i = 0; i < ELEMENTSOF(rows); i++)
		if (!strcmp(rows[i].name, name))
			return &rows[i];
	return NULL;
}

static char *strip(char *s)
{
	char *e;

	while (isspace((unsigned char)*s))
		s++;
	e = s + strlen(s);
	while (e > s && isspace((unsigned char)e[-1]))
		*--e = '\0';
	return s;
}

/* Reads the file's whole text (at most CONFIG_MAX_FILE_BYTES). */
static int read_file(const char *path, char **ret, char *err, size_t len)
{
	_cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
	_cleanup_free_ char *text = NULL;
	struct stat st;
	size_t n = 0, cap;

	if (fd < 0)
		return -errno;
	if (fstat(fd, &st) < 0)
		return -errno;
	if (!S_ISREG(st.st_mode)) {
		fail(err, len, "%s: not a regular file", path);
		return -EINVAL;
	}
	/* Sized by the file (it may still grow while read: then doubled),
	 * not by the cap: a config file is a few hundred bytes. */
	cap = (size_t)MIN((uint64_t)MAX(st.st_size, 0), (uint64_t)CONFIG_MAX_FILE_BYTES) + 1;
	text = malloc(cap);
	if (!text)
		return -ENOMEM;
	for (;;) {
		ssize_t k;

		if (n == cap) {
			char *bigger;

			cap = MIN(2 * cap, (size_t)CONFIG_MAX_FILE_BYTES + 1);
			bigger = realloc(text, cap);
			if (!bigger)
				return -ENOMEM;
			text = bigger;
		}
		k = read(fd, text + n, cap - n);
		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0)
			return -errno;
		if (k == 0)
			break;
		n += (size_t)k;
		if (n > CONFIG_MAX_FILE_BYTES) {
			fail(err, len, "%s: larger than %u bytes", path, CONFIG_MAX_FILE_BYTES);
			return -EFBIG;
		}
	}
	text[n] = '\0';
	if (strlen(text) != n) {
		fail(err, len, "%s: holds a NUL byte", path);
		return -EINVAL;
	}
	*ret = TAKE_PTR(text);
	return 0;
}

static int apply_file(struct config *c, const char *path, char *err, size_t len)
{
	_cleanup_free_ char *text = NULL;
	char *line, *next, why[CONFIG_ERROR_MAX];
	unsigned lineno = 0;
	int r;

	err[0] = '\0';
	r = read_file(path, &text, err, len);
	if (r < 0) {
		if (!err[0])
			fail(err, len, "%s: %s", path, strerror(-r));
		return r;
	}
	for (line = text; line; line = next) {
		const struct row *row;
		char *key, *value, *eq;

		next = strchr(line, '\n');
		if (next)
			*next++ = '\0';
		lineno++;
		key = strip(line);
		if (!key[0] || key[0] == '#' || key[0] == ';')
			continue;
		if (key[0] == '[') {
			if (strcmp(key, "[perfd]"))
				return fail(err, len, "%s:%u: unknown section %s: the one section is [perfd]", path,
					    lineno, key);
			continue;
		}
		eq = strchr(key, '=');
		if (!eq)
			return fail(err, len, "%s:%u: expected NAME = VALUE, not '%s'", path, lineno, key);
		*eq = '\0';
		value = strip(eq + 1);
		key = strip(key);
		if (value[0] == '"' && strlen(value) >= 2 && value[strlen(value) - 1] == '"') {
			value[strlen(value) - 1] = '\0';
			value++;
		}
		row = row_find(key);
		if (!row || !row_in_file(row))
			return fail(err, len, row ? "%s:%u: '%s' can only be given on the command line"
						  : "%s:%u: unknown option '%s'",
				    path, lineno, key);
		r = row_set(row, c, value, why, sizeof(why));
		if (r == -ENOMEM)
			return fail(err, len, "out of memory");
		if (r < 0)
			return fail(err, len, "%s:%u: %s %s", path, lineno, key, why);
	}
	return 0;
}

/* --- loading ----------------------------------------------------------- */

struct config *config_free(struct config *c)
{
	if (!c)
		return NULL;
	for (size_t i = 0; i < ELEMENTSOF(rows); i++)
		if (rows[i].type == T_STRING)
			free(*FIELD(c, &rows[i], char *));
	free(c->config_path);
	free(c);
	return NULL;
}

DEFINE_TRIVIAL_CLEANUP_FUNC(struct config, config_free);

/* Checks across options, and against the kernel. */
static int validate(struct config *c, char *err, size_t len)
{
	long max_hz = sampler_max_frequency();
	const struct {
		const char *name;
		const struct export_http *e;
	} http[] = { { "push", &c->export.push }, { "otlp", &c->export.otlp } };

	if (max_hz > 0 && c->frequency_hz > (uint64_t)max_hz)
		return fail(err, len,
			    "--frequency %" PRIu64 " Hz is above the kernel's limit of %ld Hz "
			    "(/proc/sys/kernel/perf_event_max_sample_rate)",
			    c->frequency_hz, max_hz);
	for (size_t i = 0; i < ELEMENTSOF(http); i++) {
		const struct export_http *e = http[i].e;

		if (e->url && strncmp(e->url, "http://", 7) && strncmp(e->url, "https://", 8))
			return fail(err, len, "%s-url takes an http:// or https:// URL, not '%s'", http[i].name,
				    e->url);
		if (e->basic_auth && !strchr(e->basic_auth, ':'))
			return fail(err, len, "%s-basic-auth takes USER:PASSWORD", http[i].name);
		if (e->basic_auth && e->bearer_token)
			return fail(err, len, "%s-basic-auth and %s-bearer-token exclude each other",
				    http[i].name, http[i].name);
	}
	if (c->export.output_dir && c->export.output_dir[0] != '/')
		return fail(err, len, "output-dir takes an absolute path, not '%s'", c->export.output_dir);
	return 0;
}

int config_load(const struct config_args *args, struct config **ret, char *err, size_t errlen)
{
	_cleanup_(config_freep) struct config *c = calloc(1, sizeof(*c));
	const char *path = args->config_path ? args->config_path : PERFD_DEFAULT_CONFIG;
	const char *env_socket = getenv(PERFD_SOCKET_ENV);
	char why[CONFIG_ERROR_MAX];
	bool labels_from_flags = false;
	int r;

	if (!c)
		return fail(err, errlen, "out of memory");
	for (size_t i = 0; i < ELEMENTSOF(rows); i++)
		if (rows[i].def && row_set(&rows[i], c, rows[i].def, why, sizeof(why)) < 0)
			return fail(err, errlen, "out of memory");
	if (!(c->socket_path = strdup(env_socket && env_socket[0] ? env_socket : PERFD_DEFAULT_SOCKET)))
		return fail(err, errlen, "out of memory");

	if (args->config_path || access(path, F_OK) == 0) {
		r = apply_file(c, path, err, errlen);
		if (r < 0)
			return r;
		if (!(c->config_path = strdup(path)))
			return fail(err, errlen, "out of memory");
	}
	for (size_t i = 0; i < args->n; i++) {
		const struct config_arg *a = &args->list[i];

		if (a->row->type == T_LABEL && !labels_from_flags) {
			c->export.n_labels = 0;
			labels_from_flags = true;
		}
		r = row_set(a->row, c, a->value, why, sizeof(why));
		if (r == -ENOMEM)
			return fail(err, errlen, "out of memory");
		if (r < 0)
			return fail(err, errlen, "--%s %s", a->row->name, why);
	}
	r = validate(c, err, errlen);
	if (r < 0)
		return r;
	*ret = TAKE_PTR(c);
	return 0;
}

/* --- comparing and showing --------------------------------------------- */

static bool row_equal(const struct row *r, const struct config *a, const struct config *b)
{
	switch (r->type) {
	case T_STRING: {
		const char *x = *CFIELD(a, r, char *), *y = *CFIELD(b, r, char *);

		return (!x && !y) || (x && y && !strcmp(x, y));
	}
	case T_UINT:
	case T_BYTES:
	case T_DURATION:
		return *CFIELD(a, r, uint64_t) == *CFIELD(b, r, uint64_t);
	case T_BOOL:
		return *CFIELD(a, r, bool) == *CFIELD(b, r, bool);
	case T_LABEL:
		return a->export.n_labels == b->export.n_labels &&
		       !memcmp(a->export.labels, b->export.labels,
			       a->export.n_labels * sizeof(a->export.labels[0]));
	default:
		return true;
	}
}

static void append_name(char *list, size_t len, const char *name)
{
	size_t at = strlen(list);

	if (at < len)
		snprintf(list + at, len - at, "%s%s", at ? ", " : "", name);
}

size_t config_diff(const struct config *a, const struct config *b, char *changed, size_t len)
{
	size_t n = 0;

	if (len)
		changed[0] = '\0';
	for (size_t i = 0; i < ELEMENTSOF(rows); i++) {
		if (!row_in_file(&rows[i]) || row_equal(&rows[i], a, b))
			continue;
		append_name(changed, len, rows[i].name);
		n++;
	}
	return n;
}

size_t config_keep_restart_only(const struct config *running, struct config *next, char *changed,
				size_t len)
{
	size_t n = 0;

	if (len)
		changed[0] = '\0';
	for (size_t i = 0; i < ELEMENTSOF(rows); i++) {
		const struct row *r = &rows[i];

		if (!row_in_file(r) || (r->flags & R_RELOAD) || row_equal(r, running, next))
			continue;
		if (r->type == T_STRING) {
			const char *old = *CFIELD(running, r, char *);
			char *copy = old ? strdup(old) : NULL;

			if (old && !copy)
				continue; /* out of memory: the new value stays */
			free(*FIELD(next, r, char *));
			*FIELD(next, r, char *) = copy;
		} else if (r->type == T_BOOL) {
			*FIELD(next, r, bool) = *CFIELD(running, r, bool);
		} else {
			*FIELD(next, r, uint64_t) = *CFIELD(running, r, uint64_t);
		}
		append_name(changed, len, r->name);
		n++;
	}
	return n;
}

char *config_to_json(const struct config *c, bool root)
{
	struct jsonw w;
	char *text;
	size_t len;

	jsonw_init(&w);
	jsonw_object_begin(&w);
	jsonw_key(&w, "config_file");
	if (c->config_path)
		jsonw_string(&w, c->config_path);
	else
		jsonw_null(&w);
	for (size_t i = 0; i < ELEMENTSOF(rows); i++) {
		const struct row *r = &rows[i];

		if (!row_in_file(r) || (!root && (r->flags & (R_PRIVATE | R_SECRET))) ||
		    r->type == T_REFUSE || r->type == T_CONFIG || r->type == T_HELP || r->type == T_VERSION)
			continue;
		jsonw_key(&w, r->name);
		switch (r->type) {
		case T_STRING: {
			const char *s = *CFIELD(c, r, char *);
			_cleanup_free_ char *shown = NULL;

			if (s && (r->flags & R_URL)) {
				if (!(shown = malloc(strlen(s) + 1))) {
					jsonw_done(&w);
					return NULL;
				}
				(root ? http_describe : http_describe_origin)(s, shown, strlen(s) + 1);
				s = shown;
			}
			if (s)
				jsonw_string(&w, r->flags & R_SECRET ? "(set)" : s);
			else
				jsonw_null(&w);
			break;
		}
		case T_UINT:
		case T_BYTES:
		case T_DURATION:
			jsonw_u64(&w, *CFIELD(c, r, uint64_t));
			break;
		case T_BOOL:
			jsonw_bool(&w, *CFIELD(c, r, bool));
			break;
		case T_LABEL:
			/* keys are unique: set_label replaces a repeated one */
			jsonw_object_begin(&w);
			for (size_t k = 0; k < c->export.n_labels; k++)
				jsonw_kv_string(&w, c->export.labels[k].key, c->export.labels[k].value);
			jsonw_object_end(&w);
			break;
		default:
			jsonw_null(&w); /* not reached: left out above */
			break;
		}
	}
	jsonw_object_end(&w);
	text = jsonw_error(&w) ? NULL : jsonw_steal(&w, &len);
	jsonw_done(&w);
	return text;
}
