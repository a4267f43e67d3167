//! `--format png` end to end: real runs of the binary on generated signals; the test decodes the
//! PNG and finds the tone, the burst and the axes where they must be. Where the plot lies and what
//! its axes span is read from the image's `fftd:*` text chunks (pixel column x of the plot covers
//! [t0 + x·(t1−t0)/w, …), pixel row j from the bottom [f0 + j·(f1−f0)/h, …)). Viridis' green
//! channel rises monotonically with the level, so it serves as the level of a pixel.

use crate::common;

use common::{assert_clean_error, fftd, run, stderr_text};
use std::collections::HashMap;
use std::f64::consts::PI;
use std::io::{Read, Write};
use std::path::Path;
use std::process::Stdio;

/// A decoded PNG and its text chunks.
struct Image {
    width: usize,
    height: usize,
    rgb: Vec<u8>,
    text: HashMap<String, String>,
}

/// The plot area and its axes, from the image's text chunks.
struct Plot {
    x: usize,
    y: usize,
    width: usize,
    height: usize,
    time: (f64, f64),
    /// Bottom and top edge in Hz (a linear axis).
    frequency: (f64, f64),
}

impl Image {
    fn read(path: &Path) -> Image {
        let file = std::fs::File::open(path).expect("png exists");
        let mut reader = png::Decoder::new(std::io::BufReader::new(file))
            .read_info()
            .expect("a PNG");
        let mut rgb = vec![0; reader.output_buffer_size().expect("size")];
        let frame = reader.next_frame(&mut rgb).expect("pixels");
        assert_eq!(frame.color_type, png::ColorType::Rgb);
        assert_eq!(frame.bit_depth, png::BitDepth::Eight);
        let info = reader.info();
        let mut text: HashMap<String, String> = info
            .uncompressed_latin1_text
            .iter()
            .map(|c| (c.keyword.clone(), c.text.clone()))
            .collect();
        for chunk in &info.utf8_text {
            text.insert(chunk.keyword.clone(), chunk.get_text().expect("utf8 text"));
        }
        Image {
            width: frame.width as usize,
            height: frame.height as usize,
            rgb,
            text,
        }
    }

    fn numbers(&self, key: &str) -> Vec<f64> {
        let text = self
            .text
            .get(key)
            .unwrap_or_else(|| panic!("no {key} chunk"));
        text.split_whitespace()
            .filter_map(|w| w.parse().ok())
            .collect()
    }

    fn plot(&self) -> Plot {
        let p = self.numbers("fftd:plot");
        let t = self.numbers("fftd:time-s");
        let frequency = &self.text["fftd:frequency-hz"];
        assert!(frequency.starts_with("linear "), "{frequency}");
        let f = self.numbers("fftd:frequency-hz");
        Plot {
            x: p[0] as usize,
            y: p[1] as usize,
            width: p[2] as usize,
            height: p[3] as usize,
            time: (t[0], t[1]),
            frequency: (f[0], f[1]),
        }
    }

    fn pixel(&self, x: usize, y: usize) -> [u8; 3] {
        let i = (y * self.width + x) * 3;
        [self.rgb[i], self.rgb[i + 1], self.rgb[i + 2]]
    }

    /// The level (green channel) of plot pixel column `x`, row `j` counted from the bottom.
    fn level(&self, plot: &Plot, x: usize, j: usize) -> u8 {
        self.pixel(plot.x + x, plot.y + plot.height - 1 - j)[1]
    }

    /// The loudest pixel row (from the bottom) of plot column `x`.
    fn loudest_row(&self, plot: &Plot, x: usize) -> usize {
        (0..plot.height)
            .max_by_key(|&j| self.level(plot, x, j))
            .expect("rows")
    }
}

impl Plot {
    /// Centre frequency of pixel row `j` (from the bottom).
    fn hz_of_row(&self, j: usize) -> f64 {
        let (f0, f1) = self.frequency;
        f0 + (j as f64 + 0.5) * (f1 - f0) / self.height as f64
    }

    /// Pixel column whose interval holds time `t`.
    fn column_of(&self, t: f64) -> usize {
        let (t0, t1) = self.time;
        ((t - t0) / (t1 - t0) * self.width as f64).floor() as usize
    }

    fn hz_per_row(&self) -> f64 {
        (self.frequency.1 - self.frequency.0) / self.height as f64
    }
}

