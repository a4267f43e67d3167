//! Compressed and Apple audio inputs (src/source/audio.rs), end to end through the binary:
//!
//! - FLAC, AIFF and CAF (PCM and ALAC) made by sox/ffmpeg from a WAV give spectra bit-identical
//!   to that WAV's, per channel, from files, from stdin and from a FIFO, found by extension, by
//!   `--input-format` and by content;
//! - MP3 (sox's, and ffmpeg's with a LAME gapless header) and Ogg Vorbis agree with libsndfile's
//!   decode (python `soundfile`) within codec tolerance, frame for frame, with the peak level
//!   within 0.5 dB; M4A (AAC) finds the tone at its level;
//! - broken inputs (truncated, corrupt, an Opus stream, text called .flac, an M4A piped whose
//!   index comes last) are one line naming the file, exit 1, no panic.
//!
//! Needs sox and ffmpeg (and python3 with numpy and soundfile for the libsndfile comparison);
//! scripts/deps.sh --test installs them. Without them the tests skip, except in CI.

use crate::common;

use common::*;
use std::io::Write;
use std::path::Path;
use std::process::{Command, Output, Stdio};

/// Whether sox and ffmpeg run (CI requires them).
fn tools() -> bool {
    program_runs("sox", &["--version"]) && program_runs("ffmpeg", &["-version"])
}

