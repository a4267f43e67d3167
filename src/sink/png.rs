//! `--format png`: a spectrogram image per output: time left to right, frequency bottom to top,
//! level in dB as colour (viridis) with a colour bar, axes in s and Hz, `--png-size WxH` pixels.
//!
//! Rows take the same way as any format's: the encode threads turn each row into a level record
//! (`LevelEncoder`: its columns in dB, so the logarithms are spread over the encode threads),
//! and the output's destination, an `ImageFile`, reduces the records into a
//! `spectrogram::Spectrogram` as they arrive (memory bounded by the plot size) and draws and
//! writes the PNG when the output is finished: at the end of the input, or when the run is cut
//! short by `--max-frames`, `--duration` or Ctrl-C (the image of what was analysed).
//!
//! The dB of each scale: `magnitude` 20·log10 v, `power`, `spectrum`, `density`
//! 10·log10 v, `db` as is, `complex` 10·log10(re² + im²); levels are floored at −300 dB so
//! silence has a value. Colours span `--png-db MIN:MAX`, or by default the image's largest value
//! (rounded up to a whole dB) down to `DEFAULT_DB_RANGE` below it; the image says which.

use super::analysis::Analysis;
use super::plot::{self, Labels, Layout, PlotFacts};
use super::spectrogram::{FrequencyAxis, Spectrogram, SpectrogramImage};
use super::{Encoder, Sample, SpectrumRow};
use crate::fft::Scale;
use crate::types::StreamMeta;
use std::fmt;
use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::str::FromStr;

/// Image size when `--png-size` is not given.
pub(crate) const DEFAULT_SIZE: PngSize = PngSize {
    width: 1200,
    height: 600,
};

/// dB the colours span below the image's maximum, unless `--png-db` says otherwise.
pub(crate) const DEFAULT_DB_RANGE: f64 = 100.0;

/// Power below which a level counts as silence (−300 dB).
const LEVEL_FLOOR: f64 = 1e-30;

/// `--png-size WxH`: the image's size in pixels.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PngSize {
    pub width: u32,
    pub height: u32,
}

impl FromStr for PngSize {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let bad = || {
            format!(
                "'{s}': expected WxH in whole pixels, from {}x{} to {} per side and {} pixels in all",
                plot::MIN_WIDTH,
                plot::MIN_HEIGHT,
                plot::MAX_SIDE,
                plot::MAX_PIXELS
            )
        };
        let (w, h) = s.trim().split_once(['x', 'X']).ok_or_else(bad)?;
        let (width, height) = match (w.parse::<u32>(), h.parse::<u32>()) {
            (Ok(w), Ok(h)) => (w, h),
            _ => return Err(bad()),
        };
        let fits = (plot::MIN_WIDTH..=plot::MAX_SIDE).contains(&width)
            && (plot::MIN_HEIGHT..=plot::MAX_SIDE).contains(&height)
            && width as u64 * height as u64 <= plot::MAX_PIXELS;
        if fits {
            Ok(PngSize { width, height })
        } else {
            Err(bad())
        }
    }
}

impl fmt::Display for PngSize {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}x{}", self.width, self.height)
    }
}

/// `--png-db MIN:MAX`: the levels the colour bar spans.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct DbRange {
    pub min: f64,
    pub max: f64,
}

/// The largest |dB| `--png-db` takes (a dB scale spans a few hundred dB at most).
const MOST_DB: f64 = 1000.0;

impl FromStr for DbRange {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let bad = || {
            format!("'{s}': expected MIN:MAX in dB from -{MOST_DB} to {MOST_DB} with MIN < MAX, e.g. -120:0")
        };
        let (lo, hi) = s.trim().split_once(':').ok_or_else(bad)?;
        // (bounded: the colour bar's scale is drawn over MAX - MIN, which must be a number)
        let within = |db: f64| db.abs() <= MOST_DB;
        match (lo.trim().parse::<f64>(), hi.trim().parse::<f64>()) {
            (Ok(min), Ok(max)) if within(min) && within(max) && min < max => {
                Ok(DbRange { min, max })
            }
            _ => Err(bad()),
        }
    }
}

/// What `--format png` is asked for.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PngOptions {
    pub size: PngSize,
    /// Fixed colour range; None: the image's maximum and `DEFAULT_DB_RANGE` below it.
    pub db: Option<DbRange>,
}