/// Writes 16-bit mono WAV at `rate` Hz.
fn write_wav(path: &Path, rate: u32, samples: &[f64]) {
    let spec = hound::WavSpec {
        channels: 1,
        sample_rate: rate,
        bits_per_sample: 16,
        sample_format: hound::SampleFormat::Int,
    };
    let mut w = hound::WavWriter::create(path, spec).expect("wav");
    for &s in samples {
        w.write_sample((s * 32767.0).round() as i16)
            .expect("sample");
    }
    w.finalize().expect("finalize");
}

/// A sine of `hz` at `rate` Hz for samples `range`, amplitude `amplitude` (0 elsewhere: added to
/// `into`).
fn add_tone(into: &mut [f64], rate: f64, hz: f64, amplitude: f64, range: std::ops::Range<usize>) {
    for (i, v) in into[range.clone()].iter_mut().enumerate() {
        *v += amplitude * (2.0 * PI * hz * (range.start + i) as f64 / rate).sin();
    }
}

fn s(p: &Path) -> &str {
    p.to_str().expect("utf8 path")
}

#[test]
fn a_tone_that_changes_halfway_is_where_it_must_be_and_the_size_is_as_asked() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (wav, out) = (dir.path().join("tone.wav"), dir.path().join("spec.png"));
    let rate = 8000.0;
    let mut x = vec![0.0; 16_000]; // 2 s: 1 kHz, then 2.5 kHz
    add_tone(&mut x, rate, 1000.0, 0.5, 0..8000);
    add_tone(&mut x, rate, 2500.0, 0.5, 8000..16_000);
    write_wav(&wav, 8000, &x);
    let args = ["--file", s(&wav), "--frame", "256", "--format", "png"];
    let run_out = run(&[&args[..], &["--output", s(&out), "--png-size", "800x400"]].concat());
    assert!(run_out.status.success(), "{}", stderr_text(&run_out));
    let image = Image::read(&out);
    assert_eq!((image.width, image.height), (800, 400));
    let plot = image.plot();
    assert!(plot.x > 0 && plot.y > 0, "room for the labels");
    assert!(plot.x + plot.width < 800 && plot.y + plot.height < 400);
    assert!(
        plot.width > 500 && plot.height > 250,
        "most of the image is plot"
    );
    // real input: 0 Hz at the bottom edge, Nyquist at the top; time from 0 to the end
    assert_eq!(plot.frequency, (0.0, 4000.0));
    // 62.5 frames of 256: 63 rows, the last one padded, each 32 ms
    assert_eq!(plot.time.0, 0.0);
    assert!((plot.time.1 - 2.016).abs() < 1e-9, "{:?}", plot.time);
    let tolerance = plot.hz_per_row() + 8000.0 / 256.0 / 2.0;
    for (t, hz) in [(0.2, 1000.0), (0.7, 1000.0), (1.3, 2500.0), (1.9, 2500.0)] {
        let row = image.loudest_row(&plot, plot.column_of(t));
        let got = plot.hz_of_row(row);
        assert!(
            (got - hz).abs() <= tolerance,
            "at {t} s: {got} Hz, want {hz}"
        );
    }
    // the change shows within a frame (32 ms) of 1 s
    let at_1k = plot.frequency_row(1000.0);
    let last_1k = (0..plot.width)
        .filter(|&x| image.loudest_row(&plot, x).abs_diff(at_1k) <= 1)
        .max()
        .expect("1 kHz columns");
    let seconds =
        plot.time.0 + (last_1k as f64 + 0.5) * (plot.time.1 - plot.time.0) / plot.width as f64;
    assert!((seconds - 1.0).abs() < 0.04, "1 kHz ends at {seconds} s");
    // text was drawn: dark pixels in the title band, left of the plot (tick labels) and below it
    let dark = |x0: usize, x1: usize, y0: usize, y1: usize| {
        (y0..y1).any(|y| (x0..x1).any(|x| image.pixel(x, y).iter().all(|&c| c < 100)))
    };
    assert!(dark(plot.x, plot.x + 200, 0, plot.y - 10), "title");
    assert!(
        dark(0, plot.x - 5, plot.y, plot.y + plot.height),
        "frequency labels"
    );
    assert!(
        dark(plot.x, plot.x + plot.width, plot.y + plot.height + 5, 400),
        "time labels"
    );
    assert_eq!(image.text["Title"], s(&wav));
}

impl Plot {
    /// The pixel row (from the bottom) that holds `hz`.
    fn frequency_row(&self, hz: f64) -> usize {
        ((hz - self.frequency.0) / self.hz_per_row()).floor() as usize
    }
}

