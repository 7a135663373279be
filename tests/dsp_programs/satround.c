/* Saturating and rounding arithmetic (the intrinsics map to single instructions), 64-bit pairs, bit ops. */
#include "hexagon_rt.h"
#include <hexagon_protos.h>

int main(void) {
    unsigned long long h = 1469598103934665603ull;
    int x = 0x7ffff000, y = -0x7ffff000;
    long long p = 0x123456789abcdefll, q = -0x0fedcba987654321ll;
    for (int i = 0; i < 40; i++) {
        int a = Q6_R_add_RR_sat(x, i * 0x1000);
        int b = Q6_R_sub_RR_sat(y, i * 0x1000);
        int c = Q6_R_asr_RI_rnd(a ^ b, 3);
        int d = Q6_R_sath_R(a >> (i & 15));
        long long e = Q6_P_vaddh_PP_sat(p, q);
        long long f = Q6_P_vmpyh_RR_sat(a, b);
        int g = Q6_R_cl0_R(i * 77 + 1) + Q6_R_popcount_P(p);
        long long k = Q6_P_asl_PR(p, i - 20) ^ Q6_P_lsr_PI(q, 7);
        h = (h ^ (unsigned)a ^ ((unsigned long long)(unsigned)b << 32)) * 1099511628211ull;
        h = (h ^ (unsigned)c ^ (unsigned)d ^ (unsigned long long)e) * 1099511628211ull;
        h = (h ^ (unsigned long long)f ^ (unsigned)g ^ (unsigned long long)k) * 1099511628211ull;
        p = p * 3 + i;
        q = (q >> 1) - i;
    }
    put_hex64("h", h);
    return (int)(h & 0x7f);
}
