// r2c_post.cl: last step of the multi-pass path. Reads the complex spectrum Z (M values per frame)
// and writes BINS finished bins per frame: for real input the half-length packing is undone
// (X_k from Z_k and Z_{M-k}, k = 0..M), then |X|^2 and the output scale, or X's re and im with
// COMPLEX_OUT (common.cl: store_bin).
// Work-group shape: 1-D, any size; one work-item per output bin, bounds-checked.
//
// Defines: M, REAL_INPUT, COMPLEX_OUT, USE_DOUBLE (see common.cl); REAL_FULL (stockham_global.cl:
// odd real n transformed as n complex points: bins 0..M/2 of Z are X, only DC is an edge bin).
// M need not be a power of two (mixed_radix.cl).

#if REAL_FULL
#define POST_BINS (M / 2 + 1)
#elif REAL_INPUT
#define POST_BINS (M + 1)
#else
#define POST_BINS M
#endif

__kernel void post(__global const real2 *restrict z, __global real_t *restrict out, uint frames,
                   int scale_mode, real_t norm_edge, real_t norm_interior) {
    const size_t g = get_global_id(0);
    if (g >= (size_t)frames * POST_BINS) {
        return;
    }
    const size_t fo = (g / POST_BINS) * (size_t)M;
    const uint k = g % POST_BINS;
#if REAL_FULL
    real2 x = z[fo + k];
    int edge = (k == 0);
#elif REAL_INPUT
    real_t a = -(real_t)k / (real_t)M; // exp(-2 pi i k / 2M) = exp(i pi a)
    real2 x = r2c_bin(z[fo + (k % M)], z[fo + ((M - k) % M)],
                      (real2)(cospi(a), sinpi(a)));
    int edge = (k == 0) || (k == M);
#else
    real2 x = z[fo + k];
    int edge = (k == 0);
#endif
    store_bin(out, g, x, edge, scale_mode, norm_edge, norm_interior);
}
