/* Single-precision arithmetic, conversions and comparisons (the sf instructions; no compiler-rt helpers). */
#include "hexagon_rt.h"

int main(void) {
    float v[32];
    float acc = 0.0f, mx = -1e30f;
    for (int i = 0; i < 32; i++) v[i] = (float)(i * 7 - 100) * 0.37f + 1.0f / 3.0f;
    for (int i = 0; i < 32; i++) {
        acc = acc * 0.99f + v[i] * v[31 - i];
        mx = v[i] > mx ? v[i] : mx;
    }
    int iv = (int)acc, iu = (int)(mx * 1000.0f);
    unsigned bits;
    __builtin_memcpy(&bits, &acc, 4);
    put_hex64("acc", bits);
    put_hex64("ints", ((unsigned long long)(unsigned)iv << 32) | (unsigned)iu);
    put_bytes("v", v, sizeof v);
    return iv & 0x7f;
}
