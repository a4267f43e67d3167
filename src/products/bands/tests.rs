//! Unit tests of `--bands` parsing and the band matrices: parsed values, error messages, IEC
//! centre frequencies and edge-bin weights worked out by hand, mel values from librosa's own
//! documentation and from the formulas, and property tests (nothing panics; errors are one line).

use super::*;
use proptest::prelude::*;
use proptest::sample::select;

fn parse(value: &str) -> BandSpec {
    value
        .parse()
        .unwrap_or_else(|e| panic!("{value} should parse: {e}"))
}

fn matrix(value: &str, n_fft: usize, sample_rate: f64) -> BandMatrix {
    BandMatrix::new(&parse(value), n_fft, sample_rate)
        .unwrap_or_else(|e| panic!("{value} at {n_fft}/{sample_rate}: {e}"))
}

fn matrix_error(value: &str, n_fft: usize, sample_rate: f64) -> String {
    match BandMatrix::new(&parse(value), n_fft, sample_rate) {
        Ok(m) => panic!("{value} at {n_fft}/{sample_rate} built {} bands", m.bands()),
        Err(e) => e,
    }
}

fn assert_close(got: f64, want: f64, tolerance: f64, what: &str) {
    assert!(
        (got - want).abs() <= tolerance,
        "{what}: got {got}, want {want} (±{tolerance})"
    );
}

/// Weight of `bin` in `band` (0 outside the row).
fn weight(m: &BandMatrix, band: usize, bin: usize) -> f64 {
    let row = &m.rows()[band];
    bin.checked_sub(row.first_bin)
        .and_then(|i| row.weights.get(i))
        .copied()
        .unwrap_or(0.0)
}

fn mel(count: usize) -> MelBands {
    MelBands {
        count,
        scale: MelScale::Slaney,
        norm: MelNorm::Slaney,
        fmin_hz: 0.0,
        fmax_hz: None,
    }
}

#[test]
fn parses_mel_values_with_librosa_defaults() {
    assert_eq!(parse("mel:128"), BandSpec::Mel(mel(128)));
    let htk = MelBands {
        scale: MelScale::Htk,
        ..mel(64)
    };
    assert_eq!(parse("mel:64,htk"), BandSpec::Mel(htk));
    let unnormalised = MelBands {
        norm: MelNorm::None,
        ..mel(40)
    };
    assert_eq!(parse("mel:40,norm=none"), BandSpec::Mel(unnormalised));
    let limited = MelBands {
        fmin_hz: 20.0,
        fmax_hz: Some(8000.0),
        ..mel(128)
    };
    assert_eq!(
        parse("mel:128,fmin=20,fmax=8000"),
        BandSpec::Mel(limited.clone())
    );
    assert_eq!(
        parse("mel:128,fmax=8e3,norm=slaney,fmin=20"),
        BandSpec::Mel(limited)
    );
}

#[test]
fn parses_octave_values() {
    let octave = |fraction, fmin_hz, fmax_hz| {
        BandSpec::Octave(OctaveBands {
            fraction,
            fmin_hz,
            fmax_hz,
        })
    };
    assert_eq!(parse("octave"), octave(OctaveFraction::Octave, None, None));
    assert_eq!(
        parse("third-octave"),
        octave(OctaveFraction::ThirdOctave, None, None)
    );
    assert_eq!(
        parse("third-octave:fmin=25,fmax=16000"),
        octave(OctaveFraction::ThirdOctave, Some(25.0), Some(16000.0))
    );
    assert_eq!(
        parse("third-octave:fmin=25,fmax=16k"),
        octave(OctaveFraction::ThirdOctave, Some(25.0), Some(16000.0))
    );
    assert_eq!(
        parse("octave:fmax=4000"),
        octave(OctaveFraction::Octave, None, Some(4000.0))
    );
}

