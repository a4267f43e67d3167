//! Property tests of the compressed-audio reader (src/source/audio.rs) over hostile input, in
//! memory as tests/parsers_prop.rs does for the other parsers: FLAC, MP3, Ogg Vorbis, AIFF, CAF
//! and M4A files made once by sox/ffmpeg, then cut short, bit-flipped, bytes inserted, deleted or
//! replaced (most of it in the headers), and arbitrary bytes after each format's magic number.
//!
//! For every case: no panic escapes (a decoder panic is caught and reported), the read loop
//! ends, each read appends exactly the frames it reports, every value is finite, and every
//! error is one line that starts with, and carries, the file's name.
//!
//! `PROPTEST_CASES=N` runs N cases of each test. Needs sox and ffmpeg (scripts/deps.sh --test);
//! skipped without them, except in CI.

use fftd::error::FftdError;
use fftd::source::audio::AudioSource;
use fftd::source::input::InputReader;
use fftd::source::{InputFormat, SampleSource};
use fftd::types::Precision;
use proptest::prelude::*;
use proptest::sample::{select, Index};
use std::path::Path;
use std::process::Command;
use std::sync::OnceLock;

fn config(default: u32) -> ProptestConfig {
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default);
    ProptestConfig {
        cases,
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

/// A seed file: its format, extension and bytes.
type Seed = (InputFormat, &'static str, Vec<u8>);

/// One small file per format, made by sox and ffmpeg from a two-channel WAV of tones; `None`
/// when they cannot run (outside CI).
fn seeds() -> Option<&'static Vec<Seed>> {
    static SEEDS: OnceLock<Option<Vec<Seed>>> = OnceLock::new();
    SEEDS.get_or_init(make_seeds).as_ref()
}

fn make_seeds() -> Option<Vec<Seed>> {
    let runs = |p: &str, a: &str| {
        Command::new(p)
            .arg(a)
            .output()
            .is_ok_and(|o| o.status.success())
    };
    if !(runs("sox", "--version") && runs("ffmpeg", "-version")) {
        assert!(
            std::env::var("CI").ok().as_deref() != Some("true"),
            "sox and ffmpeg are needed (CI requires them: run scripts/deps.sh --test)"
        );
        eprintln!("skipping: sox or ffmpeg is missing");
        return None;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let wav = dir.path().join("w.wav");
    let w = wav.display().to_string();
    let sh = |program: &str, args: &[&str]| {
        let out = Command::new(program).args(args).output().expect(program);
        assert!(
            out.status.success(),
            "{program}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    };
    sh(
        "sox",
        &[
            "-n", "-r", "8000", "-b", "16", "-c", "2", &w, "synth", "0.15", "sine", "440", "sine",
            "1300",
        ],
    );
    let made = |name: &str| dir.path().join(name).display().to_string();
    let ff = |name: &str, codec: &[&str]| {
        let out = made(name);
        sh(
            "ffmpeg",
            &[&["-loglevel", "error", "-i", &w][..], codec, &[&out]].concat(),
        );
        out
    };
    let files = [
        (InputFormat::Flac, "flac", {
            let o = made("a.flac");
            sh("sox", &[&w, &o]);
            o
        }),
        (
            InputFormat::Mp3,
            "mp3",
            ff("a.mp3", &["-c:a", "libmp3lame", "-b:a", "64k"]),
        ),
        (InputFormat::Ogg, "ogg", {
            let o = made("a.ogg");
            sh("sox", &[&w, &o]);
            o
        }),
        (InputFormat::Aiff, "aiff", {
            let o = made("a.aiff");
            sh("sox", &[&w, &o]);
            o
        }),
        (InputFormat::Caf, "caf", ff("a.caf", &["-c:a", "alac"])),
        (
            InputFormat::M4a,
            "m4a",
            ff(
                "a.m4a",
                &["-c:a", "aac", "-b:a", "64k", "-movflags", "+faststart"],
            ),
        ),
    ];
    Some(
        files
            .into_iter()
            .map(|(f, ext, path)| (f, ext, std::fs::read(path).expect("read seed")))
            .collect(),
    )
}

/// An input error is one line, `NAME: what`, and carries `name` as its path.
fn assert_names_file(err: &FftdError, name: &str) {
    let msg = err.to_string();
    let carries = match err {
        FftdError::Input { path, .. } => path == name,
        FftdError::Io { path, .. } => path == Path::new(name),
        _ => false,
    };
    assert!(carries, "error does not carry the path {name:?}: {err:?}");
    assert!(msg.starts_with(&format!("{name}: ")), "{msg:?}");
    assert!(!msg.contains('\n'), "error is not one line: {msg:?}");
}

/// Opens and reads `bytes` as `format` to the end or the first error, `chunk` frames per call:
/// from a file when `from_file` (seekable, as a regular file is read) and always for CAF (which
/// symphonia cannot read front to back), else as a stream.
fn read_audio(
    name: &str,
    bytes: &[u8],
    format: InputFormat,
    chunk: usize,
    from_file: bool,
) -> Result<Vec<f64>, FftdError> {
    let reader = InputReader::from_read(std::io::Cursor::new(bytes.to_vec()));
    let file = (from_file || format == InputFormat::Caf).then(|| {
        let mut file = tempfile::tempfile().expect("temp file");
        std::io::Write::write_all(&mut file, bytes).expect("write");
        std::io::Seek::rewind(&mut file).expect("rewind");
        file
    });
    let mut src = AudioSource::new(name, file, reader, format, Precision::F32)?;
    let channels = src.info().channels;
    assert!(channels > 0 && src.info().rate > 0.0, "{:?}", src.info());
    let mut out = Vec::new();
    // every call but the last appends at least one frame; a packet holds at least one byte
    for _ in 0..=bytes.len() * 8 + 2 {
        let before = out.len();
        let n = src.read(&mut out, chunk)?;
        assert!(n <= chunk, "read {n} frames, asked for {chunk}");
        assert_eq!(
            out.len() - before,
            n * channels,
            "read() miscounted its frames"
        );
        if n == 0 {
            return Ok(out);
        }
    }
    panic!("the source did not end");
}

fn check(name: &str, result: &Result<Vec<f64>, FftdError>) {
    match result {
        Ok(values) => assert!(values.iter().all(|v| v.is_finite())),
        Err(err) => assert_names_file(err, name),
    }
}

#[derive(Clone, Debug)]
enum Mutation {
    Flip(Index, u8),
    Replace(Index, u8),
    Insert(Index, u8),
    Delete(Index),
    Truncate(Index),
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        (any::<Index>(), 0u8..8).prop_map(|(i, bit)| Mutation::Flip(i, bit)),
        (any::<Index>(), any::<u8>()).prop_map(|(i, b)| Mutation::Replace(i, b)),
        (any::<Index>(), any::<u8>()).prop_map(|(i, b)| Mutation::Insert(i, b)),
        any::<Index>().prop_map(Mutation::Delete),
        any::<Index>().prop_map(Mutation::Truncate),
    ]
}

/// Applies `m` within the first `span` bytes (the headers) when `head`, else anywhere.
fn mutate(bytes: &mut Vec<u8>, m: &Mutation, head: bool) {
    let len = bytes.len();
    let span = if head { len.min(256) } else { len };
    if span == 0 {
        return;
    }
    match m {
        Mutation::Flip(i, bit) => bytes[i.index(span)] ^= 1 << bit,
        Mutation::Replace(i, b) => bytes[i.index(span)] = *b,
        Mutation::Insert(i, b) => bytes.insert(i.index(span + 1), *b),
        Mutation::Delete(i) => {
            bytes.remove(i.index(span));
        }
        Mutation::Truncate(i) => bytes.truncate(i.index(len)),
    }
}

fn file_name(ext: &'static str) -> impl Strategy<Value = String> {
    "[a-zA-Z0-9_][a-zA-Z0-9_ .-]{0,10}(/[a-z]{1,6})?".prop_map(move |stem| format!("{stem}.{ext}"))
}

proptest! {
    #![proptest_config(config(3_000))]
    #[test]
    fn audio_mutated(
        stem in file_name("x"),
        which in 0usize..6,
        mutations in prop::collection::vec((mutation(), prop::bool::weighted(0.7)), 1..5),
        chunk in 1usize..2048,
        from_file in prop::bool::weighted(0.2),
    ) {
        let Some(seeds) = seeds() else { return Ok(()) };
        let (format, ext, seed) = &seeds[which];
        let name = format!("{stem}.{ext}");
        let mut bytes = seed.clone();
        for (m, head) in &mutations {
            mutate(&mut bytes, m, *head);
        }
        check(&name, &read_audio(&name, &bytes, *format, chunk, from_file));
    }
}

/// Each format's magic number, so random bytes after it reach the container parsers.
const PREFIXES: &[(&[u8], InputFormat)] = &[
    (b"fLaC", InputFormat::Flac),
    (b"fLaC\x00\x00\x00\x22", InputFormat::Flac),
    (b"ID3\x04\x00\x00\x00\x00\x00\x00", InputFormat::Mp3),
    (b"\xff\xfb\x90\x64", InputFormat::Mp3),
    (b"OggS\x00\x02", InputFormat::Ogg),
    (b"FORM\x00\x00\x10\x00AIFFCOMM", InputFormat::Aiff),
    (b"caff\x00\x01\x00\x00desc", InputFormat::Caf),
    (b"\x00\x00\x00\x18ftypM4A ", InputFormat::M4a),
    (b"", InputFormat::M4a),
];

proptest! {
    #![proptest_config(config(3_000))]
    #[test]
    fn audio_arbitrary_bytes(
        name in file_name("audio"),
        (prefix, format) in select(PREFIXES),
        tail in prop::collection::vec(any::<u8>(), 0..400),
        chunk in 1usize..512,
        from_file in prop::bool::weighted(0.2),
    ) {
        let bytes = [prefix, &tail[..]].concat();
        check(&name, &read_audio(&name, &bytes, format, chunk, from_file));
    }
}

#[test]
fn seeds_read_whole() {
    let Some(seeds) = seeds() else { return };
    for (format, ext, bytes) in seeds {
        let name = format!("seed.{ext}");
        for from_file in [false, true] {
            let values =
                read_audio(&name, bytes, *format, 100, from_file).unwrap_or_else(|e| panic!("{e}"));
            // 0.15 s of two channels at 8 kHz (AAC may add priming samples)
            assert!(values.len() >= 2 * 1200, "{ext}: {} values", values.len());
        }
    }
}