#[test]
fn a_one_frame_burst_in_a_long_input_shows_at_its_time() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (wav, out) = (dir.path().join("long.wav"), dir.path().join("long.png"));
    let rate = 8000;
    // 64 s of faint 500 Hz, frames of 64: 8000 frames for a plot of about 500 pixel columns (and
    // 1 MiB as npy rows: enough to be placed, were it npy);
    // one frame (64 samples, frame-aligned) of loud 3 kHz at 13 s
    let mut x = vec![0.0; 64 * rate];
    let len = x.len();
    add_tone(&mut x, rate as f64, 500.0, 0.001, 0..len);
    let burst = 13 * rate; // early: its column is merged three more times as the input goes on
    add_tone(&mut x, rate as f64, 3000.0, 0.8, burst..burst + 64);
    write_wav(&wav, rate as u32, &x);
    // a range-read WAV into a file: f32/npy rows would be placed by the encoders; an image never
    let out_run = fftd()
        .env("RUST_LOG", "fftd=debug")
        .args(["--device", "cpu"])
        .args([
            "--file",
            s(&wav),
            "--frame",
            "64",
            "--format",
            "png",
            "--output",
            s(&out),
            "--png-size",
            "700x400",
            "--png-db",
            "-100:30",
        ])
        .output()
        .expect("fftd runs");
    let log = stderr_text(&out_run);
    assert!(out_run.status.success(), "{log}");
    assert!(!log.contains("rows placed"), "{log}");
    let image = Image::read(&out);
    let plot = image.plot();
    assert_eq!(image.numbers("fftd:rows"), vec![8000.0]);
    assert!(
        image.numbers("fftd:rows-per-column")[0] >= 8.0,
        "frames were reduced"
    );
    let row_3k = plot.frequency_row(3000.0);
    // the burst's own level (22 dB) is near the top of the fixed colour range: a mean over the
    // frames of a pixel column would have sunk it to the bottom
    let loud: Vec<usize> = (0..plot.width)
        .filter(|&x| image.level(&plot, x, row_3k) > 200)
        .collect();
    let want = plot.column_of(13.004);
    assert!(!loud.is_empty(), "the burst is lost");
    assert!(
        loud.iter().all(|&x| x.abs_diff(want) <= 1),
        "3 kHz loud at columns {loud:?}, want {want}"
    );
    // elsewhere the faint 500 Hz tone is the loudest row
    let quiet_column = plot.column_of(40.0);
    let row = image.loudest_row(&plot, quiet_column);
    assert!((plot.hz_of_row(row) - 500.0).abs() <= plot.hz_per_row() + 62.5);
}

#[test]
fn output_dir_writes_one_png_per_stream() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().join("out");
    std::fs::create_dir(&out).expect("mkdir");
    let mut files = Vec::new();
    for (name, hz) in [("low", 700.0), ("high", 3100.0)] {
        let mut x = vec![0.0; 8000];
        add_tone(&mut x, 8000.0, hz, 0.5, 0..8000);
        let path = dir.path().join(format!("{name}.wav"));
        write_wav(&path, 8000, &x);
        files.push((path, hz));
    }
    let result = run(&[
        "--file",
        s(&files[0].0),
        "--file",
        s(&files[1].0),
        "--frame",
        "512",
        "--format",
        "png",
        "--output-dir",
        s(&out),
        "--png-size",
        "640x320",
    ]);
    assert!(result.status.success(), "{}", stderr_text(&result));
    let mut names: Vec<String> = std::fs::read_dir(&out)
        .expect("dir")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(names, ["high.png", "low.png"]);
    for (path, hz) in &files {
        let stem = path.file_stem().expect("stem").to_string_lossy();
        let image = Image::read(&out.join(format!("{stem}.png")));
        assert_eq!((image.width, image.height), (640, 320));
        let plot = image.plot();
        let row = image.loudest_row(&plot, plot.width / 2);
        let got = plot.hz_of_row(row);
        assert!(
            (got - hz).abs() <= plot.hz_per_row() + 8.0,
            "{stem}: {got} Hz, want {hz}"
        );
        assert_eq!(image.text["Title"], s(path));
    }
}

