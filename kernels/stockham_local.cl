// stockham_local.cl: the whole transform of a frame in one kernel, one global read and one global
// write per frame: load (window applied) -> self-sorting Stockham FFT in local memory -> r2c
// post-processing (real input) -> |X|^2 -> output scale -> n/2+1 (real) or n (complex) values
// (COMPLEX_OUT: X itself, two values per bin; common.cl: store_bin).
//
// Layout: input frames back to back; a real frame is n = 2M samples read as M complex pairs
// z_j = (x_2j, x_2j+1) (the half-length packing trick); a complex frame is M interleaved (re, im)
// samples. Either way a frame is 2M reals and pair j of frame f starts at in[f*step + 2j] (step = 2M
// for frames back to back; less for overlapping frames, whose shared samples are held once).
// Output: BINS bins per frame (one value each, two with COMPLEX_OUT), frames back to back.
// Window: `win` holds n coefficients (real: one per sample; complex: one per complex sample).
// Twiddles: `tw[t] = exp(-2 pi i t / TABN)`, computed on the host in double.
//
// Work-group shape: WG = TPF * FPB work-items; FPB frames per work-group, TPF work-items per frame.
// Local memory: FPB*M reals for the real parts and as many for the imaginary parts, each padded by
// one word every 32 (PADI) so the stride-R writes of the early passes hit distinct banks.
// Registers: each work-item holds the R inputs (R = MAIN_RADIX, 16 by default) of its M/(R*TPF) butterflies. The first pass reads
// them straight from global memory (window applied); every pass twiddles, transforms and writes
// its outputs to local memory; the next pass reads its inputs back after a barrier. After the
// last pass the store phase reads the spectrum from local memory (real input: it needs Z_k and
// Z_{M-k}); complex input skips it and writes |X| (or X) from registers (DIRECT, below).
// (passes: stockham_passes.cl)
// Twiddles: w = tw[step] read once per butterfly and raised to the powers 2..R-1 by complex
// multiplication.
//
// SPLIT=1 (one frame per group, FPB=1): for frames whose 2M reals do not fit in local memory but
// M reals do (complex input: or M/CHUNKS reals, each exchange in CHUNKS rounds per component;
// stockham_passes.cl). The spectrum stays in registers; every exchange, and the store phase, goes through
// one local array twice (real parts, then imaginary parts). For real input the store phase
// accumulates X_k = a Z_k + b conj(Z_{M-k}) (a = (1 - iW^k)/2, b = (1 + iW^k)/2) over the two
// halves; NB = ceil(BINS/WG) bins per work-item.
//
// Defines: M, TPF, FPB, MAIN_RADIX (2, 4, 8 or 16), MAIN_PASSES, LAST_RADIX (1 = none, else 2, 4 or 8),
// REAL_INPUT (0 or 1), TABN (2M for real input, M for complex), COMPLEX_OUT, USE_DOUBLE (see
// common.cl).

#define WG (TPF * FPB)
#if REAL_INPUT
#define BINS (M + 1)
#else
#define BINS M
#endif

// Complex input: after the last pass (sub-transform length ns = M/R) work-item t holds bins
// k = t + b*TPF + r*ns in natural order, consecutive across work-items for each (b, r), so |X|^2
// (or X) goes straight from registers to global memory, with no store phase through local memory.
#if !REAL_INPUT && MAIN_PASSES > 0
#define DIRECT 1
#else
#define DIRECT 0
#endif
#if SPLIT && CHUNKS > 1 && !DIRECT
#error "the split exchange in rounds needs the direct store (complex input)"
#endif
#define STORE_DIRECT(RR, vv, fr)                                                                   \
    if ((fr) < frames) {                                                                           \
        for (uint b = 0; b < M / ((RR) * TPF); b++) {                                              \
            for (uint r = 0; r < (RR); r++) {                                                      \
                uint k = t + b * TPF + r * (M / (RR));                                             \
                store_bin(out, (size_t)(fr) * BINS + k, vv[b][r], k == 0, scale_mode, norm_edge,   \
                          norm_interior);                                                          \
            }                                                                                      \
        }                                                                                          \
    }


