// mixed_radix.cl: the path for frame sizes that are not powers of two, in global memory. Launched
// after stockham_global.cl's `pack` (window applied, M complex points per frame) and before
// r2c_post.cl's `post` (both compiled with the same M):
//   mpass_rR:  one radix-R self-sorting Stockham pass over transforms of `n` points (a run-time
//              argument), src -> dst, R = 2, 3, 4, 5, 7, 8, 16; twiddles from a table
//              tw[t] = exp(-2 pi i t / n) computed on the host in double.
// Sizes with a prime factor above 7 use Bluestein's chirp-z transform over a power-of-two length
// L >= 2M - 1 (the mpass kernels with n = L):
//   chirp_in:  a_j = z_j c_j (j < M), 0 (M <= j < L)          c_j = exp(-i pi j^2 / M)
//   (L-point FFT of a)
//   chirp_mul: d = conj(A * Bh)                                Bh = FFT_L(b) / L, b_j = conj(c_|j|)
//   (L-point FFT of d: E)
//   chirp_out: X_k = c_k conj(E_k), k < M
// c and Bh are computed on the host in double (j^2 mod 2M in integers) and uploaded.
// Work-group shape: 1-D, any size (the host uses 256), one work-item per butterfly or point,
// bounds-checked so the global size may be rounded up.
//
// Defines: USE_DOUBLE (see common.cl).

// Forward odd-radix DFT of v[0..RR-1] from cos/sin tables c[m] = cos(2 pi m/RR),
// s[m] = sin(2 pi m/RR): pairs X_k, X_{RR-k} share the sums over v_j +- v_{RR-j}.
#define DEFINE_DFT_ODD(RR)                                                                         \
    inline void dft_odd##RR(real2 *v, const real_t *c, const real_t *s) {                         \
        real2 a[RR / 2 + 1], b[RR / 2 + 1];                                                        \
        real2 x0 = v[0];                                                                           \
        real2 sum = v[0];                                                                          \
        for (uint j = 1; j <= RR / 2; j++) {                                                       \
            a[j] = v[j] + v[RR - j];                                                               \
            b[j] = v[j] - v[RR - j];                                                               \
            sum += a[j];                                                                           \
        }                                                                                          \
        for (uint k = 1; k <= RR / 2; k++) {                                                       \
            real2 sa = x0, sb = (real2)(R(0.0), R(0.0));                                           \
            for (uint j = 1; j <= RR / 2; j++) {                                                   \
                uint m = (j * k) % RR;                                                             \
                sa += a[j] * c[m];                                                                 \
                sb += b[j] * s[m];                                                                 \
            }                                                                                      \
            /* X_k = sa - i sb, X_{RR-k} = sa + i sb */                                            \
            v[k] = (real2)(sa.x + sb.y, sa.y - sb.x);                                              \
            v[RR - k] = (real2)(sa.x - sb.y, sa.y + sb.x);                                         \
        }                                                                                          \
        v[0] = sum;                                                                                \
    }

DEFINE_DFT_ODD(3)
DEFINE_DFT_ODD(5)
DEFINE_DFT_ODD(7)

inline void dft3(real2 *v) {
    const real_t c[3] = {R(1.0), R(-0.5), R(-0.5)};
    const real_t s[3] = {R(0.0), R(0.86602540378443864676), R(-0.86602540378443864676)};
    dft_odd3(v, c, s);
}

inline void dft5(real2 *v) {
    const real_t c[5] = {R(1.0), R(0.30901699437494742410), R(-0.80901699437494742410),
                         R(-0.80901699437494742410), R(0.30901699437494742410)};
    const real_t s[5] = {R(0.0), R(0.95105651629515357212), R(0.58778525229247312917),
                         R(-0.58778525229247312917), R(-0.95105651629515357212)};
    dft_odd5(v, c, s);
}

