//! Live microphone capture through cpal (in progress).

use super::SampleSource;
use crate::config::Settings;
use crate::error::{FftdError, Result};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

pub fn open(
    _device: &str,
    _settings: &Settings,
    _stop: Arc<AtomicBool>,
) -> Result<Box<dyn SampleSource>> {
    Err(FftdError::Runtime(
        "microphone capture is not built yet: use --file".into(),
    ))
}