/// Runs a command, which must succeed.
fn make(program: &str, args: &[&str]) {
    let out = Command::new(program).args(args).output().expect(program);
    assert!(
        out.status.success(),
        "{program} {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// `dir/name` as a string.
fn at(dir: &Path, name: &str) -> String {
    dir.join(name).display().to_string()
}

/// A WAV of `channels` channels at 16 kHz: a different tone per channel plus a little noise,
/// `bits` per sample.
fn test_wav(dir: &Path, name: &str, channels: usize, bits: u32) -> String {
    let path = at(dir, name);
    let tones: Vec<String> = (0..channels)
        .map(|c| format!("sine {}", 440 * (c + 1) + 97 * c))
        .collect();
    let mut args = vec!["-n", "-r", "16000", "-b"];
    let bits = bits.to_string();
    let channels_text = channels.to_string();
    args.extend([bits.as_str(), "-c", &channels_text, &path, "synth", "1.3"]);
    args.extend(tones.iter().flat_map(|t| t.split(' ')));
    args.extend(["vol", "0.7"]);
    make("sox", &args);
    path
}

/// fftd's csv spectra of `file` (extra `args` after it), every channel its own stream.
fn spectra(file: &str, args: &[&str]) -> Output {
    let mut all = vec![
        "--file",
        file,
        "--frame",
        "512",
        "--hop",
        "200",
        "--channel",
        "all",
        "--format",
        "csv",
    ];
    all.extend(args);
    run(&all)
}

/// `spectra` of standard input fed from `file`.
fn spectra_piped(file: &str, args: &[&str]) -> Output {
    let bytes = std::fs::read(file).expect("read");
    let mut cmd = fftd();
    cmd.args(["--file", "-", "--frame", "512", "--hop", "200"])
        .args(["--channel", "all", "--format", "csv", "--device", "cpu"])
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().expect("fftd");
    let mut stdin = child.stdin.take().expect("stdin");
    let feeder = std::thread::spawn(move || {
        let _ = stdin.write_all(&bytes);
    });
    let out = child.wait_with_output().expect("fftd ends");
    feeder.join().expect("feeder");
    out
}

/// Asserts `out` succeeded silently with exactly `want`'s rows. The streams of a many-channel
/// input interleave their rows as they come, so rows are compared in (stream, frame) order.
fn assert_same_rows(out: &Output, want: &Output, what: &str) {
    assert_silent_success(out);
    let sorted = |o: &Output| {
        let text = stdout_text(o);
        let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
        lines[1..].sort_by_key(|l| {
            let mut id = l.split(',').take(2).map(|v| v.parse::<u64>().expect("id"));
            (id.next(), id.next())
        });
        lines
    };
    let (got, want) = (sorted(out), sorted(want));
    assert!(want.len() > 2, "{what}: no rows");
    assert_eq!(got.len(), want.len(), "{what}: row counts differ");
    assert!(got == want, "{what}: spectra differ from the WAV's");
}

#[test]
fn lossless_files_read_bit_identical_to_their_wav() {
    if !tools() {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let d = dir.path();
    for (channels, bits) in [(1, 16), (3, 24), (2, 16)] {
        let wav = test_wav(d, &format!("w{channels}.wav"), channels, bits);
        let want = spectra(&wav, &[]);
        assert_silent_success(&want);
        let flac = at(d, &format!("w{channels}.flac"));
        make("sox", &[&wav, &flac]);
        assert_same_rows(&spectra(&flac, &[]), &want, "FLAC");
        let aiff = at(d, &format!("w{channels}.aiff"));
        make("sox", &[&wav, &aiff]);
        assert_same_rows(&spectra(&aiff, &[]), &want, "AIFF");
        for (ext, codec) in [("caf", "pcm_s24le"), ("m4a", "alac")] {
            if codec == "alac" && channels > 2 {
                continue; // ffmpeg's ALAC encoder makes 3 channels 2
            }
            let out = at(d, &format!("w{channels}.{codec}.{ext}"));
            let codec = if bits == 16 && codec == "pcm_s24le" {
                "pcm_s16le"
            } else {
                codec
            };
            make(
                "ffmpeg",
                &["-loglevel", "error", "-y", "-i", &wav, "-c:a", codec, &out],
            );
            assert_same_rows(&spectra(&out, &[]), &want, codec);
        }
        // one channel alone, as from the WAV
        let one = ["--channel", "1"];
        if channels > 1 {
            let w = run(&[
                "--file", &wav, "--frame", "256", "--format", "csv", one[0], one[1],
            ]);
            let f = run(&[
                "--file", &flac, "--frame", "256", "--format", "csv", one[0], one[1],
            ]);
            assert_same_rows(&f, &w, "FLAC --channel 1");
        }
        // from stdin (found by content) and with --input-format on a name that says nothing
        assert_same_rows(&spectra_piped(&flac, &[]), &want, "FLAC on stdin");
        assert_same_rows(
            &spectra_piped(&wav, &[]),
            &want,
            "WAV on stdin, found by content",
        );
        let renamed = at(d, &format!("w{channels}.dat"));
        std::fs::copy(&flac, &renamed).expect("copy");
        assert_same_rows(&spectra(&renamed, &[]), &want, "FLAC named .dat");
        let forced = spectra(&renamed, &["--input-format", "flac"]);
        assert_same_rows(&forced, &want, "--input-format flac");
    }
}

#[test]
fn flac_from_a_fifo_reads_as_the_file() {
    if !tools() {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let wav = test_wav(dir.path(), "w.wav", 2, 16);
    let flac = at(dir.path(), "w.flac");
    make("sox", &[&wav, &flac]);
    let fifo = dir.path().join("pipe");
    mkfifo(&fifo);
    let writer = {
        let (flac, fifo) = (flac.clone(), fifo.clone());
        std::thread::spawn(move || std::fs::write(fifo, std::fs::read(flac).expect("read")))
    };
    let out = spectra(&fifo.display().to_string(), &[]);
    writer.join().expect("writer").expect("write fifo");
    assert_same_rows(&out, &spectra(&wav, &[]), "FLAC through a FIFO");
}

/// Compares fftd's spectra of `coded` with those of libsndfile's decode of it (written as a
/// 64-bit float WAV by python soundfile): the same frames, each within `tolerance` of its
/// largest bin, and peak levels within 0.5 dB. Returns the largest relative difference.
fn matches_libsndfile(coded: &str, dir: &Path, tolerance: f64) -> f64 {
    let decoded = dir.join("decoded.wav").display().to_string();
    run_python(
        "import sys, soundfile as sf\n\
         data, rate = sf.read(sys.argv[1], dtype='float64', always_2d=True)\n\
         sf.write(sys.argv[2], data, rate, subtype='DOUBLE')",
        &[coded, &decoded],
        coded,
    );
    let args = [
        "--channel",
        "0",
        "--frame",
        "1024",
        "--hop",
        "512",
        "--scale",
        "db",
    ];
    let run_on = |file: &str| {
        let out = run(&[&["--file", file, "--format", "csv"][..], &args].concat());
        assert_silent_success(&out);
        let text = stdout_text(&out);
        let rows: Vec<Vec<f64>> = text
            .lines()
            .skip(1)
            .map(|l| {
                l.split(',')
                    .skip(3)
                    .map(|v| v.parse().expect("number"))
                    .collect()
            })
            .collect();
        rows
    };
    let (got, want) = (run_on(coded), run_on(&decoded));
    assert_eq!(
        got.len(),
        want.len(),
        "{coded}: frame counts differ from libsndfile's"
    );
    let mut worst = 0.0f64;
    for (g, w) in got.iter().zip(&want) {
        let peak = |row: &Vec<f64>| row.iter().cloned().fold(f64::MIN, f64::max);
        assert!(
            (peak(g) - peak(w)).abs() <= 0.5,
            "{coded}: peak {} vs {}",
            peak(g),
            peak(w)
        );
        let lin = |row: &Vec<f64>| {
            row.iter()
                .map(|db| 10f64.powf(db / 20.0))
                .collect::<Vec<_>>()
        };
        worst = worst.max(max_relative_error(&lin(g), &lin(w)));
    }
    assert!(
        worst <= tolerance,
        "{coded}: differs by {worst} of the frame's peak"
    );
    eprintln!("{coded}: largest difference {worst:.2e} of the frame's peak bin");
    worst
}

#[test]
fn mp3_and_ogg_agree_with_libsndfile() {
    if !tools() || !python_has("numpy, soundfile") {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let d = dir.path();
    let wav = test_wav(d, "w.wav", 2, 16);
    let sox_mp3 = at(d, "sox.mp3");
    make("sox", &[&wav, "-C", "192", &sox_mp3]);
    let lame_mp3 = at(d, "lame.mp3");
    make(
        "ffmpeg",
        &[
            "-loglevel",
            "error",
            "-i",
            &wav,
            "-c:a",
            "libmp3lame",
            "-b:a",
            "160k",
            &lame_mp3,
        ],
    );
    let ogg = at(d, "w.ogg");
    make("sox", &[&wav, "-C", "5", &ogg]);
    for coded in [&sox_mp3, &lame_mp3, &ogg] {
        matches_libsndfile(coded, d, 1e-3);
    }
    // cut to half, the LAME header still saying the whole length: an error after the rows of
    // what decoded (helper-40: exit 0, 19 of 40 rows, no word)
    let bytes = std::fs::read(&lame_mp3).expect("read");
    let cut = at(d, "cut.mp3");
    std::fs::write(&cut, &bytes[..bytes.len() / 2]).expect("write");
    let out = spectra(&cut, &[]);
    assert_clean_error(&out, 1, &[&cut, "MP3 stream ends early (truncated)"]);
    assert!(
        stdout_text(&out).lines().count() > 2,
        "the decoded part's rows come first"
    );
}

#[test]
fn vorbis_of_three_to_six_channels_decodes_as_libvorbis() {
    // (helper-53: symphonia's decoder gave 3- to 6-channel streams wrong samples, max |error|
    // 0.3 to 1.2, with no error; vendor/symphonia-codec-vorbis/FFTD-PATCH.md)
    if !tools() || !python_has("numpy, soundfile") {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let d = dir.path();
    // fftd numbers a Vorbis stream's channels in WAV order, as ffmpeg does; libsndfile in the
    // stream's (3: L C R; 5.1: FL FC FR RL RR LFE)
    for (channels, quality, wav_order) in [
        (3, "5", "0,2,1"),
        (4, "0", "0,1,2,3"),
        (6, "3", "0,2,1,5,3,4"),
    ] {
        let wav = test_wav(d, &format!("w{channels}.wav"), channels, 16);
        let ogg = at(d, &format!("w{channels}.ogg"));
        make("sox", &[&wav, "-C", quality, &ogg]);
        let reference = at(d, &format!("libvorbis{channels}.wav"));
        run_python(
            "import sys, soundfile as sf\n\
             data, rate = sf.read(sys.argv[1], dtype='float64', always_2d=True)\n\
             order = [int(c) for c in sys.argv[3].split(',')]\n\
             sf.write(sys.argv[2], data[:, order], rate, subtype='DOUBLE')",
            &[&ogg, &reference, wav_order],
            &ogg,
        );
        let samples = |file: &str| {
            let out = run(&[
                "--file",
                file,
                "--channel",
                "all",
                "--frame",
                "1024",
                "--window",
                "rect",
                "--precision",
                "f64",
                "--scale",
                "complex",
                "--format",
                "csv",
            ]);
            assert_silent_success(&out);
            stdout_text(&out)
                .lines()
                .skip(1)
                .map(|l| {
                    l.split(',')
                        .skip(3)
                        .map(|v| v.parse::<f64>().expect("number"))
                        .collect()
                })
                .collect::<Vec<Vec<f64>>>()
        };
        let (got, want) = (samples(&ogg), samples(&reference));
        assert_eq!(got.len(), want.len(), "{channels} channels: rows");
        let worst = got
            .iter()
            .zip(&want)
            .flat_map(|(g, w)| g.iter().zip(w).map(|(a, b)| (a - b).abs()))
            .fold(0.0, f64::max);
        // (a full-scale bin is about 512 here; the fixed decoder is within 2e-4 of it, the
        // broken one was off by tens)
        assert!(worst < 0.01, "{channels} channels: bins differ by {worst}");
    }
}

/// The samples ffmpeg decodes from `file` (one channel).
fn ffmpeg_samples(file: &str) -> usize {
    let out = Command::new("ffmpeg")
        .args([
            "-loglevel",
            "error",
            "-i",
            file,
            "-f",
            "f32le",
            "-ac",
            "1",
            "-",
        ])
        .output()
        .expect("ffmpeg");
    assert!(out.status.success(), "ffmpeg decodes {file}");
    out.stdout.len() / 4
}

#[test]
fn an_mp3_without_a_length_tag_reads_whole() {
    // (helper-53: with no Xing/Info or VBRI tag, symphonia's reader estimated the length from
    // the first frames' bitrate and trimmed every packet past it: loud then quiet read 111744 of
    // 222336 samples, exit 0; quiet then loud was 'truncated'; constant bitrate lost a frame)
    if !tools() {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let d = dir.path();
    let part = |name: &str, synth: &[&str]| {
        let path = at(d, name);
        let mut args = vec!["-n", "-r", "44100", "-b", "16", &path, "synth"];
        args.extend(synth);
        make("sox", &args);
        path
    };
    let loud = part("loud.wav", &["1", "whitenoise", "vol", "0.5"]);
    let quiet = part("quiet.wav", &["3", "sine", "1000", "vol", "0"]);
    let tone = part("tone.wav", &["1", "sine", "1000", "vol", "0.5"]);
    for (name, parts, rate) in [
        ("loud_quiet", [&loud, &quiet, &tone], &["-q:a", "4"][..]),
        ("quiet_loud", [&quiet, &loud, &loud], &["-q:a", "4"][..]),
        ("constant", [&tone, &tone, &tone], &["-b:a", "192k"][..]),
    ] {
        let wav = at(d, &format!("{name}.wav"));
        make("sox", &[parts[0], parts[1], parts[2], &wav]);
        let mp3 = at(d, &format!("{name}.mp3"));
        let mut args = vec!["-loglevel", "error", "-i", &wav, "-c:a", "libmp3lame"];
        args.extend(rate);
        args.extend(["-write_xing", "0", "-id3v2_version", "0", &mp3]);
        make("ffmpeg", &args);
        let from_file = spectra(&mp3, &["--stats"]);
        assert_silent_success_but_stats(&from_file, name);
        let samples = stats_samples_read(&stderr_text(&from_file));
        assert_eq!(samples, ffmpeg_samples(&mp3), "{name}: samples read");
        let piped = spectra_piped(&mp3, &[]);
        let rows = |o: &Output| stdout_text(o).lines().count();
        assert_eq!(
            rows(&from_file),
            rows(&piped),
            "{name}: rows, file against pipe"
        );
    }
}

/// Asserts `out` succeeded and said nothing on stderr but its `--stats` lines.
fn assert_silent_success_but_stats(out: &Output, what: &str) {
    let err = stderr_text(out);
    assert!(out.status.success(), "{what}: {err}");
    assert!(
        // ("fftd stats: ...", "fftd thread ...": a warning or an error is "WARN ..." or "fftd: ...")
        err.lines().all(|l| l.starts_with("fftd ")),
        "{what}: {err}"
    );
}

/// The "samples read N" of a `--stats` line.
fn stats_samples_read(err: &str) -> usize {
    let after = err.split("samples read ").nth(1).expect("a --stats line");
    let n = after.split([',', ' ']).next().expect("a count");
    n.parse().expect("a count")
}

#[test]
fn m4a_aac_finds_the_tone_at_its_level() {
    if !tools() {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let wav = test_wav(dir.path(), "w.wav", 1, 16);
    let m4a = at(dir.path(), "w.m4a");
    make(
        "ffmpeg",
        &[
            "-loglevel",
            "error",
            "-i",
            &wav,
            "-c:a",
            "aac",
            "-b:a",
            "128k",
            &m4a,
        ],
    );
    let peak = |file: &str| {
        let out = run(&[
            "--file", file, "--frame", "16000", "--hop", "4000", "--tail", "drop", "--scale", "db",
            "--format", "csv",
        ]);
        assert_silent_success(&out);
        let text = stdout_text(&out);
        let row: Vec<f64> = text
            .lines()
            .nth(1)
            .expect("a row")
            .split(',')
            .skip(3)
            .map(|v| v.parse().expect("number"))
            .collect();
        let (bin, level) =
            row.iter()
                .enumerate()
                .fold((0, f64::MIN), |b, (i, &v)| if v > b.1 { (i, v) } else { b });
        (bin, level)
    };
    let (want_bin, want_level) = peak(&wav);
    let (bin, level) = peak(&m4a);
    assert_eq!(bin, want_bin, "440 Hz in 1 Hz bins");
    assert_eq!(want_bin, 440);
    assert!(
        (level - want_level).abs() <= 0.5,
        "{level} dB vs {want_level} dB"
    );
}

/// AIFF and CAF files cut short (by one byte, by half) give the rows of every whole frame they
/// hold, the same as the whole file's first rows, then one line naming the cut and exit 1: from
/// a file, whose chunks symphonia walks to the end of the sound data first (before: no row and
/// "ends inside its header"), and piped (before: a cut AIFF piped gave exit 0).
#[test]
fn aiff_and_caf_cut_short_give_their_whole_frames_then_an_error() {
    if !tools() {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let d = dir.path();
    let wav = test_wav(d, "m.wav", 1, 16); // 20800 samples of 2 bytes at the file's end
    let aiff = at(d, "m.aiff");
    make("sox", &[&wav, &aiff]);
    let caf = at(d, "m.caf");
    make(
        "ffmpeg",
        &[
            "-loglevel",
            "error",
            "-y",
            "-i",
            &wav,
            "-c:a",
            "pcm_s16le",
            &caf,
        ],
    );
    for (whole, ext) in [(&aiff, "aiff"), (&caf, "caf")] {
        let want = stdout_text(&spectra(whole, &[]));
        let bytes = std::fs::read(whole).expect("read");
        for cut_by in [1, bytes.len() / 2] {
            let samples = (41600 - cut_by) / 2;
            let frames = (samples - 512) / 200 + 1; // whole frames of 512 at hop 200
            let cut = at(d, &format!("cut{cut_by}.{ext}"));
            std::fs::write(&cut, &bytes[..bytes.len() - cut_by]).expect("write");
            let mut runs = vec![(cut.clone(), spectra(&cut, &[]))];
            if ext == "aiff" {
                runs.push(("-".to_string(), spectra_piped(&cut, &[])));
            }
            for (name, out) in runs {
                let what = format!("{ext} cut by {cut_by}, read from {name}");
                assert_clean_error(&out, 1, &[&name, &ext.to_uppercase(), "ends early"]);
                let text = stdout_text(&out);
                let rows: Vec<&str> = text.lines().skip(1).collect();
                let whole_rows: Vec<&str> = want.lines().skip(1).take(frames).collect();
                assert_eq!(rows, whole_rows, "{what}: the whole frames' rows");
            }
        }
    }
}

#[test]
fn broken_audio_is_one_line_naming_the_file() {
    if !tools() {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let d = dir.path();
    let wav = test_wav(d, "w.wav", 2, 16);
    let flac = at(d, "w.flac");
    make("sox", &[&wav, &flac]);
    let bytes = std::fs::read(&flac).expect("read");
    // cut inside the audio: what decodes is analysed, then the error
    let cut = at(d, "cut.flac");
    std::fs::write(&cut, &bytes[..bytes.len() * 2 / 3]).expect("write");
    let out = spectra(&cut, &[]);
    assert_clean_error(&out, 1, &[&cut, "FLAC", "ends early"]);
    assert!(
        stdout_text(&out).lines().count() > 10,
        "the decoded part's rows come first"
    );
    // a WAV named as FLAC, and a FLAC named as WAV: the error says what the content is and the
    // flag that reads it (helper-53)
    let wav_as_flac = at(d, "wav.flac");
    std::fs::copy(&wav, &wav_as_flac).expect("copy");
    let out = spectra(&wav_as_flac, &[]);
    assert_clean_error(&out, 1, &["content is a WAV file", "--input-format wav"]);
    let flac_as_wav = at(d, "flac.wav");
    std::fs::copy(&flac, &flac_as_wav).expect("copy");
    let out = spectra(&flac_as_wav, &[]);
    assert_clean_error(&out, 1, &["content is flac: give --input-format flac"]);
    // AAC of more than two channels: what symphonia decodes, and what to do
    let six = test_wav(d, "six.wav", 6, 16);
    let aac = at(d, "six.m4a");
    make(
        "ffmpeg",
        &["-loglevel", "error", "-i", &six, "-c:a", "aac", &aac],
    );
    let out = spectra(&aac, &[]);
    assert_clean_error(
        &out,
        1,
        &["AAC of 6 channels is not decoded", "mono and stereo"],
    );
    // cut inside its header: said as such, not "not a FLAC ... stream" (helper-32's audit)
    let head = at(d, "head.flac");
    std::fs::write(&head, &bytes[..20]).expect("write");
    let out = spectra(&head, &[]);
    assert_clean_error(&out, 1, &[&head, "ends inside its flac header"]);
    // and from a pipe, where the magic number is seen only as the stream is read
    let out = spectra_piped(&head, &[]);
    assert_clean_error(&out, 1, &["-", "ends inside its flac header"]);
    // an Ogg cut before its first page of audio is whole: not said to be cut in its header
    // alone (helper-52: a file cut inside that page read "ends inside its ogg header")
    let ogg = at(d, "w.ogg");
    make("sox", &[&wav, &ogg]);
    let ogg_head = at(d, "head.ogg");
    std::fs::write(&ogg_head, &std::fs::read(&ogg).expect("read")[..300]).expect("write");
    let out = spectra(&ogg_head, &[]);
    assert_clean_error(
        &out,
        1,
        &[&ogg_head, "before its first whole ogg page of audio"],
    );
    // the audio's bytes garbled
    let mut garbled = bytes.clone();
    for b in garbled[bytes.len() / 2..].iter_mut().step_by(7) {
        *b ^= 0x5a;
    }
    let bad = at(d, "bad.flac");
    std::fs::write(&bad, &garbled).expect("write");
    assert_clean_error(&spectra(&bad, &[]), 1, &[&bad, "FLAC"]);
    // one bit flipped in a FLAC frame: the decoder skips the frame; fftd says so
    let mut flipped = bytes.clone();
    flipped[bytes.len() / 2] ^= 0x10;
    let skip = at(d, "flipped.flac");
    std::fs::write(&skip, &flipped).expect("write");
    assert_clean_error(&spectra(&skip, &[]), 1, &[&skip, "corrupt FLAC", "skipped"]);
    // and in the first frame (helper-40: its rows were left out without a word, the rest's
    // times shifted): the stream must start at sample 0
    let first = (bytes.windows(2).skip(4))
        .position(|w| w[0] == 0xff && w[1] & 0xfe == 0xf8)
        .expect("a FLAC frame")
        + 4;
    let mut flipped = bytes.clone();
    flipped[first + 40] ^= 0x10;
    let skip = at(d, "first.flac");
    std::fs::write(&skip, &flipped).expect("write");
    let out = spectra(&skip, &[]);
    assert_clean_error(&out, 1, &[&skip, "corrupt FLAC stream at its start"]);
    // only the header
    let head = at(d, "head.flac");
    std::fs::write(&head, &bytes[..60]).expect("write");
    assert_clean_error(&spectra(&head, &[]), 1, &[&head]);
    // not audio at all
    let text = at(d, "notes.mp3");
    std::fs::write(&text, "0.5\n0.25\n").expect("write");
    assert_clean_error(&spectra(&text, &[]), 1, &[&text, "not a FLAC, MP3"]);
    let empty = at(d, "empty.ogg");
    std::fs::write(&empty, "").expect("write");
    assert_clean_error(&spectra(&empty, &[]), 1, &[&empty]);
    // a codec symphonia does not have
    let opus = at(d, "w.opus");
    make(
        "ffmpeg",
        &["-loglevel", "error", "-i", &wav, "-c:a", "libopus", &opus],
    );
    assert_clean_error(&spectra(&opus, &[]), 1, &[&opus, "unsupported codec Opus"]);
    // an M4A with its index at the end, piped
    let m4a = at(d, "w.m4a");
    make(
        "ffmpeg",
        &["-loglevel", "error", "-i", &wav, "-c:a", "aac", &m4a],
    );
    assert_clean_error(&spectra_piped(&m4a, &[]), 1, &["-: ", "faststart"]);
    let fast = at(d, "fast.m4a");
    make(
        "ffmpeg",
        &[
            "-loglevel",
            "error",
            "-i",
            &wav,
            "-c:a",
            "aac",
            "-movflags",
            "+faststart",
            &fast,
        ],
    );
    assert_same_rows(
        &spectra_piped(&fast, &[]),
        &spectra(&fast, &[]),
        "faststart M4A piped",
    );
}

/// The frames a run serving its live view on loopback `port` has cut so far
/// (`fftd_frames_in_total` on /metrics; 0 while it cannot be asked).
fn frames_in(port: u16) -> f64 {
    let metrics = http_get(port, "/metrics").unwrap_or_default();
    gauge(&metrics, "fftd_frames_in_total").unwrap_or(0.0)
}

/// A FLAC stream cut off by Ctrl-C (its writer still open) ends the run cleanly: exit 0, the
/// spectra so far, no "ends early" error.
#[test]
fn sigint_on_a_flac_pipe_ends_cleanly() {
    if !tools() {
        return;
    }
    use std::io::{BufRead, Read};
    let dir = tempfile::tempdir().expect("tempdir");
    let wav = test_wav(dir.path(), "w.wav", 1, 16);
    let flac = at(dir.path(), "w.flac");
    make("sox", &[&wav, &flac]);
    let bytes = std::fs::read(&flac).expect("read");
    let mut child = fftd()
        .args([
            "--file", "-", "--frame", "512", "--format", "csv", "--device", "cpu",
        ])
        .args(["--serve", "127.0.0.1:0"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("fftd");
    // three quarters first (fftd reads its input's first bytes before it serves): FLAC packets
    // of 4096 samples (5 in the file, after sox's padding), the decoder holding its last until
    // the next one's bytes come
    let mut stdin = child.stdin.take().expect("stdin");
    stdin
        .write_all(&bytes[..bytes.len() * 3 / 4])
        .expect("write");
    stdin.flush().expect("flush");
    // rows are read as they come (a pipe left full would meet the stuck-write guard)
    let stdout = child.stdout.take().expect("stdout");
    let rows = std::thread::spawn(move || {
        let lines = std::io::BufReader::new(stdout).lines();
        lines.map(|l| l.expect("read")).collect::<Vec<String>>()
    });
    let mut stderr = std::io::BufReader::new(child.stderr.take().expect("stderr"));
    let mut said = String::new();
    let addr = loop {
        said.clear();
        assert!(
            stderr.read_line(&mut said).expect("stderr") > 0,
            "no live view"
        );
        if let Some(rest) = said.split("http://").nth(1) {
            break rest.split('/').next().expect("an address").to_string();
        }
    };
    let port: u16 = addr
        .rsplit(':')
        .next()
        .and_then(|p| p.parse().ok())
        .expect("a port");
    // Ctrl-C once /metrics counts two frames cut
    wait_until_signals_caught(child.id());
    let started = std::time::Instant::now();
    while frames_in(port) < 2.0 {
        assert!(
            started.elapsed() < std::time::Duration::from_secs(60),
            "fftd cut no frames"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    // SAFETY: kill(2) with the pid of our own child and SIGINT; no memory is involved.
    let rc = unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGINT) };
    assert_eq!(rc, 0);
    let mut rest = String::new();
    stderr.read_to_string(&mut rest).expect("stderr");
    let status = child.wait().expect("fftd ends");
    drop(stdin);
    let rows = rows.join().expect("rows");
    let err = rest;
    assert_eq!(status.code(), Some(0), "{err}");
    assert!(
        !err.contains("ends early") && !err.contains("panicked"),
        "{err}"
    );
    assert!(rows.len() > 2 && rows[1].starts_with("0,0,"), "{rows:?}");
}
