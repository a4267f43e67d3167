// carry.cl: f32 across the bus in an f64 run (issue 41; src/fft/opencl/carry.rs). Samples that
// are f32 values cross to the device as float and are widened here to the double the transform
// reads (exact); finished rows an f32 output writes are narrowed here to float before they
// cross back, rounded to nearest even as Rust's `as f32` rounds them, so the bytes written are
// the host's.
//
// Layout: `count` values back to back in `in` and `out`. Work: one work-item per value, in
// work-groups of 256 (the global size rounded up to them); items past `count` return.
// Built alone, with no defines (needs cl_khr_fp64).

#pragma OPENCL EXTENSION cl_khr_fp64 : enable

__kernel void widen(__global const float *in, __global double *out, const uint count) {
    const uint i = get_global_id(0);
    if (i < count) {
        out[i] = (double)in[i];
    }
}

__kernel void narrow(__global const double *in, __global float *out, const uint count) {
    const uint i = get_global_id(0);
    if (i < count) {
        out[i] = convert_float_rte(in[i]);
    }
}