#[test]
fn complex_input_has_negative_frequencies_below_zero() {
    let dir = tempfile::tempdir().expect("tempdir");
    let iq = dir.path().join("iq.cf32");
    // e^(-j·2π·1500·t) at 8 kHz: a tone at -1500 Hz
    let bytes: Vec<u8> = (0..16_384)
        .flat_map(|i| {
            let phase = -2.0 * PI * 1500.0 * i as f64 / 8000.0;
            [phase.cos() as f32, phase.sin() as f32]
        })
        .flat_map(f32::to_le_bytes)
        .collect();
    std::fs::write(&iq, bytes).expect("write");
    for shift in [true, false] {
        let out = dir.path().join(format!("iq-{shift}.png"));
        let mut args = vec![
            "--file",
            s(&iq),
            "--rate",
            "8000",
            "--frame",
            "256",
            "--format",
            "png",
            "--output",
            s(&out),
        ];
        if shift {
            args.push("--fftshift");
        }
        let result = run(&args);
        assert!(result.status.success(), "{}", stderr_text(&result));
        let image = Image::read(&out);
        let plot = image.plot();
        // fftfreq order or shifted, the axis runs from -4000 Hz up to 4000 - 31.25 Hz
        assert_eq!(
            plot.frequency,
            (-4000.0, 4000.0 - 31.25),
            "fftshift {shift}"
        );
        let zero_row = plot.frequency_row(0.0);
        let row = image.loudest_row(&plot, plot.width / 2);
        assert!(row < zero_row, "the tone is below 0 Hz (fftshift {shift})");
        let got = plot.hz_of_row(row);
        assert!((got + 1500.0).abs() <= plot.hz_per_row() + 16.0, "{got} Hz");
    }
}

#[test]
fn mel_bands_are_labelled_with_their_frequencies() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (wav, out) = (dir.path().join("tone.wav"), dir.path().join("mel.png"));
    let mut x = vec![0.0; 16_000];
    add_tone(&mut x, 8000.0, 1000.0, 0.5, 0..16_000);
    write_wav(&wav, 8000, &x);
    let result = run(&[
        "--file",
        s(&wav),
        "--frame",
        "512",
        "--bands",
        "mel:32",
        "--scale",
        "power",
        "--format",
        "png",
        "--output",
        s(&out),
    ]);
    assert!(result.status.success(), "{}", stderr_text(&result));
    let image = Image::read(&out);
    let axis = &image.text["fftd:frequency-hz"];
    assert!(axis.starts_with("columns "), "{axis}");
    let bands = image.numbers("fftd:frequency-hz");
    assert_eq!(bands.len(), 32);
    // each band an equal share of the height, lowest at the bottom: the loudest is near 1 kHz
    let p = image.numbers("fftd:plot");
    let (x, y, w, h) = (p[0] as usize, p[1] as usize, p[2] as usize, p[3] as usize);
    let loudest = (0..h)
        .max_by_key(|&j| image.pixel(x + w / 2, y + h - 1 - j)[1])
        .expect("rows");
    let band = loudest * 32 / h;
    assert!(
        (bands[band] - 1000.0).abs() < 150.0,
        "band {band}: {} Hz",
        bands[band]
    );
}

#[test]
fn a_run_cut_short_still_writes_its_image_and_meta() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (wav, out, meta) = (
        dir.path().join("tone.wav"),
        dir.path().join("cut.png"),
        dir.path().join("cut.json"),
    );
    let mut x = vec![0.0; 80_000];
    add_tone(&mut x, 8000.0, 1000.0, 0.5, 0..80_000);
    write_wav(&wav, 8000, &x);
    let result = run(&[
        "--file",
        s(&wav),
        "--frame",
        "800",
        "--max-frames",
        "10",
        "--format",
        "png",
        "--output",
        s(&out),
        "--meta",
        s(&meta),
    ]);
    assert!(result.status.success(), "{}", stderr_text(&result));
    let image = Image::read(&out);
    assert_eq!(image.numbers("fftd:rows"), vec![10.0]);
    let time = image.plot().time; // 10 frames of 0.1 s
    assert!(time.0 == 0.0 && (time.1 - 1.0).abs() < 1e-9, "{time:?}");
    let meta: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&meta).expect("meta")).expect("json");
    assert_eq!(meta["format"], "png");
    assert_eq!(meta["inputs"][0]["frames"], 10);
    assert_eq!(meta["inputs"][0]["output"], s(&out));
}

