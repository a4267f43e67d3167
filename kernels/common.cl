// common.cl: types, complex helpers, radix-2/4/8 DFT butterflies and the output-scale step shared
// by every fftd kernel. Prepended to each kernel source by the host.
//
// Defines (set by the host with -D):
//   USE_DOUBLE        compute in double (needs cl_khr_fp64); float otherwise
//   COMPLEX_OUT       1: write X_k itself, re and im interleaved (--scale complex: two values per
//                     bin, output index 2i and 2i+1 for bin slot i); 0 (default): one finished
//                     value per bin (store_bin)
//
// Conventions: forward DFT, X_k = sum_j x_j exp(-2 pi i jk/n). Complex numbers are real2 (x = re,
// y = im). The scale step mirrors src/fft/scale.rs (ScalePlan::finish_row): from the squared
// magnitude p = |X_k|^2 (unless COMPLEX_OUT),
//   scale_mode 0 (magnitude): sqrt(p)
//   scale_mode 1 (power):     p * (edge ? norm_edge : norm_interior)   edge = DC or Nyquist bin
//   scale_mode 2 (dB):        10 log10(max(p, 1e-24)), a NaN p kept NaN
// and where p overflowed or underflowed though X is finite and not 0, from |X| itself
// (finish_from_magnitude)

#ifdef USE_DOUBLE
#pragma OPENCL EXTENSION cl_khr_fp64 : enable
typedef double real_t;
typedef double2 real2;
#define DB_FLOOR_POWER 1e-24
#define DB_FLOOR_MAGNITUDE 1e-12
#define R(x) (x)
#else
typedef float real_t;
typedef float2 real2;
#define DB_FLOOR_POWER 1e-24f
#define DB_FLOOR_MAGNITUDE 1e-12f
#define R(x) (x##f)
#endif

#define M_SQRT1_2_R R(0.70710678118654752440)

#ifndef COMPLEX_OUT
#define COMPLEX_OUT 0
#endif

inline real2 cmul(real2 a, real2 b) {
    return (real2)(a.x * b.x - a.y * b.y, a.x * b.y + a.y * b.x);
}

// multiply by -i
inline real2 mul_mi(real2 a) { return (real2)(a.y, -a.x); }

inline void dft2(real2 *a0, real2 *a1) {
    real2 t = *a0;
    *a0 = t + *a1;
    *a1 = t - *a1;
}

// in-place 4-point forward DFT of v[0..3]
inline void dft4(real2 *v0, real2 *v1, real2 *v2, real2 *v3) {
    real2 t0 = *v0 + *v2, t1 = *v0 - *v2;
    real2 t2 = *v1 + *v3, t3 = mul_mi(*v1 - *v3);
    *v0 = t0 + t2;
    *v2 = t0 - t2;
    *v1 = t1 + t3;
    *v3 = t1 - t3;
}

// in-place 8-point forward DFT: two 4-point DFTs of the even and odd terms, then W8 twiddles
inline void dft8(real2 *v) {
    real2 e0 = v[0], e1 = v[2], e2 = v[4], e3 = v[6];
    real2 o0 = v[1], o1 = v[3], o2 = v[5], o3 = v[7];
    dft4(&e0, &e1, &e2, &e3);
    dft4(&o0, &o1, &o2, &o3);
    o1 = (real2)(o1.x + o1.y, o1.y - o1.x) * M_SQRT1_2_R;   // * exp(-i pi/4)
    o2 = mul_mi(o2);                                          // * -i
    o3 = (real2)(o3.y - o3.x, -(o3.x + o3.y)) * M_SQRT1_2_R; // * exp(-3i pi/4)
    v[0] = e0 + o0; v[4] = e0 - o0;
    v[1] = e1 + o1; v[5] = e1 - o1;
    v[2] = e2 + o2; v[6] = e2 - o2;
    v[3] = e3 + o3; v[7] = e3 - o3;
}

