/* stdin -> stdout: reads its input in chunks (as tinygrad's MOCKDSP programs read their buffers), writes it
 * back transformed, and a checksum; exit status from the byte count. */
#include "hexagon_rt.h"

static unsigned char buf[4096];

int main(void) {
    unsigned long total = 0;
    unsigned sum = 0;
    long n;
    while ((n = sys_read(0, buf, sizeof buf)) > 0) {
        for (long i = 0; i < n; i++) { sum = sum * 31 + buf[i]; buf[i] ^= 0x20; }
        sys_write(1, buf, n);
        total += n;
    }
    put_hex64("sum", sum);
    return (int)(total & 0x7f);
}
