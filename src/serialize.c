/* SPDX-License-Identifier: MIT */
/*
 * Stops serialized between processes: the kernel's stop_cpus_mutex at
 * the scope of the machine's user space.
 *
 * Two processes' stops that interleave wait for each other: each one's
 * hogs spin at SCHED_FIFO 99 on the CPUs they hold, and the other's hog
 * for such a CPU is queued behind one of them at the same priority, for
 * as long as the stop lasts.  Inside a process multi_lock rules that out;
 * between processes this lock does: an open-file-description lock
 * (F_OFD_SETLK) on STOP_LOCK_PATH, which the kernel drops when the last
 * descriptor of its open file goes, so a holder that dies (or is killed
 * in the middle of a stop) never leaves it held.
 *
 * The wait is a poll with naps, bounded by its own deadline (four stop
 * timeouts), apart from the stop's, which begins once the lock is had:
 * F_OFD_SETLKW has no timeout, and a holder may be a stop that waits for
 * ever (CPUHOG_NO_TIMEOUT), or a long one.  A poll alone would starve a
 * waiter behind a process stopping back to back (it re-takes the lock
 * microseconds after it lets go; the waiter naps), so the first waiter
 * says it waits, holding byte W, and the lock is taken as bytes M and W
 * together, which fails while anyone waits: only that waiter then takes
 * M alone.  The holder lets W go as soon as it has M (a third fcntl()),
 * so that the next waiter can say so while it runs.
 *
 * One descriptor per process, opened when a context is made (never in a
 * stop: nothing there does I/O) with O_CLOEXEC.  A forked child shares
 * its parent's open file description, and with it the parent's lock:
 * the child's atfork handler forgets it (closing its copy does not
 * release the parent's lock: only the last close does), and the child's
 * own context opens the file anew.
 *
 * Where the file cannot be opened (another mount namespace, a read-only
 * or missing /run/lock, a file of another user's that we may not write),
 * stops go unserialized, as well as they can: two processes' stops may
 * then time out against each other.  cpuhog_info.stop_serialized says so.
 */
#include "internal.h"

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

/* The last wait ran out (a holder stopped, frozen, or squatting on the
 * file): until the lock is had again, a stop tries it once and goes on
 * unserialized, rather than pay the whole wait each time. */
static _Atomic bool g_overdue;

/* Whether the lock call failed only because another holds the range. */
static bool busy(void)
{
	return errno == EAGAIN || errno == EACCES || errno == EINTR;
}

/*
 * The wait: M alone once we hold W (the first waiter) or once we have
 * waited one stop timeout (a first waiter that is stopped, frozen or not
 * run must not shut the others out for longer), else M and W together.
 * Returns 0 (locked), 1 (no lock here: ENOLCK and the like), or
 * -ETIMEDOUT after four stop timeouts (after one try while the last
 * wait ran out: g_overdue); the caller then stops unserialized, as well
 * as it can (a squatter on the file must not fail, nor slow, every stop
 * of the machine).  No cancellation point inside: a thread
 * cancelled in a nap would leave W, and the caller's multi_lock, held.
 */
int cpuhog_i_stop_lock(uint64_t timeout_ns, bool *waited)
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
	/* W goes whoever took it: the first waiter, and a taker of M and W
	 * together (which holds both bytes until this unlock) */
	ofd_lock(fd, F_UNLCK, W, 1);
	if (r <= 0)
		atomic_store(&g_overdue, r < 0);
	pthread_setcancelstate(was, NULL);
	return r;
}

void cpuhog_i_stop_unlock(void)
{
	int fd = atomic_load_explicit(&g_fd, memory_order_relaxed);

	if (fd >= 0)
		ofd_lock(fd, F_UNLCK, M, 1);
}
