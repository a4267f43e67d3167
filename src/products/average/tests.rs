//! Unit tests of `products::average`: parsing, grouping, and each mode against a direct
//! computation over deterministic pseudo-random rows.

use super::*;
use proptest::prelude::*;

/// Deterministic pseudo-random power values in [0, 1) (xorshift), so failures reproduce.
fn random_rows(frames: usize, bins: usize, seed: u64) -> Vec<Vec<f64>> {
    let mut state = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        (state >> 11) as f64 / (1u64 << 53) as f64
    };
    (0..frames)
        .map(|_| (0..bins).map(|_| next()).collect())
        .collect()
}

fn frames_grouping(frames: usize) -> Grouping {
    AverageSpec::Frames(frames)
        .grouping(1000.0, 100)
        .expect("valid grouping")
}

/// Pushes `rows` (frame i starting at i·hop) and finishes; returns every emitted row.
fn run_rows<T: Sample>(
    grouping: Grouping,
    mode: AverageMode,
    rows: &[Vec<T>],
    hop: u64,
) -> Vec<AveragedRow<T>> {
    let bins = rows.first().map_or(0, Vec::len);
    let mut averager = Averager::new(grouping, mode, bins);
    let mut out = Vec::new();
    for (i, row) in rows.iter().enumerate() {
        averager.push(i as u64, i as u64 * hop, row, &mut |r| out.push(r));
    }
    averager.finish(&mut |r| out.push(r));
    out
}

/// Per-bin `reduce` over a group of rows.
fn per_bin(rows: &[Vec<f64>], reduce: impl Fn(&[f64]) -> f64) -> Vec<f64> {
    (0..rows[0].len())
        .map(|bin| reduce(&rows.iter().map(|r| r[bin]).collect::<Vec<_>>()))
        .collect()
}

fn assert_close(got: &[f64], want: &[f64], tolerance: f64, context: &str) {
    assert_eq!(got.len(), want.len(), "{context}: lengths");
    for (bin, (g, w)) in got.iter().zip(want).enumerate() {
        assert!(
            (g - w).abs() <= tolerance * w.abs().max(1e-300),
            "{context}: bin {bin}: got {g}, want {w}"
        );
    }
}

// ----- parsing ------------------------------------------------------------------------------

#[test]
fn parses_frame_counts_and_durations() {
    let cases = [
        ("64", AverageSpec::Frames(64)),
        ("1", AverageSpec::Frames(1)),
        (" 64 ", AverageSpec::Frames(64)),
        ("250ms", AverageSpec::Interval { nanos: 250_000_000 }),
        (
            "1s",
            AverageSpec::Interval {
                nanos: 1_000_000_000,
            },
        ),
        (
            "1.5s",
            AverageSpec::Interval {
                nanos: 1_500_000_000,
            },
        ),
        (".5s", AverageSpec::Interval { nanos: 500_000_000 }),
        (
            "2.s",
            AverageSpec::Interval {
                nanos: 2_000_000_000,
            },
        ),
        ("500us", AverageSpec::Interval { nanos: 500_000 }),
        (
            "2min",
            AverageSpec::Interval {
                nanos: 120_000_000_000,
            },
        ),
        (
            "0.1min",
            AverageSpec::Interval {
                nanos: 6_000_000_000,
            },
        ),
        (
            "1 s",
            AverageSpec::Interval {
                nanos: 1_000_000_000,
            },
        ),
        ("0.000000001s", AverageSpec::Interval { nanos: 1 }),
        ("0.0000000019s", AverageSpec::Interval { nanos: 1 }),
    ];
    for (text, want) in cases {
        assert_eq!(text.parse::<AverageSpec>(), Ok(want), "{text:?}");
    }
}

#[test]
fn rejects_bad_average_values_in_one_line_naming_flag_and_value() {
    for bad in [
        "0",
        "",
        "-1",
        "+4",
        "1.5",
        "abc",
        "0ms",
        "0.0000000001s",
        "1e3s",
        "s",
        ".s",
        "1..5s",
        "1,5s",
        "5 hours",
        "5 frames",
        "18446744073709551616",
        "99999999999999999999999999999999999999999",
        "1000000000000min",
        "inf",
        "nan",
        "1\n2",
    ] {
        let err = bad.parse::<AverageSpec>().expect_err(bad);
        assert!(
            err.starts_with(&format!("--average {}:", crate::types::escaped(bad))),
            "{bad:?}: {err}"
        );
        assert!(!err.contains('\n'), "{bad:?}: {err}");
    }
    assert_eq!(
        "0".parse::<AverageSpec>(),
        Err("--average 0: must be a number of frames >= 1 or a duration like 250ms (units: us, ms, s, min (or m), h, d, w)".into())
    );
    assert!("1.5"
        .parse::<AverageSpec>()
        .expect_err("1.5")
        .contains("whole"));
}

