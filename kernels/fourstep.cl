// fourstep.cl: frames too large for local memory, in two kernels (four-step FFT). A frame of MT
// complex points (pairs z_p, p = M2*n1 + n2; see stockham_local.cl for how real frames become
// pairs) is seen as an M1 x M2 matrix:
//   columns (STAGE 1): for each n2, Y[k1, n2] = sum_n1 z[M2 n1 + n2] W_M1^(n1 k1), times the
//       twiddle W_MT^(n2 k1); written transposed, tmp[k1*M2 + n2].
//   rows (STAGE 2): for each k1, Z[k1 + M1 k2] = sum_n2 tmp[k1*M2 + n2] W_M2^(n2 k2); complex
//       input: |Z|^2 and the output scale (or Z itself, COMPLEX_OUT) go straight to `out`
//       (common.cl: store_bin); real input: the half-length packing is undone in the same
//       kernel (r2c post fused, no third kernel): X_k needs Z_k and Z_{MT-k}, and
//       MT - (k1 + M1 k2) = (M1 - k1) + M1 (M2 - 1 - k2) for k1 > 0 (M1 (M2 - k2) mod MT for
//       k1 = 0), so a group holds rows in pairs (k1, M1 - k1): pair p = 1..M1/2-1 is rows
//       (p, M1 - p), pair 0 is rows (0, M1/2), each of which is its own partner. The group's
//       FPB slots: slot i < FPB/2 holds the first row of pair p0 + i, slot FPB/2 + i the second.
// Each stage runs FPB independent FFTs of M points per work-group with stockham_passes.cl.
// Work-group shape: TPF*FPB work-items. STAGE 1 puts FPB adjacent columns in a group with the
// column index fastest across work-items, so global reads and writes are runs of FPB pairs.
// STAGE 2 puts FPB adjacent rows in a group; its reads are contiguous rows and its writes runs of
// FPB values.
// Twiddles on store (stage 1's W_MT^(n2 k1); real input's W_2MT^k in stage 2): a work-item's
// store loop keeps one column (stage 1: n2) or row (stage 2: k1) and steps k1 (stage 1) or k2
// (stage 2) by TPF, so with FS_TW_RECUR it computes its first twiddle with cospi/sinpi and the
// others by one complex multiplication each (w *= W^step; at most M/TPF steps); without,
// cospi/sinpi for every point. The plan chooses by size (plan.rs `fourstep_twiddle_recurrence`,
// measured on an H100).
// Three stages (frames past the four-step's reach, src/fft/opencl/threestage.rs): a frame of m = OUTER x MT
// points is first seen as an OUTER x MT matrix and its columns transformed by STAGE 1 built with
// M1 = OUTER, M2 = MT' (= the inner four-step's MT), MT = m: the input frames -> work a. Each row
// of a (MT' contiguous points, OUTER of them per frame) is then a four-step frame of its own:
// STAGE 1 with NO_WINDOW (complex rows in, a -> b), then STAGE 2 with OUTER defined, whose bin
// k of row k0 is the frame's bin k0 + OUTER k. There a group holds row k1 of FPB consecutive
// rows k0, so its stores are runs of FPB values; it writes complex values (COMPLEX_OUT, real
// input: into work a for r2c_post.cl) or finished bins (complex input). REAL_INPUT is 0 in the
// inner kernels.
// Defines: STAGE (1 or 2), M (= M1 in stage 1, M2 in stage 2), M1, M2, MT = M1*M2, TPF, FPB,
// MAIN_RADIX, MAIN_PASSES, LAST_RADIX, TABN (= M), REAL_INPUT, COMPLEX_OUT, USE_DOUBLE; FS_TW_RECUR
// (optional, above); NO_WINDOW, OUTER (optional, three stages).

// `first` (both kernels): the batch's first frame, always 0. It stays a run-time argument
// because NVIDIA's compiler made complex 65536 15 % slower without it (H100, 2026-11-27:
// 0.843 vs 0.740 ms per 2^26-sample batch, bench/gpu_vs_cufft.sh; issue 40).

#define WG (TPF * FPB)

