/* SPDX-License-Identifier: MIT */
/*
 * main.c - perfd's command line: parses the options into struct
 * manager_opts, checks them, and runs the manager.  The only place that
 * turns an error into an exit status.
 */
#include <errno.h>
#include <getopt.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>

#include <bpf/libbpf.h>

#include "base/duration.h"
#include "base/log.h"
#include "manager.h"
#include "perfd/protocol.h"
#include "perfd/unwind.h"
#include "collect/sampler.h"

#define EXIT_USAGE 2

/* The mean growth a memory sample stands for.  make bench's memory_cost
 * (docs/PERFORMANCE.md): a process doing nothing but fault pages in is
 * slowed 9.7 % at 1 MiB, 5.0 % at 4 MiB, where the samples' stack walks
 * are a tenth of the cost and the rest the tracepoint's own; 4 MiB still
 * gives dozens of samples for the hundreds of MiB that matter, and
 * --memory-sample-bytes 256K a few per MiB where precision matters. */
#define DEFAULT_MEMORY_SAMPLE_BYTES (4u << 20)

static void help(void)
{
	printf("Usage: perfd [OPTIONS]\n"
	       "System-wide sampling profiler daemon.\n\n"
	       "  --socket PATH        listen on PATH (default $%s or %s)\n"
	       "  --frequency HZ       samples per second per CPU (default 99), at random\n"
	       "                       instants: one in each period of 1/HZ\n"
	       "  --fixed-period       sample at a fixed period of 1/HZ instead (a workload\n"
	       "                       repeating at that period is then seen at one phase)\n"
	       "  --max-processes N    processes kept (default 4096)\n"
	       "  --max-stacks N       unique stacks kept (default 200000)\n"
	       "  --max-frames N       frames kept in all stacks (default 8000000)\n"
	       "  --retention DURATION how long profiles are kept: 30s, 10m, 1h (default 1h)\n"
	       "  --max-memory MIB     cap on everything the profile store holds (default 64)\n"
	       "  --memory-sample-bytes N  mean resident-memory growth between two memory\n"
	       "                       samples, e.g. 512K (default 4M)\n"
	       "  --no-memory          do not sample memory growth\n"
	       "  --ringbuf-mib N      BPF ring buffer size, power of two (default:\n"
	       "                       1 KiB x frequency x CPUs, 1 to 64)\n"
	       "  --unwind-mib N       kernel memory for unwind tables, 0 for frame\n"
	       "                       pointers only (default 16)\n"
	       "  --no-demangle        print C++ and Rust symbols as they are mangled\n"
	       "  --no-python          do not read Python frames (CPython processes show\n"
	       "                       their native frames only)\n"
	       "  --debug-dir DIR      separate debug files (default /usr/lib/debug)\n"
	       "  --symbol-cache-mib N parsed symbol tables kept in memory (default 256)\n"
	       "  --verbose            log debug messages, libbpf's included\n"
	       "  --help, --version\n",
	       PERFD_SOCKET_ENV, PERFD_DEFAULT_SOCKET);
}

static int parse_ulong(const char *s, unsigned long min, unsigned long max,
		       unsigned long *ret)
{
	unsigned long v;
	char *end;

	errno = 0;
	if (!s[0] || s[0] == '-')
		return -EINVAL;
	v = strtoul(s, &end, 10);
	if (errno || *end || v < min || v > max)
		return -ERANGE;
	*ret = v;
	return 0;
}

/* libbpf's messages, the verifier's log among them, one log line each. */
static int libbpf_log(enum libbpf_print_level level, const char *fmt, va_list ap)
{
	_cleanup_free_ char *text = NULL;
	char *line, *save = NULL;

	if (level == LIBBPF_DEBUG && log_get_max_level() < LOG_DEBUG)
		return 0;
	if (vasprintf(&text, fmt, ap) < 0)
		return 0;
	for (line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save))
		log_full_errno(level == LIBBPF_WARN ? LOG_WARNING : LOG_DEBUG, 0, "libbpf: %s", line);
	return 0;
}

static void raise_nofile_limit(void)
{
	struct rlimit rl;

	/* One descriptor per binary profiled, held until its symbols are read. */
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		(void)setrlimit(RLIMIT_NOFILE, &rl);
	}
}

static int make_socket_dir(const char *path)
{
	char *copy = strdup(path), *dir;
	int r = 0;

	if (!copy)
		return -ENOMEM;
	dir = dirname(copy);
	/* Reachable by every user (the socket is 0666, see api/auth.h): a
	 * directory we create is 0755 whatever the umask; one that exists is
	 * the administrator's to set. */
	if (mkdir(dir, 0755) < 0) {
		if (errno != EEXIST)
			r = -errno;
	} else if (chmod(dir, 0755) < 0)
		r = -errno;
	free(copy);
	return r;
}

