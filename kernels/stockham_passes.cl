// stockham_passes.cl: the in-local-memory Stockham machinery shared by stockham_local.cl and
// fourstep.cl: register/local-memory radix-R passes over FPB independent transforms of M points
// stored at local offsets base = 0, M, 2M, ... (padded by PADI).
//
// Work split: TPF work-items per transform; work-item t handles butterflies j = t + b*TPF,
// b < M/(R*TPF). Pass with sub-transform length ns reads inputs j + r*M/R and writes outputs
// (j - j%ns)*R + j%ns + r*ns (self-sorting: natural order after the last pass).
// Split exchange (used by stockham_local.cl with SPLIT=1 when 2M reals do not fit in local
// memory but M do): the data stay in registers and each exchange goes through one M-real local
// buffer twice, real parts then imaginary parts (dft_rR, put_rR, get_rR); with CHUNKS > 1
// (complex input, when M reals do not fit either but M/CHUNKS do) each component goes through
// a buffer of CH = M/CHUNKS reals in CHUNKS rounds, chunk c holding indices c*CH..(c+1)*CH-1.
// Defines: M, TPF, TABN (resolution of the twiddle table tw[t] = exp(-2 pi i t/TABN), a multiple
// of M).

#define PADI(i) ((i) + ((i) >> 5))
#ifndef CHUNKS
#define CHUNKS 1
#endif
#define CH (M / CHUNKS)