#[test]
fn parse_errors_name_the_value_and_what_is_allowed() {
    let cases = [
        (
            "mel:0",
            "--bands mel:0: the number of mel bands must be at least 1",
        ),
        (
            "mel",
            "--bands mel: give the number of mel bands, e.g. mel:128",
        ),
        ("mel:", "'' is not a number of mel bands"),
        ("mel:-3", "'-3' is not a number of mel bands"),
        (
            "mel:64,foo",
            "unknown mel option 'foo': expected htk, norm=slaney|none",
        ),
        ("mel:64,htk=1", "unknown mel option 'htk=1'"),
        (
            "mel:64,htk,htk",
            "--bands mel:64,htk,htk: htk is given twice",
        ),
        (
            "mel:64,norm=l2",
            "norm=l2: expected norm=slaney (the default) or norm=none",
        ),
        (
            "mel:64,fmin=-1",
            "fmin=-1: expected a frequency in Hz, a number >= 0",
        ),
        ("mel:64,fmax=inf", "fmax=inf: expected a frequency in Hz"),
        ("mel:64,fmin=nan", "fmin=nan: expected a frequency in Hz"),
        ("mel:64,fmin=1e1k", "fmin=1e1k: expected a frequency in Hz"),
        (
            "mel:64,fmin=100,fmax=50",
            "fmin=100 Hz is not below fmax=50 Hz",
        ),
        ("mel:64,fmax=0", "fmin=0 Hz is not below fmax=0 Hz"),
        ("mel:64,", "empty option"),
        ("octave:", "empty option"),
        (
            "octave:htk",
            "unknown octave option 'htk': expected fmin=HZ or fmax=HZ",
        ),
        ("third-octave:fmin=1,fmin=2", "fmin is given twice"),
        ("bark", "--bands bark: expected mel:N[,htk]"),
        ("", "--bands : expected mel:N"),
        ("Mel:64", "expected mel:N"),
        ("mel:4\n0", "--bands mel:4\\n0: '4\\n0' is not a number"),
    ];
    for (value, needle) in cases {
        let err = value
            .parse::<BandSpec>()
            .expect_err(&format!("{value:?} should not parse"));
        assert!(err.contains(needle), "{value:?}: {err}");
        assert!(err.starts_with("--bands "), "{value:?}: {err}");
        assert!(!err.contains('\n'), "{value:?}: {err}");
    }
}

#[test]
fn display_gives_the_canonical_value() {
    for (value, canonical) in [
        ("mel:128", "mel:128"),
        ("mel:64,norm=none,htk", "mel:64,htk,norm=none"),
        ("mel:40,fmin=0,norm=slaney", "mel:40"),
        ("mel:40,fmax=8000,fmin=20.5", "mel:40,fmin=20.5,fmax=8000"),
        ("octave", "octave"),
        (
            "third-octave:fmax=1e4,fmin=20",
            "third-octave:fmin=20,fmax=10000",
        ),
    ] {
        assert_eq!(parse(value).to_string(), canonical);
        assert_eq!(parse(canonical), parse(value));
    }
}

#[test]
fn octave_centres_are_the_iec_base_10_mid_band_frequencies() {
    // Δf = 23.4 Hz: the 15.8 Hz band (lower edge 11.2 Hz) starts inside the DC bin (to 11.7 Hz);
    // the 31.6 kHz band ends above Nyquist (24 kHz).
    let m = matrix("octave", 2048, 48000.0);
    let rounded: Vec<f64> = m
        .centres_hz()
        .iter()
        .map(|c| (c * 10.0).round() / 10.0)
        .collect();
    let want = [
        31.6, 63.1, 125.9, 251.2, 501.2, 1000.0, 1995.3, 3981.1, 7943.3, 15848.9,
    ];
    assert_eq!(rounded, want);
    assert_eq!(m.centres_hz()[5], 1000.0);
    let g = 10f64.powf(0.3);
    for (&centre, &(lower, upper)) in m.centres_hz().iter().zip(m.edges_hz()) {
        assert_close(lower, centre / g.sqrt(), 1e-9 * centre, "lower edge");
        assert_close(upper, centre * g.sqrt(), 1e-9 * centre, "upper edge");
    }
}

