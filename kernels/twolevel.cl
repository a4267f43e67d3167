// twolevel.cl: the two-level (four-step) path for frames that are not powers of two and do not
// fit local memory (mixed radix 2/3/5/7), and for Bluestein's power-of-two length: a transform of
// N = N1*N2 points as two kernels, each doing its sub-FFTs in local memory with mixed_lpass.cl's
// passes, so a frame crosses device memory twice (fourstep.cl is the same idea for powers of two
// with the register-resident passes of stockham_passes.cl).
//   columns (STAGE 1): for each n2 < N2, Y[k1, n2] = sum_n1 z[N2 n1 + n2] W_N1^(n1 k1), times
//       the twiddle W_N^(n2 k1), written transposed: tmp[k1 N2 + n2]. FPB adjacent columns per
//       work-group, the column index fastest across work-items, so global reads and writes are
//       runs of FPB points.
//   rows (STAGE 2): for each k1 < N1, Z[k1 + N1 k2] = sum_n2 tmp[k1 N2 + n2] W_N2^(n2 k2). FPB
//       rows per work-group, read contiguously.
// Loading (stage 1, LOAD): 1 = the input frames, window applied, as the plan's kind reads them
//   (even real n: the half-length packing z_p = (x_2p, x_2p+1); REAL_FULL: odd real n, one real
//   per point; complex: interleaved re, im; frame f at in[f * step]); 0 = a work buffer of N
//   complex points per frame (step = 2N), no window. CHIRP_IN=1 (Bluestein's first transform):
//   point p < M times chirp[p], points M <= p < N zero.
// Storing (stage 2, STORE):
//   0: the finished bins straight to `out` (store_bin: |X|^2 and the scale, or X), bins k below
//      TL_BINS (complex: M; REAL_FULL: M/2 + 1);
//   1: even real n (N = M): the r2c post-processing fused (X_k from Z_k and Z_{M-k}, bins
//      0..M): a group holds rows in pairs, pair p = 1..ceil(N1/2)-1 is rows (p, N1 - p), pair 0
//      is rows (0, N1/2) for even N1 (each its own partner) or row 0 alone for odd N1, since
//      M - (k1 + N1 k2) = (N1 - k1) + N1 (N2 - 1 - k2) for k1 > 0, N1 ((N2 - k2) mod N2) for
//      k1 = 0. Slot i < FPB/2 holds the first row of pair p0 + i, slot FPB/2 + i the second;
//   2: Bluestein's middle step: dst[k] = conj(Z_k aux[k]) (aux: the filter's spectrum / N);
//   3: Bluestein's last step: X_k = aux[k] conj(Z_k) for k < M (aux: the chirp), as bins (0) or,
//      for even real n, into dst (M points per frame) for r2c_post.cl's `post`.
// TWO_FRAMES=1 (odd real n through Bluestein, always): two real frames go through one
//   complex transform, z_p = (w_p x_p of frame 2f, w_p x_p of frame 2f + 1), so half as many
//   transforms run; `frames` stays the count of real frames and transform f is frame pair f (the
//   second frame of the last pair may be missing: zeros). The last step stores Z (M points per
//   pair) into dst for `two_frames_post`, which splits it: X1_k = (Z_k + conj Z_{M-k})/2, X2_k =
//   (Z_k - conj Z_{M-k})/(2i).
// Twiddles: tw[t] = exp(-2 pi i t / LP_LEN) for the passes, twn[t] = exp(-2 pi i t / N) for
// stage 1's twiddle (n2 k1 < N), all computed on the host in double.
// Local memory: two arrays (ping-pong) of FPB transforms at stride LP_STRIDE (LP_LEN rounded up
// to odd, so the strided accesses of the transposes spread over the banks), every index padded
// (LP_PAD: mixed_lpass.cl's LPAD).
// Defines: STAGE, N, N1, N2, FPB, WG, NPASSES, RADICES, LP_LEN (N1 or N2), LP_COUNT (= FPB),
// LP_STRIDE, LP_PAD, LOAD, CHIRP_IN, STORE; M, REAL_INPUT, REAL_FULL, COMPLEX_OUT, USE_DOUBLE (plan).

#ifndef REAL_FULL
#define REAL_FULL 0
#endif

#ifndef TWO_FRAMES
#define TWO_FRAMES 0
#endif
// transforms of a launch of `frames` frames
#if TWO_FRAMES
#define TRANSFORMS(frames) (((frames) + 1) / 2)
#else
#define TRANSFORMS(frames) (frames)
#endif