// in-place 16-point forward DFT: 4-point DFTs over n1 (stride 4), twiddles W16^(n2 k1), 4-point
// DFTs over n2: X[k1 + 4 k2]
inline void dft16(real2 *v) {
    // W16^m = (cos(m pi/8), -sin(m pi/8)), m = n2*k1 in 1..9
    const real_t c1 = R(0.92387953251128675613), s1 = R(0.38268343236508977173);
    real2 a[16];
    for (uint n2 = 0; n2 < 4; n2++) {
        real2 t0 = v[n2], t1 = v[n2 + 4], t2 = v[n2 + 8], t3 = v[n2 + 12];
        dft4(&t0, &t1, &t2, &t3);
        a[n2 * 4 + 0] = t0;
        a[n2 * 4 + 1] = t1;
        a[n2 * 4 + 2] = t2;
        a[n2 * 4 + 3] = t3;
    }
    a[5] = cmul(a[5], (real2)(c1, -s1));                       // W^1
    a[6] = (real2)(a[6].x + a[6].y, a[6].y - a[6].x) * M_SQRT1_2_R; // W^2
    a[7] = cmul(a[7], (real2)(s1, -c1));                       // W^3
    a[9] = (real2)(a[9].x + a[9].y, a[9].y - a[9].x) * M_SQRT1_2_R; // W^2
    a[10] = mul_mi(a[10]);                                     // W^4
    a[11] = (real2)(a[11].y - a[11].x, -(a[11].x + a[11].y)) * M_SQRT1_2_R; // W^6
    a[13] = cmul(a[13], (real2)(s1, -c1));                     // W^3
    a[14] = (real2)(a[14].y - a[14].x, -(a[14].x + a[14].y)) * M_SQRT1_2_R; // W^6
    a[15] = cmul(a[15], (real2)(-c1, s1));                     // W^9
    for (uint k1 = 0; k1 < 4; k1++) {
        real2 t0 = a[k1], t1 = a[4 + k1], t2 = a[8 + k1], t3 = a[12 + k1];
        dft4(&t0, &t1, &t2, &t3);
        v[k1] = t0;
        v[k1 + 4] = t1;
        v[k1 + 8] = t2;
        v[k1 + 12] = t3;
    }
}

// in-place 32-point forward DFT: two 16-point DFTs of the even and odd terms, then W32^k twiddles
inline void dft32(real2 *v) {
    const real2 w32[16] = {
        (real2)(R(1.00000000000000000000), -R(0.00000000000000000000)),
        (real2)(R(0.98078528040323043058), -R(0.19509032201612824808)),
        (real2)(R(0.92387953251128673848), -R(0.38268343236508978178)),
        (real2)(R(0.83146961230254523567), -R(0.55557023301960217765)),
        (real2)(R(0.70710678118654757274), -R(0.70710678118654746172)),
        (real2)(R(0.55557023301960228867), -R(0.83146961230254523567)),
        (real2)(R(0.38268343236508983729), -R(0.92387953251128673848)),
        (real2)(R(0.19509032201612833135), -R(0.98078528040323043058)),
        (real2)(R(0.00000000000000006123), -R(1.00000000000000000000)),
        (real2)(-R(0.19509032201612819257), -R(0.98078528040323043058)),
        (real2)(-R(0.38268343236508972627), -R(0.92387953251128673848)),
        (real2)(-R(0.55557023301960195560), -R(0.83146961230254545772)),
        (real2)(-R(0.70710678118654746172), -R(0.70710678118654757274)),
        (real2)(-R(0.83146961230254534669), -R(0.55557023301960217765)),
        (real2)(-R(0.92387953251128673848), -R(0.38268343236508989280)),
        (real2)(-R(0.98078528040323043058), -R(0.19509032201612860891)),
    };
    real2 e[16], o[16];
    for (uint i = 0; i < 16; i++) {
        e[i] = v[2 * i];
        o[i] = v[2 * i + 1];
    }
    dft16(e);
    dft16(o);
    for (uint k = 0; k < 16; k++) {
        real2 t = cmul(o[k], w32[k]);
        v[k] = e[k] + t;
        v[k + 16] = e[k] - t;
    }
}