// Twiddle, transform and write to local memory one pass's butterflies held in v[b][r]
// (radix RR, sub-transform length ns), for the frame at local offset `base`.
#define DEFINE_PASS(RR) DEFINE_PASS_(RR)
#define DEFINE_PASS_(RR)                                                                           \
    inline void compute_r##RR(real2 v[M / (RR * TPF)][RR], __local real_t *sre,                   \
                              __local real_t *sim, __global const real2 *tw, uint base, uint t,    \
                              uint ns) {                                                           \
        for (uint b = 0; b < M / (RR * TPF); b++) {                                                \
            uint j = t + b * TPF;                                                                  \
            uint k = j & (ns - 1);                                                                 \
            if (ns > 1) {                                                                          \
                uint step = (TABN / RR) / ns * k;                                                  \
                TWIDDLE(v[b], RR, step);                                                           \
            }                                                                                      \
            dft_r(v[b], RR);                                                                       \
            uint d = base + (j - k) * RR + k;                                                      \
            for (uint r = 0; r < RR; r++) {                                                        \
                sre[PADI(d + r * ns)] = v[b][r].x;                                                 \
                sim[PADI(d + r * ns)] = v[b][r].y;                                                 \
            }                                                                                      \
        }                                                                                          \
    }                                                                                              \
    inline void load_r##RR(real2 v[M / (RR * TPF)][RR], __local real_t *sre, __local real_t *sim,  \
                           uint base, uint t) {                                                    \
        for (uint b = 0; b < M / (RR * TPF); b++) {                                                \
            uint j = t + b * TPF;                                                                  \
            for (uint r = 0; r < RR; r++) {                                                        \
                uint s = PADI(base + j + r * (M / RR));                                            \
                v[b][r] = (real2)(sre[s], sim[s]);                                                 \
            }                                                                                      \
        }                                                                                          \
    }                                                                                              \
    /* split exchange (SPLIT=1): twiddle + transform in registers only */                         \
    inline void dft_r##RR(real2 v[M / (RR * TPF)][RR], __global const real2 *tw, uint t,          \
                          uint ns) {                                                               \
        for (uint b = 0; b < M / (RR * TPF); b++) {                                                \
            uint j = t + b * TPF;                                                                  \
            uint k = j & (ns - 1);                                                                 \
            if (ns > 1) {                                                                          \
                uint step = (TABN / RR) / ns * k;                                                  \
                TWIDDLE(v[b], RR, step);                                                           \
            }                                                                                      \
            dft_r(v[b], RR);                                                                       \
        }                                                                                          \
    }                                                                                              \
    /* write one component (0: re, 1: im) of a pass's outputs (produced with ns) whose index   \
       falls in chunk c (CHUNKS chunks of CH = M/CHUNKS points; one chunk: every output) */       \
    inline void put_r##RR(real2 v[M / (RR * TPF)][RR], __local real_t *buf, uint base, uint t,    \
                          uint ns, int comp, uint c) {                                             \
        for (uint b = 0; b < M / (RR * TPF); b++) {                                                \
            uint j = t + b * TPF;                                                                  \
            uint k = j & (ns - 1);                                                                 \
            uint d = base + (j - k) * RR + k;                                                      \
            for (uint r = 0; r < RR; r++) {                                                        \
                uint i = d + r * ns;                                                               \
                if (CHUNKS == 1 || i / CH == c) {                                                  \
                    buf[PADI(i - c * CH)] = comp ? v[b][r].y : v[b][r].x;                          \
                }                                                                                  \
            }                                                                                      \
        }                                                                                          \
    }                                                                                              \
    /* one component of a pass's inputs whose index falls in chunk c into g[b*RR + r] (the     \
       split exchange in rounds: the register arrays must not change before every round's put) */ \
    inline void getc_r##RR(real_t g[M / TPF], __local real_t *buf, uint t, uint c) {               \
        for (uint b = 0; b < M / (RR * TPF); b++) {                                                \
            uint j = t + b * TPF;                                                                  \
            for (uint r = 0; r < RR; r++) {                                                        \
                uint i = j + r * (M / RR);                                                         \
                if (i / CH == c) {                                                                 \
                    g[b * RR + r] = buf[PADI(i - c * CH)];                                         \
                }                                                                                  \
            }                                                                                      \
        }                                                                                          \
    }                                                                                              \
    inline void setc_r##RR(real2 v[M / (RR * TPF)][RR], real_t g[M / TPF], int comp) {             \
        for (uint b = 0; b < M / (RR * TPF); b++) {                                                \
            for (uint r = 0; r < RR; r++) {                                                        \
                if (comp) {                                                                        \
                    v[b][r].y = g[b * RR + r];                                                     \
                } else {                                                                           \
                    v[b][r].x = g[b * RR + r];                                                     \
                }                                                                                  \
            }                                                                                      \
        }                                                                                          \
    }                                                                                              \
    /* read one component of a pass's inputs whose index falls in chunk c */                      \
    inline void get_r##RR(real2 v[M / (RR * TPF)][RR], __local real_t *buf, uint base, uint t,    \
                          int comp, uint c) {                                                      \
        for (uint b = 0; b < M / (RR * TPF); b++) {                                                \
            uint j = t + b * TPF;                                                                  \
            for (uint r = 0; r < RR; r++) {                                                        \
                uint i = base + j + r * (M / RR);                                                  \
                if (CHUNKS == 1 || i / CH == c) {                                                  \
                    real_t x = buf[PADI(i - c * CH)];                                              \
                    if (comp) {                                                                    \
                        v[b][r].y = x;                                                             \
                    } else {                                                                       \
                        v[b][r].x = x;                                                             \
                    }                                                                              \
                }                                                                                  \
            }                                                                                      \
        }                                                                                          \
    }

// The first twiddle of a butterfly from the table (computing it with native_cos/native_sin was
// no faster, docs/perf.md), its powers by complex multiplication.
#define TWIDDLE(vv, RR, step)                                                                      \
    {                                                                                              \
        real2 w1 = tw[step], w = w1;                                                         \
        for (uint r = 1; r < RR; r++) {                                                            \
            vv[r] = cmul(vv[r], w);                                                                \
            w = cmul(w, w1);                                                                       \
        }                                                                                          \
    }

#define CALL(F, RR) CALL_(F, RR)
#define CALL_(F, RR) F##RR

#if MAIN_PASSES > 0
DEFINE_PASS(MAIN_RADIX)
#endif
#if LAST_RADIX > 1
DEFINE_PASS(LAST_RADIX)
#endif