#if REAL_FULL
#define TL_BINS (M / 2 + 1)
#elif REAL_INPUT
#define TL_BINS (M + 1)
#else
#define TL_BINS M
#endif

#if STAGE == 1
// point p of frame `frame`, as the stage loads it
inline real2 tl_load(__global const real_t *in, __global const real_t *win,
                     __global const real2 *chirp, uint frames, uint frame, uint step, uint p) {
#if CHIRP_IN
    if (p >= M) {
        return (real2)(R(0.0), R(0.0));
    }
#endif
#if TWO_FRAMES && LOAD == 1
    // frame pair `frame`: frames 2 frame and 2 frame + 1 (zeros past the last frame)
    __global const real_t *x = in + (size_t)(2 * frame) * step;
    real_t x2 = 2 * frame + 1 < frames ? x[step + p] : R(0.0);
    real2 z = (real2)(x[p], x2) * win[p];
#else
    __global const real_t *x = in + (size_t)frame * step;
#endif
#if TWO_FRAMES && LOAD == 1
#elif LOAD == 0
    real2 z = vload2(p, x);
#elif REAL_FULL
    real2 z = (real2)(x[p] * win[p], R(0.0));
#elif REAL_INPUT
    real2 z = vload2(p, x) * vload2(p, win);
#else
    real2 z = vload2(p, x) * win[p];
#endif
#if CHIRP_IN
    z = cmul(z, chirp[p]);
#endif
    return z;
}

__kernel __attribute__((reqd_work_group_size(WG, 1, 1))) void
tl_columns(__global const real_t *restrict in, __global const real_t *restrict win,
           __global const real2 *restrict chirp, __global const real2 *restrict tw,
           __global const real2 *restrict twn, __global real2 *restrict tmp, uint frames,
           uint step) {
    __local real2 a[LPAD(FPB * LP_STRIDE) + 1], b[LPAD(FPB * LP_STRIDE) + 1];
    const uint t = get_local_id(0);
    const uint gpf = (N2 + FPB - 1) / FPB;
    const uint frame = get_group_id(0) / gpf;
    const uint n2_0 = (get_group_id(0) % gpf) * FPB;
    if (frame >= TRANSFORMS(frames)) {
        return; // the whole group: no barrier is reached
    }
    for (uint i = t; i < FPB * N1; i += WG) {
        uint c = i % FPB, n1 = i / FPB, n2 = n2_0 + c;
        a[LPAD(c * LP_STRIDE + n1)] = n2 < N2 ? tl_load(in, win, chirp, frames, frame, step, N2 * n1 + n2)
                                        : (real2)(R(0.0), R(0.0));
    }
    __local const real2 *y = lpasses(a, b, tw, t);
    const size_t fo = (size_t)frame * N;
    for (uint i = t; i < FPB * N1; i += WG) {
        uint c = i % FPB, k1 = i / FPB, n2 = n2_0 + c;
        if (n2 < N2) {
            tmp[fo + (size_t)k1 * N2 + n2] = cmul(y[LPAD(c * LP_STRIDE + k1)], twn[n2 * k1]);
        }
    }
}
#endif

#if STAGE == 2
#define HALF (FPB / 2)
#define NPAIRS ((N1 + 1) / 2)

#if STORE == 1
// the row in slot s of the group whose first pair is p0, or N1 (none) past the last pair and
// for the empty second slot of pair 0 when N1 is odd
inline uint slot_row(uint p0, uint s) {
    uint p = p0 + s % HALF;
    if (p >= NPAIRS) {
        return N1;
    }
    if (s < HALF) {
        return p;
    }
    if (p == 0) {
        return N1 % 2 == 0 ? N1 / 2 : N1;
    }
    return N1 - p;
}
#define GPF ((NPAIRS + HALF - 1) / HALF)
#else
#define GPF ((N1 + FPB - 1) / FPB)
#endif