// radix-R DFT of v[0..R-1] for R in {2, 4, 8, 16, 32}
inline void dft_r(real2 *v, uint r) {
    if (r == 32) {
        dft32(v);
    } else if (r == 16) {
        dft16(v);
    } else if (r == 8) {
        dft8(v);
    } else if (r == 4) {
        dft4(&v[0], &v[1], &v[2], &v[3]);
    } else {
        dft2(&v[0], &v[1]);
    }
}

// The finished output value of one bin from its squared magnitude.
inline real_t finish_bin(real_t p, int edge, int scale_mode, real_t norm_edge, real_t norm_interior) {
    if (scale_mode == 0) {
        return sqrt(p);
    } else if (scale_mode == 1) {
        return p * (edge ? norm_edge : norm_interior);
    } else {
        // not fmax: it would turn a NaN power into the floor (-240 dB); NaN stays NaN
        return R(10.0) * log10(p < DB_FLOOR_POWER ? DB_FLOOR_POWER : p);
    }
}

// The finished value of a bin whose |X|^2 overflowed (|X| above ~1.8e19 in float, ~1.3e154 in
// double) or underflowed (|X| below ~1.1e-19, ~1.5e-154) from |X| itself, as scale.rs's
// refinish_out_of_range: the magnitude, its level in dB (floored as finish_bin's), or
// (|X| sqrt(norm))^2, finite where a norm below 1 brings it in range. An infinite X stays infinite.
inline real_t finish_from_magnitude(real2 x, int edge, int scale_mode, real_t norm_edge,
                                    real_t norm_interior) {
    real_t m = hypot(x.x, x.y);
    if (scale_mode == 0) {
        return m;
    } else if (scale_mode == 1) {
        real_t scaled = m * sqrt(edge ? norm_edge : norm_interior);
        return scaled * scaled;
    } else {
        return R(20.0) * log10(m < DB_FLOOR_MAGNITUDE ? DB_FLOOR_MAGNITUDE : m);
    }
}

// Writes bin X of output slot `i` (frame * bins + k): COMPLEX_OUT writes re, im at out[2i],
// out[2i+1]; else out[i] = the finished value of |X|^2 (edge: DC or Nyquist bin).
inline void store_bin(__global real_t *out, size_t i, real2 x, int edge, int scale_mode,
                      real_t norm_edge, real_t norm_interior) {
#if COMPLEX_OUT
    vstore2(x, i, out);
#else
    real_t p = x.x * x.x + x.y * x.y;
#ifdef USE_DOUBLE
    int tiny = p < DBL_MIN && (x.x != 0 || x.y != 0);
#else
    int tiny = p < FLT_MIN && (x.x != 0 || x.y != 0);
#endif
    out[i] = (isinf(p) || tiny)
                 ? finish_from_magnitude(x, edge, scale_mode, norm_edge, norm_interior)
                 : finish_bin(p, edge, scale_mode, norm_edge, norm_interior);
#endif
}

// Bin k (0..m) of the real FFT of length 2m from Z = FFT_m(z), z_j = x_2j + i x_2j+1:
//   X_k = (Z_k + conj Z_{m-k})/2 + W^k (Z_k - conj Z_{m-k})/(2i),  W = exp(-2 pi i/(2m)).
// zk = Z_{k mod m}, zc = Z_{(m-k) mod m}, w = W^k. Returns X_k.
inline real2 r2c_bin(real2 zk, real2 zc, real2 w) {
    real2 c = (real2)(zc.x, -zc.y);
    real2 fe = (zk + c) * R(0.5);
    real2 d = zk - c;
    real2 fo = (real2)(d.y, -d.x) * R(0.5);
    return fe + cmul(w, fo);
}