impl Default for PngOptions {
    fn default() -> Self {
        PngOptions {
            size: DEFAULT_SIZE,
            db: None,
        }
    }
}

/// Turns a row into a level record for an `ImageFile`: time_s (f64), frame size (u64), column
/// count (u32), then each column's level in dB (f32), all little-endian.
pub(crate) struct LevelEncoder {
    pub scale: Scale,
}

/// Bytes of a level record before its levels.
const RECORD_HEAD: usize = 20;

/// The head of the level record at the start of `bytes`: its time, frame size and column count.
fn record_head(bytes: &[u8]) -> Option<(f64, usize, usize)> {
    let time_s = f64::from_le_bytes(bytes.get(0..8)?.try_into().ok()?);
    let n = u64::from_le_bytes(bytes.get(8..16)?.try_into().ok()?);
    let columns = u32::from_le_bytes(bytes.get(16..20)?.try_into().ok()?);
    Some((time_s, n as usize, columns as usize))
}

impl<T: Sample> Encoder<T> for LevelEncoder {
    fn encode(&self, row: &SpectrumRow<'_, T>, out: &mut Vec<u8>) {
        let per_bin = self.scale.values_per_bin();
        let columns = row.values.len() / per_bin;
        out.reserve(RECORD_HEAD + 4 * columns);
        out.extend_from_slice(&row.time_s.to_le_bytes());
        out.extend_from_slice(&(row.n as u64).to_le_bytes());
        out.extend_from_slice(&(columns as u32).to_le_bytes());
        for bin in row.values.chunks_exact(per_bin) {
            out.extend_from_slice(&level_db(self.scale, bin).to_le_bytes());
        }
    }
}

/// One bin's level in dB (`bin`: its value, or re and im with `Scale::Complex`). In f32 through
/// log2, the cheapest logarithm (this runs once per bin of every row); levels beyond f32's
/// range (above 385 dB) are clipped there.
fn level_db<T: Sample>(scale: Scale, bin: &[T]) -> f32 {
    /// 10·log10(2): dB per doubling of power.
    const DB_PER_OCTAVE: f32 = 3.010_3;
    let power_db = |p: f64| DB_PER_OCTAVE * (p.clamp(LEVEL_FLOOR, f32::MAX as f64) as f32).log2();
    let v = bin[0].into_f64();
    match scale {
        Scale::Db => v as f32,
        Scale::Magnitude => power_db(v * v),
        Scale::Power | Scale::Spectrum | Scale::Density | Scale::ScaledPower => power_db(v),
        Scale::Complex => {
            let im = bin.get(1).map_or(0.0, |x| x.into_f64());
            power_db(v * v + im * im)
        }
    }
}

/// Name of the colour bar for `scale`.
fn level_name(scale: Scale) -> &'static str {
    match scale {
        Scale::Magnitude | Scale::Db | Scale::Power | Scale::Complex | Scale::ScaledPower => {
            "dB (20·log10 |X|)"
        }
        Scale::Spectrum => "dB (10·log10 spectrum)",
        Scale::Density => "dB/Hz (10·log10 density)",
    }
}

/// An output that is a PNG file: takes level records (through `Write`), and in `finish` draws
/// the image and writes the file.
pub(crate) struct ImageFile {
    path: PathBuf,
    stream: StreamMeta,
    layout: Layout,
    db: Option<DbRange>,
    scale: Scale,
    /// The analysis in words, for the image's second title line.
    analysis: String,
    /// The file, once created (a single `--output` is created before the run).
    file: Option<File>,
    /// Bytes of a record not complete yet.
    pending: Vec<u8>,
    /// Filled from the first record on.
    spectrogram: Option<Spectrogram>,
    levels: Vec<f32>,
    finished: bool,
}

impl ImageFile {
    /// The image of `stream` to be written at `path`; nothing is created yet.
    pub(crate) fn new(
        path: &Path,
        stream: &StreamMeta,
        options: &PngOptions,
        analysis: &Analysis,
    ) -> Self {
        let size = options.size;
        ImageFile {
            path: path.to_path_buf(),
            stream: stream.clone(),
            layout: Layout::new(size.width, size.height),
            db: options.db,
            scale: analysis.scale,
            analysis: analysis.caption(stream.rate),
            file: None,
            pending: Vec::new(),
            spectrogram: None,
            levels: Vec::new(),
            finished: false,
        }
    }

    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// Whether the file was created before the run (`create_with`).
    pub(crate) fn is_created(&self) -> bool {
        self.file.is_some()
    }