#[test]
fn third_octave_centres_and_range_limits() {
    // fmin/fmax name nominal frequencies: the 20 Hz band's mid-band is 19.95 Hz
    let m = matrix("third-octave:fmin=20,fmax=20000", 8192, 48000.0);
    assert_eq!(
        m.bands(),
        31,
        "19.95 Hz .. 19.95 kHz is 31 third-octave bands"
    );
    assert_close(m.centres_hz()[0], 19.953, 1e-3, "first centre");
    // the exact mid-bands, as the columns label them (whole or rounded), keep the same bands
    for (fmin, fmax) in [(m.centres_hz()[0], m.centres_hz()[30]), (19.9526, 19952.6)] {
        let spec = format!("third-octave:fmin={fmin},fmax={fmax}");
        assert_eq!(
            matrix(&spec, 8192, 48000.0).centres_hz(),
            m.centres_hz(),
            "{spec}"
        );
    }
    let octave = matrix("octave:fmin=1000,fmax=1001", 8192, 48000.0);
    assert_eq!(octave.centres_hz(), [1000.0], "the 1 kHz band alone");
    let exact = matrix("octave:fmin=1995.26,fmax=1995.3", 8192, 48000.0);
    assert_eq!(exact.bands(), 1, "the 2 kHz band by its exact mid-band");
    assert_close(m.centres_hz()[30], 19952.6, 0.1, "last centre");
    let g = 10f64.powf(0.3);
    for pair in m.centres_hz().windows(2) {
        assert_close(pair[1] / pair[0], g.cbrt(), 1e-12, "centre ratio");
    }
    // without limits the lowest band is the first whose lower edge clears the DC bin
    let all = matrix("third-octave", 8192, 48000.0);
    let dc_top = 48000.0 / 8192.0 / 2.0;
    assert!(all.edges_hz()[0].0 >= dc_top);
    assert!(all.edges_hz()[0].0 / g.cbrt() < dc_top);
    assert!(all.edges_hz().last().is_some_and(|e| e.1 <= 24000.0));
}

#[test]
fn neighbouring_octave_bands_share_their_edge_exactly() {
    for value in ["octave", "third-octave"] {
        let m = matrix(value, 4096, 44100.0);
        for pair in m.edges_hz().windows(2) {
            assert_eq!(pair[0].1, pair[1].0, "{value}");
        }
    }
}

#[test]
fn octave_edge_bins_are_split_by_the_fraction_inside() {
    // sr 8000, n_fft 16: Δf = 500 Hz, bin k covers [(k-½)500, (k+½)500] Hz. Bands: 501.2 Hz
    // (354.813..707.946), 1000 Hz (707.946..1412.538), 1995.3 Hz (1412.538..2818.383); the 251 Hz
    // band starts below the DC bin's 250 Hz, the 3981 Hz band ends above Nyquist (4000 Hz).
    let m = matrix("octave", 16, 8000.0);
    assert_eq!(m.bands(), 3);
    assert_eq!(m.spans(), vec![(1, 1), (1, 3), (3, 4)]);
    let want = [
        (0, 1, (707.946 - 354.813) / 500.0),
        (1, 1, (750.0 - 707.946) / 500.0),
        (1, 2, 1.0),
        (1, 3, (1412.538 - 1250.0) / 500.0),
        (2, 3, (1750.0 - 1412.538) / 500.0),
        (2, 4, 1.0),
        (2, 5, 1.0),
        (2, 6, (2818.383 - 2750.0) / 500.0),
    ];
    for (band, bin, w) in want {
        assert_close(
            weight(&m, band, bin),
            w,
            2e-6,
            &format!("band {band} bin {bin}"),
        );
    }
    // the straddling bins' power is shared exactly
    assert_close(
        weight(&m, 0, 1) + weight(&m, 1, 1),
        1.0 - 2.0 * (354.813 - 250.0) / 1000.0,
        2e-6,
        "bin 1",
    );
    assert_close(weight(&m, 1, 3) + weight(&m, 2, 3), 1.0, 1e-15, "bin 3");
}

/// Σ over bands of each bin's weight.
fn column_sums(m: &BandMatrix) -> Vec<f64> {
    let mut sums = vec![0.0; m.bins()];
    for row in m.rows() {
        for (i, w) in row.weights.iter().enumerate() {
            sums[row.first_bin + i] += w;
        }
    }
    sums
}

