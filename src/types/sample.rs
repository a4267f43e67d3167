//! The sample types fftd computes in and the kind of input a frame holds.

use std::fmt::{Debug, Display};

/// The floating-point types fftd computes in (`--precision f32|f64`): f32 and f64 only (the
/// trait is sealed), so code may view their memory as bytes (the sink writes spectra buffers as
/// they are, `pipeline::encode`).
pub trait Sample:
    sealed::Sealed
    + rustfft::FftNum
    + num_traits::Float
    + Default
    + Display
    + Debug
    + Send
    + Sync
    + 'static
{
    /// "f32" or "f64".
    const NAME: &'static str;
    fn of_f64(v: f64) -> Self;
    fn into_f64(self) -> f64;
    fn into_f32(self) -> f32;
    /// Shortest decimal text that reads back to exactly this value, for finite values only
    /// (`types::number` writes every value, finite or not).
    fn format_finite(self, buf: &mut ryu::Buffer) -> &str;
    /// The values as f32, when `Self` is f32 (lets a reader put f32 samples in place).
    fn as_f32_mut(values: &mut [Self]) -> Option<&mut [f32]>;
    /// The values as f64, when `Self` is f64 (lets a reader widen f32 samples in place).
    fn as_f64_mut(values: &mut [Self]) -> Option<&mut [f64]>;
    /// The values as f32, when `Self` is f32 (for vector code written per type).
    fn as_f32(values: &[Self]) -> Option<&[f32]>;
    /// The values as f64, when `Self` is f64.
    fn as_f64(values: &[Self]) -> Option<&[f64]>;
}

/// Keeps `Sample` to f32 and f64: no type outside this module can name `Sealed`.
mod sealed {
    pub trait Sealed {}
    impl Sealed for f32 {}
    impl Sealed for f64 {}
}

impl Sample for f32 {
    const NAME: &'static str = "f32";
    fn of_f64(v: f64) -> Self {
        v as f32
    }
    fn into_f64(self) -> f64 {
        self as f64
    }
    fn into_f32(self) -> f32 {
        self
    }
    fn format_finite(self, buf: &mut ryu::Buffer) -> &str {
        buf.format_finite(self)
    }
    fn as_f32_mut(values: &mut [Self]) -> Option<&mut [f32]> {
        Some(values)
    }
    fn as_f64_mut(_: &mut [Self]) -> Option<&mut [f64]> {
        None
    }
    fn as_f32(values: &[Self]) -> Option<&[f32]> {
        Some(values)
    }
    fn as_f64(_: &[Self]) -> Option<&[f64]> {
        None
    }
}

impl Sample for f64 {
    const NAME: &'static str = "f64";
    fn of_f64(v: f64) -> Self {
        v
    }
    fn into_f64(self) -> f64 {
        self
    }
    fn into_f32(self) -> f32 {
        self as f32
    }
    fn format_finite(self, buf: &mut ryu::Buffer) -> &str {
        buf.format_finite(self)
    }
    fn as_f32_mut(_: &mut [Self]) -> Option<&mut [f32]> {
        None
    }
    fn as_f64_mut(values: &mut [Self]) -> Option<&mut [f64]> {
        Some(values)
    }
    fn as_f32(_: &[Self]) -> Option<&[f32]> {
        None
    }
    fn as_f64(values: &[Self]) -> Option<&[f64]> {
        Some(values)
    }
}

/// Whether frames hold real samples or complex (I/Q) samples.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum InputKind {
    /// One value per sample; the spectrum has n/2+1 bins.
    Real,
    /// Interleaved (re, im) per sample; the spectrum has n bins in FFT order.
    Complex,
}

impl InputKind {
    /// Values stored per sample: 1 for real, 2 for complex.
    pub fn width(self) -> usize {
        match self {
            InputKind::Real => 1,
            InputKind::Complex => 2,
        }
    }
}
