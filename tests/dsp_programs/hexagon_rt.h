/* A tiny runtime for static, -nostdlib Hexagon programs: Linux syscalls through trap0(#1)
 * (number in r6, arguments in r0-r5), _start, and output helpers. */
#ifndef HEXAGON_RT_H
#define HEXAGON_RT_H

static inline long syscall3(long n, long a, long b, long c) {
    register long r0 __asm__("r0") = a;
    register long r1 __asm__("r1") = b;
    register long r2 __asm__("r2") = c;
    register long r6 __asm__("r6") = n;
    __asm__ volatile("trap0(#1)" : "+r"(r0) : "r"(r1), "r"(r2), "r"(r6) : "memory");
    return r0;
}

static inline long sys_write(int fd, const void *p, unsigned long n) { return syscall3(64, fd, (long)p, n); }
static inline long sys_read(int fd, void *p, unsigned long n) { return syscall3(63, fd, (long)p, n); }
static inline void sys_exit(int code) { syscall3(93, code, 0, 0); for (;;) {} }

static unsigned long rt_strlen(const char *s) { unsigned long n = 0; while (s[n]) n++; return n; }

static void put_hex64(const char *label, unsigned long long v) {
    char line[48];
    unsigned long n = rt_strlen(label);
    for (unsigned long i = 0; i < n && i < 24; i++) line[i] = label[i];
    if (n > 24) n = 24;
    line[n++] = '=';
    for (int i = 15; i >= 0; i--) line[n++] = "0123456789abcdef"[(v >> (4 * i)) & 15];
    line[n++] = '\n';
    sys_write(1, line, n);
}

static void put_bytes(const char *label, const void *p, unsigned long len) {
    const unsigned char *b = p;
    unsigned long long h = 1469598103934665603ull;  /* FNV-1a of the bytes */
    for (unsigned long i = 0; i < len; i++) h = (h ^ b[i]) * 1099511628211ull;
    put_hex64(label, h);
}

int main(void);
void _start(void) { sys_exit(main()); }

#endif
