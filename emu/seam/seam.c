/* hwemu's native seam (docs/seam.md): an LD_PRELOAD library that shows any program hwemu's mock GPUs.
 *
 * The device nodes /dev/kfd and /dev/dri/renderD<minor> are served by a transport (one function, seam.h; in-process:
 * hwemu's Python, python.c): open gives a descriptor of /dev/null that the transport knows as the node, and ioctl,
 * mmap, dup and close of such a descriptor go to it. The sysfs files of amdkfd and amdgpu (the topology, the render
 * nodes' device folders, the amdgpu module) are real files in the folder HWEMU_SEAM_SYSFS names, written by
 * `hwemu run`: every call that takes one of those paths is given the folder's path instead, so libc reads, lists
 * and stats them itself. Everything else goes to libc untouched. */
#define _GNU_SOURCE
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "seam.h"

#define MAX_FDS 65536
#define KFD_MAJOR 238 /* amdkfd's char major is dynamic; this is a common one */
#define DRM_MAJOR 226
#define NOT_MOCK 0
#define KFD_NODE (-1)

static seam_transport transport = seam_python;
static void (*transport_exit)(void) = seam_python_exit;
int seam_logging;
static const char *sysfs_root;        /* HWEMU_SEAM_SYSFS */
static short node_of_fd[MAX_FDS];     /* NOT_MOCK, KFD_NODE or a render minor */
static int started, inherited;        /* a mock node was opened; this is a fork()ed child of that process */

/* the paths served from HWEMU_SEAM_SYSFS (device nodes: placeholders there, for stat and access) */
static const char *const SERVED[] = {"/sys/devices/virtual/kfd", "/sys/class/kfd", "/sys/class/drm/renderD",
                                     "/sys/module/amdgpu", "/sys/dev/char/226:", "/proc/modules", "/dev/kfd",
                                     "/dev/dri/renderD"};

/* libc's dlsym (this library's dlsym is an interposer too), found by the constructor: from then on a call of it
 * through real_dlsym is a plain jump, which leaves dlsym(RTLD_NEXT)'s caller as it was */
