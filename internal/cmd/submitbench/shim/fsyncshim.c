// fsyncshim wraps fsync and fdatasync: each call is counted, its time
// (the real call and the injected delay) summed, and the delay slept after
// the real call. The counters and the delay live in a shared file mapped
// from $FSYNCSHIM_FILE (int64 slots): 0 fsync calls, 1 fdatasync calls,
// 2 nanoseconds spent in both, 3 the delay in nanoseconds (set by the
// parent process at any time).
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

static int64_t *slots;
static int (*real_fsync)(int);
static int (*real_fdatasync)(int);

__attribute__((constructor)) static void shim_init(void) {
	real_fsync = (int (*)(int))dlsym(RTLD_NEXT, "fsync");
	real_fdatasync = (int (*)(int))dlsym(RTLD_NEXT, "fdatasync");
	const char *path = getenv("FSYNCSHIM_FILE");
	if (path == NULL) {
		return;
	}
	int fd = open(path, O_RDWR);
	if (fd < 0) {
		return;
	}
	void *m = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	close(fd);
	if (m != MAP_FAILED) {
		slots = (int64_t *)m;
	}
}

static int64_t now_ns(void) {
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static int wrap(int (*real)(int), int fd, int slot) {
	int64_t t0 = now_ns();
	int rc = real(fd);
	if (slots == NULL) {
		return rc;
	}
	int saved = errno;
	int64_t d = __atomic_load_n(&slots[3], __ATOMIC_RELAXED);
	if (d > 0) {
		struct timespec ts = {d / 1000000000, d % 1000000000};
		while (nanosleep(&ts, &ts) == -1 && errno == EINTR) {
		}
	}
	__atomic_add_fetch(&slots[slot], 1, __ATOMIC_RELAXED);
	__atomic_add_fetch(&slots[2], now_ns() - t0, __ATOMIC_RELAXED);
	errno = saved;
	return rc;
}

int fsync(int fd) { return wrap(real_fsync, fd, 0); }
int fdatasync(int fd) { return wrap(real_fdatasync, fd, 1); }
