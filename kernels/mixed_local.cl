// mixed_local.cl: sizes that are not powers of two but whose prime factors are 2, 3, 5 and 7 and
// whose frame fits local memory twice: the whole transform of a frame in one work-group, one
// global read and one global write per frame, like stockham_local.cl for powers of two:
// load (window applied, half-length packing for even real n) -> mixed-radix Stockham passes
// between two local arrays -> r2c post-processing (even real n) -> |X|^2 -> output scale (or X
// with COMPLEX_OUT; common.cl: store_bin).
// The passes are mixed_radix.cl's butterflies (MDFT_R) with its indexing: butterfly j < M/R reads
// j + r M/R, twiddles by tw[r k M/(ns R)] (k = j mod ns; tw[t] = exp(-2 pi i t/M), computed on the
// host in double) and writes (j - k) R + k + r ns.
//
// Work-group shape: WG work-items, one frame per group (group id = frame); each work-item takes
// butterflies j = t, t + WG, ... of every pass, and bins k = t, t + WG, ... at the end.
// Defines: M, WG, NPASSES, RADICES ({r0, r1, ...}: the radices in pass order), REAL_INPUT,
// REAL_FULL (odd real n as M = n complex points), COMPLEX_OUT, USE_DOUBLE (see common.cl).
// The passes: mixed_lpass.cl (LP_LEN = M, one transform; LP_PAD where the padded arrays fit).
//
// BLUESTEIN=1 (a prime factor above 7, LP_LEN = L: Bluestein's power-of-two length, whose two
// arrays fit local memory): the chirp-z transform in the same one kernel, as mixed_radix.cl's
// global version does it in eight or more: load a_j = x_j w_j c_j (j < M; zero up to L), L-point
// FFT, d = conj(A * Bh) in place, L-point FFT (E), then X_k = c_k conj(E_k) on the store (c: the
// chirp, Bh: the filter's spectrum / L; both computed on the host in double, `chirp`, `filter`);
// `tw` is the L-point table. Unused otherwise.

#ifndef REAL_FULL
#define REAL_FULL 0
#endif

#ifndef BLUESTEIN
#define BLUESTEIN 0
#endif

#if REAL_FULL
#define LBINS (M / 2 + 1)
#elif REAL_INPUT
#define LBINS (M + 1)
#else
#define LBINS M
#endif

__kernel __attribute__((reqd_work_group_size(WG, 1, 1))) void
fft_mixed_local(__global const real_t *restrict in, __global const real_t *restrict win,
                __global const real2 *restrict tw, __global real_t *restrict out, uint frames,
                int scale_mode, real_t norm_edge, real_t norm_interior, uint step,
                __global const real2 *restrict chirp, __global const real2 *restrict filter) {
    __local real2 a[LPAD(LP_LEN) + 1], b[LPAD(LP_LEN) + 1];
    const uint f = get_group_id(0);
    const uint t = get_local_id(0);
    if (f >= frames) {
        return; // the whole group: no barrier is reached
    }
    // frame f starts at in[f * step]
    __global const real_t *x = in + (size_t)f * step;
    for (uint j = t; j < M; j += WG) {
#if REAL_FULL
        a[LPAD(j)] = (real2)(x[j] * win[j], R(0.0));
#elif REAL_INPUT
        a[LPAD(j)] = vload2(j, x) * vload2(j, win);
#else
        a[LPAD(j)] = vload2(j, x) * win[j];
#endif
#if BLUESTEIN
        a[LPAD(j)] = cmul(a[LPAD(j)], chirp[j]);
#endif
    }
#if BLUESTEIN
    for (uint j = M + t; j < LP_LEN; j += WG) {
        a[LPAD(j)] = (real2)(R(0.0), R(0.0));
    }
    __local real2 *e = lpasses(a, b, tw, t);
    for (uint j = t; j < LP_LEN; j += WG) {
        real2 d = cmul(e[LPAD(j)], filter[j]);
        e[LPAD(j)] = (real2)(d.x, -d.y);
    }
    __local real2 *src = lpasses(e, e == a ? b : a, tw, t);
    // Z_k = c_k conj(E_k), k < M
#define ZK(k) cmul(chirp[k], (real2)(src[LPAD(k)].x, -src[LPAD(k)].y))
#else
    __local real2 *src = lpasses(a, b, tw, t);
#define ZK(k) src[LPAD(k)]
#endif
    for (uint k = t; k < LBINS; k += WG) {
#if REAL_FULL || !REAL_INPUT
        real2 z = ZK(k);
        int edge = (k == 0);
#else
        real_t ang = -(real_t)k / (real_t)M; // exp(-2 pi i k / 2M) = exp(i pi ang)
        real2 z = r2c_bin(ZK(k % M), ZK((M - k) % M), (real2)(cospi(ang), sinpi(ang)));
        int edge = (k == 0) || (k == M);
#endif
        store_bin(out, (size_t)f * LBINS + k, z, edge, scale_mode, norm_edge, norm_interior);
    }
}
