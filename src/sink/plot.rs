//! Draws a reduced spectrogram (`spectrogram::SpectrogramImage`) as a PNG: the heat map in the
//! plot area (viridis, dB), axes with tick labels and their names (time in s along the bottom,
//! frequency in Hz/kHz/MHz up the left), a colour bar labelled in dB on the right and a title
//! band on top, all with plotters. Text uses DejaVu Sans embedded in the binary
//! (`assets/fonts/`), so no system font is needed at run time.
//!
//! The layout is fixed pixel sizes around the plot (`Layout`), so where the plot area lies is
//! known before drawing (the spectrogram is reduced to its size while the rows come) and can be
//! told to readers: the PNG carries it, the axes' ranges and the dB range in `fftd:*` tEXt
//! chunks (`PlotFacts`).

use super::spectrogram::{FrequencyScale, PlotSize, SpectrogramImage};
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};
use std::io::Write;
use std::sync::OnceLock;

/// DejaVu Sans (Bitstream Vera licence, `assets/fonts/LICENSE-DejaVu.txt`).
static FONT: &[u8] = include_bytes!("../../assets/fonts/DejaVuSans.ttf");

/// Height of the title band on top.
const TITLE_BAND: u32 = 50;
/// Space between the title band and the plot.
const PLOT_TOP_MARGIN: u32 = 6;
/// Space right of the plot, before the colour bar.
const PLOT_RIGHT_MARGIN: u32 = 14;
/// Left of the plot: frequency tick labels and the axis name.
const Y_LABEL_AREA: u32 = 84;
/// Below the plot: time tick labels and the axis name.
const X_LABEL_AREA: u32 = 50;
/// The colour bar's column: a gap, the bar, its labels and name.
const BAR_GAP: u32 = 10;
const BAR_WIDTH: u32 = 22;
const BAR_LABEL_AREA: u32 = 80;
const BAR_AREA: u32 = BAR_GAP + BAR_WIDTH + BAR_LABEL_AREA;

/// Pixels a side may have, and in all (64 Mpx: 192 MiB of RGB while it is drawn).
pub(crate) const MIN_WIDTH: u32 = 320;
pub(crate) const MIN_HEIGHT: u32 = 240;
pub(crate) const MAX_SIDE: u32 = 16384;
pub(crate) const MAX_PIXELS: u64 = 1 << 26;

/// Colour of plot pixels with no data (a gap in time, a band with no bin).
const NO_DATA: RGBColor = RGBColor(225, 225, 225);
const TEXT_GREY: RGBColor = RGBColor(80, 80, 80);
const FONT_FAMILY: &str = "sans-serif";

/// Where the plot area lies in an image of a given size.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Layout {
    pub width: u32,
    pub height: u32,
    /// Plot area: left, top (pixels from the image's top-left corner), width, height.
    pub plot_x: u32,
    pub plot_y: u32,
    pub plot: PlotSize,
}

impl Layout {
    /// The layout of a `width` × `height` image (at least `MIN_WIDTH` × `MIN_HEIGHT`).
    pub(crate) fn new(width: u32, height: u32) -> Self {
        let plot_x = Y_LABEL_AREA;
        let plot_y = TITLE_BAND + PLOT_TOP_MARGIN;
        let plot_width = width.saturating_sub(plot_x + PLOT_RIGHT_MARGIN + BAR_AREA);
        let plot_height = height.saturating_sub(plot_y + X_LABEL_AREA);
        Layout {
            width,
            height,
            plot_x,
            plot_y,
            plot: PlotSize {
                width: plot_width.max(1) as usize,
                height: plot_height.max(1) as usize,
            },
        }
    }
}

/// The texts around the plot.
pub(crate) struct Labels {
    /// Title (the input).
    pub title: String,
    /// Second line: the analysis (rate, frame, hop, window, frames drawn).
    pub info: String,
    /// What the colours span and why, beside the title.
    pub colours: String,
    /// Name of the colour bar (e.g. `dB (20·log10 |X|)`).
    pub level: String,
}

/// Facts about a drawn image that a reader may need, as PNG text chunks.
pub(crate) struct PlotFacts {
    pub chunks: Vec<(String, String)>,
}

