//! Work-group geometry of the OpenCL kernels: the local (one-kernel) path's, the four-step
//! path's two stages, and the global path's radices.

use super::MAX_TPF;

/// Most transforms per work-group of a four-step stage.
const FOURSTEP_FPB: usize = 16;

/// Work-group geometry of the local (one-kernel) path for one frame size.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct LocalGeometry {
    /// Complex points per frame.
    pub m: usize,
    /// Work-items per frame.
    pub tpf: usize,
    /// Frames per work-group.
    pub fpb: usize,
    pub main_radix: usize,
    pub main_passes: u32,
    /// 1 when there is no leftover pass.
    pub last_radix: usize,
    /// Split exchange: the frame stays in registers and local memory holds M reals, not 2M
    /// (one frame per group); for frames that fit no other way.
    pub split: bool,
    /// Split exchange in rounds: local memory holds M/chunks reals (complex input only: its
    /// bins go straight from registers to the output); 1 otherwise.
    pub chunks: usize,
}

impl LocalGeometry {
    /// Local memory the kernel declares for `points` complex points: two arrays of reals, padded
    /// by one word every 32 (`PADI` in stockham_local.cl).
    pub(crate) fn local_bytes(points: usize, real_bytes: usize) -> usize {
        2 * real_bytes * (points + (points >> 5) + 1)
    }

    /// The geometry for `m` complex points of `real_bytes`-byte reals, or None when one frame
    /// does not fit in `local_limit` bytes. `target_wg`: work-items per group to aim for;
    /// `complex`: complex input (whose split exchange may go in rounds, `chunks`).
    pub(crate) fn new(
        m: usize,
        real_bytes: usize,
        local_limit: usize,
        (max_wg, target_wg): (usize, usize),
        complex: bool,
    ) -> Option<Self> {
        if m > 1 << 16 {
            return None;
        }
        let split = Self::local_bytes(m, real_bytes) > local_limit;
        let chunks = if split {
            Self::split_chunks(m, real_bytes, local_limit, complex)?
        } else {
            1
        };
        // radix-16 passes (radix 2/4/8 for the leftover pass): faster than radix 8 on an H200 at
        // every size 256..16384 (docs/perf.md). The split exchange keeps a radix-2 leftover
        // (16·16·16·2 on 512 work-items for 8192 points): folding it into a radix-32 last pass
        // was slower (docs/perf.md).
        let log2m = m.trailing_zeros();
        let (main_radix, main_passes, last_radix) = match log2m {
            0 => (2, 0, 1),
            1 => (2, 1, 1),
            2 => (4, 1, 1),
            3 => (8, 1, 1),
            _ => (16, log2m / 4, 1usize << (log2m % 4)),
        };
        let max_tpf = if split { 512 } else { MAX_TPF };
        let tpf = (m / main_radix.max(last_radix)).clamp(1, max_tpf.min(max_wg));
        let mut fpb = (target_wg / tpf).max(1).min(max_wg / tpf).max(1);
        while fpb > 1 && Self::local_bytes(fpb * m, real_bytes) > local_limit {
            fpb /= 2;
        }
        if split {
            fpb = 1;
        }
        Some(LocalGeometry {
            m,
            tpf,
            fpb,
            main_radix,
            main_passes,
            last_radix,
            split,
            chunks,
        })
    }

    /// Rounds per component of the split exchange: 1 when M reals fit `local_limit`; for
    /// complex input below 16384 points 2 or 4 when M/2 or M/4 do (one frame in registers);
    /// None when the frame does not fit this way. A 16384-point complex frame in one kernel
    /// with 48 KiB was 3.8x slower than four-step on an H200 (docs/perf.md), so it takes
    /// four-step.
    fn split_chunks(
        m: usize,
        real_bytes: usize,
        local_limit: usize,
        complex: bool,
    ) -> Option<usize> {
        if m > 1 << 14 {
            return None;
        }
        let fits = |c: usize| Self::local_bytes(m / c, real_bytes) / 2 <= local_limit;
        if fits(1) {
            return Some(1);
        }
        if !complex || !(64..1 << 14).contains(&m) {
            return None;
        }
        [2, 4].into_iter().find(|&c| fits(c))
    }