#[test]
fn third_octave_weights_sum_to_one_for_each_covered_bin() {
    for (n_fft, sample_rate) in [(4096, 44100.0), (1001, 16000.0), (65536, 96000.0)] {
        let m = matrix("third-octave", n_fft, sample_rate);
        let grid = BinGrid::new(n_fft, sample_rate).expect("grid");
        let covered_from = m.edges_hz()[0].0;
        let covered_to = m.edges_hz()[m.bands() - 1].1;
        let sums = column_sums(&m);
        let mut inside = 0;
        for (k, sum) in sums.iter().enumerate() {
            let (lower, upper) = grid.interval_hz(k);
            if lower >= covered_from && upper <= covered_to {
                assert_close(*sum, 1.0, 1e-12, &format!("{n_fft}/{sample_rate} bin {k}"));
                inside += 1;
            } else if upper <= covered_from || lower >= covered_to {
                assert_eq!(
                    *sum, 0.0,
                    "{n_fft}/{sample_rate} bin {k} is outside every band"
                );
            } else {
                assert!(
                    *sum > 0.0 && *sum < 1.0,
                    "{n_fft}/{sample_rate} bin {k}: {sum}"
                );
            }
        }
        assert!(
            inside > m.bands(),
            "{n_fft}/{sample_rate}: {inside} interior bins"
        );
    }
}

#[test]
fn odd_frames_give_the_last_bin_a_whole_interval() {
    // n_fft 9 at 9 Hz: Δf = 1, bins 0..4, the last covers [3.5, 4.5] = up to Nyquist
    let grid = BinGrid::new(9, 9.0).expect("grid");
    assert_eq!(grid.interval_hz(4), (3.5, 4.5));
    assert_eq!(grid.interval_hz(0), (0.0, 0.5));
    // n_fft 8 at 8 Hz: the Nyquist bin 4 covers [3.5, 4]
    let grid = BinGrid::new(8, 8.0).expect("grid");
    assert_eq!(grid.interval_hz(4), (3.5, 4.0));
    assert_eq!(grid.fraction_inside(4, 3.75, 10.0), 0.5);
}

#[test]
fn slaney_scale_matches_librosa_documentation() {
    // librosa.hz_to_mel(60) == 0.9; 1 kHz is mel 15 where the log part starts
    assert_close(hz_to_mel(60.0, MelScale::Slaney), 0.9, 1e-12, "60 Hz");
    // (1000/(200/3) in f64 is 14.999999999999998, in librosa as here)
    assert_close(hz_to_mel(1000.0, MelScale::Slaney), 15.0, 1e-12, "1 kHz");
    assert_eq!(mel_to_hz(3.0, MelScale::Slaney), 200.0);
    assert_close(
        hz_to_mel(6400.0, MelScale::Slaney),
        15.0 + 27.0,
        1e-12,
        "6.4 kHz",
    );
    assert_close(
        hz_to_mel(1000.0, MelScale::Htk),
        999.985_6,
        1e-4,
        "htk 1 kHz",
    );
    for hz in [0.0, 50.0, 999.0, 1000.0, 4321.0, 22050.0] {
        for scale in [MelScale::Slaney, MelScale::Htk] {
            let back = mel_to_hz(hz_to_mel(hz, scale), scale);
            assert_close(back, hz, 1e-9 * hz.max(1.0), "round trip");
        }
    }
    // librosa.mel_frequencies(40) (fmax 11025): the centres of mel:38 at 22050 Hz
    let m = matrix("mel:38", 2048, 22050.0);
    let documented = [
        (0, 85.317),
        (1, 170.635),
        (11, 1024.856),
        (12, 1119.114),
        (37, 10096.408),
    ];
    for (band, hz) in documented {
        assert_close(m.centres_hz()[band], hz, 1e-3, &format!("centre {band}"));
    }
    assert_eq!(m.edges_hz()[0].0, 0.0);
    assert_close(m.edges_hz()[37].1, 11025.0, 1e-9, "last edge");
}

