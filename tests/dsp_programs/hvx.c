/* HVX (128-byte vectors): add, multiply, shuffle, reduce, unaligned loads. */
#include "hexagon_rt.h"
#include <hexagon_types.h>
#include <hexagon_protos.h>

static unsigned char a[512] __attribute__((aligned(128)));
static unsigned char b[512] __attribute__((aligned(128)));
static HVX_Vector out[4];

int main(void) {
    for (int i = 0; i < 512; i++) { a[i] = (unsigned char)(i * 13 + 5); b[i] = (unsigned char)(i * 7 + 1); }
    HVX_Vector acc = Q6_V_vzero();
    for (int k = 0; k < 3; k++) {
        HVX_Vector va = *(HVX_Vector *)(a + 128 * k);
        HVX_Vector vb = *(HVX_UVector *)(b + 128 * k + 3);          /* unaligned */
        HVX_Vector s = Q6_Vb_vadd_VbVb(va, vb);
        HVX_VectorPair m = Q6_Wh_vmpy_VubVb(va, vb);
        HVX_Vector sh = Q6_Vb_vshuffe_VbVb(s, Q6_V_lo_W(m));
        acc = Q6_Vw_vadd_VwVw(acc, Q6_Vw_vrmpy_VubRb(sh, 0x01020304));
        out[k] = sh;
    }
    out[3] = acc;
    const int *lanes = (const int *)&out[3];
    int total = 0;
    for (int i = 0; i < 32; i++) total += lanes[i];
    put_hex64("total", (unsigned)total);
    put_bytes("out", out, sizeof out);
    return total & 0x7f;
}
