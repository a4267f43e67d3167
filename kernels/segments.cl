// segments.cl: runs of consecutive rows reduced to one row on the device (--average fused with
// the FFT), so one row per run is copied back. Prepended with common.cl. Mirrors
// fft::Segments::reduce: op 0 mean, 1 max, 2 min of each column over the run's rows; a NaN stays
// NaN under max and min as under the mean (OpenCL's fmax/fmin would drop it).
// The mean's sum is held in real_t as it comes until an addition leaves the type's range; from
// there on it is held over 2^k, k = ceil(log2 n), which an n-row sum of finite values leaves
// only by rounding at the very top (a power of two: the scaling is exact), so a mean that the
// type holds is written. The division by n is the device's (OpenCL allows 2.5 ulp in f32, less
// than the n roundings of the sum); a run of one row is copied as it is.
// One work-item per (column, run); neighbouring items read neighbouring columns.

__kernel void reduce_segments(__global const real_t *rows, __global real_t *out,
                              __global const uint *start, __global const uint *len,
                              uint first_run, uint first_row, uint runs, uint width, int op) {
    uint c = get_global_id(0);
    uint r = get_global_id(1);
    if (c >= width || r >= runs) {
        return;
    }
    uint n = len[first_run + r];
    __global const real_t *p = rows + (size_t)(start[first_run + r] - first_row) * width + c;
    real_t acc = p[0];
    real_t scale = 1; // the mean's acc is the sum times scale
    for (uint i = 1; i < n; i++) {
        real_t v = p[(size_t)i * width];
        if (op == 0) {
            real_t next = acc + v * scale;
            if (isinf(next) && isfinite(acc) && isfinite(v) && scale == 1) {
                scale = ldexp((real_t)1, -(int)(32 - clz(n - 1)));
                acc *= scale;
                next = acc + v * scale;
            }
            acc = next;
        } else if (isnan(acc) || isnan(v)) {
            acc = NAN;
        } else {
            acc = op == 1 ? fmax(acc, v) : fmin(acc, v);
        }
    }
    if (op == 0 && n > 1) {
        acc = acc / (real_t)n / scale;
    }
    out[(size_t)r * width + c] = acc;
}
