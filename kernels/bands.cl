// bands.cl: band powers summed on the device (--bands fused with the FFT), so only the bands are
// copied back. Prepended with common.cl (real_t, USE_DOUBLE). Mirrors fft::BandWeights::apply:
//   out[f][b] = sum over i < len[b] of weights[offset[b] + i] * power[f][first[b] + i]
// One work-item per (band, frame); the weights are read once per band by every frame's item.
// finish (fft::RowFinish), after the sum is made a power by `unit` (fft::BandWeights::unit, a
// power of two; root_unit is its square root, db_unit 10·log10 of it, so a power beyond real_t's
// range is still finished): 0 sum * unit, 1 sqrt(sum) * root_unit, 2 10·log10(sum) + db_unit
// raised to floor_db (-240 dB), a NaN kept NaN (fmax would turn it into the floor).

__kernel void band_powers(__global const real_t *power, __global real_t *out,
                          __global const uint *first, __global const uint *len,
                          __global const uint *offset, __global const real_t *weights,
                          uint bins, uint bands, uint frames, int finish, real_t unit,
                          real_t root_unit, real_t db_unit, real_t floor_db) {
    uint b = get_global_id(0);
    uint f = get_global_id(1);
    if (b >= bands || f >= frames) {
        return;
    }
    __global const real_t *p = power + (size_t)f * bins + first[b];
    __global const real_t *w = weights + offset[b];
    real_t sum = 0;
    for (uint i = 0; i < len[b]; i++) {
        sum += w[i] * p[i];
    }
    if (finish == 0) {
        sum *= unit;
    } else if (finish == 1) {
        sum = sqrt(sum) * root_unit;
    } else {
        real_t db = R(10.0) * log10(sum) + db_unit;
        sum = db < floor_db ? floor_db : db;
    }
    out[(size_t)f * bands + b] = sum;
}
