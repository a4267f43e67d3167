//! Which path a frame takes on an OpenCL device, decided in one place from plain values: the
//! device's limits, the frame's complex points, real or complex input and the precision
//! (`choose`), as rustfft's planner turns a length into a recipe. `plan.rs` builds what this
//! chooses and nothing else decides; the tests below run it over frame sizes up to 2^26 with no
//! device.
//!
//! The order, for `m` complex points (`fft_points`):
//! - a power of two: one kernel in local memory (`Local`, the split exchange included) when a
//!   frame fits; else four-step (two kernels, each stage in local memory, up to 2^18 points);
//!   else three stages (outer columns, then a four-step over each row); else the two-level
//!   split; else passes in global memory (`Global`);
//! - any other size, over `len` points (m when its prime factors are 2, 3, 5, 7; else
//!   Bluestein's power of two): one kernel in local memory (`MixedLocal`) when two arrays of
//!   `len` fit; else two-level; else passes in global memory (`Mixed`).

use super::geometry::{fourstep_geometry, threestage_geometry, LocalGeometry, ThreeStages};
use super::mixed::transform_len;
use super::twolevel::{twolevel_geometry, Stage};
use super::TARGET_WG;

/// What the choice needs to know of a device (or of a test's local-memory limit).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct DeviceLimits {
    /// Local memory one work-group may use, bytes.
    pub local_bytes: usize,
    /// Most work-items per work-group.
    pub max_work_group: usize,
}

/// The path of one frame, with the shapes its kernels are built for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum PathChoice {
    /// A power of two in one kernel in local memory (the split exchange included).
    Local(LocalGeometry),
    /// A power of two as columns then rows, each stage in local memory.
    FourStep(LocalGeometry, LocalGeometry),
    /// A power of two past the four-step: outer columns, then a four-step over each row, each
    /// stage in local memory (three crossings of device memory, four for real input).
    ThreeStage(ThreeStages),
    /// A power of two in passes through global memory.
    Global,
    /// Any other size in one kernel in local memory, over `len` points (`len` > m: Bluestein).
    MixedLocal { len: usize },
    /// Column then row transforms, each in local memory, over `len` points (`len` > m:
    /// Bluestein); also powers of two too large for four-step.
    TwoLevel { len: usize, stages: (Stage, Stage) },
    /// Any other size in passes through global memory (Bluestein for a prime factor above 7).
    Mixed,
}

/// The path of frames of `m` complex points (`complex`: complex input) in reals of `real_bytes`
/// bytes on a device with `limits`.
pub(crate) fn choose(
    limits: DeviceLimits,
    m: usize,
    complex: bool,
    real_bytes: usize,
) -> PathChoice {
    let DeviceLimits {
        local_bytes: limit,
        max_work_group: max_wg,
    } = limits;
    let two_level = |len| {
        twolevel_geometry(len, real_bytes, limit, max_wg)
            .map(|stages| PathChoice::TwoLevel { len, stages })
    };
    if !m.is_power_of_two() {
        let len = transform_len(m);
        if mixed_local_fits(len, real_bytes, limit) {
            return PathChoice::MixedLocal { len };
        }
        return two_level(len).unwrap_or(PathChoice::Mixed);
    }
    let wg = (max_wg.min(1024), TARGET_WG);
    if let Some(g) = LocalGeometry::new(m, real_bytes, limit, wg, complex) {
        return PathChoice::Local(g);
    }
    if let Some((g1, g2)) = fourstep_geometry(m, real_bytes, limit) {
        return PathChoice::FourStep(g1, g2);
    }
    if let Some(stages) = threestage_geometry(m, real_bytes, limit) {
        return PathChoice::ThreeStage(stages);
    }
    two_level(m).unwrap_or(PathChoice::Global)
}

/// Whether the one-kernel mixed-radix path's two arrays of `len` complex values fit `limit`.
fn mixed_local_fits(len: usize, real_bytes: usize, limit: usize) -> bool {
    4 * len * real_bytes <= limit
}

#[cfg(test)]
mod tests {
    use super::super::mixed::radices;
    use super::super::plan::fft_points;
    use super::*;
    use crate::types::InputKind;

    /// PoCL on a CPU (1 MiB of local memory), an NVIDIA H100 (48 KiB), both less the 256 bytes
    /// the engine leaves, and the tests' limits that force the four-step, two-level and global
    /// paths (`OpenClOptions::local_mem_limit`).
    const DEVICES: [(&str, DeviceLimits); 5] = [
        ("pocl", limits((1 << 20) - 256, 4096)),
        ("h100", limits((48 << 10) - 256, 1024)),
        ("16k", limits(16 << 10, 1024)),
        ("4k", limits(4 << 10, 1024)),
        ("64b", limits(64, 1024)),
    ];

    const fn limits(local_bytes: usize, max_work_group: usize) -> DeviceLimits {
        DeviceLimits {
            local_bytes,
            max_work_group,
        }
    }

    /// Complex points of a frame of n samples.
    fn points(n: usize, complex: bool) -> usize {
        let kind = if complex {
            InputKind::Complex
        } else {
            InputKind::Real
        };
        fft_points(n, kind)
    }