#[test]
fn average_spec_display_parses_back() {
    for text in [
        "64",
        "250ms",
        "1s",
        "1.5s",
        "2min",
        "90s",
        "500us",
        "0.001000001s",
    ] {
        let spec: AverageSpec = text.parse().expect("valid spec");
        assert_eq!(spec.to_string().parse::<AverageSpec>(), Ok(spec), "{text}");
    }
    assert_eq!(
        AverageSpec::Interval {
            nanos: 1_500_000_000
        }
        .to_string(),
        "1500ms"
    );
    assert_eq!(
        AverageSpec::Interval { nanos: 1_000_001 }.to_string(),
        "0.001000001s"
    );
    // the largest unit that divides it, as a user writes it (helper-38: "--average 1000ms" for
    // a user's 1s)
    for (nanos, text) in [
        (1_000_000_000, "1s"),
        (90_000_000_000, "90s"),
        (120_000_000_000, "2min"),
        (3_600_000_000_000, "1h"),
    ] {
        assert_eq!(AverageSpec::Interval { nanos }.to_string(), text);
    }
    assert_eq!(
        AverageSpec::Interval {
            nanos: 120_000_000_000
        }
        .to_string(),
        "2min"
    );
}

#[test]
fn parses_modes() {
    let cases = [
        ("mean", AverageMode::Mean),
        ("median", AverageMode::Median),
        ("max", AverageMode::Max),
        ("min", AverageMode::Min),
        ("peak", AverageMode::Peak),
        ("exp:0.25", AverageMode::Exp { alpha: 0.25 }),
        ("exp:1", AverageMode::Exp { alpha: 1.0 }),
        ("exp:1e-3", AverageMode::Exp { alpha: 1e-3 }),
    ];
    for (text, want) in cases {
        assert_eq!(text.parse::<AverageMode>(), Ok(want), "{text}");
        assert_eq!(want.to_string().parse::<AverageMode>(), Ok(want), "{text}");
    }
    assert_eq!(AverageMode::default(), AverageMode::Mean);
}

#[test]
fn rejects_bad_modes_in_one_line_naming_flag_and_value() {
    for bad in [
        "", "mode", "Mean", "exp", "exp:", "exp:0", "exp:-0.5", "exp:1.5", "exp:nan", "exp:inf",
        "exp:x", "exp0.5", "median:3",
    ] {
        let err = bad.parse::<AverageMode>().expect_err(bad);
        assert!(
            err.starts_with(&format!("--average-mode {bad}:")),
            "{bad:?}: {err}"
        );
        assert!(err.contains("exp:ALPHA"), "{err}");
    }
}

proptest! {
    #![proptest_config(ProptestConfig { failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn parsers_never_panic_and_errors_are_one_line(text in "\\PC*|[0-9. ]{0,12}(us|ms|s|min)?|exp:[0-9.e-]{0,8}") {
        match text.parse::<AverageSpec>() {
            Ok(spec) => prop_assert_eq!(spec.to_string().parse::<AverageSpec>(), Ok(spec)),
            Err(e) => prop_assert!(e.starts_with("--average ") && !e.contains('\n'), "{}", e),
        }
        match text.parse::<AverageMode>() {
            Ok(mode) => prop_assert_eq!(mode.to_string().parse::<AverageMode>(), Ok(mode)),
            Err(e) => prop_assert!(e.starts_with("--average-mode ") && !e.contains('\n'), "{}", e),
        }
    }

    #[test]
    fn grouping_never_panics(
        nanos in 1u64..=u64::MAX,
        frames in 1usize..=usize::MAX,
        rate in prop_oneof![any::<f64>(), 1.0f64..1e7, (1u32..200_000).prop_map(f64::from)],
        hop in any::<usize>(),
        start in any::<u64>(),
    ) {
        for spec in [AverageSpec::Interval { nanos }, AverageSpec::Frames(frames)] {
            match spec.grouping(rate, hop) {
                Ok(grouping) => {
                    let per_row = grouping.frames_per_row();
                    prop_assert!(per_row.fewest >= 1 && per_row.fewest <= per_row.most);
                    let _ = grouping.interval_of(start);
                }
                Err(e) => prop_assert!(e.starts_with("--average ") && !e.contains('\n'), "{}", e),
            }
        }
    }
}