impl PlotFacts {
    /// The plot area, the axes' ranges and the colour range of `image` drawn with `layout`.
    pub(crate) fn new(
        image: &SpectrogramImage,
        layout: &Layout,
        db: (f64, f64),
        db_rule: &str,
    ) -> Self {
        let plot = format!(
            "{} {} {} {}",
            layout.plot_x, layout.plot_y, layout.plot.width, layout.plot.height
        );
        let frequency = match &image.frequency {
            FrequencyScale::Linear { bottom, top } => format!("linear {bottom} {top}"),
            FrequencyScale::Columns { hz } => {
                let hz: Vec<String> = hz.iter().map(f64::to_string).collect();
                format!("columns {}", hz.join(" "))
            }
        };
        let chunks = vec![
            ("fftd:plot".into(), plot),
            (
                "fftd:time-s".into(),
                format!("{} {}", image.time.0, image.time.1),
            ),
            ("fftd:frequency-hz".into(), frequency),
            ("fftd:db".into(), format!("{} {}", db.0, db.1)),
            ("fftd:db-rule".into(), db_rule.into()),
            ("fftd:rows".into(), image.rows.to_string()),
            (
                "fftd:rows-per-column".into(),
                image.rows_per_column.to_string(),
            ),
        ];
        PlotFacts { chunks }
    }
}

/// Registers the embedded font with plotters, once.
fn register_font() -> Result<(), String> {
    static REGISTERED: OnceLock<Result<(), String>> = OnceLock::new();
    REGISTERED
        .get_or_init(|| {
            plotters::style::register_font(FONT_FAMILY, FontStyle::Normal, FONT)
                .map_err(|_| "the embedded font does not load".to_string())
        })
        .clone()
}

/// Draws `image` in an RGB buffer of `layout`'s size, colours spanning `db` (low, high).
pub(crate) fn draw(
    image: &SpectrogramImage,
    layout: &Layout,
    labels: &Labels,
    db: (f64, f64),
) -> Result<Vec<u8>, String> {
    register_font()?;
    let mut rgb = vec![255u8; layout.width as usize * layout.height as usize * 3];
    {
        let root =
            BitMapBackend::with_buffer(&mut rgb, (layout.width, layout.height)).into_drawing_area();
        let (title_band, body) = root.split_vertically(TITLE_BAND);
        draw_title(&title_band, labels).map_err(drawing)?;
        let (chart_area, bar_area) = body.split_horizontally(layout.width - BAR_AREA);
        draw_chart(&chart_area, image, layout, db)?;
        draw_colour_bar(&bar_area, db, &labels.level, layout).map_err(drawing)?;
        root.present().map_err(drawing)?;
    }
    Ok(rgb)
}

fn drawing(e: impl std::fmt::Display) -> String {
    format!("drawing the image: {e}")
}

type Area<'a> = DrawingArea<BitMapBackend<'a>, Shift>;
type DrawResult<'a> =
    Result<(), DrawingAreaErrorKind<<BitMapBackend<'a> as DrawingBackend>::ErrorType>>;

fn draw_title<'a>(band: &Area<'a>, labels: &Labels) -> DrawResult<'a> {
    let (width, _) = band.dim_in_pixel();
    let (left, right) = (Y_LABEL_AREA as i32, width as i32 - TITLE_RIGHT_INSET);
    let grey = TextStyle::from((FONT_FAMILY, 13).into_font()).color(&TEXT_GREY);
    // the title first: the colour note takes at most half of the line
    let colours = fit(band, &labels.colours, &grey, (right - left) / 2, Elide::End)?;
    let colours_width = band.estimate_text_size(&colours, &grey)?.0 as i32;
    let right_aligned = grey.pos(Pos::new(HPos::Right, VPos::Top));
    band.draw_text(&colours, &right_aligned, (right, 12))?;
    let title_style = TextStyle::from((FONT_FAMILY, 18).into_font()).color(&BLACK);
    let room = right - left - colours_width - TITLE_GAP;
    let title = fit(band, &labels.title, &title_style, room, Elide::Start)?;
    band.draw_text(&title, &title_style, (left, 8))?;
    let info = fit(band, &labels.info, &grey, right - left, Elide::End)?;
    band.draw_text(&info, &grey, (left, 31))
}

