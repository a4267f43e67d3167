//! Sample types of radio recordings: the I/Q formats of SDR receivers (`--input-format cu8`,
//! `cs8`, `cs16`) and every datatype of SigMF (`core:datatype`: real `r` or complex `c`; `f32`,
//! `f64`, `i8`, `i16`, `i32`, `u8`, `u16`, `u32`; `_le` or `_be` for the types wider than a byte).
//!
//! Integers are scaled to about [-1, 1]:
//! - signed, b bits: `x / 2^(b-1)` (cs8: x/128, cs16: x/32768, as `s16` already is);
//! - unsigned, b bits: `(x - m) / m` with `m = (2^b - 1) / 2`, the middle of the range: for cu8
//!   (RTL-SDR) `(x - 127.5) / 127.5`, so 0 is -1.0, 255 is +1.0 and the ADC's mid-scale is 0.
//!
//! Floats are taken as they are; NaN or infinity is an error naming its byte offset, as is a
//! 64-bit float beyond the f32 range when samples are analysed in f32 (`--precision`).

use super::{overflows, BEYOND_F32};
use crate::error::{FftdError, Result};
use crate::types::InputKind;
use crate::types::Precision;

/// One component's encoding (a real sample, or the I or the Q of a complex one).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Elem {
    F32,
    F64,
    I8,
    I16,
    I32,
    U8,
    U16,
    U32,
}

impl Elem {
    const ALL: [(Elem, &'static str); 8] = [
        (Elem::F32, "f32"),
        (Elem::F64, "f64"),
        (Elem::I8, "i8"),
        (Elem::I16, "i16"),
        (Elem::I32, "i32"),
        (Elem::U8, "u8"),
        (Elem::U16, "u16"),
        (Elem::U32, "u32"),
    ];

    pub fn bytes(self) -> usize {
        match self {
            Elem::I8 | Elem::U8 => 1,
            Elem::I16 | Elem::U16 => 2,
            Elem::F32 | Elem::I32 | Elem::U32 => 4,
            Elem::F64 => 8,
        }
    }

    fn name(self) -> &'static str {
        Elem::ALL
            .iter()
            .find(|(e, _)| *e == self)
            .map_or("?", |(_, n)| n)
    }
}

/// How one sample frame's values are encoded: the component type, real or complex (I then Q),
/// and the byte order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SampleType {
    pub elem: Elem,
    pub complex: bool,
    pub big_endian: bool,
}

impl SampleType {
    pub(crate) const CU8: SampleType = SampleType::le(Elem::U8, true);
    pub(crate) const CS8: SampleType = SampleType::le(Elem::I8, true);
    pub(crate) const CS16: SampleType = SampleType::le(Elem::I16, true);

    const fn le(elem: Elem, complex: bool) -> Self {
        SampleType {
            elem,
            complex,
            big_endian: false,
        }
    }

    /// Bytes of one sample (both parts of a complex one).
    pub(crate) fn sample_bytes(self) -> usize {
        self.elem.bytes() * if self.complex { 2 } else { 1 }
    }

    pub fn kind(self) -> InputKind {
        if self.complex {
            InputKind::Complex
        } else {
            InputKind::Real
        }
    }

    /// The type a SigMF `core:datatype` names (`cf32_le`, `ri16_be`, `cu8`, ...); None when it
    /// names none (the caller's message lists what is read).
    pub fn from_sigmf(text: &str) -> Option<SampleType> {
        let complex = match text.as_bytes().first()? {
            b'c' => true,
            b'r' => false,
            _ => return None,
        };
        let rest = &text[1..];
        let (body, big_endian) = match rest.rsplit_once('_') {
            Some((body, "le")) => (body, false),
            Some((body, "be")) => (body, true),
            Some(_) => return None,
            None => (rest, false),
        };
        let elem = Elem::ALL.iter().find(|(_, n)| *n == body)?.0;
        // one-byte types have no byte order; the wider ones must say theirs
        let suffixed = rest.len() != body.len();
        (suffixed == (elem.bytes() > 1)).then_some(SampleType {
            elem,
            complex,
            big_endian,
        })
    }

    /// The SigMF `core:datatype` of this type.
    pub(crate) fn sigmf_name(self) -> String {
        let order = match (self.elem.bytes(), self.big_endian) {
            (1, _) => "",
            (_, true) => "_be",
            (_, false) => "_le",
        };
        let part = if self.complex { "c" } else { "r" };
        format!("{part}{}{order}", self.elem.name())
    }

