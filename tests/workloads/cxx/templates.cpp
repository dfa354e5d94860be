// templates.cpp - proves C++ names are demangled: the hot function is a
// member of a class template in a nested namespace,
// app::engine::Accumulator<unsigned long>::churn(unsigned long).
//
// usage: templates CPU_SECONDS
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <ctime>

namespace app {
namespace engine {

template <typename T> struct Accumulator {
	__attribute__((noinline)) static T churn(T seed)
	{
		volatile T x = seed | 1;
		for (int i = 0; i < 200000; i++)
			x = x * 6364136223846793005ULL + 1442695040888963407ULL;
		return x;
	}
};

} // namespace engine
} // namespace app

static double cpu_seconds()
{
	timespec ts;
	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
	if (argc != 2) {
		std::fprintf(stderr, "usage: %s CPU_SECONDS\n", argv[0]);
		return 2;
	}
	double until = cpu_seconds() + std::atof(argv[1]);
	unsigned long s = 1;
	while (cpu_seconds() < until)
		s = app::engine::Accumulator<unsigned long>::churn(s);
	std::printf("%lu\n", s);
	return 0;
}