/// Space between the title band's text and the image's right edge, and between the title and
/// the colour note beside it.
const TITLE_RIGHT_INSET: i32 = 10;
const TITLE_GAP: i32 = 16;

/// Which end of a text too long for its place gives way to "…".
#[derive(Clone, Copy)]
enum Elide {
    /// Keep the end (a path's file name).
    Start,
    /// Keep the start.
    End,
}

/// `text`, shortened with "…" at one end until it is at most `room` pixels wide in `style`.
fn fit<'a>(
    area: &Area<'a>,
    text: &str,
    style: &TextStyle<'_>,
    room: i32,
    elide: Elide,
) -> Result<String, DrawingAreaErrorKind<<BitMapBackend<'a> as DrawingBackend>::ErrorType>> {
    let chars: Vec<char> = text.chars().collect();
    let mut keep = chars.len();
    let mut candidate = text.to_string();
    while keep > 0 && area.estimate_text_size(&candidate, style)?.0 as i32 > room {
        keep -= 1;
        candidate = match elide {
            Elide::Start => std::iter::once('…')
                .chain(chars[chars.len() - keep..].iter().copied())
                .collect(),
            Elide::End => chars[..keep]
                .iter()
                .copied()
                .chain(std::iter::once('…'))
                .collect(),
        };
    }
    Ok(candidate)
}

fn draw_chart(
    area: &Area<'_>,
    image: &SpectrogramImage,
    layout: &Layout,
    db: (f64, f64),
) -> Result<(), String> {
    let (t0, t1) = image.time;
    let (f0, f1) = image.frequency.extent();
    let mut chart = ChartBuilder::on(area)
        .margin_top(PLOT_TOP_MARGIN)
        .margin_right(PLOT_RIGHT_MARGIN)
        .x_label_area_size(X_LABEL_AREA)
        .y_label_area_size(Y_LABEL_AREA)
        .build_cartesian_2d(t0..t1, f0..f1)
        .map_err(drawing)?;
    let (xs, ys) = chart.plotting_area().get_pixel_range();
    let drawn = (xs.start, ys.start, xs.len(), ys.len());
    let planned = (
        layout.plot_x as i32,
        layout.plot_y as i32,
        layout.plot.width,
        layout.plot.height,
    );
    if drawn != planned {
        return Err(format!(
            "plot area {drawn:?} is not where it was planned {planned:?}"
        ));
    }
    let heat = heat_map(image, db);
    let size = (layout.plot.width as u32, layout.plot.height as u32);
    let element = BitMapElement::with_owned_buffer((t0, f1), size, heat)
        .ok_or_else(|| "heat map buffer of the wrong size".to_string())?;
    chart.plotting_area().draw(&element).map_err(drawing)?;
    let unit = FrequencyUnit::for_scale(&image.frequency);
    let frequency_label = |f: &f64| unit.tick_label(*f, &image.frequency);
    let time_label = |t: &f64| tick_number(*t);
    chart
        .configure_mesh()
        .disable_mesh()
        .x_labels((layout.plot.width / 90).max(2))
        .y_labels((layout.plot.height / 45).max(2))
        .x_label_formatter(&time_label)
        .y_label_formatter(&frequency_label)
        .x_desc("Time (s)")
        .label_style((FONT_FAMILY, 13))
        .axis_desc_style((FONT_FAMILY, 15))
        .draw()
        .map_err(drawing)?;
    let middle = (PLOT_TOP_MARGIN as usize + layout.plot.height / 2) as i32;
    let name = format!("Frequency ({})", unit.name);
    draw_upward_text(area, &name, (AXIS_NAME_INSET, middle)).map_err(drawing)
}

/// Distance of a vertical axis name's centre from the image edge next to it.
const AXIS_NAME_INSET: i32 = 12;

