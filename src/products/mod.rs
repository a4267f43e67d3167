//! Products derived from the power spectrum of each frame, computed after the FFT stage: band
//! powers (`--bands mel:N`, `--bands octave|third-octave`).

pub mod bands;
