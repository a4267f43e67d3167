//! One description of a run's analysis (framing, window, scale, precision, products, format),
//! the one every writer of metadata uses: the `--meta` sidecar, the PNG caption, a fleet
//! worker's `--meta` and the analysis part of fleet row ids. Built by `app` with the rest of
//! the run's spec; the hop default lives here (`hop_for`) and nowhere else.

use crate::fft::Scale;
use crate::frame::{FrameSize, Tail};
use crate::products::ProductOptions;
use crate::sink::OutputFormat;
use crate::types::Precision;
use crate::window::WindowKind;
use serde_json::{json, Map, Value};

/// What is computed from each stream and how it is written.
#[derive(Clone, Debug)]
pub struct Analysis {
    pub frame: FrameSize,
    /// `--hop` as given (None: the frame size, `hop_for`).
    pub hop: Option<usize>,
    pub tail: Tail,
    pub window: WindowKind,
    pub scale: Scale,
    pub precision: Precision,
    pub fftshift: bool,
    /// `--dc-remove`: each frame's mean subtracted before the window (`source::dc`).
    pub dc_remove: bool,
    /// Averages, bands, frequency range and measurements (`products`).
    pub products: ProductOptions,
    pub format: OutputFormat,
}

impl Analysis {
    /// The hop between frames of `n` samples: `--hop`, else `n` (frames side by side).
    pub(crate) fn hop_for(&self, n: usize) -> usize {
        self.hop.unwrap_or(n)
    }

    /// Frame size and hop of fixed-size frames (None with `--frame whole`).
    pub fn fixed(&self) -> Option<(usize, usize)> {
        match self.frame {
            FrameSize::Fixed(n) => Some((n, self.hop_for(n))),
            FrameSize::Whole => None,
        }
    }

    /// Everything that makes two runs' rows of one frame of `n` samples every `hop` different,
    /// but the engine that made them: fleet row ids carry its fingerprint.
    pub(crate) fn description(&self, n: usize, hop: usize) -> String {
        let mut description = format!(
            "n={n};hop={hop};window={};scale={};format={};fftshift={};precision={:?}",
            self.window,
            self.scale.name(),
            self.format.name(),
            self.fftshift,
            self.precision
        );
        if !self.products.is_plain() {
            description.push_str(&format!(";products={:?}", self.products));
        }
        description
    }

    /// The analysis in a few words for a stream at `rate` Hz: rate, frame, hop, window,
    /// products and scale (the PNG caption).
    pub(crate) fn caption(&self, rate: f64) -> String {
        let mut parts = vec![format!("{} Hz", crate::types::shown(rate))];
        match self.fixed() {
            Some((n, hop)) => {
                parts.push(format!("frame {n}"));
                parts.push(format!("hop {hop}"));
            }
            None => parts.push("whole input as one frame".into()),
        }
        parts.push(self.window.name().to_string());
        let products = &self.products;
        if let Some(bands) = &products.bands {
            parts.push(format!("bands {bands}"));
        }
        if let Some(average) = products.average {
            parts.push(format!("average {average} ({})", products.mode));
        }
        parts.push(format!("scale {}", self.scale.name()));
        parts.join(" · ")
    }

    /// The run-wide fields of a `--meta` document: products, window, scale, format, precision,
    /// tail, bin order and, with measurements, their unit and calibration.
    pub(crate) fn meta_fields(&self) -> Map<String, Value> {
        let products = &self.products;
        let doc = json!({
            "average": products.average.map(|a| a.to_string()),
            "average_mode": products.average.map(|_| products.mode.to_string()),
            "row_time": products.average.map(|_| "start of the row's interval"),
            "bands": products.bands.as_ref().map(|b| b.to_string()),
            "fmin": products.fmin,
            "fmax": products.fmax,
            "dc_remove": self.dc_remove,
            "window": self.window.name(),
            "window_form": "periodic (scipy.signal.get_window default)",
            "scale": self.scale.name(),
            "values_per_bin": self.scale.values_per_bin(),
            "format": self.format.name(),
            "precision": self.precision.name(),
            "tail": match self.tail { Tail::Pad => "pad", Tail::Drop => "drop" },
            "fftshift": self.fftshift,
            "bin_order": if self.fftshift { "fftshift (DC centred)" } else { "fft (numpy rfftfreq/fftfreq order)" },
        });
        let mut fields = match doc {
            Value::Object(map) => map,
            _ => Map::new(),
        };
        fields.extend(self.measurement_fields());
        if self.products.measure.cross.is_some() {
            // (helper-54: said 1 value per bin of magnitude, beside rows of 5 per bin)
            fields.extend(cross_fields());
        }
        fields
    }

    /// With measurements (`products::measure`): their unit, weighting, calibration and the names
    /// of the values each row carries after its columns (`cross_fields` replaces the row's
    /// description for `--cross`).
    fn measurement_fields(&self) -> Map<String, Value> {
        let products = &self.products;
        let measure = &products.measure;
        if !measure.is_active() {
            return Map::new();
        }
        let layout = measure.layout(products.bands.is_some(), self.scale);
        let doc = json!({
            "unit": measure.unit(),
            "weighting": measure.weighting.map(|w| w.letter()),
            "calibration_db": measure.calibration_db,
            "calibration_file": measure.calibration_file.as_ref().map(|c| c.path.clone()),
            "sens_factor_db": measure.calibration_file.as_ref().map(|c| c.sens_factor_db),
            "values_scale": "calibrated power: a full-scale sine's bin reads the calibration (0 dBFS without)",
            "row_measurements": layout.names(),
        });
        match doc {
            Value::Object(map) => map,
            _ => Map::new(),
        }
    }
}

/// `--cross`'s rows (`products::measure::cross`): 5 values per bin, in blocks, in their own units;
/// `--scale` does not apply to them.
fn cross_fields() -> Map<String, Value> {
    let doc = json!({
        "scale": Value::Null,
        "values_per_bin": 5,
        "row_layout": "csd re, im per bin (2·bins), then coherence, h1_db and h1_deg (bins each)",
        "values_scale": "csd: scipy's one-sided cross-spectral density (unit²/Hz); coherence 0 to 1; h1_db dB; h1_deg degrees",
        "row_measurements": [],
    });
    match doc {
        Value::Object(map) => map,
        _ => Map::new(),
    }
}