    /// Whether any row (or part of one) has come.
    pub(crate) fn has_rows(&self) -> bool {
        self.spectrogram.is_some() || !self.pending.is_empty()
    }

    /// Takes the file, created (truncated) now so an unusable path is found before the run.
    pub(crate) fn create_with(&mut self, file: File) {
        self.file = Some(file);
    }

    /// Creates (truncates) the file if it was not created before the run.
    pub(crate) fn create(&mut self) -> io::Result<()> {
        if self.file.is_none() {
            self.file = Some(File::create(&self.path)?);
        }
        Ok(())
    }

    /// Takes every complete record out of `pending`.
    fn take_records(&mut self) -> io::Result<()> {
        let mut at = 0;
        while let Some((time_s, n, columns)) = record_head(&self.pending[at..]) {
            let body = at + RECORD_HEAD..at + RECORD_HEAD + 4 * columns;
            let Some(bytes) = self.pending.get(body.clone()) else {
                break; // the rest comes with the next write
            };
            self.levels.clear();
            let levels = bytes.chunks_exact(4);
            self.levels
                .extend(levels.map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]])));
            self.push_levels(time_s, n)?;
            at = body.end;
        }
        self.pending.drain(..at);
        Ok(())
    }

    /// Adds the row in `levels` (frame size `n`) to the spectrogram, made at the first row.
    fn push_levels(&mut self, time_s: f64, n: usize) -> io::Result<()> {
        let spectrogram = self.spectrogram.get_or_insert_with(|| {
            let axis =
                FrequencyAxis::new(&self.stream.column_frequencies(n), self.layout.plot.height);
            Spectrogram::new(self.layout.plot, axis, n as f64 / self.stream.rate)
        });
        let expected = spectrogram.axis().columns();
        if self.levels.len() != expected {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!(
                    "a row of {} columns after rows of {expected}",
                    self.levels.len()
                ),
            ));
        }
        spectrogram.push_row(time_s, &self.levels);
        Ok(())
    }

    /// Draws the image of the rows so far and writes the file (once; later calls do nothing).
    pub(crate) fn finish(&mut self) -> io::Result<()> {
        if std::mem::replace(&mut self.finished, true) {
            return Ok(());
        }
        let image = match self.spectrogram.take() {
            Some(s) => s.finish(),
            None => SpectrogramImage::empty(self.layout.plot),
        };
        let (db, rule) = self.colour_range(&image);
        let labels = Labels {
            title: self.title(),
            info: format!("{} · {}", self.analysis, describe_rows(&image)),
            colours: format!("colours: {rule}"),
            level: level_name(self.scale).to_string(),
        };
        let rgb = plot::draw(&image, &self.layout, &labels, db).map_err(io::Error::other)?;
        let facts = PlotFacts::new(&image, &self.layout, db, &rule);
        self.create()?;
        let file = self
            .file
            .take()
            .ok_or_else(|| io::Error::other("not created"))?;
        let mut out = BufWriter::new(file);
        plot::write_png(&mut out, &self.layout, &rgb, &labels.title, &facts)
            .map_err(io::Error::other)?;
        out.flush()
    }

    /// The colour range and how it was chosen.
    fn colour_range(&self, image: &SpectrogramImage) -> ((f64, f64), String) {
        if let Some(DbRange { min, max }) = self.db {
            return ((min, max), format!("{min} to {max} dB (--png-db)"));
        }
        let top = image.max_db().map_or(0.0, |m| (m as f64).ceil());
        let bottom = top - DEFAULT_DB_RANGE;
        let rule = format!("{bottom} to {top} dB (the maximum and {DEFAULT_DB_RANGE} dB below)");
        ((bottom, top), rule)
    }

    fn title(&self) -> String {
        let input = match self.stream.input.as_str() {
            "-" => "stdin",
            other => other,
        };
        match self.stream.channel {
            Some(c) => format!("{input}, channel {c}"),
            None => input.to_string(),
        }
    }
}