// ----- grouping -----------------------------------------------------------------------------

#[test]
fn duration_with_whole_frames_per_interval() {
    // 250 ms at 8000 Hz = 2000 samples = exactly 2 hops of 1000.
    let spec: AverageSpec = "250ms".parse().expect("spec");
    let per_row = spec.frames_per_row(8000.0, 1000).expect("valid");
    assert_eq!(per_row, FramesPerRow { fewest: 2, most: 2 });
    let rows = random_rows(7, 3, 1);
    let out = run_rows(
        spec.grouping(8000.0, 1000).expect("valid"),
        AverageMode::Mean,
        &rows,
        1000,
    );
    let counts: Vec<usize> = out.iter().map(|r| r.frames).collect();
    assert_eq!(counts, [2, 2, 2, 1]);
    let times: Vec<f64> = out.iter().map(|r| r.time_s).collect();
    assert_eq!(times, [0.0, 0.25, 0.5, 0.75]);
    let firsts: Vec<u64> = out.iter().map(|r| r.first_frame).collect();
    assert_eq!(firsts, [0, 2, 4, 6]);
}

#[test]
fn duration_with_fractional_frames_per_interval() {
    // 1 s at 1000 Hz, hop 300: starts 0 300 600 900 | 1200 1500 1800 | 2100 2400 2700 | 3000 ...
    let spec: AverageSpec = "1s".parse().expect("spec");
    assert_eq!(
        spec.frames_per_row(1000.0, 300),
        Ok(FramesPerRow { fewest: 3, most: 4 })
    );
    let rows = random_rows(14, 2, 2);
    let out = run_rows(
        spec.grouping(1000.0, 300).expect("valid"),
        AverageMode::Mean,
        &rows,
        300,
    );
    let counts: Vec<usize> = out.iter().map(|r| r.frames).collect();
    assert_eq!(counts, [4, 3, 3, 4]);
    let firsts: Vec<u64> = out.iter().map(|r| r.first_frame).collect();
    assert_eq!(firsts, [0, 4, 7, 10]);
    let starts: Vec<u64> = out.iter().map(|r| r.first_start_sample).collect();
    assert_eq!(starts, [0, 1200, 2100, 3000]);
    let times: Vec<f64> = out.iter().map(|r| r.time_s).collect();
    assert_eq!(times, [0.0, 1.0, 2.0, 3.0]);
    assert_close(
        &out[1].values,
        &per_bin(&rows[4..7], |c| c.iter().sum::<f64>() / 3.0),
        1e-15,
        "mean",
    );
}

/// Interval membership against floor(s / (T·rate)) computed directly, for whole and fractional
/// rates and intervals that are not whole numbers of samples.
#[test]
fn interval_membership_matches_direct_floor() {
    for (text, rate, hop) in [
        ("23ms", 44100.0, 256usize),
        ("10ms", 48000.0, 480),
        ("1.7s", 1000.0, 7),
        ("1ms", 44100.5, 3),
        ("333us", 96000.25, 17),
    ] {
        let spec: AverageSpec = text.parse().expect("spec");
        let grouping = spec.grouping(rate, hop).expect("valid");
        let AverageSpec::Interval { nanos } = spec else {
            panic!("{text} is an interval")
        };
        let interval_samples = nanos as f64 * 1e-9 * rate;
        let rows = random_rows(400, 1, 3);
        let out = run_rows(grouping, AverageMode::Mean, &rows, hop as u64);
        let per_row = grouping.frames_per_row();
        let mut expected_counts: Vec<usize> = Vec::new();
        let mut last_interval = None;
        for frame in 0..400u64 {
            let k = ((frame * hop as u64) as f64 / interval_samples).floor() as u64;
            if last_interval == Some(k) {
                *expected_counts.last_mut().expect("open") += 1;
            } else {
                expected_counts.push(1);
                last_interval = Some(k);
            }
        }
        let counts: Vec<usize> = out.iter().map(|r| r.frames).collect();
        assert_eq!(counts, expected_counts, "{text} at {rate} Hz, hop {hop}");
        for (k, row) in out.iter().enumerate() {
            assert!(
                (row.time_s - k as f64 * nanos as f64 * 1e-9).abs() < 1e-9,
                "{text}: row {k}"
            );
            let first_start_s = row.first_start_sample as f64 / rate;
            assert!(
                first_start_s >= row.time_s - 1e-9
                    && first_start_s < row.time_s + hop as f64 / rate
            );
        }
        let inner = &counts[..counts.len() - 1];
        assert!(
            inner
                .iter()
                .all(|c| (per_row.fewest..=per_row.most).contains(c)),
            "{text}: {inner:?} vs {per_row:?}"
        );
    }
}

