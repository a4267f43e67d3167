// stockham_passes.cl: the in-local-memory Stockham machinery shared by stockham_local.cl and
// fourstep.cl: register/local-memory radix-R passes over FPB independent transforms of M points
// stored at local offsets base = 0, M, 2M, ... (padded by PADI).
//
// Work split: TPF work-items per transform; work-item t handles butterflies j = t + b*TPF,
// b < M/(R*TPF). Pass with sub-transform length ns reads inputs j + r*M/R and writes outputs
// (j - j%ns)*R + j%ns + r*ns (self-sorting: natural order after the last pass).
// Defines: M, TPF, TABN (resolution of the twiddle table tw[t] = exp(-2 pi i t/TABN), a multiple
// of M), TW_TABLE_ALL (optional, see stockham_local.cl).

#define PADI(i) ((i) + ((i) >> 5))

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
    }

#ifdef TW_TABLE_ALL
#define TWIDDLE(vv, RR, step)                                                                      \
    for (uint r = 1; r < RR; r++) {                                                                \
        vv[r] = cmul(vv[r], tw[r * step]);                                                         \
    }
#else
#define TWIDDLE(vv, RR, step)                                                                      \
    {                                                                                              \
        real2 w1 = tw[step], w = w1;                                                               \
        for (uint r = 1; r < RR; r++) {                                                            \
            vv[r] = cmul(vv[r], w);                                                                \
            w = cmul(w, w1);                                                                       \
        }                                                                                          \
    }
#endif

#define CALL(F, RR) CALL_(F, RR)
#define CALL_(F, RR) F##RR

#if MAIN_PASSES > 0
DEFINE_PASS(MAIN_RADIX)
#endif
#if LAST_RADIX > 1
DEFINE_PASS(LAST_RADIX)
#endif