// pair j of frame f0+f, windowed; zero past the end of the batch
// (frame f starts at in[f * step]: 2M for frames back to back, less for overlapping frames held once)
inline real2 load_pair(__global const real_t *in, __global const real_t *win, uint frames,
                       uint step, uint frame, uint j) {
    if (frame >= frames) {
        return (real2)(R(0.0), R(0.0));
    }
    real2 x = vload2(0, in + (size_t)frame * step + 2 * j);
#if REAL_INPUT
    return x * vload2(j, win);
#else
    return x * win[j];
#endif
}

#if SPLIT
#define NB ((BINS + WG - 1) / WG)
// exchange: store the outputs of pass radix RA (produced with ns) and load the inputs of a pass
// of radix RB, one component at a time through `buf`
#if CHUNKS == 1
// real parts, then imaginary parts, each with a literal component so that the compiler keeps
// every register array access static
#define EXCHANGE(RA, va, RB, vb, ns)                                                               \
    barrier(CLK_LOCAL_MEM_FENCE);                                                                  \
    CALL(put_r, RA)(va, buf, 0, t, ns, 0, 0);                                                      \
    barrier(CLK_LOCAL_MEM_FENCE);                                                                  \
    CALL(get_r, RB)(vb, buf, 0, t, 0, 0);                                                          \
    barrier(CLK_LOCAL_MEM_FENCE);                                                                  \
    CALL(put_r, RA)(va, buf, 0, t, ns, 1, 0);                                                      \
    barrier(CLK_LOCAL_MEM_FENCE);                                                                  \
    CALL(get_r, RB)(vb, buf, 0, t, 1, 0);
#else
// in rounds: every round puts from `va` as it was, so the inputs gather in `g` (one component)
// and go into `vb` (possibly `va` itself) after the last round
#define EXCHANGE(RA, va, RB, vb, ns)                                                               \
    for (int comp = 0; comp < 2; comp++) {                                                         \
        real_t g[M / TPF];                                                                         \
        for (uint c = 0; c < CHUNKS; c++) {                                                        \
            barrier(CLK_LOCAL_MEM_FENCE);                                                          \
            CALL(put_r, RA)(va, buf, 0, t, ns, comp, c);                                           \
            barrier(CLK_LOCAL_MEM_FENCE);                                                          \
            CALL(getc_r, RB)(g, buf, t, c);                                                        \
        }                                                                                          \
        CALL(setc_r, RB)(vb, g, comp);                                                             \
    }
#endif

// PAIRED: real input on the split path whose last pass is radix 2 (ns = M/2) with an even
// number of butterflies per work-item (real 16384 f32):
// work-item t takes the butterfly pairs q = t + c*TPF, c < NPAIRS: A = q and B = M/2 - q (q = 0:
// A = 0, B = M/4). Their outputs k = A, A + M/2, B, B + M/2 hold each other's partners M - k
// (M - A = B + M/2, M - (A + M/2) = B; q = 0: 0 and M/2 their own, M/4 and 3M/4 each other's),
// so every bin's r2c post-processing reads only this work-item's registers: no store phase
// through local memory (two local round trips and four barriers fewer).
#if SPLIT && REAL_INPUT && LAST_RADIX == 2 && (M / (2 * TPF)) % 2 == 0
#define PAIRED 1
#define NPAIRS (M / (4 * TPF))
inline uint paired_b(uint q) { return q == 0 ? M / 4 : M / 2 - q; }

// one component of the last pass's inputs: u[2c] butterfly A, u[2c + 1] butterfly B of pair c
inline void paired_get(real2 u[2 * NPAIRS][2], __local real_t *buf, uint t, int comp) {
    for (uint c = 0; c < NPAIRS; c++) {
        uint q = t + c * TPF, b = paired_b(q);
        for (uint r = 0; r < 2; r++) {
            real_t xa = buf[PADI(q + r * (M / 2))], xb = buf[PADI(b + r * (M / 2))];
            if (comp) {
                u[2 * c][r].y = xa;
                u[2 * c + 1][r].y = xb;
            } else {
                u[2 * c][r].x = xa;
                u[2 * c + 1][r].x = xb;
            }
        }
    }
}