#[test]
fn mel_weights_match_librosa_documentation() {
    // librosa.filters.mel(sr=22050, n_fft=2048)[0, 1] ≈ 0.016, and 0.02 with fmax=8000
    let m = matrix("mel:128", 2048, 22050.0);
    assert_close(weight(&m, 0, 1), 0.016, 5e-4, "default");
    assert_eq!(weight(&m, 0, 0), 0.0);
    let m = matrix("mel:128,fmax=8000", 2048, 22050.0);
    assert_close(weight(&m, 0, 1), 0.02, 5e-4, "fmax 8000");
}

#[test]
fn one_htk_band_is_the_triangle_of_the_formula() {
    // one band between 0 and 8 kHz: its peak is at mel(8000)/2, i.e. 700·(√(1 + 8000/700) − 1) Hz
    let m = matrix("mel:1,htk,norm=none", 16, 16000.0);
    let peak = 700.0 * ((1.0f64 + 8000.0 / 700.0).sqrt() - 1.0);
    assert_close(m.centres_hz()[0], peak, 1e-9, "peak");
    assert_close(
        weight(&m, 0, 1),
        1000.0 / peak,
        1e-12,
        "rising, bin 1 (1 kHz)",
    );
    assert_close(
        weight(&m, 0, 2),
        6000.0 / (8000.0 - peak),
        1e-12,
        "falling, bin 2 (2 kHz)",
    );
    assert_close(
        weight(&m, 0, 7),
        1000.0 / (8000.0 - peak),
        1e-12,
        "falling, bin 7 (7 kHz)",
    );
    assert_eq!(weight(&m, 0, 0), 0.0);
    // Slaney norm: the same triangle × 2/(upper − lower)
    let scaled = matrix("mel:1,htk", 16, 16000.0);
    for bin in 0..9 {
        assert_close(
            weight(&scaled, 0, bin),
            weight(&m, 0, bin) * 2.0 / 8000.0,
            1e-18,
            &format!("bin {bin}"),
        );
    }
}

#[test]
fn mel_triangles_peak_at_their_centres() {
    let m = matrix("mel:40,norm=none,fmin=50,fmax=7000", 4096, 16000.0);
    let grid = BinGrid::new(4096, 16000.0).expect("grid");
    for band in 0..m.bands() {
        let (lower, upper) = m.edges_hz()[band];
        let row = &m.rows()[band];
        let max = row.weights.iter().copied().fold(0.0, f64::max);
        assert!(max > 0.9 && max <= 1.0, "band {band}: peak {max}");
        let first_hz = row.first_bin as f64 * grid.spacing_hz();
        let last_hz = (row.first_bin + row.weights.len() - 1) as f64 * grid.spacing_hz();
        assert!(first_hz > lower && last_hz < upper, "band {band}");
    }
}

#[test]
fn more_mel_bands_than_bins_is_an_error() {
    let err = matrix_error("mel:300", 512, 16000.0);
    assert_eq!(
        err,
        "--bands mel:300: more bands (300) than the 257 frequency bins of frame 512"
    );
    assert_eq!(matrix("mel:257", 512, 16000.0).bands(), 257);
}

#[test]
fn frame_dependent_errors() {
    let cases = [
        (
            "mel:40,fmax=9000",
            512,
            16000.0,
            "fmax=9000 Hz is above Nyquist (8000 Hz at 16000 Hz sample rate)",
        ),
        (
            "mel:40,fmin=9000",
            512,
            16000.0,
            "fmin=9000 Hz is above Nyquist",
        ),
        (
            "mel:40,fmin=8000",
            512,
            16000.0,
            "fmin=8000 Hz is not below fmax=8000 Hz",
        ),
        (
            "octave:fmax=30000",
            512,
            48000.0,
            "fmax=30000 Hz is above Nyquist",
        ),
        (
            "octave",
            2,
            8000.0,
            "no octave band fits between 2000 Hz (the top of the DC bin) and Nyquist (4000 Hz)",
        ),
        (
            "third-octave:fmin=1100,fmax=1200",
            4096,
            48000.0,
            "no third-octave band fits",
        ),
        ("mel:1", 1, 8000.0, "frames need at least 2 samples"),
        ("mel:1", 512, 0.0, "sample rate 0 Hz"),
        ("octave", 512, f64::NAN, "sample rate NaN Hz"),
    ];
    for (value, n_fft, sample_rate, needle) in cases {
        let err = matrix_error(value, n_fft, sample_rate);
        assert!(err.starts_with(&format!("--bands {value}: ")), "{err}");
        assert!(err.contains(needle), "{value} {n_fft}/{sample_rate}: {err}");
    }
}

