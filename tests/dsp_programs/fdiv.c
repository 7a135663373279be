/* Single-precision division (clang expands a/b into the sfrecipa / sffixupn / sffixupd / sffma / sffma:scale
 * sequence) on edge operands in each of USR's rounding modes: quotients and USR's sticky flags. */
#include "hexagon_rt.h"

#define USR_FPRND_SHIFT 22
#define USR_FLAGS 0x3e

static unsigned get_usr(void) {
    unsigned u;
    __asm__ volatile("%0 = usr" : "=r"(u) : : "memory");
    return u;
}

static void set_usr(unsigned u) { __asm__ volatile("usr = %0" : : "r"(u) : "memory"); }

/* 1, 3, -7, 1/3, the largest normal, the smallest normal, subnormals, zeros, infinity, NaN, 2^100, 2^-100,
 * 1.5, 0.1, 1e-30 */
static const unsigned operands[] = {
    0x3f800000, 0x40400000, 0xc0e00000, 0x3eaaaaab, 0x7f7fffff, 0x00800000, 0x00000001, 0x80012345,
    0x00000000, 0x80000000, 0x7f800000, 0x7fc00000, 0x71800000, 0x0d800000, 0x3fc00000, 0x3dcccccd,
    0x0da24260,
};
#define N (sizeof operands / sizeof operands[0])

static volatile unsigned vin[N];
static volatile float out;

static unsigned long long fnv(unsigned long long h, unsigned v) {
    for (int k = 0; k < 4; k++) h = (h ^ ((v >> (8 * k)) & 0xff)) * 1099511628211ull;
    return h;
}

int main(void) {
    for (unsigned i = 0; i < N; i++) vin[i] = operands[i];
    for (unsigned mode = 0; mode < 4; mode++) {
        unsigned long long hash = 1469598103934665603ull, seen = 0;
        for (unsigned i = 0; i < N; i++) {
            for (unsigned j = 0; j < N; j++) {
                set_usr((get_usr() & ~(3u << USR_FPRND_SHIFT) & ~USR_FLAGS) | mode << USR_FPRND_SHIFT);
                unsigned a = vin[i], b = vin[j];
                float fa, fb;
                __builtin_memcpy(&fa, &a, 4);
                __builtin_memcpy(&fb, &b, 4);
                out = fa / fb;
                float q = out;
                unsigned r, flags = get_usr() & USR_FLAGS;
                __builtin_memcpy(&r, &q, 4);
                hash = fnv(fnv(hash, r), flags);
                seen |= 1ull << (flags >> 1);
            }
        }
        char label[8] = "div m0";
        label[5] = '0' + mode;
        put_hex64(label, hash);
        label[3] = '!';
        put_hex64(label, seen);
    }
    return 0;
}
