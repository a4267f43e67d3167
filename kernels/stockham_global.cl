// stockham_global.cl: the multi-pass path for frames too large for local memory. Three kernels,
// launched in sequence on one batch:
//   pack:      input frames (2M reals each, see stockham_local.cl) * window -> complex z (M per frame)
//   pass_rR:   one radix-R self-sorting Stockham pass, src -> dst (ping-pong buffers), R = 2, 4, 8
//   (then r2c_post.cl's `post` turns the spectrum into scaled output bins)
// Work-group shape: 1-D, any size (the host uses 256); one work-item per pair (pack) or per
// radix-R butterfly (pass), with a bounds check so the global size may be rounded up.
// Twiddles are computed with sinpi/cospi from integer indices (exact in f32 up to 2^24; past
// that the index rounds by at most one part in 2^24, the order of the transform's own error).
//
// Defines: M, REAL_INPUT, USE_DOUBLE (see common.cl); REAL_FULL=1 (mixed_radix.cl, odd real n):
// real input transformed as a complex frame of M = n points with zero imaginary parts, pack reads
// one real per point.

#ifndef REAL_FULL
#define REAL_FULL 0
#endif

__kernel void pack(__global const real_t *restrict in, __global const real_t *restrict win,
                   __global real2 *restrict z, uint frames, uint step) {
    const size_t g = get_global_id(0);
    if (g >= (size_t)frames * M) {
        return;
    }
    const uint j = g % M;
#if REAL_FULL
    z[g] = (real2)(in[(g / M) * step + j] * win[j], R(0.0));
#else
    // frame g / M starts at in[frame * step] (step = 2M: frames back to back)
    real2 x = vload2(0, in + (g / M) * step + 2 * j);
#if REAL_INPUT
    z[g] = x * vload2(j, win);
#else
    z[g] = x * win[j];
#endif
#endif
}

#define DEFINE_GPASS(RR)                                                                           \
    __kernel void pass_r##RR(__global const real2 *restrict src, __global real2 *restrict dst,    \
                             uint frames, uint ns) {                                               \
        const size_t g = get_global_id(0);                                                         \
        if (g >= (size_t)frames * (M / RR)) {                                                      \
            return;                                                                                \
        }                                                                                          \
        const size_t fo = (g / (M / RR)) * (size_t)M;                                              \
        const uint j = g % (M / RR);                                                               \
        real2 v[RR];                                                                               \
        for (uint r = 0; r < RR; r++) {                                                            \
            v[r] = src[fo + j + r * (M / RR)];                                                     \
        }                                                                                          \
        const uint k = j & (ns - 1);                                                               \
        if (ns > 1) {                                                                              \
            for (uint r = 1; r < RR; r++) {                                                        \
                real_t a = R(-2.0) * (real_t)(r * k) / (real_t)(ns * RR);                          \
                v[r] = cmul(v[r], (real2)(cospi(a), sinpi(a)));                                    \
            }                                                                                      \
        }                                                                                          \
        dft_r(v, RR);                                                                              \
        const size_t d = fo + (size_t)(j - k) * RR + k;                                            \
        for (uint r = 0; r < RR; r++) {                                                            \
            dst[d + r * ns] = v[r];                                                                \
        }                                                                                          \
    }

#if M >= 8
DEFINE_GPASS(8)
#endif
#if M >= 4
DEFINE_GPASS(4)
#endif
#if M >= 2
DEFINE_GPASS(2)
#endif
