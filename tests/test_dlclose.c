/* SPDX-License-Identifier: MIT */
/*
 * dlclose() of the library stops its hogs: none is left asleep, at
 * SCHED_FIFO 99, in code that is no longer mapped, and opening and
 * closing again adds no set.  The library's path comes from the build
 * (CPUHOG_LIB); this program does not link it.
 */
#include <dirent.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Threads of this process whose name begins with "cpuhog". */
static int hog_threads(void)
{
	DIR *d = opendir("/proc/self/task");
	struct dirent *e;
	char path[300], name[64];
	int n = 0;

	while (d && (e = readdir(d))) {
		FILE *f;

		if (e->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "/proc/self/task/%s/comm",
			 e->d_name);
		f = fopen(path, "r");
		if (f && fgets(name, sizeof(name), f) &&
		    !strncmp(name, "cpuhog", 6))
			n++;
		if (f)
			fclose(f);
	}
	if (d)
		closedir(d);
	return n;
}

/*
 * The hog threads still listed after dlclose(), once /proc has caught
 * up: a joined thread stays listed until the kernel releases it, after
 * it woke its joiner (a moment, longer in an emulated guest).  A hog
 * left running stays for good: 2 s times the slowness knob.
 */
static int hog_threads_left(void)
{
	const char *slow = getenv("CPUHOG_TEST_SLOW");
	int ms = 2000 * (slow && atoi(slow) > 0 ? atoi(slow) : 1), n;

	while ((n = hog_threads()) && ms-- > 0)
		usleep(1000);
	return n;
}

int main(void)
{
	int round;

	for (round = 0; round < 3; round++) {
		void *lib = dlopen(CPUHOG_LIB, RTLD_NOW | RTLD_LOCAL);
		int (*init)(const void *);

		if (!lib) {
			fprintf(stderr, "dlopen: %s\n", dlerror());
			return 1;
		}
		*(void **)&init = dlsym(lib, "cpuhog_init");
		if (!init || init(NULL) != 0) {
			fprintf(stderr, "cpuhog_init failed\n");
			return 1;
		}
		printf("round %d: %d hog threads while open", round,
		       hog_threads());
		dlclose(lib);
		printf(", %d after dlclose\n", hog_threads_left());
		if (hog_threads()) {
			printf("FAIL: hogs left running after dlclose\n");
			return 1;
		}
	}
	return 0;
}
