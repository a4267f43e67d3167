// segments.cl: runs of consecutive rows reduced to one row on the device (--average fused with
// the FFT), so one row per run is copied back. Prepended with common.cl. Mirrors
// fft::Segments::reduce: op 0 sum, 1 max, 2 min of each column over the run's rows; a NaN stays
// NaN under max and min as under the sum (OpenCL's fmax/fmin would drop it).
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
    for (uint i = 1; i < n; i++) {
        real_t v = p[(size_t)i * width];
        if (op == 0) {
            acc += v;
        } else if (isnan(acc) || isnan(v)) {
            acc = NAN;
        } else {
            acc = op == 1 ? fmax(acc, v) : fmin(acc, v);
        }
    }
    out[(size_t)r * width + c] = acc;
}