/// Draws `text` reading bottom to top, centred on `centre` (plotters' own placement of rotated
/// axis names cuts them off with the ab_glyph font).
fn draw_upward_text<'a>(area: &Area<'a>, text: &str, centre: (i32, i32)) -> DrawResult<'a> {
    let style = TextStyle::from((FONT_FAMILY, 15).into_font())
        .color(&BLACK)
        .transform(FontTransform::Rotate270)
        .pos(Pos::new(HPos::Center, VPos::Center));
    area.draw_text(text, &style, centre)
}

fn draw_colour_bar<'a>(
    area: &Area<'a>,
    db: (f64, f64),
    name: &str,
    layout: &Layout,
) -> DrawResult<'a> {
    let mut bar = ChartBuilder::on(area)
        .margin_top(PLOT_TOP_MARGIN)
        .margin_left(BAR_GAP)
        .x_label_area_size(X_LABEL_AREA)
        .right_y_label_area_size(BAR_LABEL_AREA)
        .build_cartesian_2d(0f64..1f64, db.0..db.1)?;
    let steps = layout.plot.height.max(2);
    let step = (db.1 - db.0) / steps as f64;
    bar.draw_series((0..steps).map(|i| {
        let lo = db.0 + i as f64 * step;
        let colour = viridis(((i as f64 + 0.5) / steps as f64) as f32);
        Rectangle::new([(0.0, lo), (1.0, lo + step)], colour.filled())
    }))?;
    let db_label = |v: &f64| tick_number(*v);
    bar.configure_mesh()
        .disable_mesh()
        .disable_x_axis()
        .y_labels((layout.plot.height / 45).max(2))
        .y_label_formatter(&db_label)
        .label_style((FONT_FAMILY, 13))
        .draw()?;
    let (width, _) = area.dim_in_pixel();
    let middle = (PLOT_TOP_MARGIN as usize + layout.plot.height / 2) as i32;
    draw_upward_text(area, name, (width as i32 - AXIS_NAME_INSET, middle))
}

/// The plot's pixels in RGB, top row first: each value's colour on the `db` scale (values
/// outside it take the end colours), `NO_DATA` where there is none.
fn heat_map(image: &SpectrogramImage, db: (f64, f64)) -> Vec<u8> {
    let palette: Vec<RGBColor> = (0..256).map(|i| viridis(i as f32 / 255.0)).collect();
    let span = (db.1 - db.0).max(f64::MIN_POSITIVE);
    let mut rgb = Vec::with_capacity(image.values.len() * 3);
    for &v in &image.values {
        let RGBColor(r, g, b) = if v.is_finite() {
            let t = ((v as f64 - db.0) / span).clamp(0.0, 1.0);
            palette[(t * 255.0).round() as usize]
        } else {
            NO_DATA
        };
        rgb.extend_from_slice(&[r, g, b]);
    }
    rgb
}

fn viridis(t: f32) -> RGBColor {
    ViridisRGB::get_color(t)
}

/// A tick value as a person writes it: no trailing zeros, at most 3 decimals.
fn tick_number(v: f64) -> String {
    let text = format!("{v:.3}");
    let text = text.trim_end_matches('0').trim_end_matches('.');
    match text {
        "-0" => "0".to_string(),
        t => t.to_string(),
    }
}

/// The unit of the frequency axis: Hz, or kHz/MHz for high frequencies.
struct FrequencyUnit {
    name: &'static str,
    hz: f64,
}

impl FrequencyUnit {
    fn for_scale(scale: &FrequencyScale) -> Self {
        let highest = match scale {
            FrequencyScale::Linear { bottom, top } => bottom.abs().max(top.abs()),
            FrequencyScale::Columns { hz } => hz.iter().fold(0.0, |m: f64, f| m.max(f.abs())),
        };
        match highest {
            h if h >= 1e7 => FrequencyUnit {
                name: "MHz",
                hz: 1e6,
            },
            h if h >= 1e4 => FrequencyUnit {
                name: "kHz",
                hz: 1e3,
            },
            _ => FrequencyUnit {
                name: "Hz",
                hz: 1.0,
            },
        }
    }

    /// The label at axis position `at`: its frequency on a linear axis, the nearest column's on
    /// a column axis (3 significant digits).
    fn tick_label(&self, at: f64, scale: &FrequencyScale) -> String {
        match scale {
            FrequencyScale::Linear { .. } => tick_number(at / self.hz),
            FrequencyScale::Columns { hz } => {
                let k = (at.round().max(0.0) as usize).min(hz.len().saturating_sub(1));
                hz.get(k)
                    .map_or(String::new(), |f| significant(f / self.hz, 3))
            }
        }
    }
}

