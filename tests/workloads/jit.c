/*
 * jit.c - runs code it wrote itself into anonymous memory, as a JIT does,
 * and names none of it: whoever runs it writes the perf map
 * (/tmp/perf-PID.map) that names the code, or a hostile stand-in for one.
 *
 * Proves: frames in anonymous code are named from a perf map the daemon
 * accepts, and never from one it must refuse.  The code is one counting
 * loop (a few instructions), so every sample of it falls in the one range
 * that the printed line describes.  The sleep leaves time to put the map in
 * place before the first sample of the code.
 *
 * usage: jit CPU_SECONDS [SLEEP_SECONDS]
 * output: "START SIZE" (hex, no 0x: the code's range, as a perf map line
 *         begins) at once, then, after the sleep and the burn, the CPU
 *         seconds used, with 3 decimals
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "workload.h"

/* loop: count down the first argument to zero, then return */
#if defined(__x86_64__)
static const unsigned char loop_code[] = {
	0x48, 0x83, 0xef, 0x01, /* sub $1, %rdi */
	0x75, 0xfa,             /* jne loop */
	0xc3,                   /* ret */
};
#elif defined(__aarch64__)
static const uint32_t loop_code[] = {
	0xf1000400, /* subs x0, x0, #1 */
	0x54ffffe1, /* b.ne loop */
	0xd65f03c0, /* ret */
};
#else
#error "jit.c: no loop for this architecture"
#endif

int main(int argc, char **argv)
{
	double burn, pause = 1.0;
	void (*loop)(uint64_t);
	struct timespec ts;
	long page = sysconf(_SC_PAGESIZE);
	void *code;

	if (argc < 2 || argc > 3 || parse_seconds(argv[1], &burn) < 0 ||
	    (argc == 3 && parse_seconds(argv[2], &pause) < 0)) {
		fprintf(stderr, "usage: %s CPU_SECONDS [SLEEP_SECONDS]\n", argv[0]);
		return 2;
	}
	code = mmap(NULL, (size_t)page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (code == MAP_FAILED) {
		perror("mmap");
		return 1;
	}
	memcpy(code, loop_code, sizeof(loop_code));
	__builtin___clear_cache((char *)code, (char *)code + sizeof(loop_code));
	if (mprotect(code, (size_t)page, PROT_READ | PROT_EXEC) < 0) {
		perror("mprotect");
		return 1;
	}
	printf("%lx %zx\n", (unsigned long)(uintptr_t)code, sizeof(loop_code));
	if (fflush(stdout) != 0)
		return 1;

	ts.tv_sec = (time_t)pause;
	ts.tv_nsec = (long)((pause - (double)ts.tv_sec) * 1e9);
	while (nanosleep(&ts, &ts) < 0) {
		if (errno != EINTR) {
			perror("nanosleep");
			return 1;
		}
	}
	loop = (void (*)(uint64_t))code;
	for (double until = cpu_seconds() + burn; cpu_seconds() < until;)
		loop(20 * 1000 * 1000);

	printf("%.3f\n", cpu_seconds());
	return fflush(stdout) == 0 ? 0 : 1;
}