inline void dft7(real2 *v) {
    const real_t c[7] = {R(1.0),
                         R(0.62348980185873353053),
                         R(-0.22252093395631440429),
                         R(-0.90096886790241912624),
                         R(-0.90096886790241912624),
                         R(-0.22252093395631440429),
                         R(0.62348980185873353053)};
    const real_t s[7] = {R(0.0),
                         R(0.78183148246802980871),
                         R(0.97492791218182360702),
                         R(0.43388373911755812048),
                         R(-0.43388373911755812048),
                         R(-0.97492791218182360702),
                         R(-0.78183148246802980871)};
    dft_odd7(v, c, s);
}

#define MDFT_2(v) dft2(&v[0], &v[1])
#define MDFT_3(v) dft3(v)
#define MDFT_4(v) dft4(&v[0], &v[1], &v[2], &v[3])
#define MDFT_5(v) dft5(v)
#define MDFT_7(v) dft7(v)
#define MDFT_8(v) dft8(v)
#define MDFT_16(v) dft16(v)

// One radix-RR pass: butterfly j (< n/RR) of frame f reads j + r n/RR, twiddles input r by
// exp(-2 pi i r k/(ns RR)) = tw[r k n/(ns RR)] (k = j mod ns) and writes (j - k) RR + k + r ns.
#define DEFINE_MPASS(RR)                                                                           \
    __kernel void mpass_r##RR(__global const real2 *restrict src, __global real2 *restrict dst,   \
                              __global const real2 *restrict tw, uint frames, uint n, uint ns) {   \
        const uint q = n / RR;                                                                     \
        const size_t g = get_global_id(0);                                                         \
        if (g >= (size_t)frames * q) {                                                             \
            return;                                                                                \
        }                                                                                          \
        const size_t fo = (g / q) * (size_t)n;                                                     \
        const uint j = g % q;                                                                      \
        real2 v[RR];                                                                               \
        for (uint r = 0; r < RR; r++) {                                                            \
            v[r] = src[fo + j + r * q];                                                            \
        }                                                                                          \
        const uint k = j % ns;                                                                     \
        if (ns > 1) {                                                                              \
            const uint stride = q / ns;                                                            \
            for (uint r = 1; r < RR; r++) {                                                        \
                v[r] = cmul(v[r], tw[r * k * stride]);                                             \
            }                                                                                      \
        }                                                                                          \
        MDFT_##RR(v);                                                                              \
        const size_t d = fo + (size_t)(j - k) * RR + k;                                            \
        for (uint r = 0; r < RR; r++) {                                                            \
            dst[d + r * ns] = v[r];                                                                \
        }                                                                                          \
    }

DEFINE_MPASS(2)
DEFINE_MPASS(3)
DEFINE_MPASS(4)
DEFINE_MPASS(5)
DEFINE_MPASS(7)
DEFINE_MPASS(8)
DEFINE_MPASS(16)

// Bluestein: frames of m points (src) -> chirped and zero-padded frames of l points (dst).
__kernel void chirp_in(__global const real2 *restrict src, __global real2 *restrict dst,
                       __global const real2 *restrict chirp, uint frames, uint m, uint l) {
    const size_t g = get_global_id(0);
    if (g >= (size_t)frames * l) {
        return;
    }
    const uint j = g % l;
    dst[g] = j < m ? cmul(src[(g / l) * (size_t)m + j], chirp[j]) : (real2)(R(0.0), R(0.0));
}

// Bluestein: the convolution's spectrum, conjugated for the inverse transform (in place).
__kernel void chirp_mul(__global real2 *restrict buf, __global const real2 *restrict bhat,
                        uint frames, uint l) {
    const size_t g = get_global_id(0);
    if (g >= (size_t)frames * l) {
        return;
    }
    const real2 x = cmul(buf[g], bhat[g % l]);
    buf[g] = (real2)(x.x, -x.y);
}

// Bluestein: frames of l points of conj(convolution) -> the m-point spectra.
__kernel void chirp_out(__global const real2 *restrict src, __global real2 *restrict dst,
                        __global const real2 *restrict chirp, uint frames, uint m, uint l) {
    const size_t g = get_global_id(0);
    if (g >= (size_t)frames * m) {
        return;
    }
    const uint k = g % m;
    const real2 e = src[(g / m) * (size_t)l + k];
    dst[g] = cmul(chirp[k], (real2)(e.x, -e.y));
}