    /// Appends the samples of `bytes` (whole components, found at byte `offset` of the input
    /// `name`) to `out` as f64, scaled as the module comment says.
    pub fn decode(
        self,
        bytes: &[u8],
        offset: u64,
        name: &str,
        precision: Precision,
        out: &mut Vec<f64>,
    ) -> Result<()> {
        let be = self.big_endian;
        macro_rules! ints {
            ($ty:ty, $n:expr, $map:expr) => {
                out.extend(bytes.chunks_exact($n).map(|b| {
                    let mut a = [0u8; $n];
                    a.copy_from_slice(b);
                    let v = if be {
                        <$ty>::from_be_bytes(a)
                    } else {
                        <$ty>::from_le_bytes(a)
                    };
                    $map(v as f64)
                }))
            };
        }
        let unsigned = |bits: i32| {
            let mid = (2f64.powi(bits) - 1.0) / 2.0;
            move |v: f64| (v - mid) / mid
        };
        let signed = |bits: i32| {
            let scale = 1.0 / 2f64.powi(bits - 1);
            move |v: f64| v * scale
        };
        let start = out.len();
        match self.elem {
            Elem::U8 => out.extend(bytes.iter().map(|&b| (b as f64 - 127.5) / 127.5)),
            Elem::I8 => out.extend(bytes.iter().map(|&b| b as i8 as f64 / 128.0)),
            Elem::U16 => ints!(u16, 2, unsigned(16)),
            Elem::I16 => ints!(i16, 2, signed(16)),
            Elem::U32 => ints!(u32, 4, unsigned(32)),
            Elem::I32 => ints!(i32, 4, signed(32)),
            Elem::F32 => ints!(f32, 4, |v| v),
            Elem::F64 => ints!(f64, 8, |v| v),
        }
        if matches!(self.elem, Elem::F32 | Elem::F64) {
            let width = self.elem.bytes() as u64;
            let bad = out[start..]
                .iter()
                .position(|v| !v.is_finite() || overflows(*v, precision));
            if let Some(i) = bad {
                let v = out[start + i];
                out.truncate(start + i); // (the values before the fault: `RawSource::read`)
                let what = if v.is_finite() {
                    format!("{v:e} is {BEYOND_F32}")
                } else {
                    format!("{v}, not a finite number")
                };
                return Err(FftdError::input(
                    name,
                    format!(
                        "value at byte offset {} is {what}",
                        offset + width * i as u64
                    ),
                ));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sigmf_names_round_trip_and_bad_ones_are_refused() {
        for part in ["r", "c"] {
            for (elem, name) in Elem::ALL {
                let orders: &[&str] = if elem.bytes() == 1 {
                    &[""]
                } else {
                    &["_le", "_be"]
                };
                for order in orders {
                    let text = format!("{part}{name}{order}");
                    let t = SampleType::from_sigmf(&text).expect(&text);
                    assert_eq!(t.sigmf_name(), text);
                }
            }
        }
        for bad in [
            "", "cf32", "cu8_le", "xf32_le", "cf16_le", "ci16_me", "c", "cf32_",
        ] {
            assert_eq!(SampleType::from_sigmf(bad), None, "{bad}");
        }
    }

    #[test]
    fn integers_scale_to_unit_range() {
        let mut out = Vec::new();
        SampleType::CU8
            .decode(&[0, 255, 127, 128], 0, "x", Precision::F32, &mut out)
            .expect("cu8");
        assert_eq!(out, [-1.0, 1.0, -0.5 / 127.5, 0.5 / 127.5]);
        out.clear();
        SampleType::CS8
            .decode(&[0x80, 0x7f], 0, "x", Precision::F32, &mut out)
            .expect("cs8");
        assert_eq!(out, [-1.0, 127.0 / 128.0]);
        out.clear();
        let be = SampleType {
            elem: Elem::U16,
            complex: false,
            big_endian: true,
        };
        be.decode(&[0xff, 0xff, 0, 0], 0, "x", Precision::F32, &mut out)
            .expect("u16");
        assert_eq!(out, [1.0, -1.0]);
    }

    #[test]
    fn bad_floats_name_their_offset() {
        let t = SampleType::from_sigmf("rf64_le").expect("rf64");
        let mut bytes = 1.0f64.to_le_bytes().to_vec();
        bytes.extend(1e300f64.to_le_bytes());
        let mut out = Vec::new();
        let err = t
            .decode(&bytes, 16, "a.sigmf-data", Precision::F32, &mut out)
            .expect_err("beyond f32");
        assert!(err.to_string().contains("offset 24"), "{err}");
        out.clear();
        t.decode(&bytes, 0, "x", Precision::F64, &mut out)
            .expect("fits f64");
    }
}