__kernel __attribute__((reqd_work_group_size(WG, 1, 1))) void
tl_rows(__global const real2 *restrict tmp, __global const real2 *restrict tw,
        __global const real2 *restrict aux, __global real2 *restrict dst,
        __global real_t *restrict out, uint frames, int scale_mode, real_t norm_edge,
        real_t norm_interior) {
    __local real2 a[LPAD(FPB * LP_STRIDE) + 1], b[LPAD(FPB * LP_STRIDE) + 1];
    const uint t = get_local_id(0);
    const uint frame = get_group_id(0) / GPF;
    const uint g0 = (get_group_id(0) % GPF) * (STORE == 1 ? HALF : FPB);
    if (frame >= TRANSFORMS(frames)) {
        return; // the whole group: no barrier is reached
    }
    const size_t fo = (size_t)frame * N;
    for (uint i = t; i < FPB * N2; i += WG) {
        uint s = i / N2, n2 = i % N2;
#if STORE == 1
        uint row = slot_row(g0, s);
#else
        uint row = g0 + s;
#endif
        a[LPAD(s * LP_STRIDE + n2)] = row < N1 ? tmp[fo + (size_t)row * N2 + n2]
                                         : (real2)(R(0.0), R(0.0));
    }
    __local const real2 *y = lpasses(a, b, tw, t);
    for (uint i = t; i < FPB * N2; i += WG) {
        uint s = i % FPB, k2 = i / FPB;
        real2 z = y[LPAD(s * LP_STRIDE + k2)];
#if STORE == 1
        uint k1 = slot_row(g0, s);
        if (k1 >= N1) {
            continue;
        }
        // the partner row's slot: the other half of the pair, or this slot (rows 0 and N1/2)
        uint sp = (k1 == 0 || 2 * k1 == N1) ? s : (s + HALF) % FPB;
        uint kp = k1 == 0 ? (N2 - k2) % N2 : N2 - 1 - k2;
        real2 zc = y[LPAD(sp * LP_STRIDE + kp)];
        uint k = k1 + N1 * k2;
        const size_t ob = (size_t)frame * (M + 1);
        real_t e = -(real_t)k / (real_t)M; // W_2M^k = exp(i pi e)
        store_bin(out, ob + k, r2c_bin(z, zc, (real2)(cospi(e), sinpi(e))), k == 0, scale_mode,
                  norm_edge, norm_interior);
        if (k == 0) {
            // the Nyquist bin X_M from Z_0 alone (W_2M^M = -1)
            store_bin(out, ob + M, r2c_bin(z, z, (real2)(R(-1.0), R(0.0))), 1, scale_mode,
                      norm_edge, norm_interior);
        }
#else
        uint k1 = g0 + s;
        if (k1 >= N1) {
            continue;
        }
        uint k = k1 + N1 * k2;
#if STORE == 2
        real2 x = cmul(z, aux[k]);
        dst[fo + k] = (real2)(x.x, -x.y);
#else
#if STORE == 3
        if (k >= M) {
            continue;
        }
        z = cmul(aux[k], (real2)(z.x, -z.y));
#if (REAL_INPUT && !REAL_FULL) || TWO_FRAMES
        dst[(size_t)frame * M + k] = z;
        continue;
#endif
#endif
        if (k < TL_BINS) {
            store_bin(out, (size_t)frame * TL_BINS + k, z, k == 0, scale_mode, norm_edge,
                      norm_interior);
        }
#endif
#endif
    }
}
#endif

#if STAGE == 3
// TWO_FRAMES: bins 0..M/2 of frames 2f and 2f + 1 from the pair's spectrum Z (M points per pair in
// z); one work-item per output bin, bounds-checked. Only DC is an edge bin (M is odd).
#define PP_BINS (M / 2 + 1)
__kernel void two_frames_post(__global const real2 *restrict z, __global real_t *restrict out,
                        uint frames, int scale_mode, real_t norm_edge, real_t norm_interior) {
    const size_t g = get_global_id(0);
    if (g >= (size_t)frames * PP_BINS) {
        return;
    }
    const size_t f = g / PP_BINS;
    const uint k = g % PP_BINS;
    __global const real2 *zf = z + (f / 2) * (size_t)M;
    real2 zk = zf[k], zc = zf[k == 0 ? 0 : M - k];
    zc.y = -zc.y;
    // even frame: (Z_k + conj Z_{M-k}) / 2; odd frame: (Z_k - conj Z_{M-k}) / (2i)
    real2 d = zk - zc;
    real2 x = f % 2 == 0 ? (zk + zc) * R(0.5) : (real2)(d.y, -d.x) * R(0.5);
    store_bin(out, g, x, k == 0, scale_mode, norm_edge, norm_interior);
}
#endif
