//! How fftd writes a number as text: the one place every text output takes its digits from
//! (`--format text`, `csv` and `ndjson` rows and headers, so also the live view's `/spectra`,
//! `--output nats://` rows and fleet rows, and the fleet's row headers).
//!
//! - Finite values: the shortest decimal that reads back to exactly the same float (ryu).
//! - Not-a-number and infinities as what they are. Text and CSV: `nan`, `inf`, `-inf`, which
//!   `numpy.loadtxt`, `numpy.genfromtxt`, `pandas.read_csv` and Python's `float()` read as NaN
//!   and ±infinity. JSON (NDJSON) has no such numbers: `null`, as JavaScript's `JSON.stringify`
//!   writes them, which every JSON reader accepts (Python's `json` gives None); the `f32` and
//!   `npy` formats keep which non-finite value it was.

use crate::types::Sample;

/// The syntax a number is written in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Syntax {
    /// Plain text and CSV: `nan`, `inf`, `-inf` for non-finite values.
    Text,
    /// JSON: `null` for non-finite values.
    Json,
}

/// The text of a value that is not finite, in `syntax`.
fn non_finite<T: Sample>(v: T, syntax: Syntax) -> &'static str {
    match syntax {
        Syntax::Json => "null",
        Syntax::Text if v.is_nan() => "nan",
        Syntax::Text if v.is_sign_negative() => "-inf",
        Syntax::Text => "inf",
    }
}

/// Appends `v` to `out` with the scratch buffer `buf`.
fn push_with<T: Sample>(out: &mut Vec<u8>, v: T, syntax: Syntax, buf: &mut ryu::Buffer) {
    let text = if v.is_finite() {
        v.format_finite(buf)
    } else {
        non_finite(v, syntax)
    };
    out.extend_from_slice(text.as_bytes());
}

/// Appends one number.
pub(crate) fn push<T: Sample>(out: &mut Vec<u8>, v: T, syntax: Syntax) {
    push_with(out, v, syntax, &mut ryu::Buffer::new());
}

/// Appends numbers separated by `separator`.
pub(crate) fn push_all<T: Sample>(out: &mut Vec<u8>, values: &[T], separator: u8, syntax: Syntax) {
    let mut buf = ryu::Buffer::new();
    for (i, v) in values.iter().enumerate() {
        if i > 0 {
            out.push(separator);
        }
        push_with(out, *v, syntax, &mut buf);
    }
}

/// One number as a string (headers, messages that quote a value).
pub(crate) fn text<T: Sample>(v: T, syntax: Syntax) -> String {
    let mut out = Vec::new();
    push(&mut out, v, syntax);
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn non_finite_values_are_written_as_what_they_are() {
        let values = [
            1.5f32,
            f32::NAN,
            f32::INFINITY,
            f32::NEG_INFINITY,
            -0.0,
            f32::MAX,
        ];
        let mut out = Vec::new();
        push_all(&mut out, &values, b' ', Syntax::Text);
        assert_eq!(
            String::from_utf8(out).expect("utf8"),
            "1.5 nan inf -inf -0.0 3.4028235e38"
        );
        let mut out = Vec::new();
        push_all(&mut out, &values, b',', Syntax::Json);
        assert_eq!(
            String::from_utf8(out).expect("utf8"),
            "1.5,null,null,null,-0.0,3.4028235e38"
        );
        assert_eq!(text(-f64::NAN, Syntax::Text), "nan");
        assert_eq!(text(f64::NEG_INFINITY, Syntax::Text), "-inf");
        assert_eq!(text(0.25f64, Syntax::Json), "0.25");
    }
}