/// How many rows the image shows and how they were reduced.
fn describe_rows(image: &SpectrogramImage) -> String {
    let per_pixel = image.rows as f64 / image.plot.width as f64;
    match image.rows {
        0 => "no frames".to_string(),
        1 => "1 frame".to_string(),
        rows if per_pixel > 1.0 => format!("{rows} frames, max of ~{per_pixel:.1} per pixel"),
        rows => format!("{rows} frames"),
    }
}

impl Write for ImageFile {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.pending.extend_from_slice(buf);
        self.take_records()?;
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::frame::FrameSize;

    #[test]
    fn sizes_parse_and_bad_ones_say_what_is_expected() {
        assert_eq!(
            "800x400".parse::<PngSize>(),
            Ok(PngSize {
                width: 800,
                height: 400
            })
        );
        for bad in [
            "800",
            "800x",
            "x400",
            "-800x400",
            "800.5x400",
            "100x100",
            "20000x400",
            "16384x16384",
        ] {
            let e = bad.parse::<PngSize>().expect_err(bad);
            assert!(e.contains("WxH") && e.contains(bad), "{e}");
        }
    }

    #[test]
    fn db_ranges_parse() {
        assert_eq!(
            "-120:0".parse::<DbRange>(),
            Ok(DbRange {
                min: -120.0,
                max: 0.0
            })
        );
        for bad in ["0:-10", "5:5", "a:b", "-10"] {
            assert!(bad.parse::<DbRange>().is_err(), "{bad}");
        }
    }

    #[test]
    fn records_split_across_writes_are_all_drawn() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("o.png");
        let options = crate::app::config::Options {
            file: vec!["in.wav".into()],
            format: Some(super::super::OutputFormat::Png),
            output: Some(path.clone()),
            frame: Some(FrameSize::Fixed(8)),
            ..Default::default()
        };
        let settings = crate::app::config::Settings::from_options(options)
            .expect("settings")
            .run;
        let stream = StreamMeta {
            id: 0,
            input: "in.wav".into(),
            channel: None,
            rate: 8.0,
            kind: crate::types::InputKind::Real,
            fftshift: false,
            columns: None,
            tuning: None,
        };
        let encoder = LevelEncoder {
            scale: Scale::Magnitude,
        };
        let mut bytes = Vec::new();
        for frame in 0..3u64 {
            let values = [1.0f32, 2.0, 3.0, 4.0, 5.0];
            let row = SpectrumRow {
                stream: &stream,
                frame,
                time_s: frame as f64,
                n: 8,
                frames: 1,
                values: &values,
            };
            Encoder::<f32>::encode(&encoder, &row, &mut bytes);
        }
        let mut image = ImageFile::new(&path, &stream, &settings.output.png, &settings.analysis);
        for chunk in bytes.chunks(7) {
            image.write_all(chunk).expect("write");
        }
        assert!(image.pending.is_empty());
        image.finish().expect("finish");
        let decoder = png::Decoder::new(io::BufReader::new(File::open(&path).expect("png")));
        let info = decoder.read_info().expect("png").info().clone();
        assert_eq!((info.width, info.height), (1200, 600));
        let rows = info
            .uncompressed_latin1_text
            .iter()
            .find(|c| c.keyword == "fftd:rows");
        assert_eq!(rows.map(|c| c.text.as_str()), Some("3"));
    }

    #[test]
    fn every_scale_gives_the_same_db_for_the_same_bin() {
        let magnitude = 10.0f64; // 20 dB
        let cases: [(Scale, Vec<f64>); 4] = [
            (Scale::Magnitude, vec![magnitude]),
            (Scale::Db, vec![20.0]),
            (Scale::Power, vec![magnitude * magnitude]),
            (Scale::Complex, vec![6.0, 8.0]),
        ];
        for (scale, bin) in cases {
            assert!((level_db(scale, &bin) - 20.0).abs() < 1e-5, "{scale}");
        }
        assert!((level_db(Scale::Magnitude, &[0.0f64]) + 300.0).abs() < 1e-3);
        assert!(
            (level_db(Scale::Power, &[1e300f64]) - 385.3).abs() < 0.1,
            "clipped"
        );
    }
}
