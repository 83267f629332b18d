// SPDX-License-Identifier: MIT
// The public header compiles as C++ (and its work initializer works there).
#include <cpuhog.h>

#include <cstdio>

int main()
{
	struct cpuhog_work w = CPUHOG_WORK_INIT;
	struct cpuhog_attr attr;
	cpuhog_fn_t where = [](void *) -> int { return sched_getcpu(); };

	cpuhog_attr_init(&attr);
	if (cpuhog_init(&attr) != 0)
		return 1;
	if (hog_one_cpu(0, where, nullptr) != 0)
		return 2;
	if (!hog_one_cpu_nowait(0, where, nullptr, &w) || hog_work_wait(&w) != 0)
		return 3;
	cpuhog_shutdown();
	std::puts("C++ OK");
	return 0;
}