/// `v` rounded to `digits` significant digits, written without an exponent.
fn significant(v: f64, digits: i32) -> String {
    if v == 0.0 || !v.is_finite() {
        return tick_number(v);
    }
    let magnitude = v.abs().log10().floor() as i32;
    let decimals = (digits - 1 - magnitude).max(0) as usize;
    let text = format!("{v:.decimals$}");
    match text.contains('.') {
        true => text.trim_end_matches('0').trim_end_matches('.').to_string(),
        false => text,
    }
}

/// Writes an RGB image as PNG with `facts` (and `title`, UTF-8) as text chunks.
pub(crate) fn write_png(
    out: impl Write,
    layout: &Layout,
    rgb: &[u8],
    title: &str,
    facts: &PlotFacts,
) -> Result<(), png::EncodingError> {
    let mut encoder = png::Encoder::new(out, layout.width, layout.height);
    encoder.set_color(png::ColorType::Rgb);
    encoder.set_depth(png::BitDepth::Eight);
    encoder.set_compression(png::Compression::High);
    let software = format!("fftd {}", env!("CARGO_PKG_VERSION"));
    encoder.add_text_chunk("Software".into(), software)?;
    encoder.add_itxt_chunk("Title".into(), title.into())?;
    for (key, value) in &facts.chunks {
        encoder.add_text_chunk(key.clone(), value.clone())?;
    }
    let mut writer = encoder.write_header()?;
    writer.write_image_data(rgb)?;
    writer.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_plot_lies_where_the_layout_says_at_every_size() {
        for (w, h) in [
            (MIN_WIDTH, MIN_HEIGHT),
            (1200, 600),
            (801, 399),
            (3000, 2000),
        ] {
            let layout = Layout::new(w, h);
            let image = SpectrogramImage::empty(layout.plot);
            let labels = Labels {
                title: "a title far too long for the smallest image, so it is cut short".into(),
                info: "i".into(),
                colours: "colours".into(),
                level: "dB".into(),
            };
            // draw checks the plotting area against the layout
            let rgb = draw(&image, &layout, &labels, (-100.0, 0.0)).expect("draws");
            assert_eq!(rgb.len(), (w * h * 3) as usize);
            let at = |x: u32, y: u32| {
                let i = ((y * w + x) * 3) as usize;
                RGBColor(rgb[i], rgb[i + 1], rgb[i + 2])
            };
            let (x0, y0) = (layout.plot_x, layout.plot_y);
            let (pw, ph) = (layout.plot.width as u32, layout.plot.height as u32);
            assert_eq!(at(x0 + pw / 2, y0 + ph / 2), NO_DATA, "{w}x{h}");
            assert_eq!(at(x0 + pw - 1, y0), NO_DATA, "{w}x{h}");
        }
    }

    #[test]
    fn the_layout_matches_plotters_across_many_sizes() {
        // draw() fails when plotters puts the plotting area anywhere but where Layout planned it
        for i in 0..40u32 {
            let (w, h) = (MIN_WIDTH + 43 * i, MIN_HEIGHT + 23 * i);
            let layout = Layout::new(w, h);
            let image = SpectrogramImage::empty(layout.plot);
            let labels = Labels {
                title: "t".into(),
                info: "i".into(),
                colours: "c".into(),
                level: "dB".into(),
            };
            assert!(
                draw(&image, &layout, &labels, (-100.0, 0.0)).is_ok(),
                "{w}x{h}"
            );
        }
    }

    #[test]
    fn tick_labels_read_like_numbers() {
        assert_eq!(tick_number(1.5), "1.5");
        assert_eq!(tick_number(2.0), "2");
        assert_eq!(tick_number(-0.0001), "0");
        assert_eq!(significant(1234.5678, 3), "1235");
        assert_eq!(significant(0.012345, 3), "0.0123");
        assert_eq!(significant(12.0, 3), "12");
    }
}
