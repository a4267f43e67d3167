// stockham_local.cl: the whole transform of a frame in one kernel, one global read and one global
// write per frame: load (window applied) -> self-sorting Stockham FFT in local memory -> r2c
// post-processing (real input) -> |X|^2 -> output scale -> n/2+1 (real) or n (complex) values.
//
// Layout: input frames back to back; a real frame is n = 2M samples read as M complex pairs
// z_j = (x_2j, x_2j+1) (the half-length packing trick); a complex frame is M interleaved (re, im)
// samples. Either way a frame is 2M reals and pair j of frame f starts at in[f*2M + 2j].
// Output: BINS values per frame, frames back to back.
// Window: `win` holds n coefficients (real: one per sample; complex: one per complex sample).
// Twiddles: `tw[t] = exp(-2 pi i t / TABN)`, computed on the host in double.
//
// Work-group shape: WG = TPF * FPB work-items; FPB frames per work-group, TPF work-items per frame.
// Local memory: FPB*M reals for the real parts and as many for the imaginary parts (split so that
// double data does not cause two-way bank conflicts). Each Stockham pass reads R values per
// butterfly into registers, waits at a barrier, and writes the butterfly outputs back in place.
//
// Defines: M, TPF, FPB, MAIN_RADIX (2, 4 or 8), MAIN_PASSES, LAST_RADIX (1 = none, else 2 or 4),
// REAL_INPUT (0 or 1), TABN (2M for real input, M for complex), USE_DOUBLE (see common.cl).

#define WG (TPF * FPB)
#if REAL_INPUT
#define BINS (M + 1)
#else
#define BINS M
#endif

// One radix-RR Stockham pass over the frame at local offset `base`, done by the TPF work-items
// t = 0..TPF-1 of that frame, for sub-transform length ns (product of the earlier radices).
#define DEFINE_PASS(RR) DEFINE_PASS_(RR)
#define DEFINE_PASS_(RR)                                                                           \
    inline void pass_r##RR(__local real_t *sre, __local real_t *sim, __global const real2 *tw,    \
                           uint base, uint t, uint ns) {                                           \
        real2 v[M / (RR * TPF)][RR];                                                               \
        for (uint b = 0; b < M / (RR * TPF); b++) {                                                \
            uint j = t + b * TPF;                                                                  \
            for (uint r = 0; r < RR; r++) {                                                        \
                uint s = base + j + r * (M / RR);                                                  \
                v[b][r] = (real2)(sre[s], sim[s]);                                                 \
            }                                                                                      \
        }                                                                                          \
        barrier(CLK_LOCAL_MEM_FENCE);                                                              \
        for (uint b = 0; b < M / (RR * TPF); b++) {                                                \
            uint j = t + b * TPF;                                                                  \
            uint k = j & (ns - 1);                                                                 \
            uint step = (TABN / RR) / ns * k;                                                      \
            for (uint r = 1; r < RR; r++) {                                                        \
                v[b][r] = cmul(v[b][r], tw[r * step]);                                             \
            }                                                                                      \
            dft_r(v[b], RR);                                                                       \
            uint d = base + (j - k) * RR + k;                                                      \
            for (uint r = 0; r < RR; r++) {                                                        \
                sre[d + r * ns] = v[b][r].x;                                                       \
                sim[d + r * ns] = v[b][r].y;                                                       \
            }                                                                                      \
        }                                                                                          \
        barrier(CLK_LOCAL_MEM_FENCE);                                                              \
    }
#define PASS_FN(RR) PASS_FN_(RR)
#define PASS_FN_(RR) pass_r##RR

#if MAIN_PASSES > 0
DEFINE_PASS(MAIN_RADIX)
#endif
#if LAST_RADIX > 1
DEFINE_PASS(LAST_RADIX)
#endif

__kernel __attribute__((reqd_work_group_size(WG, 1, 1)))
void fft_local(__global const real_t *restrict in, __global const real_t *restrict win,
               __global const real2 *restrict tw, __global real_t *restrict out, uint frames,
               int scale_mode, real_t norm_edge, real_t norm_interior) {
    __local real_t sre[FPB * M];
    __local real_t sim[FPB * M];
    const uint lid = get_local_id(0);
    const uint f0 = get_group_id(0) * FPB;

    // load: consecutive work-items read consecutive pairs (coalesced); window applied here
    for (uint i = lid; i < FPB * M; i += WG) {
        uint f = i / M, j = i % M;
        real2 z = (real2)(R(0.0), R(0.0));
        if (f0 + f < frames) {
            real2 x = vload2(0, in + (size_t)(f0 + f) * (2 * M) + 2 * j);
#if REAL_INPUT
            z = x * vload2(j, win);
#else
            z = x * win[j];
#endif
        }
        sre[i] = z.x;
        sim[i] = z.y;
    }
    barrier(CLK_LOCAL_MEM_FENCE);

    const uint base = (lid / TPF) * M, t = lid % TPF;
    uint ns = 1;
#if MAIN_PASSES > 0
    for (uint p = 0; p < MAIN_PASSES; p++) {
        PASS_FN(MAIN_RADIX)(sre, sim, tw, base, t, ns);
        ns *= MAIN_RADIX;
    }
#endif
#if LAST_RADIX > 1
    PASS_FN(LAST_RADIX)(sre, sim, tw, base, t, ns);
#endif

    // store: |X|^2 and the output scale, only BINS values per frame leave the device
    for (uint f = 0; f < FPB; f++) {
        if (f0 + f >= frames) {
            break;
        }
        const uint o = f * M;
        for (uint k = lid; k < BINS; k += WG) {
#if REAL_INPUT
            uint a = o + (k & (M - 1)), c = o + ((M - k) & (M - 1));
            real_t p = r2c_power((real2)(sre[a], sim[a]), (real2)(sre[c], sim[c]),
                                 tw[k * (TABN / (2 * M))]);
            int edge = (k == 0) || (k == M);
#else
            real_t p = sre[o + k] * sre[o + k] + sim[o + k] * sim[o + k];
            int edge = (k == 0);
#endif
            out[(size_t)(f0 + f) * BINS + k] =
                finish_bin(p, edge, scale_mode, norm_edge, norm_interior);
        }
    }
}