#[test]
fn duration_shorter_than_a_hop_is_an_error_naming_both() {
    let spec: AverageSpec = "1ms".parse().expect("spec");
    let err = spec.grouping(44100.0, 1024).expect_err("1 ms < one hop");
    assert!(err.starts_with("--average 1ms:"), "{err}");
    assert!(err.contains("--hop 1024"), "{err}");
    assert!(!err.contains('\n'));
    // Exactly one hop is fine: 1000 samples at 1 MHz, hop 1000.
    assert_eq!(
        spec.frames_per_row(1e6, 1000),
        Ok(FramesPerRow { fewest: 1, most: 1 })
    );
    assert!(spec.grouping(1e6, 1001).is_err());
}

#[test]
fn bad_rate_or_hop_is_an_error() {
    for rate in [0.0, -1.0, f64::NAN, f64::INFINITY] {
        assert!(AverageSpec::Frames(4).grouping(rate, 10).is_err(), "{rate}");
    }
    assert!(AverageSpec::Frames(4).grouping(1000.0, 0).is_err());
}

#[test]
fn a_gap_in_the_input_skips_empty_intervals() {
    // 100 ms at 1000 Hz, hop 50: two frames per interval; frames 2.. come after a 1 s gap.
    let grouping = AverageSpec::Interval { nanos: 100_000_000 }
        .grouping(1000.0, 50)
        .expect("valid");
    let mut averager = Averager::<f64>::new(grouping, AverageMode::Mean, 1);
    let mut out = Vec::new();
    for (frame, start) in [(0u64, 0u64), (1, 50), (2, 1050), (3, 1100), (4, 1150)] {
        averager.push(frame, start, &[frame as f64], &mut |r| out.push(r));
    }
    averager.finish(&mut |r| out.push(r));
    let summary: Vec<(f64, usize, f64)> = out
        .iter()
        .map(|r| (r.time_s, r.frames, r.values[0]))
        .collect();
    assert_eq!(summary, [(0.0, 2, 0.5), (1.0, 1, 2.0), (1.1, 2, 3.5)]);
}

#[test]
fn a_row_is_emitted_with_the_last_frame_of_its_group() {
    for grouping in [
        frames_grouping(3),
        // 300 ms at 1000 Hz with hop 100: frames 0, 1, 2 per interval.
        AverageSpec::Interval { nanos: 300_000_000 }
            .grouping(1000.0, 100)
            .expect("valid"),
    ] {
        let mut averager = Averager::<f64>::new(grouping, AverageMode::Mean, 1);
        let mut emitted_after = Vec::new();
        for frame in 0..7u64 {
            let mut count = 0;
            averager.push(frame, frame * 100, &[1.0], &mut |_| count += 1);
            if count > 0 {
                emitted_after.push(frame);
            }
        }
        assert_eq!(emitted_after, [2, 5]);
        let mut tail = Vec::new();
        averager.finish(&mut |r| tail.push(r.frames));
        assert_eq!(tail, [1]);
        averager.finish(&mut |_| panic!("finish twice emits nothing"));
    }
}

// ----- modes --------------------------------------------------------------------------------