#if STAGE == 1
__kernel __attribute__((reqd_work_group_size(WG, 1, 1)))
void fourstep_columns(__global const real_t *restrict in, __global const real_t *restrict win,
                      __global const real2 *restrict tw, __global real2 *restrict tmp,
                      uint frames, uint step, uint first) {
    __local real_t sre[PADI(FPB * M) + 1];
    __local real_t sim[PADI(FPB * M) + 1];
    const uint lid = get_local_id(0);
    const uint groups_per_frame = M2 / FPB;
    const uint frame = get_group_id(0) / groups_per_frame;
    const uint n2_0 = (get_group_id(0) % groups_per_frame) * FPB;
    // column fastest: consecutive work-items read consecutive pairs
    const uint fl = lid % FPB, t = lid / FPB;
    const uint base = fl * M;
    const size_t fo = (size_t)frame * MT;
    real2 v[M / (MAIN_RADIX * TPF)][MAIN_RADIX];
    for (uint b = 0; b < M / (MAIN_RADIX * TPF); b++) {
        uint j = t + b * TPF;
        for (uint r = 0; r < MAIN_RADIX; r++) {
            uint p = M2 * (j + r * (M / MAIN_RADIX)) + n2_0 + fl;
            real2 x = vload2(0, in + (size_t)(first + frame) * step + 2 * p);
#ifdef NO_WINDOW
            v[b][r] = x;
#elif REAL_INPUT
            v[b][r] = x * vload2(p, win);
#else
            v[b][r] = x * win[p];
#endif
        }
    }
    CALL(compute_r, MAIN_RADIX)(v, sre, sim, tw, base, t, 1);
    uint ns = MAIN_RADIX;
    for (uint p = 1; p < MAIN_PASSES; p++) {
        barrier(CLK_LOCAL_MEM_FENCE);
        CALL(load_r, MAIN_RADIX)(v, sre, sim, base, t);
        barrier(CLK_LOCAL_MEM_FENCE);
        CALL(compute_r, MAIN_RADIX)(v, sre, sim, tw, base, t, ns);
        ns *= MAIN_RADIX;
    }
#if LAST_RADIX > 1
    {
        real2 u[M / (LAST_RADIX * TPF)][LAST_RADIX];
        barrier(CLK_LOCAL_MEM_FENCE);
        CALL(load_r, LAST_RADIX)(u, sre, sim, base, t);
        barrier(CLK_LOCAL_MEM_FENCE);
        CALL(compute_r, LAST_RADIX)(u, sre, sim, tw, base, t, ns);
    }
#endif
    barrier(CLK_LOCAL_MEM_FENCE);
#ifdef FS_TW_RECUR
    // WG is a multiple of FPB: this work-item's column c stays, k1 steps by WG / FPB = TPF
    const uint c = lid % FPB, n2 = n2_0 + c;
    real_t e0 = R(-2.0) * (real_t)(n2 * (lid / FPB)) / (real_t)MT;
    real_t es = R(-2.0) * (real_t)((n2 * TPF) % MT) / (real_t)MT;
    real2 w = (real2)(cospi(e0), sinpi(e0));
    const real2 ws = (real2)(cospi(es), sinpi(es));
    for (uint k1 = lid / FPB; k1 < M; k1 += TPF) {
        uint a = PADI(c * M + k1);
        tmp[fo + (size_t)k1 * M2 + n2] = cmul((real2)(sre[a], sim[a]), w);
        w = cmul(w, ws);
    }
#else
    for (uint i = lid; i < FPB * M; i += WG) {
        uint c = i % FPB, k1 = i / FPB;
        uint a = PADI(c * M + k1);
        uint n2 = n2_0 + c;
        // W_MT^(n2 k1) = exp(i pi e), e = -2 n2 k1 / MT (exact integer product, < MT)
        real_t e = R(-2.0) * (real_t)(n2 * k1) / (real_t)MT;
        real2 w = (real2)(cospi(e), sinpi(e));
        tmp[fo + (size_t)k1 * M2 + n2] = cmul((real2)(sre[a], sim[a]), w);
    }
#endif
}
#endif

#if STAGE == 2
// real input: the row held in slot s (< FPB) of the group whose first pair is p0
inline uint pair_row(uint p0, uint s) {
    uint p = p0 + s % (FPB / 2);
    if (s < FPB / 2) {
        return p;
    }
    return p == 0 ? M1 / 2 : M1 - p;
}

