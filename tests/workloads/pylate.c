/*
 * pylate.c - a program that links libpython and starts its interpreter
 * late: it sleeps DELAY_SECONDS after its exec (no CPU, no samples), then
 * calls Py_Initialize() and runs late_hot_loop(), a Python function that
 * burns CPU_SECONDS of CPU, and exits.  A profiler that looked at it at its
 * exec saw a libpython with no interpreter yet; one that looks again only
 * when records arrive may not look again before it is gone.
 *
 * usage: pylate DELAY_SECONDS CPU_SECONDS
 */
#include "workload.h"

void Py_Initialize(void);
int PyRun_SimpleStringFlags(const char *command, void *flags);
int Py_FinalizeEx(void);

static const char script[] =
	"import time\n"
	"def late_hot_loop(seconds):\n"
	"    end = time.process_time() + seconds\n"
	"    x = 0\n"
	"    while time.process_time() < end:\n"
	"        for i in range(1000):\n"
	"            x += i * i\n"
	"    return x\n"
	"late_hot_loop(%.3f)\n";

int main(int argc, char **argv)
{
	double delay = argc > 1 ? atof(argv[1]) : 0.05;
	double seconds = argc > 2 ? atof(argv[2]) : 0.5;
	struct timespec ts = { (time_t)delay, (long)((delay - (time_t)delay) * 1e9) };
	char code[sizeof(script) + 64];

	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
	Py_Initialize();
	snprintf(code, sizeof(code), script, seconds);
	if (PyRun_SimpleStringFlags(code, NULL) != 0)
		return 1;
	return Py_FinalizeEx() < 0 ? 1 : 0;
}