    /// The geometry of one four-step stage: `fpb` transforms of `m` points per work-group, at
    /// most 256 work-items.
    fn stage(m: usize, fpb: usize) -> Self {
        let mut g = Self::new(m, 1, usize::MAX, (1 << 16, 1), false).unwrap_or(LocalGeometry {
            m,
            tpf: 1,
            fpb: 1,
            main_radix: 2,
            main_passes: 0,
            last_radix: 1,
            split: false,
            chunks: 1,
        });
        g.fpb = fpb;
        g.tpf = (m / g.main_radix).clamp(1, (256 / fpb).max(1));
        g
    }

    pub(super) fn defines(&self) -> String {
        format!(
            "-D TPF={} -D FPB={} -D MAIN_RADIX={} -D MAIN_PASSES={} -D LAST_RADIX={} -D SPLIT={} \
             -D CHUNKS={}",
            self.tpf,
            self.fpb,
            self.main_radix,
            self.main_passes,
            self.last_radix,
            self.split as u32,
            self.chunks
        )
    }
}

/// Four-step split of `m` points when both stages fit in local memory with at least 4 transforms
/// per work-group (at most 16; 32 was no faster on an H100, issue 40): (stage 1 geometry over M1
/// columns, stage 2 geometry over M2-point rows).
pub(crate) fn fourstep_geometry(
    m: usize,
    real_bytes: usize,
    local_limit: usize,
) -> Option<(LocalGeometry, LocalGeometry)> {
    if !(64..=1 << 18).contains(&m) {
        return None;
    }
    let m1 = 1usize << (m.trailing_zeros() / 2);
    let m2 = m / m1;
    let f1 = stage_fpb(m1, m2, real_bytes, local_limit)?;
    let f2 = stage_fpb(m2, m1, real_bytes, local_limit)?;
    Some((LocalGeometry::stage(m1, f1), LocalGeometry::stage(m2, f2)))
}

/// The three stages of a power of two past the four-step's reach (`m` = m0 × M): the outer
/// columns (m0 points, one stage), then the inner four-step over rows of M points, its row stage
/// holding at most m0 rows per work-group (a group takes row k1 of consecutive outer rows).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct ThreeStages {
    pub outer: LocalGeometry,
    pub columns: LocalGeometry,
    pub rows: LocalGeometry,
}

impl ThreeStages {
    /// Complex points of the inner four-step's frames (one row of the outer matrix).
    pub(crate) fn inner_points(&self) -> usize {
        self.columns.m * self.rows.m
    }
}

/// Three stages for `m` points when the four-step does not take it: m0 near the cube root
/// of m (⌈log2 m / 3⌉ bits, then fewer or more) with the inner four-step and the outer column
/// stage each fitting local memory with at least 4 transforms per work-group.
pub(crate) fn threestage_geometry(
    m: usize,
    real_bytes: usize,
    local_limit: usize,
) -> Option<ThreeStages> {
    if !m.is_power_of_two() || m < 1 << 8 {
        return None;
    }
    let log2m = m.trailing_zeros() as usize;
    let first = log2m.div_ceil(3);
    let tries = (first..=log2m - 6).chain((2..first).rev());
    tries.into_iter().find_map(|bits| {
        let (m0, inner) = (1usize << bits, m >> bits);
        let (columns, rows) = fourstep_geometry(inner, real_bytes, local_limit)?;
        let f0 = stage_fpb(m0, inner, real_bytes, local_limit)?;
        let f2 = rows.fpb.min(m0);
        (f2 >= 4).then(|| ThreeStages {
            outer: LocalGeometry::stage(m0, f0),
            columns,
            rows: LocalGeometry::stage(rows.m, f2),
        })
    })
}

/// Transforms of `len` points per work-group of a four-step stage (at most 16 and `other`, the
/// count of them in a frame, fitting `local_limit`), or None below 4.
fn stage_fpb(len: usize, other: usize, real_bytes: usize, local_limit: usize) -> Option<usize> {
    let mut f = FOURSTEP_FPB.min(other);
    while f >= 4 && LocalGeometry::local_bytes(f * len, real_bytes) > local_limit {
        f /= 2;
    }
    (f >= 4).then_some(f)
}

/// The radices of the global path's passes (radix 8: the global passes are memory-bound), in order (radix 8, leftover 2 or 4 last).
pub(super) fn global_radices(m: usize) -> Vec<usize> {
    let log2m = m.trailing_zeros();
    let mut r = vec![8; (log2m / 3) as usize];
    if log2m % 3 != 0 {
        r.push(1 << (log2m % 3));
    }
    r
}