__kernel __attribute__((reqd_work_group_size(WG, 1, 1)))
void fourstep_rows(__global const real2 *restrict tmp, __global const real2 *restrict tw,
                   __global real_t *restrict out, uint frames,
                   int scale_mode, real_t norm_edge, real_t norm_interior, uint first) {
    __local real_t sre[PADI(FPB * M) + 1];
    __local real_t sim[PADI(FPB * M) + 1];
    const uint lid = get_local_id(0);
    const uint fl = lid / TPF, t = lid % TPF;
    const uint base = fl * M;
#if defined(OUTER)
    // row k1 of FPB consecutive rows k0 of an OUTER x MT frame
    const uint blocks = OUTER / FPB;
    const uint groups_per_frame = blocks * M1;
    const uint frame = get_group_id(0) / groups_per_frame;
    const uint k1 = (get_group_id(0) % groups_per_frame) / blocks;
    const uint k0_0 = (get_group_id(0) % blocks) * FPB;
    const size_t row = ((size_t)frame * OUTER + k0_0 + fl) * MT + (size_t)k1 * M2;
#elif REAL_INPUT
    const uint groups_per_frame = M1 / FPB; // (M1/2 pairs) / (FPB/2 pairs per group)
    const uint frame = get_group_id(0) / groups_per_frame;
    const uint p0 = (get_group_id(0) % groups_per_frame) * (FPB / 2);
    const size_t row = (size_t)frame * MT + (size_t)pair_row(p0, fl) * M2;
#else
    const uint groups_per_frame = M1 / FPB;
    const uint frame = get_group_id(0) / groups_per_frame;
    const uint k1_0 = (get_group_id(0) % groups_per_frame) * FPB;
    const size_t row = (size_t)frame * MT + (size_t)(k1_0 + fl) * M2;
#endif
    real2 v[M / (MAIN_RADIX * TPF)][MAIN_RADIX];
    for (uint b = 0; b < M / (MAIN_RADIX * TPF); b++) {
        uint j = t + b * TPF;
        for (uint r = 0; r < MAIN_RADIX; r++) {
            v[b][r] = tmp[row + j + r * (M / MAIN_RADIX)];
        }
    }
    CALL(compute_r, MAIN_RADIX)(v, sre, sim, tw, base, t, 1);
    uint ns = MAIN_RADIX;
    for (uint p = 1; p < MAIN_PASSES; p++) {
        barrier(CLK_LOCAL_MEM_FENCE);
        CALL(load_r, MAIN_RADIX)(v, sre, sim, base, t);
        barrier(CLK_LOCAL_MEM_FENCE);
        CALL(compute_r, MAIN_RADIX)(v, sre, sim, tw, base, t, ns);
        ns *= MAIN_RADIX;
    }
#if LAST_RADIX > 1
    {
        real2 u[M / (LAST_RADIX * TPF)][LAST_RADIX];
        barrier(CLK_LOCAL_MEM_FENCE);
        CALL(load_r, LAST_RADIX)(u, sre, sim, base, t);
        barrier(CLK_LOCAL_MEM_FENCE);
        CALL(compute_r, LAST_RADIX)(u, sre, sim, tw, base, t, ns);
    }
#endif
    barrier(CLK_LOCAL_MEM_FENCE);
#if defined(OUTER)
    // slot fastest: runs of FPB consecutive bins k0 + OUTER (k1 + M1 k2)
    for (uint i = lid; i < FPB * M; i += WG) {
        uint r = i % FPB, k2 = i / FPB;
        uint a = PADI(r * M + k2);
        size_t k = k0_0 + r + (size_t)OUTER * (k1 + M1 * k2);
        store_bin(out, (size_t)(first + frame) * OUTER * MT + k, (real2)(sre[a], sim[a]), k == 0,
                  scale_mode, norm_edge, norm_interior);
    }
#elif REAL_INPUT
    // slot fastest: runs of FPB/2 consecutive (first rows) or descending (second rows) bins
    const size_t ob = (size_t)(first + frame) * (MT + 1);
#ifdef FS_TW_RECUR
    // WG is a multiple of FPB: this work-item's slot s (row k1) stays, k2 steps by TPF, so k by
    // M1 TPF
    real2 w, ws;
    {
        uint k0 = pair_row(p0, lid % FPB) + M1 * (lid / FPB);
        real_t e0 = -(real_t)k0 / (real_t)MT, es = -(real_t)(M1 * TPF) / (real_t)MT;
        w = (real2)(cospi(e0), sinpi(e0));
        ws = (real2)(cospi(es), sinpi(es));
    }
#endif
    for (uint i = lid; i < FPB * M; i += WG) {
        uint s = i % FPB, k2 = i / FPB;
        uint k1 = pair_row(p0, s);
        // the partner row's slot: the other half of the pair, or this slot for rows 0, M1/2
        uint sp = (k1 == 0 || 2 * k1 == M1) ? s : (s + FPB / 2) % FPB;
        uint kp = k1 == 0 ? (M2 - k2) % M2 : M2 - 1 - k2;
        uint a = PADI(s * M + k2), c = PADI(sp * M + kp);
        real2 zk = (real2)(sre[a], sim[a]), zc = (real2)(sre[c], sim[c]);
        uint k = k1 + M1 * k2;
#ifdef FS_TW_RECUR
        store_bin(out, ob + k, r2c_bin(zk, zc, w), k == 0, scale_mode, norm_edge, norm_interior);
        w = cmul(w, ws);
#else
        real_t e = -(real_t)k / (real_t)MT; // W_2MT^k = exp(i pi e)
        store_bin(out, ob + k, r2c_bin(zk, zc, (real2)(cospi(e), sinpi(e))), k == 0, scale_mode,
                  norm_edge, norm_interior);
#endif
        if (k == 0) {
            // the Nyquist bin X_MT from Z_0 alone (W_2MT^MT = -1)
            store_bin(out, ob + MT, r2c_bin(zk, zk, (real2)(R(-1.0), R(0.0))), 1, scale_mode,
                      norm_edge, norm_interior);
        }
    }
#else
    // row fastest: runs of FPB consecutive bins k = k1 + M1*k2
    for (uint i = lid; i < FPB * M; i += WG) {
        uint r = i % FPB, k2 = i / FPB;
        uint a = PADI(r * M + k2);
        uint k = k1_0 + r + M1 * k2;
        store_bin(out, (size_t)(first + frame) * MT + k, (real2)(sre[a], sim[a]), k == 0, scale_mode, norm_edge,
                  norm_interior);
    }
#endif
}
#endif