#[test]
fn mean_max_min_match_direct_computation_with_a_partial_final_group() {
    let rows = random_rows(23, 17, 4);
    type Reduce = fn(&[f64]) -> f64;
    let modes: [(AverageMode, Reduce); 3] = [
        (AverageMode::Mean, |c| {
            c.iter().sum::<f64>() / c.len() as f64
        }),
        (AverageMode::Max, |c| {
            c.iter().copied().fold(f64::NEG_INFINITY, f64::max)
        }),
        (AverageMode::Min, |c| {
            c.iter().copied().fold(f64::INFINITY, f64::min)
        }),
    ];
    for (mode, reduce) in modes {
        let out = run_rows(frames_grouping(5), mode, &rows, 100);
        assert_eq!(out.len(), 5, "{mode}");
        for (k, row) in out.iter().enumerate() {
            let group = &rows[k * 5..(k * 5 + 5).min(rows.len())];
            assert_eq!(row.frames, group.len(), "{mode}: row {k}");
            assert_eq!(row.first_frame, k as u64 * 5);
            assert_eq!(row.time_s, (k * 5 * 100) as f64 / 1000.0);
            assert_close(
                &row.values,
                &per_bin(group, reduce),
                1e-14,
                &format!("{mode} row {k}"),
            );
        }
        assert_eq!(out[4].frames, 3, "partial final group");
    }
}

#[test]
fn mean_in_f32_accumulates_in_f64() {
    // 10^6 frames of 0.1f32 + one of 1.0: an f32 running sum would drift by far more than 1e-6.
    let grouping = AverageSpec::Frames(1_000_001)
        .grouping(1000.0, 1)
        .expect("valid");
    let mut averager = Averager::<f32>::new(grouping, AverageMode::Mean, 1);
    let mut out = Vec::new();
    for frame in 0..1_000_000u64 {
        averager.push(frame, frame, &[0.1f32], &mut |r| out.push(r));
    }
    averager.push(1_000_000, 1_000_000, &[1.0f32], &mut |r| out.push(r));
    let want = (1e6 * f64::from(0.1f32) + 1.0) / 1_000_001.0;
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].values[0], want as f32);
}

#[test]
fn median_bias_matches_scipy_formula() {
    let want = [
        (1, 1.0),
        (2, 1.0),
        (3, 1.0 + 1.0 / 3.0 - 1.0 / 2.0),
        (4, 1.0 + 1.0 / 3.0 - 1.0 / 2.0),
        (5, 1.0 + (1.0 / 3.0 - 1.0 / 2.0) + (1.0 / 5.0 - 1.0 / 4.0)),
        (6, 1.0 + (1.0 / 3.0 - 1.0 / 2.0) + (1.0 / 5.0 - 1.0 / 4.0)),
    ];
    for (n, bias) in want {
        assert!(
            (median_bias(n) - bias).abs() < 1e-15,
            "n = {n}: {}",
            median_bias(n)
        );
    }
    assert!((median_bias(3) - 5.0 / 6.0).abs() < 1e-15);
    assert!((median_bias(5) - 47.0 / 60.0).abs() < 1e-15);
    // Tends to ln 2 for large n.
    assert!((median_bias(100_001) - std::f64::consts::LN_2).abs() < 1e-5);
}

#[test]
fn median_of_hand_computed_groups() {
    // Bin 0: 3, 1, 2 → 2; bin 1: 10, 30, 20 → 20. Bias for 3 frames is 5/6.
    let odd = [vec![3.0, 10.0], vec![1.0, 30.0], vec![2.0, 20.0]];
    let out = run_rows(frames_grouping(3), AverageMode::Median, &odd, 100);
    assert_close(
        &out[0].values,
        &[2.0 / (5.0 / 6.0), 20.0 / (5.0 / 6.0)],
        1e-15,
        "odd",
    );
    // Even: bin 0: 4, 1, 3, 2 → (2 + 3) / 2; bin 1: 5, 5, 1, 9 → 5. Bias for 4 frames is 5/6.
    let even = [
        vec![4.0, 5.0],
        vec![1.0, 5.0],
        vec![3.0, 1.0],
        vec![2.0, 9.0],
    ];
    let out = run_rows(frames_grouping(4), AverageMode::Median, &even, 100);
    assert_close(
        &out[0].values,
        &[2.5 / (5.0 / 6.0), 5.0 / (5.0 / 6.0)],
        1e-15,
        "even",
    );
    // Two frames: mean of the two, bias 1; a final partial group of one: the value itself.
    let out = run_rows(frames_grouping(2), AverageMode::Median, &odd, 100);
    assert_eq!(out[0].values, [2.0, 20.0]);
    assert_eq!(out[1].values, [2.0, 20.0]);
    assert_eq!(out[1].frames, 1);
}

