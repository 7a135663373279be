/* HVX gathers and scatters (vgather / vscatter / vscatter-add, word and halfword, Q-masked): VTCM is a region
 * of the program's own memory here, as under qemu-hexagon's user mode; offsets stay inside the region. */
#include "hexagon_rt.h"
#include <hexagon_types.h>
#include <hexagon_protos.h>

#define REGION 2048
static unsigned char region[REGION] __attribute__((aligned(128)));
static HVX_Vector dst[6], offs[2], vals, chk[REGION / 128];

int main(void) {
    for (int i = 0; i < REGION; i++) region[i] = (unsigned char)(i * 29 + 7);
    unsigned *ow = (unsigned *)&offs[0];
    unsigned short *oh = (unsigned short *)&offs[1];
    unsigned *vw = (unsigned *)&vals;
    for (int i = 0; i < 32; i++) { ow[i] = ((i * 37) % 500) * 4; vw[i] = 0x01000193u * (i + 1); }
    for (int i = 0; i < 64; i++) oh[i] = (unsigned short)(((i * 53) % 1000) * 2);
    HVX_VectorPred q = Q6_Q_vcmp_gt_VwVw(vals, Q6_V_vsplat_R(0x10000000));
    Q6_vgather_ARMVw(&dst[0], (int)region, REGION - 1, offs[0]);
    Q6_vgather_ARMVh(&dst[1], (int)region, REGION - 1, offs[1]);
    Q6_vgather_AQRMVw(&dst[2], q, (int)region, REGION - 1, offs[0]);
    Q6_vscatter_RMVwV((int)region, REGION - 1, offs[0], vals);
    Q6_vscatteracc_RMVhV((int)region, REGION - 1, offs[1], vals);
    Q6_vscatter_QRMVwV(q, (int)region + 4, REGION - 1, offs[0], Q6_V_vsplat_R(0x5a5a5a5a));
    /* colliding offsets: scatter-add accumulates, a plain scatter keeps the last element */
    HVX_Vector small = Q6_V_vand_VV(offs[0], Q6_V_vsplat_R(0x3c));
    Q6_vscatteracc_RMVwV((int)region + 1024, REGION - 1025, small, vals);
    Q6_vscatter_RMVwV((int)region + 1536, REGION - 1537, small, vals);
    Q6_vgather_ARMVw(&dst[3], (int)region, REGION - 1, offs[0]);
    for (int k = 0; k < REGION / 128; k++) chk[k] = ((HVX_Vector *)region)[k];
    put_bytes("gathered", dst, sizeof dst);
    put_bytes("region", chk, sizeof chk);
    return ((unsigned char *)&dst[3])[5] & 0x7f;
}