static void *(*libc_dlsym)(void *, const char *);
static void find_libc_dlsym(void) {
    if (!(libc_dlsym = (void *(*)(void *, const char *))dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.34")) &&
        !(libc_dlsym = (void *(*)(void *, const char *))dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.2.5"))) {
        fprintf(stderr, "hwemu seam: libc has no dlsym\n");
        abort();
    }
}
static void *real_dlsym(void *handle, const char *name) {
    if (!libc_dlsym) /* a library's constructor ran before this one's */
        find_libc_dlsym();
    return libc_dlsym(handle, name);
}

/* libc's `name`, looked up once */
static void *resolve(void **slot, const char *name) {
    if (!*slot && !(*slot = real_dlsym(RTLD_NEXT, name))) {
        fprintf(stderr, "hwemu seam: libc has no %s\n", name);
        abort();
    }
    return *slot;
}
#define REAL(f) ((__typeof__(real_##f))resolve((void **)&real_##f, #f))
#define DECLARE(f) static __typeof__(f) *real_##f;

/* glibc's entry points that its headers do not declare */
int __open_2(const char *, int);
int __open64_2(const char *, int);
int __openat_2(int, const char *, int);
int __openat64_2(int, const char *, int);
int __xstat(int, const char *, struct stat *);
int __xstat64(int, const char *, struct stat64 *);
int __lxstat(int, const char *, struct stat *);
int __lxstat64(int, const char *, struct stat64 *);
int __fxstat(int, int, struct stat *);
int __fxstat64(int, int, struct stat64 *);
int __libc_start_main(int (*)(int, char **, char **), int, char **, void (*)(void), void (*)(void), void (*)(void),
                      void *);

#define LIBC(X) X(open) X(openat) X(close) X(ioctl) X(mmap) X(mmap64) X(dup) X(dup2) X(dup3) X(fcntl) X(fcntl64) \
    X(fopen) X(fopen64) X(opendir) X(access) X(readlink) X(realpath) X(stat) X(stat64) X(lstat) X(lstat64) X(fstat) \
    X(fstat64) X(fstatat) X(statx) X(__xstat) X(__xstat64) X(__lxstat) X(__lxstat64) X(__fxstat) X(__fxstat64) \
    X(__libc_start_main) X(exit)
LIBC(DECLARE)

static void child_after_fork(void) { inherited = started; }

__attribute__((constructor)) static void seam_init(void) {
    const char *log = getenv("HWEMU_SEAM_LOG");
    seam_logging = log && *log && strcmp(log, "0") != 0;
    sysfs_root = getenv("HWEMU_SEAM_SYSFS");
    pthread_atfork(NULL, NULL, child_after_fork);
    if (!libc_dlsym)
        find_libc_dlsym();
}

static void say(const char *what, const char *path, long result) {
    if (seam_logging)
        fprintf(stderr, "hwemu seam: %s %s -> %ld%s%s\n", what, path ? path : "", result, result < 0 ? " " : "",
                result < 0 ? strerror((int)-result) : "");
}

/* -1 with errno for a transport's -errno, else the result */
static long answer(long r) {
    if (r < 0 && r > -4096) {
        errno = (int)-r;
        return -1;
    }
    return r;
}

/* whether `p` is an absolute path (libc's headers say it is never NULL; a client may pass NULL all the same) */
__attribute__((noinline)) static int absolute(const char *p) { return p && p[0] == '/'; }

/* KFD_NODE for /dev/kfd, the minor for /dev/dri/renderD<minor>, else NOT_MOCK */
static int node_of_path(const char *p) {
    if (!p || !sysfs_root)
        return NOT_MOCK;
    if (strcmp(p, "/dev/kfd") == 0)
        return KFD_NODE;
    if (strncmp(p, "/dev/dri/renderD", 16) != 0 || !p[16] || strspn(p + 16, "0123456789") != strlen(p + 16))
        return NOT_MOCK;
    long minor = strtol(p + 16, NULL, 10);
    return minor > 0 && minor < 1024 ? (int)minor : NOT_MOCK;
}

/* `p`, or where it is served from (in `buf`) when it is a served path */
static const char *redirect(const char *p, char buf[PATH_MAX]) {
    if (!absolute(p) || !sysfs_root)
        return p;
    for (size_t i = 0; i < sizeof SERVED / sizeof *SERVED; i++) {
        size_t n = strlen(SERVED[i]);
        if (strncmp(p, SERVED[i], n) == 0 && snprintf(buf, PATH_MAX, "%s%s", sysfs_root, p) < PATH_MAX) {
            say("redirect", p, 0);
            return buf;
        }
    }
    return p;
}

static int is_mock(int fd) { return fd >= 0 && fd < MAX_FDS && node_of_fd[fd] != NOT_MOCK; }

/* ---- device nodes ---- */
static int open_node(const char *path, int node, int flags) {
    if (inherited) {
        say("open (a fork()ed child: the in-process devices are its parent's)", path, -ENODEV);
        errno = ENODEV;
        return -1;
    }
    int fd = REAL(open)("/dev/null", O_RDWR | (flags & O_CLOEXEC));
    if (fd < 0)
        return -1;
    if (fd >= MAX_FDS) {
        REAL(close)(fd);
        errno = EMFILE;
        return -1;
    }
    long a[6] = {fd, flags};
    long r = transport(SEAM_OPEN, path, a);
    say("open", path, r < 0 ? r : fd);
    if (r < 0) {
        REAL(close)(fd);
        return (int)answer(r);
    }
    node_of_fd[fd] = (short)node;
    started = 1;
    return fd;
}

static long forward(enum seam_request req, int fd, long a[6]) {
    long r = inherited ? -EBADF : transport(req, NULL, a); /* amdkfd refuses a process that did not open it */
    if (seam_logging) {
        char what[64];
        snprintf(what, sizeof what, "%s fd %d %#lx", req == SEAM_IOCTL ? "ioctl" : "mmap", fd, a[1]);
        say(what, NULL, r);
    }
    return answer(r);
}

static int open_any(const char *p, int flags, mode_t mode, int dirfd, int at) {
    int node = node_of_path(p);
    if (node != NOT_MOCK)
        return open_node(p, node, flags);
    char buf[PATH_MAX];
    const char *q = redirect(p, buf);
    return at ? REAL(openat)(dirfd, q, flags, mode) : REAL(open)(q, flags, mode);
}

static mode_t mode_arg(int flags, va_list ap) {
    return (flags & O_CREAT) || (flags & O_TMPFILE) == O_TMPFILE ? va_arg(ap, mode_t) : 0;
}

#define OPEN(name)                                                                                                   \
    int name(const char *p, int flags, ...) {                                                                       \
        va_list ap;                                                                                                  \
        va_start(ap, flags);                                                                                         \
        mode_t mode = mode_arg(flags, ap);                                                                           \
        va_end(ap);                                                                                                  \
        return open_any(p, flags, mode, AT_FDCWD, 0);                                                                \
    }
#define OPENAT(name)                                                                                                 \
    int name(int dirfd, const char *p, int flags, ...) {                                                            \
        va_list ap;                                                                                                  \
        va_start(ap, flags);                                                                                         \
        mode_t mode = mode_arg(flags, ap);                                                                           \
        va_end(ap);                                                                                                  \
        return absolute(p) ? open_any(p, flags, mode, dirfd, 1) : REAL(openat)(dirfd, p, flags, mode);              \
    }
OPEN(open)
OPEN(open64)
OPENAT(openat)
OPENAT(openat64)
int __open_2(const char *p, int flags) { return open_any(p, flags, 0, AT_FDCWD, 0); }
int __open64_2(const char *p, int flags) { return open_any(p, flags, 0, AT_FDCWD, 0); }
int __openat_2(int d, const char *p, int flags) { return openat(d, p, flags); }
int __openat64_2(int d, const char *p, int flags) { return openat(d, p, flags); }

/* `fd` is no longer a mock node's (it is being closed or replaced) */
static void forget(int fd) {
    if (!is_mock(fd))
        return;
    node_of_fd[fd] = NOT_MOCK;
    long a[6] = {fd};
    if (!inherited)
        say("close", NULL, transport(SEAM_CLOSE, NULL, a));
}
int close(int fd) {
    forget(fd);
    return REAL(close)(fd);
}

int ioctl(int fd, unsigned long request, ...) {
    va_list ap;
    va_start(ap, request);
    void *arg = va_arg(ap, void *);
    va_end(ap);
    if (!is_mock(fd))
        return REAL(ioctl)(fd, request, arg);
    long a[6] = {fd, (long)request, (long)arg};
    return (int)forward(SEAM_IOCTL, fd, a);
}

static void *map(void *addr, size_t len, int prot, int flags, int fd, off_t off) {
    long a[6] = {fd, (long)addr, (long)len, prot, flags, (long)off};
    long r = forward(SEAM_MMAP, fd, a);
    return r == -1 ? MAP_FAILED : (void *)r;
}
void *mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off) {
    return is_mock(fd) ? map(addr, len, prot, flags, fd, off) : REAL(mmap)(addr, len, prot, flags, fd, off);
}
void *mmap64(void *addr, size_t len, int prot, int flags, int fd, off64_t off) {
    return is_mock(fd) ? map(addr, len, prot, flags, fd, off) : REAL(mmap64)(addr, len, prot, flags, fd, off);
}

/* after a successful dup of `old` to `fd` (which the kernel closed first if it was open) */
static int duplicated(int old, int fd) {
    if (fd < 0 || fd == old)
        return fd;
    forget(fd);
    if (is_mock(old) && fd < MAX_FDS) {
        long a[6] = {old, fd};
        node_of_fd[fd] = node_of_fd[old];
        if (!inherited)
            transport(SEAM_DUP, NULL, a);
    }
    return fd;
}
int dup(int fd) { return duplicated(fd, REAL(dup)(fd)); }
int dup2(int old, int fd) { return duplicated(old, REAL(dup2)(old, fd)); }
int dup3(int old, int fd, int flags) { return duplicated(old, REAL(dup3)(old, fd, flags)); }

#define FCNTL(name)                                                                                                  \
    int name(int fd, int cmd, ...) {                                                                                \
        va_list ap;                                                                                                  \
        va_start(ap, cmd);                                                                                           \
        void *arg = va_arg(ap, void *);                                                                              \
        va_end(ap);                                                                                                  \
        int r = REAL(name)(fd, cmd, arg);                                                                            \
        return cmd == F_DUPFD || cmd == F_DUPFD_CLOEXEC ? duplicated(fd, r) : r;                                     \
    }
FCNTL(fcntl)
FCNTL(fcntl64)

/* ---- dlsym: a client that looks libc's functions up in libc's own handle (Python's ctypes.CDLL("libc.so.6"),
 * tinygrad's libc binding) gets this library's, as one that links them does ---- */
static void *shadowing(const char *name, void *found) {
    static void *self;
    Dl_info in_libc, mine;
    if (!self && dladdr((void *)seam_init, &mine))
        self = dlopen(mine.dli_fname, RTLD_LAZY | RTLD_NOLOAD);
    void *ours = found && self ? real_dlsym(self, name) : NULL; /* our definition, else libc's (our dependency) */
    if (!ours || ours == found || !dladdr(found, &in_libc) || !dladdr((void *)REAL(close), &mine) ||
        in_libc.dli_fbase != mine.dli_fbase)
        return found; /* not a libc function this library interposes */
    return ours;
}
void *dlsym(void *restrict handle, const char *restrict name) {
    if (handle == RTLD_NEXT)
        return real_dlsym(handle, name); /* a sibling call: "next" stays relative to the caller */
    void *found = real_dlsym(handle, name);
    return handle == RTLD_DEFAULT ? found : shadowing(name, found);
}

/* ---- exit: the transport's turn comes first, before any library's exit handlers and destructors ---- */
static void leaving(void) {
    static int once;
    if (started && !inherited && !__atomic_exchange_n(&once, 1, __ATOMIC_ACQ_REL))
        transport_exit();
}
void exit(int status) {
    leaving();
    REAL(exit)(status);
    __builtin_unreachable();
}
static int (*client_main)(int, char **, char **);
static int main_then_leave(int argc, char **argv, char **envp) {
    int status = client_main(argc, argv, envp);
    leaving(); /* returning from main exits from inside libc, where exit() is not interposed */
    return status;
}
int __libc_start_main(int (*main)(int, char **, char **), int argc, char **argv, void (*init)(void),
                      void (*fini)(void), void (*rtld_fini)(void), void *stack_end) {
    client_main = main;
    return REAL(__libc_start_main)(main_then_leave, argc, argv, init, fini, rtld_fini, stack_end);
}

/* ---- paths: the served ones are read from HWEMU_SEAM_SYSFS ---- */
#define REDIRECTED(type, name, params, ...)                                                                          \
    type name params {                                                                                               \
        char buf[PATH_MAX];                                                                                          \
        const char *q = redirect(p, buf);                                                                            \
        return REAL(name)(__VA_ARGS__);                                                                              \
    }
REDIRECTED(FILE *, fopen, (const char *p, const char *m), q, m)
REDIRECTED(FILE *, fopen64, (const char *p, const char *m), q, m)
REDIRECTED(DIR *, opendir, (const char *p), q)
REDIRECTED(int, access, (const char *p, int m), q, m)
REDIRECTED(ssize_t, readlink, (const char *restrict p, char *restrict b, size_t n), q, b, n)
REDIRECTED(char *, realpath, (const char *restrict p, char *restrict r), q, r)

/* a device node's stat: a character device of its major and minor */
static int as_node(int node, int r, struct stat *st) {
    if (r == 0 && node != NOT_MOCK) {
        st->st_mode = S_IFCHR | 0666;
        st->st_rdev = node == KFD_NODE ? makedev(KFD_MAJOR, 0) : makedev(DRM_MAJOR, node);
    }
    return r;
}
#define STAT(name, st_t, ...)                                                                                        \
    int name(__VA_ARGS__ const char *p, st_t *st) {                                                                 \
        char buf[PATH_MAX];                                                                                          \
        return as_node(node_of_path(p), REAL(name)(STAT_ARGS_##name), (struct stat *)st);                            \
    }
#define STAT_ARGS_stat redirect(p, buf), st
#define STAT_ARGS_stat64 redirect(p, buf), st
#define STAT_ARGS_lstat redirect(p, buf), st
#define STAT_ARGS_lstat64 redirect(p, buf), st
#define STAT_ARGS___xstat v, redirect(p, buf), st
#define STAT_ARGS___xstat64 v, redirect(p, buf), st
#define STAT_ARGS___lxstat v, redirect(p, buf), st
#define STAT_ARGS___lxstat64 v, redirect(p, buf), st
STAT(stat, struct stat)
STAT(stat64, struct stat64)
STAT(lstat, struct stat)
STAT(lstat64, struct stat64)
STAT(__xstat, struct stat, int v, )
STAT(__xstat64, struct stat64, int v, )
STAT(__lxstat, struct stat, int v, )
STAT(__lxstat64, struct stat64, int v, )

int fstatat(int d, const char *p, struct stat *st, int f) {
    char buf[PATH_MAX];
    const char *q = absolute(p) ? redirect(p, buf) : p;
    return as_node(absolute(p) ? node_of_path(p) : NOT_MOCK, REAL(fstatat)(d, q, st, f), st);
}
int fstatat64(int d, const char *p, struct stat64 *st, int f) { return fstatat(d, p, (struct stat *)st, f); }

int statx(int d, const char *restrict p, int f, unsigned mask, struct statx *restrict st) {
    char buf[PATH_MAX];
    int node = absolute(p) ? node_of_path(p) : NOT_MOCK;
    int r = REAL(statx)(d, absolute(p) ? redirect(p, buf) : p, f, mask, st);
    if (r == 0 && node != NOT_MOCK) {
        st->stx_mode = S_IFCHR | 0666;
        st->stx_rdev_major = node == KFD_NODE ? KFD_MAJOR : DRM_MAJOR;
        st->stx_rdev_minor = node == KFD_NODE ? 0 : (unsigned)node;
    }
    return r;
}

static int fd_node(int fd) { return is_mock(fd) ? node_of_fd[fd] : NOT_MOCK; }
int fstat(int fd, struct stat *st) { return as_node(fd_node(fd), REAL(fstat)(fd, st), st); }
int fstat64(int fd, struct stat64 *st) { return as_node(fd_node(fd), REAL(fstat64)(fd, st), (struct stat *)st); }
int __fxstat(int v, int fd, struct stat *st) { return as_node(fd_node(fd), REAL(__fxstat)(v, fd, st), st); }
int __fxstat64(int v, int fd, struct stat64 *st) {
    return as_node(fd_node(fd), REAL(__fxstat64)(v, fd, st), (struct stat *)st);
}