#[test]
fn median_matches_sorting_on_random_groups() {
    for frames in 1..=9 {
        let rows = random_rows(frames, 11, frames as u64);
        let out = run_rows(frames_grouping(frames), AverageMode::Median, &rows, 100);
        let sorted_median = |c: &[f64]| {
            let mut s = c.to_vec();
            s.sort_by(f64::total_cmp);
            let m = s.len() / 2;
            let median = if s.len() % 2 == 1 {
                s[m]
            } else {
                (s[m - 1] + s[m]) / 2.0
            };
            median / median_bias(s.len())
        };
        assert_eq!(out.len(), 1);
        assert_eq!(
            out[0].values,
            per_bin(&rows, sorted_median),
            "{frames} frames"
        );
    }
}

#[test]
fn nan_propagates_like_numpy() {
    let rows = [vec![1.0, 2.0], vec![f64::NAN, 3.0], vec![0.5, 1.0]];
    for mode in [
        AverageMode::Mean,
        AverageMode::Median,
        AverageMode::Max,
        AverageMode::Min,
    ] {
        let out = run_rows(frames_grouping(3), mode, &rows, 100);
        assert!(out[0].values[0].is_nan(), "{mode}");
        assert!(!out[0].values[1].is_nan(), "{mode}");
    }
}

#[test]
fn exp_matches_the_recurrence_and_is_never_reset() {
    let rows = random_rows(10, 6, 5);
    let alpha = 0.3;
    let mut direct = Vec::new();
    let mut y = rows[0].clone();
    direct.push(y.clone());
    for row in &rows[1..] {
        y = y
            .iter()
            .zip(row)
            .map(|(y, x)| alpha * x + (1.0 - alpha) * y)
            .collect();
        direct.push(y.clone());
    }
    let mode = AverageMode::Exp { alpha };
    let every_frame = run_rows(frames_grouping(1), mode, &rows, 100);
    assert_eq!(every_frame.len(), 10);
    for (k, row) in every_frame.iter().enumerate() {
        assert_close(&row.values, &direct[k], 1e-15, &format!("frame {k}"));
        assert_eq!(row.frames, 1);
    }
    // Every 4 frames: the state after frames 3 and 7, then the partial group's after frame 9.
    let every_four = run_rows(frames_grouping(4), mode, &rows, 100);
    let got: Vec<&Vec<f64>> = every_four.iter().map(|r| &r.values).collect();
    assert_eq!(got, [&direct[3], &direct[7], &direct[9]]);
    // alpha = 1 is the latest frame.
    let latest = run_rows(
        frames_grouping(4),
        AverageMode::Exp { alpha: 1.0 },
        &rows,
        100,
    );
    assert_eq!(latest[0].values, rows[3]);
}

#[test]
fn peak_holds_since_the_start_while_max_resets() {
    let rows = random_rows(12, 5, 6);
    let peak = run_rows(frames_grouping(3), AverageMode::Peak, &rows, 100);
    let max = run_rows(frames_grouping(3), AverageMode::Max, &rows, 100);
    let fold_max = |c: &[f64]| c.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    for k in 0..4 {
        assert_eq!(
            peak[k].values,
            per_bin(&rows[..3 * k + 3], fold_max),
            "peak row {k}"
        );
        assert_eq!(
            max[k].values,
            per_bin(&rows[3 * k..3 * k + 3], fold_max),
            "max row {k}"
        );
        assert_eq!(peak[k].frames, 3);
    }
    assert_ne!(
        peak[3].values, max[3].values,
        "this data has a later group below an earlier peak"
    );
}

#[test]
fn per_hop_rows_follow_the_hops_when_frames_are_missing() {
    // a sweep's slots of 100 samples: 50 settle, then 3 frames 10 apart; frame 2 (at 70) was
    // dropped, so a count of 3 frames would reach into the next hop
    let grouping = AverageSpec::PerHop {
        frames: 3,
        slot: 100,
        hops: 2,
    }
    .grouping(1.0, 10)
    .expect("grouping");
    let mut averager = Averager::<f64>::new(grouping, AverageMode::Mean, 1);
    let mut rows = Vec::new();
    for (index, start) in [(0, 50), (1, 60), (3, 150), (4, 160), (5, 170), (6, 250)] {
        averager.push(index, start, &[start as f64], &mut |r| rows.push(r));
    }
    averager.finish(&mut |r| rows.push(r));
    let got: Vec<(u64, usize, f64)> = (rows.iter())
        .map(|r| (r.first_start_sample, r.frames, r.values[0]))
        .collect();
    assert_eq!(got, [(50, 2, 55.0), (150, 3, 160.0), (250, 1, 250.0)]);
    assert_eq!(grouping.group_of(6, 250), 2, "engines segment by hop too");
}

