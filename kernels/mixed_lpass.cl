// mixed_lpass.cl: mixed-radix Stockham passes in local memory, shared by mixed_local.cl (one
// transform of M points per work-group) and twolevel.cl (LP_COUNT transforms per work-group).
// A pass of radix RR over LP_COUNT transforms of LP_LEN points, transform f at local offset
// f * LP_STRIDE: butterfly j < LP_LEN/RR reads j + r LP_LEN/RR, twiddles input r by
// tw[r k LP_LEN/(ns RR)] (k = j mod ns; tw[t] = exp(-2 pi i t/LP_LEN), computed on the host in
// double) and writes (j - k) RR + k + r ns (mixed_radix.cl's indexing, MDFT_RR butterflies).
// The WG work-items take the LP_COUNT * LP_LEN/RR butterflies in turn, consecutive work-items on
// consecutive butterflies of one transform.
// Defines: WG; LP_LEN (default M), LP_COUNT (default 1), LP_STRIDE (default LP_LEN); LP_PAD
// (twolevel.cl): every local index i is stored at LPAD(i) = i + i/16, so the stride-R stores of a
// pass (the first radix-16 pass: 16 points = 32 words apart, every work-item on one bank) and the
// strided reads and writes of the transposes spread over the banks; the arrays hold
// LPAD(size) + 1 values.

#ifndef LP_LEN
#define LP_LEN M
#endif
#ifndef LP_COUNT
#define LP_COUNT 1
#endif
#ifndef LP_STRIDE
#define LP_STRIDE LP_LEN
#endif
#ifdef LP_PAD
#define LPAD(i) ((i) + ((i) >> 4))
#else
#define LPAD(i) (i)
#endif

#define DEFINE_LPASS(RR)                                                                           \
    inline void lpass_r##RR(__local const real2 *src, __local real2 *dst,                         \
                            __global const real2 *restrict tw, uint ns, uint t) {                  \
        const uint q = LP_LEN / RR;                                                                \
        for (uint g = t; g < LP_COUNT * q; g += WG) {                                              \
            const uint f = g / q, j = g - f * q;                                                   \
            const uint o = f * LP_STRIDE;                                                          \
            real2 v[RR];                                                                           \
            for (uint r = 0; r < RR; r++) {                                                        \
                v[r] = src[LPAD(o + j + r * q)];                                                   \
            }                                                                                      \
            const uint k = j % ns;                                                                 \
            if (ns > 1) {                                                                          \
                const uint stride = q / ns;                                                        \
                for (uint r = 1; r < RR; r++) {                                                    \
                    v[r] = cmul(v[r], tw[r * k * stride]);                                         \
                }                                                                                  \
            }                                                                                      \
            MDFT_##RR(v);                                                                          \
            const uint d = o + (j - k) * RR + k;                                                   \
            for (uint r = 0; r < RR; r++) {                                                        \
                dst[LPAD(d + r * ns)] = v[r];                                                      \
            }                                                                                      \
        }                                                                                          \
    }

DEFINE_LPASS(2)
DEFINE_LPASS(3)
DEFINE_LPASS(4)
DEFINE_LPASS(5)
DEFINE_LPASS(7)
DEFINE_LPASS(8)
DEFINE_LPASS(16)

// All NPASSES passes (radices RADICES) from `a`, ping-ponging with `b`; returns where the
// transforms are. Barriers before and after each pass.
inline __local real2 *lpasses(__local real2 *a, __local real2 *b, __global const real2 *restrict tw,
                              uint t) {
    const uint radices[NPASSES] = RADICES;
    __local real2 *src = a;
    __local real2 *dst = b;
    uint ns = 1;
    for (uint p = 0; p < NPASSES; p++) {
        barrier(CLK_LOCAL_MEM_FENCE);
        switch (radices[p]) {
        case 2: lpass_r2(src, dst, tw, ns, t); break;
        case 3: lpass_r3(src, dst, tw, ns, t); break;
        case 4: lpass_r4(src, dst, tw, ns, t); break;
        case 5: lpass_r5(src, dst, tw, ns, t); break;
        case 7: lpass_r7(src, dst, tw, ns, t); break;
        case 8: lpass_r8(src, dst, tw, ns, t); break;
        default: lpass_r16(src, dst, tw, ns, t); break;
        }
        ns *= radices[p];
        __local real2 *swap = src;
        src = dst;
        dst = swap;
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    return src;
}