#[test]
fn too_many_mel_bands_for_the_bins_leave_some_empty() {
    // as librosa warns: narrow low bands fall between bins
    let m = matrix("mel:128", 256, 22050.0);
    let empty = m.empty_bands();
    assert!(!empty.is_empty());
    let power = vec![1.0f64; m.bins()];
    let mut bands = vec![f64::NAN; m.bands()];
    m.apply(&power, &mut bands);
    for band in empty {
        assert_eq!(bands[band], 0.0);
        assert_eq!(m.spans()[band].1, 0);
    }
    assert!(matrix("mel:128", 2048, 22050.0).empty_bands().is_empty());
}

/// A deterministic power spectrum in [0, 1).
fn test_power(bins: usize) -> Vec<f64> {
    (0..bins)
        .map(|k| ((k as f64 * 0.618_034).fract() * 7.0).fract())
        .collect()
}

#[test]
fn apply_is_the_dense_product_in_f64_and_f32() {
    for (value, n_fft, sample_rate) in [
        ("mel:64,fmin=30", 1024, 44100.0),
        ("third-octave", 1000, 48000.0),
    ] {
        let m = matrix(value, n_fft, sample_rate);
        let power = test_power(m.bins());
        let dense = m.dense_f64();
        let want: Vec<f64> = dense
            .chunks(m.bins())
            .map(|row| row.iter().zip(&power).map(|(w, p)| w * p).sum())
            .collect();
        let mut got = vec![0.0f64; m.bands()];
        m.apply(&power, &mut got);
        for (band, (g, w)) in got.iter().zip(&want).enumerate() {
            assert_close(
                *g,
                *w,
                1e-12 * w.abs().max(1e-300),
                &format!("{value} band {band}"),
            );
        }
        let power32: Vec<f32> = power.iter().map(|&p| p as f32).collect();
        let mut got32 = vec![0.0f32; m.bands()];
        m.apply(&power32, &mut got32);
        for (band, (g, w)) in got32.iter().zip(&want).enumerate() {
            assert_close(
                f64::from(*g),
                *w,
                1e-6 * w.abs(),
                &format!("{value} f32 band {band}"),
            );
        }
    }
}

#[test]
fn dense_matrices_and_spans_agree_with_the_rows() {
    let m = matrix("mel:40,htk", 512, 16000.0);
    let dense = m.dense_f64();
    let dense32 = m.dense_f32();
    assert_eq!(dense.len(), 40 * 257);
    assert_eq!(dense32, dense.iter().map(|&w| w as f32).collect::<Vec<_>>());
    for (band, &(first, len)) in m.spans().iter().enumerate() {
        let row = &dense[band * 257..(band + 1) * 257];
        let nonzero: Vec<usize> = (0..257).filter(|&k| row[k] != 0.0).collect();
        assert_eq!(nonzero.first(), Some(&first), "band {band}");
        assert_eq!(nonzero.last(), Some(&(first + len - 1)), "band {band}");
    }
}

#[test]
#[should_panic(expected = "power spectrum length")]
fn apply_rejects_a_spectrum_of_another_length() {
    let m = matrix("octave", 1024, 48000.0);
    let mut bands = vec![0.0f64; m.bands()];
    m.apply(&[0.0f64; 10], &mut bands);
}

/// Pieces of `--bands` values, valid and not, for the generated values below.
const PIECES: &[&str] = &[
    "mel",
    "octave",
    "third-octave",
    ":",
    ",",
    "=",
    "htk",
    "norm",
    "none",
    "slaney",
    "fmin",
    "fmax",
    "0",
    "1",
    "40",
    "128",
    "257",
    "8000",
    "-1",
    "1e309",
    "nan",
    "inf",
    "0.5",
    " ",
    "\n",
    "ü",
    "",
    "18446744073709551616",
    "18446744073709551615",
];

