/* Integer, 64-bit and saturating arithmetic; results written to stdout, exit code from a checksum. */
#include "hexagon_rt.h"

static long long mix(long long a, int b) { return (a * 31 + b) ^ (a >> 7); }

int main(void) {
    int buf[64];
    long long acc = 1;
    unsigned u = 0x12345678u;
    for (int i = 0; i < 64; i++) {
        buf[i] = i * i - 7 * i + (int)(u >> (i & 15));
        u = u * 1103515245u + 12345u;
    }
    for (int i = 0; i < 64; i++) acc = mix(acc, buf[i]);
    int q = buf[5] >> 3, r = buf[9] & 7;  /* no / or %: they need compiler-rt helpers */
    unsigned short h = (unsigned short)(acc >> 13);
    signed char c = (signed char)acc;
    put_hex64("acc", acc);
    put_hex64("qr", ((long long)q << 32) | (unsigned)r);
    put_hex64("hc", ((long long)h << 8) | (unsigned char)c);
    put_bytes("buf", buf, sizeof buf);
    return (int)(acc & 0x7f);
}