#[test]
fn stdin_cut_by_sigint_writes_the_image_of_what_was_read() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().join("live.png");
    let mut child = fftd()
        .args([
            "--file",
            "-",
            "--rate",
            "8000",
            "--frame",
            "80",
            "--format",
            "png",
            "--output",
            s(&out),
            "--device",
            "cpu",
        ])
        .env("RUST_LOG", "fftd=debug")
        .stdin(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    let mut stdin = child.stdin.take().expect("stdin");
    let samples: String = (0..2000)
        .map(|i| format!("{}\n", (2.0 * PI * 1000.0 * i as f64 / 8000.0).sin()))
        .collect();
    stdin.write_all(samples.as_bytes()).expect("write");
    stdin.flush().expect("flush");
    // stdin stays open; once the sink has taken the 25 frames, fftd waits for more
    let mut stderr = child.stderr.take().expect("stderr");
    let mut log = Vec::new();
    let mut chunk = [0u8; 4096];
    while String::from_utf8_lossy(&log)
        .matches("spectrum written")
        .count()
        < 25
    {
        let n = stderr.read(&mut chunk).expect("stderr");
        assert!(n > 0, "fftd ended early: {}", String::from_utf8_lossy(&log));
        log.extend_from_slice(&chunk[..n]);
    }
    let kill = std::process::Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .expect("kill");
    assert!(kill.success());
    stderr.read_to_end(&mut log).expect("rest of stderr");
    let status = child.wait().expect("wait");
    drop(stdin);
    assert_eq!(status.code(), Some(0), "{}", String::from_utf8_lossy(&log));
    let image = Image::read(&out);
    assert_eq!(image.numbers("fftd:rows"), vec![25.0]);
    let plot = image.plot();
    let got = plot.hz_of_row(image.loudest_row(&plot, plot.width / 2));
    assert!((got - 1000.0).abs() <= plot.hz_per_row() + 50.0, "{got} Hz");
    assert_eq!(image.text["Title"], "stdin");
}

#[test]
fn png_to_stdout_and_bad_png_options_are_usage_errors() {
    let dir = tempfile::tempdir().expect("tempdir");
    let wav = dir.path().join("t.wav");
    write_wav(&wav, 8000, &[0.0; 1000]);
    let out = dir.path().join("o.png");
    let file = ["--file", s(&wav)];
    let cases: Vec<(Vec<&str>, Vec<&str>)> = vec![
        (vec!["--format", "png"], vec!["png", "stdout"]),
        (
            vec!["--format", "png", "--output", "-"],
            vec!["png", "stdout"],
        ),
        (
            vec![
                "--format",
                "png",
                "--output",
                s(&out),
                "--png-size",
                "100x50",
            ],
            vec!["--png-size", "100x50", "WxH"],
        ),
        (
            vec!["--format", "png", "--output", s(&out), "--png-size", "big"],
            vec!["--png-size", "big"],
        ),
        (
            vec![
                "--format",
                "png",
                "--output",
                s(&out),
                "--png-size",
                "800x400x2",
            ],
            vec!["--png-size"],
        ),
        (
            vec![
                "--format",
                "png",
                "--output",
                s(&out),
                "--png-size",
                "20000x300",
            ],
            vec!["--png-size", "16384"],
        ),
        (
            vec!["--format", "png", "--output", s(&out), "--png-db", "0:-10"],
            vec!["--png-db", "MIN:MAX"],
        ),
        (
            // (each end a number, their span not: the colour bar's scale would never end)
            vec![
                "--format",
                "png",
                "--output",
                s(&out),
                "--png-db=-1e308:1e308",
            ],
            vec!["--png-db", "from -1000 to 1000"],
        ),
        (
            vec!["--format", "text", "--png-size", "800x400"],
            vec!["--png-size", "--format png"],
        ),
        (
            vec!["--format", "png", "--output", s(&out), "--file", s(&wav)],
            vec!["2 streams", "--output-dir"],
        ),
    ];
    for (args, needles) in cases {
        let result = run(&[&file[..], &args[..]].concat());
        assert_clean_error(&result, 2, &needles);
    }
    assert!(!out.exists(), "no image for a refused run");
}

#[test]
fn config_file_sets_the_image_size_and_colour_range() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (wav, out, config) = (
        dir.path().join("t.wav"),
        dir.path().join("c.png"),
        dir.path().join("fftd.toml"),
    );
    let mut x = vec![0.0; 8000];
    add_tone(&mut x, 8000.0, 1000.0, 0.5, 0..8000);
    write_wav(&wav, 8000, &x);
    std::fs::write(
        &config,
        "format = \"png\"\npng-size = \"500x300\"\npng-db = \"-90:10\"\n",
    )
    .expect("config");
    let result = run(&[
        "--config",
        s(&config),
        "--file",
        s(&wav),
        "--output",
        s(&out),
    ]);
    assert!(result.status.success(), "{}", stderr_text(&result));
    let image = Image::read(&out);
    assert_eq!((image.width, image.height), (500, 300));
    assert_eq!(image.numbers("fftd:db"), vec![-90.0, 10.0]);
}
