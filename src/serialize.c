/* SPDX-License-Identifier: MIT */
/*
 * Stops serialized between processes: the kernel's stop_cpus_mutex for the
 * machine's user space.  Two processes' interleaved stops wait for each
 * other (each one's hogs spin at FIFO 99 where the other's hogs queue), so
 * a stop holds an open-file-description lock on STOP_LOCK_PATH, which the
 * kernel drops with the last descriptor: a holder that dies never leaves
 * it held.  F_OFD_SETLKW has no timeout, and a holder may stop for ever,
 * so the wait polls with naps, bounded apart from the stop's deadline.
 * A poll would starve a waiter behind a process stopping back to back, so
 * the first waiter holds byte W, the lock is taken as M and W together
 * (failing while anyone waits), and only that waiter takes M alone.
 *
 * One descriptor per process, opened when a context is made (a stop does
 * no I/O), O_CLOEXEC; a forked child forgets its copy (only the last close
 * drops the parent's lock) and opens its own.  Where the file cannot be
 * opened (another mount namespace, a read-only /run/lock, a file we may
 * not write), stops go unserialized; cpuhog_info.stop_serialized says so.
 */
#include "internal.h"
#include "outcome.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#define STOP_LOCK_PATH "/run/lock/cpuhog-stop.lock"
#define M 0 /* the byte a stop holds */
#define W 1 /* the byte the first waiter holds */
#define NAP_MIN_NS 20000u    /* the first nap while another holds it */
#define NAP_MAX_NS 1000000u  /* and the longest */

static _Atomic int g_fd = -1;
static pthread_once_t g_once = PTHREAD_ONCE_INIT;

static void forget_in_child(void)
{
	int fd = atomic_exchange(&g_fd, -1);

	if (fd >= 0)
		close(fd);
}

static void register_atfork(void)
{
	pthread_atfork(NULL, NULL, forget_in_child);
}

/* Open without O_CREAT first: fs.protected_regular refuses O_CREAT on
 * another user's file in a sticky directory even where it exists. */
static int open_lock_file(void)
{
	int fd = open(STOP_LOCK_PATH, O_RDWR | O_CLOEXEC | O_NOFOLLOW);

	if (fd >= 0 || errno != ENOENT)
		return fd;
	fd = open(STOP_LOCK_PATH, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC |
					  O_NOFOLLOW, 0666);
	if (fd >= 0) {
		fchmod(fd, 0666); /* past the umask: every user's stops */
		return fd;
	}
	return errno == EEXIST ? open(STOP_LOCK_PATH,
				      O_RDWR | O_CLOEXEC | O_NOFOLLOW)
			       : -1;
}

bool cpuhog_i_stop_lock_open(void)
{
	int fd;

	pthread_once(&g_once, register_atfork);
	if (atomic_load(&g_fd) >= 0)
		return true;
	fd = open_lock_file();
	if (fd < 0)
		return false;
	if (atomic_exchange(&g_fd, fd) >= 0)
		close(fd); /* cannot be: contexts are made one at a time */
	return true;
}

static int ofd_lock(int fd, short type, off_t start, off_t len)
{
	struct flock fl = { .l_type = type, .l_whence = SEEK_SET,
			    .l_start = start, .l_len = len };

	return fcntl(fd, F_OFD_SETLK, &fl);
}

/* The last wait ran out (a holder frozen or squatting): until the lock
 * is had again, a stop tries once, not the whole wait each time. */
static _Atomic bool g_overdue;

/* Whether the lock call failed only because another holds the range. */
static bool busy(void)
{
	return errno == EAGAIN || errno == EACCES || errno == EINTR;
}

/* M alone once we hold W or have waited one stop timeout (a frozen first
 * waiter must not shut the others out longer), else M and W together.
 * 0: locked; 1: no lock here (ENOLCK...); -ETIMEDOUT after four stop
 * timeouts, or one try while g_overdue: the caller stops unserialized.
 * No cancellation point: a nap cancelled would leave W held. */
static int lock(uint64_t timeout_ns, bool *waited)
{
	int fd = atomic_load_explicit(&g_fd, memory_order_relaxed);
	bool huge = timeout_ns > NO_DEADLINE / 8;
	uint64_t nap = NAP_MIN_NS,
		 alone = huge ? NO_DEADLINE : cpuhog_i_deadline_in(timeout_ns),
		 deadline = atomic_load(&g_overdue) ? 0
			    : huge		    ? NO_DEADLINE
				   : cpuhog_i_deadline_in(4 * timeout_ns);
	bool first = false; /* we hold W: the first waiter */
	int r = 0, was;

	*waited = false;
	if (fd < 0)
		return 1; /* unserialized */
	pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &was);
	while (ofd_lock(fd, F_WRLCK, M,
			first || cpuhog_i_now_ns() >= alone ? 1 : 2) < 0) {
		if (!busy() || cpuhog_i_now_ns() >= deadline) {
			r = busy() ? -ETIMEDOUT : 1;
			break;
		}
		*waited = true;
		first = first || ofd_lock(fd, F_WRLCK, W, 1) == 0;
		nanosleep(&(struct timespec){ 0, (long)nap }, NULL);
		nap = nap * 2 < NAP_MAX_NS ? nap * 2 : NAP_MAX_NS;
	}
	/* W goes, whoever took it (a taker of M and W holds both) */
	ofd_lock(fd, F_UNLCK, W, 1);
	if (r <= 0)
		atomic_store(&g_overdue, r < 0);
	pthread_setcancelstate(was, NULL);
	return r;
}

/* The lock for a stop of @c, into @o.  Held past its bound or none here,
 * the stop goes on unserialized; cpuhog_get_info() says the latter. */
void cpuhog_i_stop_lock(struct ctx *c, struct stop_outcome *o)
{
	int r = lock(c->stop_timeout_ns, &o->lock_waited);

	o->serialized = r == 0;
	o->lock_waited_out = r == -ETIMEDOUT;
	if (o->lock_waited)
		atomic_fetch_add_explicit(&c->stop_lock_waits, 1,
					  memory_order_relaxed);
	if (r == 1)
		atomic_store_explicit(&c->stop->serialized, false,
				      memory_order_relaxed);
}

void cpuhog_i_stop_unlock(const struct stop_outcome *o)
{
	int fd = atomic_load_explicit(&g_fd, memory_order_relaxed);

	if (o->serialized && fd >= 0)
		ofd_lock(fd, F_UNLCK, M, 1);
}