// the radix-2 last pass (ns = M/2: butterfly j's twiddle is W_M^j = tw[2j], TABN = 2M)
inline void paired_dft(real2 u[2 * NPAIRS][2], __global const real2 *tw, uint t) {
    for (uint c = 0; c < NPAIRS; c++) {
        uint q = t + c * TPF;
        u[2 * c][1] = cmul(u[2 * c][1], tw[2 * q]);
        dft2(&u[2 * c][0], &u[2 * c][1]);
        u[2 * c + 1][1] = cmul(u[2 * c + 1][1], tw[2 * paired_b(q)]);
        dft2(&u[2 * c + 1][0], &u[2 * c + 1][1]);
    }
}

// bin k (< M) of the frame at out[o] from Z_k and Z_{M-k}
inline void paired_bin(__global real_t *out, size_t o, uint k, real2 zk, real2 zc,
                       __global const real2 *tw, int scale_mode, real_t norm_edge,
                       real_t norm_interior) {
    store_bin(out, o + k, r2c_bin(zk, zc, tw[k]), k == 0, scale_mode, norm_edge, norm_interior);
}

// every bin of the work-item's pairs (and the Nyquist bin, from Z_0, by work-item 0)
inline void paired_store(real2 u[2 * NPAIRS][2], __global const real2 *tw, uint t,
                         __global real_t *out, size_t o, int scale_mode, real_t norm_edge,
                         real_t norm_interior) {
    for (uint c = 0; c < NPAIRS; c++) {
        uint q = t + c * TPF, b = paired_b(q);
        real2 a0 = u[2 * c][0], a1 = u[2 * c][1], b0 = u[2 * c + 1][0], b1 = u[2 * c + 1][1];
        // partners: generic pairs cross over; pair 0's A outputs are their own partners and
        // its B outputs (M/4, 3M/4) each other's
        paired_bin(out, o, q, a0, q ? b1 : a0, tw, scale_mode, norm_edge, norm_interior);
        paired_bin(out, o, q + M / 2, a1, q ? b0 : a1, tw, scale_mode, norm_edge, norm_interior);
        paired_bin(out, o, b, b0, q ? a1 : b1, tw, scale_mode, norm_edge,
                   norm_interior);
        paired_bin(out, o, b + M / 2, b1, q ? a0 : b0, tw, scale_mode, norm_edge, norm_interior);
        if (q == 0) {
            // the Nyquist bin X_M from Z_0 alone (W_2M^M = -1)
            store_bin(out, o + M, r2c_bin(a0, a0, (real2)(R(-1.0), R(0.0))), 1, scale_mode,
                      norm_edge, norm_interior);
        }
    }
}
#else
#define PAIRED 0
#endif

// the split path's store phase: bin k's share of component `comp` (0 real parts, 1 imaginary
// parts) into acc[i]
#if REAL_INPUT
#define ACC_BIN(comp)                                                                              \
    real_t zk = buf[PADI(k & (M - 1))], zc = buf[PADI((M - k) & (M - 1))];                         \
    real2 w = tw[k * (TABN / (2 * M))];                                                            \
    real2 iw = (real2)(-w.y, w.x);                                                                 \
    real2 a = ((real2)(R(1.0), R(0.0)) - iw) * R(0.5);                                             \
    real2 bb = ((real2)(R(1.0), R(0.0)) + iw) * R(0.5);                                            \
    if ((comp) == 0) {                                                                             \
        acc[i] = a * zk + bb * zc;                                                                 \
    } else {                                                                                       \
        /* + i a zk.y - i b zc.y */                                                                \
        real2 d = a * zk - bb * zc;                                                                \
        acc[i] += (real2)(-d.y, d.x);                                                              \
    }
#else
#define ACC_BIN(comp)                                                                              \
    if ((comp) == 0) {                                                                             \
        acc[i].x = buf[PADI(k)];                                                                   \
    } else {                                                                                       \
        acc[i].y = buf[PADI(k)];                                                                   \
    }