fn bands_value() -> impl Strategy<Value = String> {
    prop::collection::vec(select(PIECES), 0..10).prop_map(|pieces| pieces.concat())
}

fn config() -> ProptestConfig {
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(4000);
    ProptestConfig {
        cases,
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

/// Whatever the result of parsing `value`: an error is one `--bands` line, a spec prints as a
/// value that parses back to it.
fn check_parse(value: &str) -> Result<(), TestCaseError> {
    match value.parse::<BandSpec>() {
        Ok(spec) => {
            let canonical = spec.to_string();
            prop_assert_eq!(canonical.parse::<BandSpec>(), Ok(spec));
        }
        Err(e) => {
            prop_assert!(e.starts_with("--bands "), "{}", e);
            prop_assert!(!e.contains('\n') && !e.contains('\r'), "{}", e);
        }
    }
    Ok(())
}

/// A built matrix is consistent: rows inside the bins, finite nonnegative weights, centres
/// inside their edges and rising; an error is one line naming the value.
fn check_matrix(spec: &BandSpec, n_fft: usize, sample_rate: f64) -> Result<(), TestCaseError> {
    match BandMatrix::new(spec, n_fft, sample_rate) {
        Ok(m) => {
            prop_assert!(m.bands() >= 1);
            prop_assert_eq!(m.bins(), n_fft / 2 + 1);
            prop_assert_eq!(m.centres_hz().len(), m.bands());
            prop_assert_eq!(m.edges_hz().len(), m.bands());
            for row in m.rows() {
                prop_assert!(row.first_bin + row.weights.len() <= m.bins());
                prop_assert!(row.weights.iter().all(|w| w.is_finite() && *w > 0.0));
            }
            for (c, (lo, hi)) in m.centres_hz().iter().zip(m.edges_hz()) {
                prop_assert!(lo < c && c < hi, "{} {} {}", lo, c, hi);
            }
            prop_assert!(m.centres_hz().windows(2).all(|p| p[0] < p[1]));
        }
        Err(e) => {
            prop_assert!(e.starts_with(&format!("--bands {spec}: ")), "{}", e);
            prop_assert!(!e.contains('\n'), "{}", e);
        }
    }
    Ok(())
}

fn band_spec() -> impl Strategy<Value = BandSpec> {
    let hz = prop_oneof![Just(None), (0.0f64..30000.0).prop_map(Some)];
    let mel = (
        1usize..600,
        any::<bool>(),
        any::<bool>(),
        0.0f64..12000.0,
        hz.clone(),
    )
        .prop_map(|(count, htk, norm, fmin_hz, fmax_hz)| {
            BandSpec::Mel(MelBands {
                count,
                scale: if htk { MelScale::Htk } else { MelScale::Slaney },
                norm: if norm { MelNorm::Slaney } else { MelNorm::None },
                fmin_hz,
                fmax_hz,
            })
        });
    let octave = (any::<bool>(), hz.clone(), hz).prop_map(|(third, fmin_hz, fmax_hz)| {
        BandSpec::Octave(OctaveBands {
            fraction: if third {
                OctaveFraction::ThirdOctave
            } else {
                OctaveFraction::Octave
            },
            fmin_hz,
            fmax_hz,
        })
    });
    prop_oneof![mel, octave]
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn parsing_any_string_never_panics(value in any::<String>()) {
        check_parse(&value)?;
    }

    #[test]
    fn parsing_value_like_strings_never_panics(value in bands_value()) {
        check_parse(&value)?;
    }

    #[test]
    fn building_any_spec_never_panics(
        spec in band_spec(),
        n_fft in 0usize..5000,
        sample_rate in prop_oneof![Just(0.0), Just(f64::NAN), Just(1e-300), 1.0f64..200_000.0],
    ) {
        check_matrix(&spec, n_fft, sample_rate)?;
    }
}
