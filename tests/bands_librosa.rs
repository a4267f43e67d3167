//! fftd's band matrices (`fftd::products::bands`) against Python:
//! - mel filter banks against `librosa.filters.mel(..., dtype=float64)` and band powers against
//!   `librosa.feature.melspectrogram(S=power, ...)` for several (sr, n_fft, n_mels, fmin, fmax,
//!   htk, norm), to 1e-10 of each band's largest weight;
//! - octave and third-octave bands against a numpy reference written here from the IEC 61260-1
//!   base-10 formula and the edge-bin rule of the module documentation (bin k covers
//!   [(k-½)Δf, (k+½)Δf] clipped to [0, Nyquist]; its weight is the fraction of that inside the band),
//!   computed the numpy way: one dense overlap matrix of every band against every bin; to 1e-10.
//!
//! Needs python3 (or `FFTD_PYTHON`) with numpy and librosa; where they are missing the tests skip,
//! unless `FFTD_REQUIRE_NUMPY` is set or `CI=true` (then they fail: run `scripts/deps.sh --test`).

use fftd::products::bands::{BandMatrix, BandSpec};
use serde_json::Value;

use crate::common;
use common::{python, python_has};

/// Runs `script` with `argument` as sys.argv[1] and parses what it prints as JSON.
fn python_json(script: &str, argument: &str) -> Value {
    let out = std::process::Command::new(python())
        .args(["-c", script, argument])
        .output()
        .expect("run python");
    assert!(
        out.status.success(),
        "python failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("python prints JSON")
}

fn floats(value: &Value) -> Vec<f64> {
    value
        .as_array()
        .expect("a JSON array")
        .iter()
        .map(|v| v.as_f64().expect("a number"))
        .collect()
}

fn rows(value: &Value) -> Vec<Vec<f64>> {
    value
        .as_array()
        .expect("a JSON array of rows")
        .iter()
        .map(floats)
        .collect()
}

/// Largest |got − want| over the largest |want| (the absolute difference when `want` is all 0).
fn relative_error(got: &[f64], want: &[f64]) -> f64 {
    assert_eq!(got.len(), want.len(), "lengths differ");
    let scale = want.iter().fold(0.0f64, |m, w| m.max(w.abs()));
    let scale = if scale > 0.0 { scale } else { 1.0 };
    got.iter()
        .zip(want)
        .map(|(g, w)| (g - w).abs() / scale)
        .fold(0.0, f64::max)
}

fn build(value: &str, n_fft: usize, sample_rate: f64) -> BandMatrix {
    let spec: BandSpec = value.parse().unwrap_or_else(|e| panic!("{e}"));
    BandMatrix::new(&spec, n_fft, sample_rate).unwrap_or_else(|e| panic!("{e}"))
}

/// Checks the matrix's dense rows, and `apply` on python's power spectrum, against python's.
fn assert_matches_python(case: &str, m: &BandMatrix, python: &Value, tolerance: f64) {
    let want_rows = rows(&python["weights"]);
    assert_eq!(m.bands(), want_rows.len(), "{case}: band count");
    let dense = m.dense_f64();
    for (band, (got, want)) in dense.chunks(m.bins()).zip(&want_rows).enumerate() {
        let error = relative_error(got, want);
        assert!(
            error <= tolerance,
            "{case}: band {band} weights off by {error:e}"
        );
    }
    let centres = floats(&python["centres"]);
    let error = relative_error(m.centres_hz(), &centres);
    assert!(error <= 1e-12, "{case}: centres off by {error:e}");
    let power = floats(&python["power"]);
    let mut bands = vec![0.0f64; m.bands()];
    m.apply(&power, &mut bands);
    for (band, (got, want)) in bands.iter().zip(floats(&python["bands"])).enumerate() {
        let error = (got - want).abs() / want.abs().max(1e-300);
        assert!(
            error <= tolerance || got == &want,
            "{case}: band {band} power {got} vs {want}"
        );
    }
}

/// For each case [sr, n_fft, n_mels, fmin, fmax|None, htk, norm|None]: librosa's filter bank in
/// float64, its centre frequencies and the mel spectrogram of a random power spectrum.
const LIBROSA_MEL: &str = r#"
import json, sys, warnings
import numpy as np, librosa
warnings.simplefilter("ignore")  # librosa warns about empty filters; the test compares them too
out = []
for i, (sr, n_fft, n_mels, fmin, fmax, htk, norm) in enumerate(json.loads(sys.argv[1])):
    args = dict(sr=sr, n_fft=n_fft, n_mels=n_mels, fmin=fmin, fmax=fmax, htk=htk, norm=norm,
                dtype=np.float64)
    weights = librosa.filters.mel(**args)
    points = librosa.mel_frequencies(n_mels + 2, fmin=fmin,
                                     fmax=sr / 2 if fmax is None else fmax, htk=htk)
    power = np.random.default_rng(i).random(n_fft // 2 + 1) ** 2
    bands = librosa.feature.melspectrogram(S=power[:, None], power=2.0, **args)[:, 0]
    out.append(dict(weights=weights.tolist(), centres=points[1:-1].tolist(),
                    power=power.tolist(), bands=bands.tolist()))
print(json.dumps(out))
"#;

struct MelCase {
    sample_rate: f64,
    n_fft: usize,
    bands: usize,
    fmin_hz: f64,
    fmax_hz: Option<f64>,
    htk: bool,
    norm_none: bool,
}

impl MelCase {
    /// The `--bands` value.
    fn value(&self) -> String {
        let mut value = format!("mel:{}", self.bands);
        if self.htk {
            value += ",htk";
        }
        if self.norm_none {
            value += ",norm=none";
        }
        if self.fmin_hz != 0.0 {
            value += &format!(",fmin={}", self.fmin_hz);
        }
        if let Some(fmax) = self.fmax_hz {
            value += &format!(",fmax={fmax}");
        }
        value
    }

    fn librosa_arguments(&self) -> Value {
        serde_json::json!([
            self.sample_rate,
            self.n_fft,
            self.bands,
            self.fmin_hz,
            self.fmax_hz,
            self.htk,
            if self.norm_none { None } else { Some("slaney") },
        ])
    }
}

fn mel_case(sample_rate: f64, n_fft: usize, bands: usize) -> MelCase {
    MelCase {
        sample_rate,
        n_fft,
        bands,
        fmin_hz: 0.0,
        fmax_hz: None,
        htk: false,
        norm_none: false,
    }
}

#[test]
fn mel_matrices_equal_librosa() {
    if !python_has("numpy, librosa") {
        return;
    }
    let cases = [
        mel_case(22050.0, 2048, 128),
        MelCase {
            htk: true,
            ..mel_case(16000.0, 512, 40)
        },
        MelCase {
            norm_none: true,
            ..mel_case(44100.0, 1024, 64)
        },
        MelCase {
            fmin_hz: 50.0,
            fmax_hz: Some(7000.0),
            ..mel_case(16000.0, 400, 40)
        },
        MelCase {
            fmin_hz: 20.0,
            fmax_hz: Some(8000.0),
            htk: true,
            norm_none: true,
            ..mel_case(16000.0, 401, 26)
        },
        MelCase {
            fmax_hz: Some(11025.0),
            ..mel_case(22050.0, 2048, 80)
        },
        // as many bands as bins: some fall between bins and stay empty, in librosa as here
        mel_case(8000.0, 256, 129),
        MelCase {
            fmin_hz: 1000.0,
            fmax_hz: Some(16000.0),
            htk: true,
            ..mel_case(48000.0, 4096, 128)
        },
    ];
    let arguments = Value::Array(cases.iter().map(MelCase::librosa_arguments).collect());
    let librosa = python_json(LIBROSA_MEL, &arguments.to_string());
    for (case, want) in cases
        .iter()
        .zip(librosa.as_array().expect("one result per case"))
    {
        let value = case.value();
        let m = build(&value, case.n_fft, case.sample_rate);
        let name = format!("{value} at {}/{}", case.n_fft, case.sample_rate);
        assert_matches_python(&name, &m, want, 1e-10);
    }
}

/// For each case [sr, n_fft, b, fmin|None, fmax|None]: the IEC 61260-1 base-10 bands whose edges
/// lie in [Δf/2, Nyquist] (and mid-band frequency in [fmin, fmax]), and the weight of each bin:
/// the fraction of the bin's interval [(k-½)Δf, (k+½)Δf] ∩ [0, Nyquist] inside the band.
const NUMPY_OCTAVE: &str = r#"
import json, sys
import numpy as np
out = []
for i, (sr, n_fft, b, fmin, fmax) in enumerate(json.loads(sys.argv[1])):
    G = 10.0 ** (3 / 10)
    x = np.arange(-100 * b, 100 * b + 1)
    mid = 1000.0 * G ** (x / b)
    lower = mid * G ** (-1 / (2 * b))
    upper = mid * G ** (1 / (2 * b))
    df, nyquist = sr / n_fft, sr / 2
    # IEC 61260-1 Annex E's nominal mid-band frequencies, which fmin/fmax name
    decade = np.array([10, 12.5, 16, 20, 25, 31.5, 40, 50, 63, 80])
    third = x * (3 // b)
    e = third // 10 + 2  # (divided below 10 Hz: 6.3, as fmax=6.3 parses, not 63 * 0.1)
    nominal = np.where(e < 0, decade[third % 10] / 10.0 ** np.abs(e), decade[third % 10] * 10.0 ** np.maximum(e, 0))
    keep = (lower >= df / 2) & (upper <= nyquist)
    if fmin is not None:
        keep &= nominal >= fmin
    if fmax is not None:
        keep &= nominal <= fmax
    mid, lower, upper = mid[keep], lower[keep], upper[keep]
    k = np.arange(n_fft // 2 + 1)
    bin_lower = np.clip((k - 0.5) * df, 0, nyquist)
    bin_upper = np.clip((k + 0.5) * df, 0, nyquist)
    overlap = np.minimum(bin_upper, upper[:, None]) - np.maximum(bin_lower, lower[:, None])
    weights = np.clip(overlap, 0, None) / (bin_upper - bin_lower)
    power = np.random.default_rng(100 + i).random(k.size)
    out.append(dict(weights=weights.tolist(), centres=mid.tolist(), lower=lower.tolist(),
                    upper=upper.tolist(), power=power.tolist(), bands=(weights @ power).tolist()))
print(json.dumps(out))
"#;

/// (`--bands` value, sample rate, n_fft, bands per octave, fmin, fmax).
type OctaveCase = (&'static str, f64, usize, u32, Option<f64>, Option<f64>);

#[test]
fn octave_matrices_equal_a_numpy_iec_reference() {
    if !python_has("numpy") {
        return;
    }
    let cases: [OctaveCase; 8] = [
        ("octave", 48000.0, 2048, 1, None, None),
        ("third-octave", 44100.0, 4096, 3, None, None),
        ("octave", 8000.0, 16, 1, None, None),
        ("third-octave", 16000.0, 1001, 3, None, None),
        (
            "third-octave:fmin=100,fmax=10000",
            48000.0,
            8192,
            3,
            Some(100.0),
            Some(10000.0),
        ),
        ("octave:fmax=2000", 22050.0, 512, 1, None, Some(2000.0)),
        ("third-octave", 96000.0, 16384, 3, None, None),
        // the nominal 20 Hz and 5 kHz bands (mid-bands 19.95 and 5011.9 Hz) are kept
        (
            "third-octave:fmin=20,fmax=5000",
            48000.0,
            16384,
            3,
            Some(20.0),
            Some(5000.0),
        ),
    ];
    let arguments: Vec<Value> = cases
        .iter()
        .map(|(_, sr, n_fft, b, fmin, fmax)| serde_json::json!([sr, n_fft, b, fmin, fmax]))
        .collect();
    let numpy = python_json(NUMPY_OCTAVE, &Value::Array(arguments).to_string());
    for ((value, sr, n_fft, ..), want) in cases.iter().zip(numpy.as_array().expect("results")) {
        let m = build(value, *n_fft, *sr);
        let name = format!("{value} at {n_fft}/{sr}");
        // an edge a few ulps apart (G^((2x±1)/2b) here, f_m·G^(±1/2b) there) moves a cut bin's
        // weight by about edge·1e-16/Δf: 3e-12 for the 20 kHz bands of Δf = 5.9 Hz
        assert_matches_python(&name, &m, want, 1e-10);
        let (lower, upper): (Vec<f64>, Vec<f64>) = m.edges_hz().iter().copied().unzip();
        assert!(
            relative_error(&lower, &floats(&want["lower"])) <= 1e-12,
            "{name}: lower edges"
        );
        assert!(
            relative_error(&upper, &floats(&want["upper"])) <= 1e-12,
            "{name}: upper edges"
        );
    }
}