#[test]
fn a_sweeps_peak_and_exp_are_held_per_hop() {
    // 2 hops, slots of 100 samples, one frame each (at 50 in its slot): hop 0 sees 10 then 1,
    // hop 1 sees 0 then 0; a hold shared by the hops would carry hop 0's 10 into hop 1's rows
    let grouping = AverageSpec::PerHop {
        frames: 1,
        slot: 100,
        hops: 2,
    }
    .grouping(1.0, 10)
    .expect("grouping");
    for (mode, want) in [
        (AverageMode::Peak, [10.0, 0.0, 10.0, 0.0]),
        (AverageMode::Exp { alpha: 0.5 }, [10.0, 0.0, 5.5, 0.0]),
        (AverageMode::Max, [10.0, 0.0, 1.0, 0.0]),
    ] {
        let mut averager = Averager::<f64>::new(grouping, mode, 1);
        let mut rows = Vec::new();
        for (index, (start, v)) in [(50, 10.0), (150, 0.0), (250, 1.0), (350, 0.0)]
            .into_iter()
            .enumerate()
        {
            averager.push(index as u64, start, &[v], &mut |r| rows.push(r.values[0]));
        }
        assert_eq!(rows, want, "{mode:?}");
    }
}

/// A group that comes as one segment (an engine's reduced run) gives the row its frames give
/// one by one, to the bit, in every mode with a segment op (the averager takes such a segment
/// as the group's row); a group split over two segments gives it within f32's rounding.
#[test]
fn groups_in_segments_give_the_rows_of_their_frames() {
    use crate::fft::Segments;
    let (group, bins, hop) = (4usize, 5usize, 100u64);
    let rows: Vec<Vec<f32>> = random_rows(4 * group + 2, bins, 9)
        .into_iter()
        .map(|r| r.into_iter().map(|v| (v * 1e3) as f32).collect())
        .collect();
    for mode in [
        AverageMode::Mean,
        AverageMode::Max,
        AverageMode::Min,
        AverageMode::Peak,
    ] {
        let op = mode.segment_op().expect("a segment op");
        let want = run_rows(frames_grouping(group), mode, &rows, hop);
        for split in [None, Some(1)] {
            let mut averager = Averager::<f32>::new(frames_grouping(group), mode, bins);
            let mut got = Vec::new();
            for first in (0..rows.len()).step_by(group) {
                let end = (first + group).min(rows.len());
                let cut = split.map_or(end, |s| (first + s).min(end));
                for (from, to) in [(first, cut), (cut, end)]
                    .into_iter()
                    .filter(|(a, b)| a < b)
                {
                    let flat: Vec<f32> = rows[from..to].concat();
                    let mut row = vec![0.0f32; bins];
                    let lengths = [(to - from) as u32];
                    Segments {
                        lengths: &lengths,
                        op,
                    }
                    .reduce(&flat, bins, &mut row);
                    let segment = Segment {
                        first_frame: from as u64,
                        first_start: from as u64 * hop,
                        last_start: (to - 1) as u64 * hop,
                        frames: to - from,
                    };
                    averager.push_segment(segment, &row, &mut |r| got.push(r));
                }
            }
            averager.finish(&mut |r| got.push(r));
            assert_eq!(got.len(), want.len(), "{mode:?} {split:?}");
            for (g, w) in got.iter().zip(&want) {
                assert_eq!((g.first_frame, g.frames), (w.first_frame, w.frames));
                for (a, b) in g.values.iter().zip(&w.values) {
                    match split {
                        None => assert_eq!(a.to_bits(), b.to_bits(), "{mode:?}: {a} vs {b}"),
                        Some(_) => assert!((a - b).abs() <= 1e-6 * b.abs(), "{mode:?}: {a} vs {b}"),
                    }
                }
            }
        }
    }
}