    /// What every choice must hold: the shapes cover the frame, fit the device, and the path
    /// suits the size.
    fn check(name: &str, d: DeviceLimits, n: usize, complex: bool, rb: usize) -> PathChoice {
        let m = points(n, complex);
        let c = choose(d, m, complex, rb);
        let at = format!("{name} n={n} complex={complex} {rb}-byte reals: {c:?}");
        let limit = d.local_bytes;
        match c {
            PathChoice::Local(g) => {
                assert!(m.is_power_of_two() && g.m == m, "{at}");
                assert!(g.tpf * g.fpb <= d.max_work_group.min(1024), "{at}");
                let used = if g.split {
                    LocalGeometry::local_bytes(m / g.chunks, rb) / 2
                } else {
                    LocalGeometry::local_bytes(g.fpb * m, rb)
                };
                assert!(used <= limit, "{at}: {used} bytes");
            }
            PathChoice::FourStep(g1, g2) => {
                assert!(m.is_power_of_two() && g1.m * g2.m == m, "{at}");
                for g in [g1, g2] {
                    assert!(g.fpb >= 4, "{at}");
                    assert!(LocalGeometry::local_bytes(g.fpb * g.m, rb) <= limit, "{at}");
                }
            }
            PathChoice::ThreeStage(t) => {
                assert!(m.is_power_of_two(), "{at}");
                assert_eq!(t.outer.m * t.inner_points(), m, "{at}");
                assert_eq!(t.inner_points(), t.columns.m * t.rows.m, "{at}");
                assert_eq!(t.outer.m % t.rows.fpb, 0, "{at}");
                for g in [t.outer, t.columns, t.rows] {
                    assert!(g.fpb >= 4, "{at}");
                    assert!(g.tpf * g.fpb <= d.max_work_group, "{at}");
                    assert!(LocalGeometry::local_bytes(g.fpb * g.m, rb) <= limit, "{at}");
                }
            }
            PathChoice::Global => assert!(m.is_power_of_two(), "{at}"),
            PathChoice::MixedLocal { len } => {
                assert!(
                    !m.is_power_of_two() && mixed_local_fits(len, rb, limit),
                    "{at}"
                );
                assert_eq!(len == m, radices(m).is_some(), "{at}");
                assert!(len >= 2 * m - 1 || len == m, "{at}");
            }
            PathChoice::TwoLevel {
                len,
                stages: (s1, s2),
            } => {
                assert_eq!(s1.len * s2.len, len, "{at}");
                assert!(
                    len == m || (!m.is_power_of_two() && len >= 2 * m - 1),
                    "{at}"
                );
                for s in [s1, s2] {
                    assert!(Stage::local_bytes(s.len, s.fpb, rb) <= limit, "{at}");
                    assert!(s.wg <= d.max_work_group, "{at}");
                }
            }
            PathChoice::Mixed => assert!(!m.is_power_of_two(), "{at}"),
        }
        c
    }

    fn every_case(n: usize) {
        for (name, d) in DEVICES {
            for complex in [false, true] {
                for rb in [4, 8] {
                    check(name, d, n, complex, rb);
                }
            }
        }
    }

    #[test]
    fn every_size_up_to_65536_has_a_path_that_fits() {
        for n in 2..=1 << 16 {
            every_case(n);
        }
    }

    #[test]
    fn larger_sizes_up_to_2_pow_26_have_a_path_that_fits() {
        // every power of two, and a spread of the others (a prime step through each octave)
        for log2 in 17..=26 {
            every_case(1 << log2);
            let step = ((1 << (log2 - 1)) / 97) | 1;
            let mut n = (1 << (log2 - 1)) + 1;
            while n < 1 << log2 {
                every_case(n);
                n += step;
            }
        }
    }

    /// The paths the engine's device tests assert on an H100's limit (tests/opencl_twolevel.rs)
    /// and the largest frames, decided here with no device.
    #[test]
    fn paths_on_an_h100() {
        let h100 = DEVICES[1].1;
        let path = |n, complex, rb| choose(h100, points(n, complex), complex, rb);
        assert!(matches!(path(4096, false, 4), PathChoice::Local(g) if !g.split));
        assert!(matches!(path(16384, false, 4), PathChoice::Local(g) if g.split));
        assert!(matches!(path(16384, true, 4), PathChoice::FourStep(..)));
        assert!(matches!(path(65536, false, 4), PathChoice::FourStep(..)));
        assert!(matches!(
            path(44100, false, 4),
            PathChoice::TwoLevel { len: 22050, .. }
        ));
        // odd real 65521 (prime): Bluestein over 2^17, two-level
        assert!(matches!(
            path(65521, false, 4),
            PathChoice::TwoLevel { len: 131072, .. }
        ));
        // powers of two past the four-step take three stages, up to the CPU's largest frame
        // (2^26, `limits::MAX_FRAME_SAMPLES`): 2^26 complex as 512 x (256 x 512)
        for log2 in 19..=26 {
            for complex in [false, true] {
                let c = path(1 << (log2 + !complex as u32), complex, 4);
                assert!(matches!(c, PathChoice::ThreeStage(_)), "2^{log2}: {c:?}");
            }
        }
        let PathChoice::ThreeStage(t) = path(1 << 26, true, 4) else {
            panic!("2^26 complex");
        };
        assert_eq!((t.outer.m, t.columns.m, t.rows.m), (512, 256, 512));
    }
}
