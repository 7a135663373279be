/* HVX kernels of the kind tensor compilers emit: dot products (vrmpy), widening multiply-accumulate,
 * shifts with rounding/saturation, predicates and vmux, deal/shuffle/rotate, unaligned loads and stores. */
#include "hexagon_rt.h"
#include <hexagon_types.h>
#include <hexagon_protos.h>

static unsigned char a[1024] __attribute__((aligned(128)));
static signed char w[1024] __attribute__((aligned(128)));
static unsigned char out[512 + 7] __attribute__((aligned(128)));

int main(void) {
    for (int i = 0; i < 1024; i++) { a[i] = (unsigned char)(i * 29 + 3); w[i] = (signed char)(i * 11 - 50); }
    HVX_Vector acc = Q6_V_vzero(), mx = Q6_V_vzero();
    HVX_VectorPair wide = Q6_W_vcombine_VV(Q6_V_vzero(), Q6_V_vzero());
    for (int k = 0; k < 8; k++) {
        HVX_Vector va = ((HVX_Vector *)a)[k];
        HVX_Vector vw = *(HVX_UVector *)(w + 128 * (k & 3) + 5);
        acc = Q6_Vw_vrmpyacc_VwVubVb(acc, va, vw);
        wide = Q6_Wh_vmpyacc_WhVubVb(wide, va, vw);
        HVX_VectorPred gt = Q6_Q_vcmp_gt_VubVub(va, mx);
        mx = Q6_V_vmux_QVV(gt, va, mx);
        mx = Q6_V_vror_VR(mx, 3 + k);
    }
    HVX_Vector lo = Q6_V_lo_W(wide), hi = Q6_V_hi_W(wide);
    HVX_Vector packed = Q6_Vub_vasr_VhVhR_rnd_sat(hi, lo, 4);
    HVX_VectorPair dealt = Q6_W_vdeal_VVR(packed, mx, -2);
    HVX_Vector sh = Q6_Vb_vshuff_Vb(Q6_V_hi_W(dealt));
    *(HVX_UVector *)(out + 3) = Q6_V_vxor_VV(sh, Q6_V_lo_W(dealt));
    *(HVX_UVector *)(out + 131) = Q6_Vw_vasl_VwR(acc, 1);
    ((HVX_Vector *)out)[2] = mx;
    const int *lanes = (const int *)&acc;
    long long total = 0;
    for (int i = 0; i < 32; i++) total += lanes[i];
    put_hex64("total", (unsigned long long)total);
    put_bytes("out", out, sizeof out);
    return (int)(total & 0x7f);
}
