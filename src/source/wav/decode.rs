//! WAV sample bytes to f64, a whole block at a time, with the scaling soundfile and librosa use:
//! integer PCM divided by 2^(bits-1) (8-bit unsigned: (v-128)/128), float as is, A-law and mu-law
//! expanded to their ITU G.711 16-bit linear value (as libsndfile, sox and Python's audioop do)
//! and divided by 32768.

use super::header::Encoding;
use crate::error::{FftdError, Result};
use crate::source::{overflows, BEYOND_F32};
use crate::types::number::{self, Syntax};
use crate::types::Precision;

/// G.711 A-law code -> 16-bit linear value.
static ALAW_TO_LINEAR: [i16; 256] = alaw_table();
/// G.711 mu-law code -> 16-bit linear value.
static MULAW_TO_LINEAR: [i16; 256] = mulaw_table();

/// Appends the samples in `bytes` (a whole number of samples) to `out`.
pub(crate) fn decode(encoding: Encoding, bytes: &[u8], out: &mut Vec<f64>) {
    const I8: f64 = 1.0 / 128.0;
    const I16: f64 = 1.0 / 32768.0;
    const I24: f64 = 1.0 / 8_388_608.0;
    const I32: f64 = 1.0 / 2_147_483_648.0;
    match encoding {
        Encoding::Unsigned8 => out.extend(bytes.iter().map(|&b| (b as f64 - 128.0) * I8)),
        Encoding::Int16 => out.extend(
            bytes
                .chunks_exact(2)
                .map(|b| i16::from_le_bytes([b[0], b[1]]) as f64 * I16),
        ),
        Encoding::Int24 => out.extend(
            bytes
                .chunks_exact(3)
                .map(|b| (i32::from_le_bytes([0, b[0], b[1], b[2]]) >> 8) as f64 * I24),
        ),
        Encoding::Int32 => out.extend(
            bytes
                .chunks_exact(4)
                .map(|b| i32::from_le_bytes([b[0], b[1], b[2], b[3]]) as f64 * I32),
        ),
        Encoding::Float32 => out.extend(
            bytes
                .chunks_exact(4)
                .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]) as f64),
        ),
        Encoding::Float64 => out.extend(
            bytes
                .chunks_exact(8)
                .map(|b| f64::from_le_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]])),
        ),
        Encoding::ALaw => out.extend(
            bytes
                .iter()
                .map(|&b| ALAW_TO_LINEAR[b as usize] as f64 * I16),
        ),
        Encoding::MuLaw => out.extend(
            bytes
                .iter()
                .map(|&b| MULAW_TO_LINEAR[b as usize] as f64 * I16),
        ),
    }
}

/// `decode`, then a check that float samples are finite and within `precision`: NaN, infinity or
/// a 64-bit value beyond f32 (analysing in f32) is an error naming the input and the sample's
/// index (`first_sample` is the index of the first sample in `bytes`).
pub(crate) fn decode_checked(
    name: &str,
    encoding: Encoding,
    bytes: &[u8],
    first_sample: u64,
    precision: Precision,
    out: &mut Vec<f64>,
) -> Result<()> {
    let start = out.len();
    decode(encoding, bytes, out);
    if !encoding.is_float() {
        return Ok(());
    }
    if let Some(i) = first_non_finite(&out[start..]) {
        let v = out[start + i];
        out.truncate(start + i); // (the samples before the fault: `WavSource::read`)
        return Err(FftdError::input(
            name,
            format!(
                "sample {} is {v}, not a finite number",
                first_sample + i as u64
            ),
        ));
    }
    if encoding != Encoding::Float64 {
        return Ok(()); // 32-bit floats and integers fit either precision
    }
    match first_overflow(&out[start..], precision) {
        None => Ok(()),
        Some(i) => {
            let v = out[start + i];
            out.truncate(start + i);
            Err(FftdError::input(
                name,
                format!(
                    "sample {} is {}, {BEYOND_F32}",
                    first_sample + i as u64,
                    number::text(v, Syntax::Text)
                ),
            ))
        }
    }
}

/// The index of the first value of `values` that `precision` cannot hold, if any.
fn first_overflow(values: &[f64], precision: Precision) -> Option<usize> {
    if precision == Precision::F64 {
        return None;
    }
    // as `first_non_finite`: one pass that vectorises, the search only when something is wrong
    let all_fit = values
        .iter()
        .fold(true, |ok, &v| ok & !overflows(v, precision));
    if all_fit {
        None
    } else {
        values.iter().position(|&v| overflows(v, precision))
    }
}

/// The index of the first NaN or infinity in `values`, if any.
pub(crate) fn first_non_finite(values: &[f64]) -> Option<usize> {
    // one pass the compiler vectorises; the search only when something is wrong
    let all_finite = values.iter().fold(true, |ok, v| ok & v.is_finite());
    if all_finite {
        None
    } else {
        values.iter().position(|v| !v.is_finite())
    }
}

/// G.711 A-law expansion (the reference algorithm of Sun's g711.c, used by sox and audioop).
const fn alaw_to_linear(code: u8) -> i16 {
    let a = code ^ 0x55;
    let mantissa = ((a & 0x0F) as i32) << 4;
    let segment = ((a & 0x70) >> 4) as u32;
    let magnitude = match segment {
        0 => mantissa + 8,
        1 => mantissa + 0x108,
        _ => (mantissa + 0x108) << (segment - 1),
    };
    if a & 0x80 != 0 {
        magnitude as i16
    } else {
        -magnitude as i16
    }
}

/// G.711 mu-law expansion (Sun's g711.c): bias 0x84 added while encoding, removed here.
const fn mulaw_to_linear(code: u8) -> i16 {
    const BIAS: i32 = 0x84;
    let u = !code;
    let t = ((((u & 0x0F) as i32) << 3) + BIAS) << ((u & 0x70) >> 4);
    if u & 0x80 != 0 {
        (BIAS - t) as i16
    } else {
        (t - BIAS) as i16
    }
}

const fn alaw_table() -> [i16; 256] {
    let mut table = [0i16; 256];
    let mut code = 0;
    while code < 256 {
        table[code] = alaw_to_linear(code as u8);
        code += 1;
    }
    table
}

const fn mulaw_table() -> [i16; 256] {
    let mut table = [0i16; 256];
    let mut code = 0;
    while code < 256 {
        table[code] = mulaw_to_linear(code as u8);
        code += 1;
    }
    table
}