int main(int argc, char **argv)
{
	enum { OPT_SOCKET = 256, OPT_FREQ, OPT_MAXP, OPT_MAXS, OPT_MAXF, OPT_RB, OPT_UNWIND, OPT_NO_DEMANGLE, OPT_NO_PYTHON, OPT_DEBUG_DIR, OPT_SYMCACHE, OPT_VERBOSE, OPT_RETENTION, OPT_MAXMEM, OPT_MEMSAMPLE, OPT_NO_MEMORY, OPT_FIXED_PERIOD,
	       OPT_HELP, OPT_VERSION };
	static const struct option options[] = {
		{ "socket", required_argument, NULL, OPT_SOCKET },
		{ "frequency", required_argument, NULL, OPT_FREQ },
		{ "fixed-period", no_argument, NULL, OPT_FIXED_PERIOD },
		{ "max-processes", required_argument, NULL, OPT_MAXP },
		{ "max-stacks", required_argument, NULL, OPT_MAXS },
		{ "max-frames", required_argument, NULL, OPT_MAXF },
		{ "ringbuf-mib", required_argument, NULL, OPT_RB },
		{ "unwind-mib", required_argument, NULL, OPT_UNWIND },
		{ "no-demangle", no_argument, NULL, OPT_NO_DEMANGLE },
		{ "no-python", no_argument, NULL, OPT_NO_PYTHON },
		{ "debug-dir", required_argument, NULL, OPT_DEBUG_DIR },
		{ "symbol-cache-mib", required_argument, NULL, OPT_SYMCACHE },
		{ "verbose", no_argument, NULL, OPT_VERBOSE },
		{ "retention", required_argument, NULL, OPT_RETENTION },
		{ "max-memory", required_argument, NULL, OPT_MAXMEM },
		{ "memory-sample-bytes", required_argument, NULL, OPT_MEMSAMPLE },
		{ "no-memory", no_argument, NULL, OPT_NO_MEMORY },
		{ "help", no_argument, NULL, OPT_HELP },
		{ "version", no_argument, NULL, OPT_VERSION },
		{}
	};
	struct manager_opts opts = {
		.socket_path = getenv(PERFD_SOCKET_ENV) ? getenv(PERFD_SOCKET_ENV) : PERFD_DEFAULT_SOCKET,
		.frequency_hz = 99,
		.limits = { .max_processes = 4096, .max_stacks = 200000, .max_frames = 8000000,
			    .max_memory_bytes = 64u << 20, .retention_s = 3600 },
		.kallsyms_path = "/proc/kallsyms",
		.kernel_notes_path = "/sys/kernel/notes",
		.unwind_rows = (16u << 20) / sizeof(struct perfd_unwind_row),
		.unwind_mappings = 65536,
		.demangle = true,
		.python = true,
		.memory_sample_bytes = DEFAULT_MEMORY_SAMPLE_BYTES,
	};
	unsigned long v;
	long max_hz;
	struct manager *m = NULL;
	int c, r;

	log_open();
	while ((c = getopt_long(argc, argv, "", options, NULL)) >= 0) {
		switch (c) {
		case OPT_SOCKET:
			if (!optarg[0]) {
				fprintf(stderr, "perfd: --socket needs a path\n");
				return EXIT_USAGE;
			}
			opts.socket_path = optarg;
			break;
		case OPT_FREQ:
			if (parse_ulong(optarg, 0, 10000000, &v) < 0) {
				fprintf(stderr, "perfd: --frequency takes a whole number of Hz, not '%s'\n", optarg);
				return EXIT_USAGE;
			}
			opts.frequency_hz = v;
			break;
		case OPT_MAXP:
		case OPT_MAXS:
		case OPT_MAXF:
			if (parse_ulong(optarg, 1, 1UL << 32, &v) < 0) {
				fprintf(stderr, "perfd: %s takes a number from 1 to 2^32, not '%s'\n",
					argv[optind - 2], optarg);
				return EXIT_USAGE;
			}
			if (c == OPT_MAXP)
				opts.limits.max_processes = v;
			else if (c == OPT_MAXS)
				opts.limits.max_stacks = v;
			else
				opts.limits.max_frames = v;
			break;
		case OPT_RB:
			if (parse_ulong(optarg, 1, 1024, &v) < 0 || (v & (v - 1))) {
				fprintf(stderr, "perfd: --ringbuf-mib takes a power of two from 1 to 1024, not '%s'\n", optarg);
				return EXIT_USAGE;
			}
			opts.ringbuf_bytes = v << 20;
			break;
		case OPT_UNWIND:
			if (parse_ulong(optarg, 0, 1024, &v) < 0) {
				fprintf(stderr, "perfd: --unwind-mib takes a number from 0 to 1024, not '%s'\n", optarg);
				return EXIT_USAGE;
			}
			opts.unwind_rows = (v << 20) / sizeof(struct perfd_unwind_row);
			break;
		case OPT_FIXED_PERIOD:
			opts.fixed_period = true;
			break;
		case OPT_NO_DEMANGLE:
			opts.demangle = false;
			break;
		case OPT_NO_PYTHON:
			opts.python = false;
			break;
		case OPT_SYMCACHE:
			if (parse_ulong(optarg, 1, 65536, &v) < 0) {
				fprintf(stderr, "perfd: --symbol-cache-mib takes a number from 1 to 65536, not '%s'\n", optarg);
				return EXIT_USAGE;
			}
			opts.symbol_cache_bytes = v << 20;
			break;
		case OPT_DEBUG_DIR:
			if (!optarg[0]) {
				fprintf(stderr, "perfd: --debug-dir needs a directory\n");
				return EXIT_USAGE;
			}
			opts.debug_dir = optarg;
			break;
		case OPT_VERBOSE:
			log_set_max_level(LOG_DEBUG);
			break;
		case OPT_RETENTION: {
			double secs;

			if (parse_duration_seconds(optarg, &secs) < 0 || secs < 1 ||
			    secs > PERFD_MAX_RETENTION_SECONDS) {
				fprintf(stderr, "perfd: --retention takes a duration from 1s to 7d (30s, 10m, 1h), not '%s'\n",
					optarg);
				return EXIT_USAGE;
			}
			opts.limits.retention_s = (uint64_t)secs;
			break;
		}
		case OPT_MEMSAMPLE: {
			char *end;

			errno = 0;
			v = strtoul(optarg, &end, 10);
			if (*end == 'K' || *end == 'k')
				v <<= 10, end++;
			else if (*end == 'M' || *end == 'm')
				v <<= 20, end++;
			if (errno || end == optarg || *end || optarg[0] == '-' || v < 4096 ||
			    v > (1UL << 30)) {
				fprintf(stderr, "perfd: --memory-sample-bytes takes 4096 to 1G bytes (512K, 1M), not '%s'\n",
					optarg);
				return EXIT_USAGE;
			}
			opts.memory_sample_bytes = v;
			break;
		}
		case OPT_NO_MEMORY:
			opts.memory_sample_bytes = 0;
			break;
		case OPT_MAXMEM:
			if (parse_ulong(optarg, 4, 65536, &v) < 0) {
				fprintf(stderr, "perfd: --max-memory takes a number of MiB from 4 to 65536, not '%s'\n", optarg);
				return EXIT_USAGE;
			}
			opts.limits.max_memory_bytes = v << 20;
			break;
		case OPT_HELP:
			help();
			return 0;
		case OPT_VERSION:
			printf("perfd 0.1.0\n");
			return 0;
		default:
			fprintf(stderr, "Try 'perfd --help'.\n");
			return EXIT_USAGE;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "perfd: unexpected argument '%s'; try 'perfd --help'.\n", argv[optind]);
		return EXIT_USAGE;
	}

	max_hz = sampler_max_frequency();
	if (opts.frequency_hz == 0) {
		fprintf(stderr, "perfd: --frequency must be at least 1 Hz\n");
		return EXIT_USAGE;
	}
	if (max_hz > 0 && opts.frequency_hz > (unsigned long)max_hz) {
		fprintf(stderr,
			"perfd: --frequency %u Hz is above the kernel's limit of %ld Hz "
			"(/proc/sys/kernel/perf_event_max_sample_rate)\n",
			opts.frequency_hz, max_hz);
		return EXIT_USAGE;
	}

	libbpf_set_print(libbpf_log);
	raise_nofile_limit();
	r = make_socket_dir(opts.socket_path);
	if (r < 0) {
		log_error_errno(r, "Failed to create the directory of %s: %m", opts.socket_path);
		return EXIT_FAILURE;
	}
	r = manager_new(&opts, &m);
	if (r < 0)
		return EXIT_FAILURE;
	r = manager_run(m);
	manager_free(m);
	return r < 0 ? EXIT_FAILURE : EXIT_SUCCESS;
}
