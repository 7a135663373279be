/* Nested counted loops (hardware loops loop0/loop1 at -O2), memory with several addressing modes. */
#include "hexagon_rt.h"

static unsigned char src[256], dst[256];
static short coef[16] = {3, -1, 4, -1, 5, -9, 2, -6, 5, 3, -5, 8, 9, -7, 9, 3};

int main(void) {
    for (int i = 0; i < 256; i++) src[i] = (unsigned char)(i * 37 + 11);
    int sum = 0;
    for (int r = 0; r < 8; r++)
        for (int c = 0; c < 32; c++) {
            int x = src[r * 32 + c] * coef[(r + c) & 15];
            dst[r * 32 + c] = (unsigned char)(x >> 2);
            sum += x;
        }
    long long s64 = 0;
    for (int i = 255; i >= 0; i -= 3) s64 += (long long)dst[i] << (i & 31);
    put_hex64("sum", (unsigned)sum);
    put_hex64("s64", s64);
    put_bytes("dst", dst, sizeof dst);
    return sum & 0xff;
}
