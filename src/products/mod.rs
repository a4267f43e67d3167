//! Products derived from a stream's spectra after the FFT stage (time averages, ...).

pub mod average;