#endif
// one component of the store phase
#define STORE_COMP(comp)                                                                           \
    {                                                                                              \
        barrier(CLK_LOCAL_MEM_FENCE);                                                              \
        /* CHUNKS == 1 here (the rounds need DIRECT) */                                            \
        CALL(put_r, FINAL_R)(FINAL_V, buf, 0, t, ns, comp, 0);                                     \
        barrier(CLK_LOCAL_MEM_FENCE);                                                              \
        for (uint i = 0; i < NB; i++) {                                                            \
            uint k = t + i * WG;                                                                   \
            if (k >= BINS) {                                                                       \
                break;                                                                             \
            }                                                                                      \
            ACC_BIN(comp)                                                                          \
        }                                                                                          \
    }

__kernel __attribute__((reqd_work_group_size(WG, 1, 1)))
void fft_local(__global const real_t *restrict in, __global const real_t *restrict win,
               __global const real2 *restrict tw, __global real_t *restrict out, uint frames,
               int scale_mode, real_t norm_edge, real_t norm_interior, uint step) {
    __local real_t buf[PADI(CH) + 1];
    const uint t = get_local_id(0);
    const uint frame = get_group_id(0);
    real2 v[M / (MAIN_RADIX * TPF)][MAIN_RADIX];
    for (uint b = 0; b < M / (MAIN_RADIX * TPF); b++) {
        uint j = t + b * TPF;
        for (uint r = 0; r < MAIN_RADIX; r++) {
            v[b][r] = load_pair(in, win, frames, step, frame, j + r * (M / MAIN_RADIX));
        }
    }
    uint ns = 1;
    CALL(dft_r, MAIN_RADIX)(v, tw, t, ns);
    for (uint p = 1; p < MAIN_PASSES; p++) {
        EXCHANGE(MAIN_RADIX, v, MAIN_RADIX, v, ns);
        ns *= MAIN_RADIX;
        CALL(dft_r, MAIN_RADIX)(v, tw, t, ns);
    }
#if PAIRED
    // the last exchange, real parts then imaginary parts, into the pairs' butterflies
    real2 u[2 * NPAIRS][2];
    barrier(CLK_LOCAL_MEM_FENCE);
    CALL(put_r, MAIN_RADIX)(v, buf, 0, t, ns, 0, 0);
    barrier(CLK_LOCAL_MEM_FENCE);
    paired_get(u, buf, t, 0);
    barrier(CLK_LOCAL_MEM_FENCE);
    CALL(put_r, MAIN_RADIX)(v, buf, 0, t, ns, 1, 0);
    barrier(CLK_LOCAL_MEM_FENCE);
    paired_get(u, buf, t, 1);
    paired_dft(u, tw, t);
    if (frame < frames) {
        paired_store(u, tw, t, out, (size_t)frame * BINS, scale_mode, norm_edge, norm_interior);
    }
#else
#if LAST_RADIX > 1
    real2 u[M / (LAST_RADIX * TPF)][LAST_RADIX];
    EXCHANGE(MAIN_RADIX, v, LAST_RADIX, u, ns);
    ns *= MAIN_RADIX;
    CALL(dft_r, LAST_RADIX)(u, tw, t, ns);
#define FINAL_R LAST_RADIX
#define FINAL_V u
#else
#define FINAL_R MAIN_RADIX
#define FINAL_V v
#endif
#if DIRECT
    STORE_DIRECT(FINAL_R, FINAL_V, frame)
#else
    // store phase, real parts then imaginary parts, into acc[i] = X of bin t + i*WG (a literal
    // component each time, as in EXCHANGE)
    real2 acc[NB];
    STORE_COMP(0)
    STORE_COMP(1)
    if (frame < frames) {
        for (uint i = 0; i < NB; i++) {
            uint k = t + i * WG;
            if (k >= BINS) {
                break;
            }
#if REAL_INPUT
            int edge = (k == 0) || (k == M);
#else
            int edge = (k == 0);
#endif
            store_bin(out, (size_t)frame * BINS + k, acc[i], edge, scale_mode, norm_edge,
                      norm_interior);
        }
    }
#endif
#endif
}
#else
__kernel __attribute__((reqd_work_group_size(WG, 1, 1)))
void fft_local(__global const real_t *restrict in, __global const real_t *restrict win,
               __global const real2 *restrict tw, __global real_t *restrict out, uint frames,
               int scale_mode, real_t norm_edge, real_t norm_interior, uint step) {
    __local real_t sre[PADI(FPB * M) + 1];
    __local real_t sim[PADI(FPB * M) + 1];
    const uint lid = get_local_id(0);
    const uint f0 = get_group_id(0) * FPB;
    const uint fl = lid / TPF, t = lid % TPF;
    const uint base = fl * M;

#if MAIN_PASSES > 0
    {
        // first pass: inputs straight from global memory; for each r consecutive work-items read
        // consecutive pairs (coalesced)
        real2 v[M / (MAIN_RADIX * TPF)][MAIN_RADIX];
        for (uint b = 0; b < M / (MAIN_RADIX * TPF); b++) {
            uint j = t + b * TPF;
            for (uint r = 0; r < MAIN_RADIX; r++) {
                v[b][r] = load_pair(in, win, frames, step, f0 + fl, j + r * (M / MAIN_RADIX));
            }
        }
#if DIRECT && MAIN_PASSES == 1 && LAST_RADIX == 1
        CALL(dft_r, MAIN_RADIX)(v, tw, t, 1);
        STORE_DIRECT(MAIN_RADIX, v, f0 + fl)
#else
        CALL(compute_r, MAIN_RADIX)(v, sre, sim, tw, base, t, 1);
#endif
        uint ns = MAIN_RADIX;
        for (uint p = 1; p < MAIN_PASSES; p++) {
            barrier(CLK_LOCAL_MEM_FENCE);
            CALL(load_r, MAIN_RADIX)(v, sre, sim, base, t);
#if DIRECT && LAST_RADIX == 1
            // the last pass writes no local memory, so no barrier after its loads (p is the
            // same for the whole group)
            if (p == MAIN_PASSES - 1) {
                CALL(dft_r, MAIN_RADIX)(v, tw, t, ns);
                STORE_DIRECT(MAIN_RADIX, v, f0 + fl)
            } else {
                barrier(CLK_LOCAL_MEM_FENCE);
                CALL(compute_r, MAIN_RADIX)(v, sre, sim, tw, base, t, ns);
            }
#else
            barrier(CLK_LOCAL_MEM_FENCE);
            CALL(compute_r, MAIN_RADIX)(v, sre, sim, tw, base, t, ns);
#endif
            ns *= MAIN_RADIX;
        }
#if LAST_RADIX > 1
        real2 u[M / (LAST_RADIX * TPF)][LAST_RADIX];
        barrier(CLK_LOCAL_MEM_FENCE);
        CALL(load_r, LAST_RADIX)(u, sre, sim, base, t);
#if DIRECT
        // no local memory written after these loads: no barrier
        CALL(dft_r, LAST_RADIX)(u, tw, t, ns);
        STORE_DIRECT(LAST_RADIX, u, f0 + fl)
#else
        barrier(CLK_LOCAL_MEM_FENCE);
        CALL(compute_r, LAST_RADIX)(u, sre, sim, tw, base, t, ns);
#endif
#endif
    }
#else
    // M == 1: nothing to transform, just stage the frame
    for (uint i = lid; i < FPB * M; i += WG) {
        real2 z = load_pair(in, win, frames, step, f0 + i / M, i % M);
        sre[PADI(i)] = z.x;
        sim[PADI(i)] = z.y;
    }
#endif
#if !DIRECT
    barrier(CLK_LOCAL_MEM_FENCE);

    // store: |X|^2 and the output scale (or X), only BINS bins per frame leave the device
    for (uint f = 0; f < FPB; f++) {
        if (f0 + f >= frames) {
            break;
        }
        const uint o = f * M;
        for (uint k = lid; k < BINS; k += WG) {
#if REAL_INPUT
            uint a = PADI(o + (k & (M - 1))), c = PADI(o + ((M - k) & (M - 1)));
            real2 x = r2c_bin((real2)(sre[a], sim[a]), (real2)(sre[c], sim[c]),
                              tw[k * (TABN / (2 * M))]);
            int edge = (k == 0) || (k == M);
#else
            uint a = PADI(o + k);
            real2 x = (real2)(sre[a], sim[a]);
            int edge = (k == 0);
#endif
            store_bin(out, (size_t)(f0 + f) * BINS + k, x, edge, scale_mode, norm_edge,
                      norm_interior);
        }
    }
#endif
}
#endif
