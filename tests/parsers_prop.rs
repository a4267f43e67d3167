//! Property tests of fftd's input parsers — text, raw (f32/s16/cf32, the I/Q formats cu8/cs8/cs16),
//! SigMF metadata and datasets of every datatype, WAV and the TOML config —
//! over random and mutated inputs, all in memory (`InputReader::from_read` over a byte buffer,
//! `parse_config` over a string), so the 10^5+ cases of a normal run take seconds.
//!
//! What they prove, for every parser:
//! 1. arbitrary bytes never panic: the whole read loop runs to its end or to the first error, and
//!    a source that succeeds says how many frames it appended and ends;
//! 2. every error is one line that names the file it was given (config: the config path and a
//!    line inside the document; validation errors of the config: a `--flag` that the document set,
//!    or `--file`/`--mic` for the input);
//! 3. valid inputs round-trip exactly: generated text (real or `re im`, with blank lines, `#`
//!    comments, CRLF, surrounding whitespace, several number spellings) reads back the very f64
//!    values written; raw f32/s16/cf32 with 1..4 channels and a PCM16 WAV built here read back
//!    their sample values bit for bit;
//! 4. valid inputs mutated (bytes flipped, inserted, deleted, replaced, cut short) never panic and
//!    either read or give such an error; in text, a sample line made bad is the line the error names.
//!
//! Case counts are set per test (their sum is over 10^5); `PROPTEST_CASES=N` runs N cases of each
//! test instead (see docs/fuzzing.md for a long run). Failures are not written to a regressions
//! file: proptest prints the shrunk input, which belongs in a plain test next to the fix.

use fftd::app::config::{parse_config, Settings};

use fftd::error::FftdError;
use fftd::source::input::InputReader;
use fftd::source::raw::RawSource;
use fftd::source::text::{PrimedTextSource, TextSource};
use fftd::source::wav::WavSource;
use fftd::source::{InputFormat, SampleSource};
use fftd::types::InputKind;
use fftd::types::Precision;
use proptest::prelude::*;
use proptest::sample::{select, Index};
use std::path::Path;

/// `default` cases, or `PROPTEST_CASES` when set (a number set in code would override the variable).
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

fn reader(bytes: &[u8]) -> InputReader {
    InputReader::from_read(std::io::Cursor::new(bytes.to_vec()))
}

/// File names as a user might give them, spaces and dots included.
fn file_name(ext: &'static str) -> impl Strategy<Value = String> {
    "[a-zA-Z0-9_][a-zA-Z0-9_ .-]{0,10}(/[a-z]{1,6})?".prop_map(move |stem| format!("{stem}.{ext}"))
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
    assert!(
        msg.starts_with(&format!("{name}: ")),
        "error does not start with the file name {name:?}: {msg:?}"
    );
    assert!(!msg.contains('\n'), "error is not one line: {msg:?}");
}

/// Reads a source to its end (`Ok(0)`) or first error, `chunk` frames per call, checking that each
/// call appends exactly the frames it reports and that the source ends within `max_calls` calls.
fn drain(
    src: &mut dyn SampleSource,
    chunk: usize,
    max_calls: usize,
) -> Result<Vec<f64>, FftdError> {
    let width = src.info().channels
        * match src.info().kind {
            InputKind::Real => 1,
            InputKind::Complex => 2,
        };
    let mut out = Vec::new();
    for _ in 0..=max_calls {
        let before = out.len();
        let n = src.read(&mut out, chunk)?;
        assert!(n <= chunk.max(1), "read {n} frames, asked for {chunk}");
        assert_eq!(
            out.len() - before,
            n * width,
            "read() miscounted its frames"
        );
        if n == 0 {
            return Ok(out);
        }
    }
    panic!("the source did not end after {max_calls} reads");
}

/// The number after `word ` in `msg` (such as `line 12` or `offset 40`), if any.
fn number_after(msg: &str, word: &str) -> Option<u64> {
    let at = msg.find(&format!("{word} "))? + word.len() + 1;
    let digits: String = msg[at..].chars().take_while(char::is_ascii_digit).collect();
    digits.parse().ok()
}

// ---- mutations ---------------------------------------------------------------------------------

#[derive(Clone, Debug)]
enum Mutation {
    Flip(Index, u8),
    Replace(Index, u8),
    Insert(Index, u8),
    Delete(Index),
    Truncate(Index),
}

fn mutation(alphabet: &'static [u8]) -> impl Strategy<Value = Mutation> {
    let byte = prop_oneof![any::<u8>(), select(alphabet)];
    prop_oneof![
        (any::<Index>(), 0u8..8).prop_map(|(i, bit)| Mutation::Flip(i, bit)),
        (any::<Index>(), byte.clone()).prop_map(|(i, b)| Mutation::Replace(i, b)),
        (any::<Index>(), byte).prop_map(|(i, b)| Mutation::Insert(i, b)),
        any::<Index>().prop_map(Mutation::Delete),
        any::<Index>().prop_map(Mutation::Truncate),
    ]
}

fn mutate(mut bytes: Vec<u8>, mutations: &[Mutation]) -> Vec<u8> {
    for m in mutations {
        let len = bytes.len();
        match *m {
            Mutation::Insert(ref i, b) => bytes.insert(i.index(len + 1), b),
            _ if len == 0 => {}
            Mutation::Flip(ref i, bit) => bytes[i.index(len)] ^= 1 << bit,
            Mutation::Replace(ref i, b) => bytes[i.index(len)] = b,
            Mutation::Delete(ref i) => {
                bytes.remove(i.index(len));
            }
            Mutation::Truncate(ref i) => bytes.truncate(i.index(len)),
        }
    }
    bytes
}

// ---- text --------------------------------------------------------------------------------------

const TEXT_ALPHABET: &[u8] = b"0123456789.-+eE \t\r\n#xinfaINFA,;";

/// Finite f64s: any bit pattern that is finite, and short "everyday" values.
fn finite() -> impl Strategy<Value = f64> {
    use proptest::num::f64 as f;
    prop_oneof![
        3 => f::POSITIVE | f::NEGATIVE | f::NORMAL | f::SUBNORMAL | f::ZERO,
        1 => (-1000i32..1000).prop_map(f64::from),
        1 => (-100_000i32..100_000).prop_map(|v| f64::from(v) / 1000.0),
    ]
}

/// One of the spellings fftd (Rust's f64 parser) reads back exactly.
fn spell(v: f64, how: u8) -> String {
    match how % 5 {
        0 => format!("{v}"),
        1 => format!("{v:e}"),
        2 => format!("{v:E}"),
        3 => ryu::Buffer::new().format_finite(v).to_string(),
        _ if v.is_sign_positive() => format!("+{v}"),
        _ => format!("{v}"),
    }
}

const SPACE: &[&str] = &["", " ", "\t", "  ", " \t "];
const SEP: &[&str] = &[" ", "\t", "   ", " \t"];

#[derive(Clone, Debug)]
enum Filler {
    Blank(&'static str),
    Comment(&'static str, String),
}

fn filler() -> impl Strategy<Value = Filler> {
    prop_oneof![
        select(SPACE).prop_map(Filler::Blank),
        (select(SPACE), "\\PC{0,16}").prop_map(|(ws, text)| Filler::Comment(ws, text)),
    ]
}

/// One sample line and the filler lines before it.
#[derive(Clone, Debug)]
struct TextSample {
    re: f64,
    im: f64,
    how: (u8, u8),
    pad: (&'static str, &'static str, &'static str),
    crlf: bool,
    before: Vec<(Filler, bool)>,
}

#[derive(Clone, Debug)]
struct TextDoc {
    complex: bool,
    samples: Vec<TextSample>,
    trailing: Vec<(Filler, bool)>,
    final_newline: bool,
}

fn text_doc() -> impl Strategy<Value = TextDoc> {
    let sample = (
        finite(),
        finite(),
        (any::<u8>(), any::<u8>()),
        (select(SPACE), select(SEP), select(SPACE)),
        any::<bool>(),
        prop::collection::vec((filler(), any::<bool>()), 0..3),
    )
        .prop_map(|(re, im, how, pad, crlf, before)| TextSample {
            re,
            im,
            how,
            pad,
            crlf,
            before,
        });
    (
        any::<bool>(),
        prop::collection::vec(sample, 1..40),
        prop::collection::vec((filler(), any::<bool>()), 0..3),
        any::<bool>(),
    )
        .prop_map(|(complex, samples, trailing, final_newline)| TextDoc {
            complex,
            samples,
            trailing,
            final_newline,
        })
}

impl TextDoc {
    /// The document's lines (without line ends) and whether each ends in CRLF, with the index
    /// of each sample's line.
    fn lines(&self) -> (Vec<(String, bool)>, Vec<usize>) {
        let mut lines = Vec::new();
        let mut sample_lines = Vec::new();
        let fill = |lines: &mut Vec<(String, bool)>, fillers: &[(Filler, bool)]| {
            for (f, crlf) in fillers {
                let text = match f {
                    Filler::Blank(ws) => ws.to_string(),
                    Filler::Comment(ws, c) => format!("{ws}#{c}"),
                };
                lines.push((text, *crlf));
            }
        };
        for s in &self.samples {
            fill(&mut lines, &s.before);
            let (pre, sep, post) = s.pad;
            let text = if self.complex {
                format!(
                    "{pre}{}{sep}{}{post}",
                    spell(s.re, s.how.0),
                    spell(s.im, s.how.1)
                )
            } else {
                format!("{pre}{}{post}", spell(s.re, s.how.0))
            };
            sample_lines.push(lines.len());
            lines.push((text, s.crlf));
        }
        fill(&mut lines, &self.trailing);
        (lines, sample_lines)
    }

    fn values(&self) -> Vec<f64> {
        let mut v = Vec::new();
        for s in &self.samples {
            v.push(s.re);
            if self.complex {
                v.push(s.im);
            }
        }
        v
    }
}

fn join_lines(lines: &[(String, bool)], final_newline: bool) -> Vec<u8> {
    let mut bytes = Vec::new();
    for (i, (text, crlf)) in lines.iter().enumerate() {
        bytes.extend_from_slice(text.as_bytes());
        if i + 1 < lines.len() || final_newline {
            bytes.extend_from_slice(if *crlf { b"\r\n" } else { b"\n" });
        }
    }
    bytes
}

fn read_text(name: &str, bytes: &[u8], chunk: usize) -> Result<Vec<f64>, FftdError> {
    // any finite f64 round-trips in f64; in f32 numbers past its range are errors (honest_numbers)
    let text = TextSource::new(name, reader(bytes), 1.0).in_precision(Precision::F64);
    let mut src = PrimedTextSource::open(text)?;
    drain(&mut src, chunk, bytes.len() + 1)
}

/// Text errors: name the file, and any line they name exists.
fn check_text_result(name: &str, bytes: &[u8], result: &Result<Vec<f64>, FftdError>) {
    match result {
        Ok(values) => assert!(values.iter().all(|v| v.is_finite()), "{values:?}"),
        Err(err) => {
            assert_names_file(err, name);
            let msg = err.to_string();
            if let Some(line) = number_after(&msg[name.len()..], "line") {
                let lines = bytes.split(|b| *b == b'\n').count() as u64;
                assert!(line >= 1 && line <= lines, "line {line} of {lines}: {err}");
            }
        }
    }
}

/// Lines that are not a valid sample line of the document's kind.
#[derive(Clone, Debug)]
enum BadLine {
    Word(String),
    Junk(&'static str),
    ThreeNumbers,
    OtherKind,
}

fn bad_line() -> impl Strategy<Value = BadLine> {
    prop_oneof![
        // letters g..z never spell a number (no inf, nan, e)
        "[g-zG-Z_][g-zG-Z_0-9]{0,8}".prop_map(BadLine::Word),
        select(&["x", "e", ",", "..", "_", "%", "/2", "e+", "0x1"][..]).prop_map(BadLine::Junk),
        Just(BadLine::ThreeNumbers),
        Just(BadLine::OtherKind),
    ]
}

proptest! {
    #![proptest_config(config(15_000))]
    #[test]
    fn text_arbitrary_bytes(
        name in file_name("txt"),
        bytes in prop_oneof![
            prop::collection::vec(any::<u8>(), 0..300),
            prop::collection::vec(select(TEXT_ALPHABET), 0..300),
        ],
        chunk in 1usize..64,
    ) {
        let result = read_text(&name, &bytes, chunk);
        check_text_result(&name, &bytes, &result);
    }
}

proptest! {
    #![proptest_config(config(10_000))]
    #[test]
    fn text_round_trip(name in file_name("txt"), doc in text_doc(), chunk in 1usize..64) {
        let (lines, _) = doc.lines();
        let bytes = join_lines(&lines, doc.final_newline);
        let got = read_text(&name, &bytes, chunk).map_err(|e| TestCaseError::fail(e.to_string()))?;
        let want = doc.values();
        let bits = |v: &[f64]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        prop_assert_eq!(bits(&got), bits(&want), "{:?}", String::from_utf8_lossy(&bytes));
    }
}

proptest! {
    #![proptest_config(config(15_000))]
    #[test]
    fn text_mutated(
        name in file_name("txt"),
        doc in text_doc(),
        mutations in prop::collection::vec(mutation(TEXT_ALPHABET), 1..5),
        chunk in 1usize..64,
    ) {
        let (lines, _) = doc.lines();
        let bytes = mutate(join_lines(&lines, doc.final_newline), &mutations);
        let result = read_text(&name, &bytes, chunk);
        check_text_result(&name, &bytes, &result);
    }
}

proptest! {
    #![proptest_config(config(10_000))]
    #[test]
    fn text_bad_line_is_named(
        name in file_name("txt"),
        doc in text_doc(),
        which in any::<Index>(),
        bad in bad_line(),
        chunk in 1usize..64,
    ) {
        let (mut lines, sample_lines) = doc.lines();
        let k = which.index(sample_lines.len());
        let s = &doc.samples[k];
        let number = spell(s.re, s.how.0);
        let text = match (&bad, doc.complex) {
            (BadLine::Word(w), _) => w.clone(),
            (BadLine::Junk(j), _) => format!("{number}{j}"),
            (BadLine::ThreeNumbers, _) => format!("{number} 1 2"),
            // the first sample line sets the kind, so only a later one can be of the other kind
            (BadLine::OtherKind, _) if k == 0 => "bad".to_string(),
            (BadLine::OtherKind, true) => number,
            (BadLine::OtherKind, false) => format!("{number} {number}"),
        };
        let line = sample_lines[k];
        lines[line].0 = format!("{}{text}{}", s.pad.0, s.pad.2);
        let bytes = join_lines(&lines, doc.final_newline);
        let err = read_text(&name, &bytes, chunk).expect_err("a bad line must be an error");
        assert_names_file(&err, &name);
        let msg = err.to_string();
        prop_assert!(
            msg.starts_with(&format!("{name}: line {}: ", line + 1)),
            "expected line {}: {}", line + 1, msg
        );
    }
}

// ---- raw ---------------------------------------------------------------------------------------

fn raw_format() -> impl Strategy<Value = InputFormat> {
    select(
        &[
            InputFormat::F32,
            InputFormat::S16,
            InputFormat::Cf32,
            InputFormat::Cu8,
            InputFormat::Cs8,
            InputFormat::Cs16,
        ][..],
    )
}

fn read_raw(
    name: &str,
    bytes: &[u8],
    format: InputFormat,
    channels: usize,
    chunk: usize,
) -> Result<Vec<f64>, FftdError> {
    let mut src = RawSource::new(name, reader(bytes), format, 1.0, channels)?;
    drain(&mut src, chunk, bytes.len() + 1)
}

/// Raw errors: name the file, and any byte offset they name is inside it.
fn check_raw_result(name: &str, bytes: &[u8], result: &Result<Vec<f64>, FftdError>) {
    match result {
        Ok(values) => {
            assert!(!bytes.is_empty(), "an empty raw file read as no samples");
            assert!(values.iter().all(|v| v.is_finite()), "{values:?}");
        }
        Err(err) => {
            assert_names_file(err, name);
            let msg = err.to_string();
            assert!(
                bytes.is_empty() || !msg.ends_with(": is empty"),
                "{msg} ({} bytes)",
                bytes.len()
            );
            if let Some(offset) = number_after(&msg[name.len()..], "offset") {
                assert!(
                    (offset as usize) < bytes.len(),
                    "{err} ({} bytes)",
                    bytes.len()
                );
            }
        }
    }
}

/// A valid raw file: its bytes and the values fftd must read back.
fn raw_file() -> impl Strategy<Value = (InputFormat, usize, Vec<u8>, Vec<f64>)> {
    (raw_format(), 1usize..=4, 1usize..64).prop_flat_map(|(format, channels, frames)| {
        let values = match format {
            InputFormat::S16 | InputFormat::F32 => 1,
            _ => 2,
        } * channels
            * frames;
        let ints = |decode: fn(&[u8]) -> f64, width: usize| {
            prop::collection::vec(any::<u8>(), values * width)
                .prop_map(move |bytes| {
                    let values = bytes.chunks_exact(width).map(decode).collect();
                    (bytes, values)
                })
                .boxed()
        };
        let samples = match format {
            // the scalings docs/radio.md gives
            InputFormat::Cu8 => ints(|b| (f64::from(b[0]) - 127.5) / 127.5, 1),
            InputFormat::Cs8 => ints(|b| f64::from(b[0] as i8) / 128.0, 1),
            InputFormat::Cs16 => ints(|b| f64::from(i16::from_le_bytes([b[0], b[1]])) / 32768.0, 2),
            InputFormat::S16 => prop::collection::vec(any::<i16>(), values)
                .prop_map(|v| {
                    let bytes = v.iter().flat_map(|s| s.to_le_bytes()).collect();
                    let values = v.iter().map(|s| f64::from(*s) / 32768.0).collect();
                    (bytes, values)
                })
                .boxed(),
            _ => {
                use proptest::num::f32 as f;
                let finite = f::POSITIVE | f::NEGATIVE | f::NORMAL | f::SUBNORMAL | f::ZERO;
                prop::collection::vec(finite, values)
                    .prop_map(|v| {
                        let bytes = v.iter().flat_map(|s| s.to_le_bytes()).collect();
                        let values = v.iter().map(|s| f64::from(*s)).collect();
                        (bytes, values)
                    })
                    .boxed()
            }
        };
        samples.prop_map(move |(bytes, values)| (format, channels, bytes, values))
    })
}

const RAW_ALPHABET: &[u8] = &[0x00, 0x7f, 0x80, 0xff, 0x3f, 0xc0];

proptest! {
    #![proptest_config(config(10_000))]
    #[test]
    fn raw_arbitrary_bytes(
        name in file_name("f32"),
        format in raw_format(),
        // huge counts too: a frame size that overflows, or far larger than the input
        channels in prop_oneof![8 => 1usize..=4, 1 => Just(0usize), 1 => 1usize..1 << 40, 1 => any::<usize>()],
        bytes in prop::collection::vec(any::<u8>(), 0..300),
        chunk in 1usize..64,
    ) {
        let result = read_raw(&name, &bytes, format, channels, chunk);
        check_raw_result(&name, &bytes, &result);
    }
}

proptest! {
    #![proptest_config(config(10_000))]
    #[test]
    fn raw_round_trip(name in file_name("cf32"), (format, channels, bytes, want) in raw_file(), chunk in 1usize..64) {
        let got = read_raw(&name, &bytes, format, channels, chunk)
            .map_err(|e| TestCaseError::fail(e.to_string()))?;
        let bits = |v: &[f64]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        prop_assert_eq!(bits(&got), bits(&want));
    }
}

proptest! {
    #![proptest_config(config(10_000))]
    #[test]
    fn raw_mutated(
        name in file_name("s16"),
        (format, channels, bytes, _) in raw_file(),
        mutations in prop::collection::vec(mutation(RAW_ALPHABET), 1..5),
        chunk in 1usize..64,
    ) {
        let bytes = mutate(bytes, &mutations);
        let result = read_raw(&name, &bytes, format, channels, chunk);
        check_raw_result(&name, &bytes, &result);
    }
}

// ---- SigMF -------------------------------------------------------------------------------------

const SIGMF_TYPES: &[&str] = &[
    "cf32_le", "cf64_be", "ci8", "ci16_le", "ci32_be", "cu8", "cu16_le", "cu32_be", "rf32_be",
    "rf64_le", "ri8", "ri16_be", "ri32_le", "ru8", "ru16_be", "ru32_le",
];

/// A valid SigMF metadata document: datatype, rate, channels and two captures.
fn sigmf_doc() -> impl Strategy<Value = String> {
    (
        select(SIGMF_TYPES),
        1u32..10_000_000,
        1usize..=3,
        0u64..1000,
        0.0f64..6e9,
    )
        .prop_map(|(t, rate, channels, start, hz)| {
            format!(
                r#"{{"global":{{"core:datatype":"{t}","core:sample_rate":{rate},"core:num_channels":{channels},"core:version":"1.2.0"}},"captures":[{{"core:sample_start":0,"core:frequency":{hz},"core:datetime":"2024-01-02T03:04:05Z"}},{{"core:sample_start":{start},"core:frequency":{}}}],"annotations":[]}}"#,
                hz + 1e6
            )
        })
}

fn read_sigmf_meta(name: &str, bytes: &[u8]) -> Result<fftd::source::sigmf::Recording, FftdError> {
    let mut input = std::io::Cursor::new(bytes.to_vec());
    fftd::source::sigmf::read_recording(name, Some(&mut input))
}

/// A metadata error names the metadata file and is one line.
fn check_sigmf_meta(name: &str, result: &Result<fftd::source::sigmf::Recording, FftdError>) {
    if let Err(err) = result {
        let meta = fftd::source::sigmf::paths(name).0;
        let msg = err.to_string();
        assert!(msg.starts_with(&format!("{meta}: ")), "{msg}");
        assert!(!msg.contains('\n'), "{msg}");
    }
}

const JSON_ALPHABET: &[u8] = b"{}[]\",:0123456789.-eEtrufalsn_ cfiu";

proptest! {
    #![proptest_config(config(5_000))]
    #[test]
    fn sigmf_meta_arbitrary_bytes(
        name in file_name("sigmf-meta"),
        bytes in prop::collection::vec(any::<u8>(), 0..300),
    ) {
        check_sigmf_meta(&name, &read_sigmf_meta(&name, &bytes));
    }
}

proptest! {
    #![proptest_config(config(10_000))]
    #[test]
    fn sigmf_meta_valid_and_mutated(
        name in file_name("sigmf-meta"),
        doc in sigmf_doc(),
        mutations in prop::collection::vec(mutation(JSON_ALPHABET), 0..4),
    ) {
        let valid = mutations.is_empty();
        let bytes = mutate(doc.into_bytes(), &mutations);
        let result = read_sigmf_meta(&name, &bytes);
        if valid {
            let r = result.as_ref().map_err(|e| TestCaseError::fail(e.to_string()))?;
            prop_assert_eq!(r.tuning.as_ref().map(|t| t.captures.len()), Some(2));
        }
        check_sigmf_meta(&name, &result);
    }
}

proptest! {
    #![proptest_config(config(10_000))]
    #[test]
    fn sigmf_data_arbitrary_bytes(
        name in file_name("sigmf-data"),
        datatype in select(SIGMF_TYPES),
        channels in 1usize..=3,
        bytes in prop::collection::vec(any::<u8>(), 0..300),
        precision in select(&[Precision::F32, Precision::F64][..]),
        chunk in 1usize..64,
    ) {
        let t = fftd::source::iq::SampleType::from_sigmf(datatype).expect("a spec type");
        let result = RawSource::typed(&name, reader(&bytes), t, precision, (1.0, channels), None)
            .and_then(|mut src| drain(&mut src, chunk, bytes.len() + 1));
        check_raw_result(&name, &bytes, &result);
    }
}

// ---- WAV ---------------------------------------------------------------------------------------

/// A canonical 44-byte-header PCM16 WAV file.
fn wav_pcm16(channels: u16, rate: u32, samples: &[i16]) -> Vec<u8> {
    let data_len = (samples.len() * 2) as u32;
    let mut b = Vec::with_capacity(44 + data_len as usize);
    b.extend_from_slice(b"RIFF");
    b.extend_from_slice(&(36 + data_len).to_le_bytes());
    b.extend_from_slice(b"WAVEfmt ");
    b.extend_from_slice(&16u32.to_le_bytes());
    b.extend_from_slice(&1u16.to_le_bytes()); // PCM
    b.extend_from_slice(&channels.to_le_bytes());
    b.extend_from_slice(&rate.to_le_bytes());
    b.extend_from_slice(&(rate * u32::from(channels) * 2).to_le_bytes());
    b.extend_from_slice(&(channels * 2).to_le_bytes());
    b.extend_from_slice(&16u16.to_le_bytes());
    b.extend_from_slice(b"data");
    b.extend_from_slice(&data_len.to_le_bytes());
    for s in samples {
        b.extend_from_slice(&s.to_le_bytes());
    }
    b
}

fn wav_file() -> impl Strategy<Value = (u16, u32, Vec<i16>)> {
    (1u16..=4, 1u32..=192_000, 1usize..48).prop_flat_map(|(channels, rate, frames)| {
        prop::collection::vec(any::<i16>(), frames * channels as usize)
            .prop_map(move |samples| (channels, rate, samples))
    })
}

fn read_wav(name: &str, bytes: &[u8], chunk: usize) -> Result<Vec<f64>, FftdError> {
    let mut src = WavSource::new(name, reader(bytes))?;
    drain(&mut src, chunk, bytes.len() + 1)
}

fn check_wav_result(name: &str, result: &Result<Vec<f64>, FftdError>) {
    match result {
        Ok(values) => assert!(values.iter().all(|v| v.is_finite()), "{values:?}"),
        Err(err) => assert_names_file(err, name),
    }
}

/// Starts that get random bytes past the RIFF checks.
const WAV_PREFIXES: &[&[u8]] = &[
    b"",
    b"RIFF",
    b"RIFF\x24\x00\x00\x00WAVE",
    b"RIFF\xff\xff\xff\xffWAVEfmt ",
];

const WAV_ALPHABET: &[u8] = &[
    0x00, 0x01, 0x02, 0x03, 0x08, 0x10, 0x18, 0x20, 0x80, 0xfe, 0xff,
];

proptest! {
    #![proptest_config(config(10_000))]
    #[test]
    fn wav_arbitrary_bytes(
        name in file_name("wav"),
        prefix in select(WAV_PREFIXES),
        tail in prop::collection::vec(any::<u8>(), 0..200),
        chunk in 1usize..64,
    ) {
        let bytes = [prefix, &tail[..]].concat();
        let result = read_wav(&name, &bytes, chunk);
        check_wav_result(&name, &result);
    }
}

proptest! {
    #![proptest_config(config(5_000))]
    #[test]
    fn wav_round_trip(name in file_name("wav"), (channels, rate, samples) in wav_file(), chunk in 1usize..64) {
        let bytes = wav_pcm16(channels, rate, &samples);
        let mut src = WavSource::new(&name, reader(&bytes)).map_err(|e| TestCaseError::fail(e.to_string()))?;
        prop_assert_eq!(src.info().channels, channels as usize);
        prop_assert_eq!(src.info().rate, f64::from(rate));
        let got = drain(&mut src, chunk, bytes.len() + 1).map_err(|e| TestCaseError::fail(e.to_string()))?;
        let want: Vec<f64> = samples.iter().map(|s| f64::from(*s) / 32768.0).collect();
        prop_assert_eq!(got, want);
    }
}

proptest! {
    #![proptest_config(config(15_000))]
    #[test]
    fn wav_mutated(
        name in file_name("wav"),
        (channels, rate, samples) in wav_file(),
        // most mutations land in the header, where the parsing is
        mutations in prop::collection::vec(
            prop_oneof![3 => (0usize..48, mutation(WAV_ALPHABET)).prop_map(|(at, m)| (Some(at), m)),
                        1 => mutation(WAV_ALPHABET).prop_map(|m| (None, m))],
            1..5),
        chunk in 1usize..64,
    ) {
        let mut bytes = wav_pcm16(channels, rate, &samples);
        for (at, m) in &mutations {
            // a mutation pinned to a header byte: replace, flip or insert there
            bytes = match (at, m) {
                (Some(at), Mutation::Flip(_, bit)) if *at < bytes.len() => { bytes[*at] ^= 1 << bit; bytes }
                (Some(at), Mutation::Replace(_, b)) if *at < bytes.len() => { bytes[*at] = *b; bytes }
                (Some(at), Mutation::Insert(_, b)) if *at <= bytes.len() => { bytes.insert(*at, *b); bytes }
                _ => mutate(bytes, std::slice::from_ref(m)),
            };
        }
        let result = read_wav(&name, &bytes, chunk);
        check_wav_result(&name, &result);
    }
}

// ---- TOML config -------------------------------------------------------------------------------

/// Every config key with values to try: ones of the right type (which validation may still
/// refuse, such as `hop = 0`), then ones of the wrong type or out of range.
type KeyValues = (
    &'static str,
    &'static [&'static str],
    &'static [&'static str],
);
const KEYS: &[KeyValues] = &[
    (
        "file",
        &["[]", "[\"a.txt\"]", "[\"a.txt\", \"-\"]"],
        &["\"a.txt\"", "[1]", "{}"],
    ),
    ("mic", &["\"\"", "\"usb\""], &["0", "true"]),
    (
        "input-format",
        &[
            "\"text\"", "\"wav\"", "\"f32\"", "\"s16\"", "\"cf32\"", "\"flac\"", "\"mp3\"",
            "\"ogg\"", "\"aiff\"", "\"caf\"", "\"m4a\"",
        ],
        &["\"opus\"", "\"aac\"", "3"],
    ),
    (
        "center-freq",
        &["100000000.0", "0.0", "-1.0", "nan", "1e300"],
        &["\"FM\"", "100000000"],
    ),
    (
        "gain",
        &["\"auto\"", "29.7", "0", "-5.0", "\"12.5\""],
        &["\"loud\"", "1000", "true"],
    ),
    (
        "rate",
        &[
            "1.0", "48000.0", "-1.0", "0.0", "nan", "inf", "-inf", "1e308", "5e-324",
        ],
        &["48000", "\"fast\""],
    ),
    ("channels", &["1", "2", "0"], &["-1", "1.5", "\"two\""]),
    (
        "channel",
        &["\"mix\"", "\"all\"", "0", "3"],
        &["\"left\"", "-1", "1.5", "\"99999999999999999999999\""],
    ),
    (
        "frame",
        &["4096", "2", "\"whole\"", "\"4096\""],
        &["1", "0", "\"big\"", "-5", "1.0", "[]"],
    ),
    (
        "hop",
        &["1", "0", "256", "9223372036854775807"],
        &["-1", "\"x\""],
    ),
    ("tail", &["\"pad\"", "\"drop\""], &["\"keep\"", "1"]),
    (
        "window",
        &[
            "\"rect\"",
            "\"hann\"",
            "\"hamming\"",
            "\"blackman\"",
            "\"blackman-harris\"",
            "\"flattop\"",
        ],
        &["\"kaiser\"", "true"],
    ),
    (
        "scale",
        &[
            "\"magnitude\"",
            "\"db\"",
            "\"power\"",
            "\"spectrum\"",
            "\"density\"",
        ],
        &["\"linear\""],
    ),
    ("fftshift", &["true", "false"], &["\"yes\"", "1"]),
    ("precision", &["\"f32\"", "\"f64\""], &["\"f16\""]),
    (
        "format",
        &["\"text\"", "\"csv\"", "\"ndjson\"", "\"f32\"", "\"npy\""],
        &["\"json\""],
    ),
    ("output", &["\"out.txt\"", "\"-\"", "\"\""], &["5"]),
    ("output-dir", &["\"dir\""], &["[]"]),
    ("meta", &["\"m.json\""], &["1"]),
    ("stats", &["true", "false"], &["\"no\""]),
    (
        "max-frames",
        &["1", "0", "9223372036854775807"],
        &["-3", "1e3"],
    ),
    (
        "duration",
        &["1.5", "0.0", "-1.0", "nan", "inf"],
        &["\"1s\"", "1"],
    ),
    (
        "device",
        &["\"auto\"", "\"cpu\"", "\"gpu\"", "\"opencl:0:1\""],
        &[
            "\"opencl:x:1\"",
            "\"opencl:99999999999999999999:0\"",
            "\"tpu\"",
            "0",
        ],
    ),
    ("batch", &["0", "8"], &["-1"]),
    (
        "max-latency",
        &["5.0", "0.0", "-1.0", "nan", "inf"],
        &["\"x\"", "5"],
    ),
    ("workers", &["0", "4"], &["-2"]),
];

#[derive(Clone, Debug)]
enum ConfigLine {
    /// Key, a wrong value?, which value, `=` spelling, line end; the key is written again only
    /// when it is a repeat (an error in TOML).
    Key(usize, bool, Index, &'static str, &'static str, bool),
    Unknown(&'static str),
    Comment(String),
    Blank,
    Garbage(String),
}

fn config_line() -> impl Strategy<Value = ConfigLine> {
    prop_oneof![
        24 => (0..KEYS.len(), prop::bool::weighted(0.1), any::<Index>(), select(&["=", " = ", "\t=  "][..]), select(&["", " # note", "  "][..]))
            .prop_flat_map(|(k, bad, v, eq, end)| prop::bool::weighted(0.05).prop_map(move |repeat| ConfigLine::Key(k, bad, v, eq, end, repeat))),
        1 => select(&["fram = 3", "colour = \"red\"", "[input]", "input.frame = 4", "frame.size = 2"][..]).prop_map(ConfigLine::Unknown),
        1 => "\\PC{0,12}".prop_map(ConfigLine::Comment),
        1 => Just(ConfigLine::Blank),
        1 => "[a-z=\"'\\[\\]{}.,# 0-9-]{1,16}".prop_map(ConfigLine::Garbage),
    ]
}

fn config_doc() -> impl Strategy<Value = (String, Vec<&'static str>)> {
    (
        prop::collection::vec((config_line(), any::<bool>()), 0..12),
        any::<bool>(),
    )
        .prop_map(|(lines, final_newline)| {
            let mut text = String::new();
            let mut keys = Vec::new();
            for (i, (line, crlf)) in lines.iter().enumerate() {
                match line {
                    ConfigLine::Key(k, bad, v, eq, end, repeat) => {
                        let (key, good, wrong) = KEYS[*k];
                        if keys.contains(&key) && !repeat {
                            continue;
                        }
                        let values = if *bad { wrong } else { good };
                        text += &format!("{key}{eq}{}{end}", values[v.index(values.len())]);
                        keys.push(key);
                    }
                    ConfigLine::Unknown(l) => text += l,
                    ConfigLine::Comment(c) => text += &format!("#{c}"),
                    ConfigLine::Blank => {}
                    ConfigLine::Garbage(g) => text += g,
                }
                if i + 1 < lines.len() || final_newline {
                    text += if *crlf { "\r\n" } else { "\n" };
                }
            }
            (text, keys)
        })
}

/// A config parse error is one line `PATH:LINE: ...` with LINE inside the document.
fn assert_config_error(err: &FftdError, path: &str, text: &str) {
    let msg = err.to_string();
    assert!(matches!(err, FftdError::Usage(_)), "{err:?}");
    assert!(!msg.contains('\n'), "error is not one line: {msg:?}");
    let rest = msg
        .strip_prefix(&format!("{path}:"))
        .unwrap_or_else(|| panic!("error does not start with '{path}:': {msg:?}"));
    let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
    let line: usize = digits
        .parse()
        .unwrap_or_else(|_| panic!("error names no line: {msg:?}"));
    let lines = text.split('\n').count();
    assert!(
        line >= 1 && line <= lines,
        "line {line} of {lines}: {msg:?}"
    );
}

fn config_path() -> impl Strategy<Value = String> {
    "(/etc/fftd/)?[a-z][a-z0-9_.-]{0,10}\\.toml"
}

proptest! {
    #![proptest_config(config(15_000))]
    #[test]
    fn config_random_documents(path in config_path(), (text, keys) in config_doc(), give_file in prop::bool::weighted(0.8)) {
        match parse_config(&text, Path::new(&path)) {
            Err(err) => assert_config_error(&err, &path, &text),
            Ok(mut options) => {
                if give_file && options.file.is_empty() && options.mic.is_none() {
                    options.file = vec!["x.txt".into()];
                }
                if let Err(err) = Settings::from_options(options) {
                    let msg = err.to_string();
                    prop_assert!(matches!(err, FftdError::Usage(_)), "{:?}", err);
                    prop_assert!(!msg.contains('\n'), "{:?}", msg);
                    // the flags it names: at least one must be one the document set, or the input
                    let named: Vec<&str> = msg
                        .match_indices("--")
                        .map(|(at, _)| {
                            let flag = &msg[at + 2..];
                            let end = flag.find(|c: char| !(c.is_ascii_lowercase() || c == '-')).unwrap_or(flag.len());
                            &flag[..end]
                        })
                        .collect();
                    prop_assert!(
                        named.iter().any(|f| keys.contains(f) || *f == "file" || *f == "mic"),
                        "{} names none of {:?}", msg, keys
                    );
                }
            }
        }
    }
}

proptest! {
    #![proptest_config(config(10_000))]
    #[test]
    fn config_arbitrary_text(
        path in config_path(),
        text in prop_oneof![
            "\\PC{0,80}",
            "[a-z=\"'\\[\\]{}.,#\n\r\t 0-9+_-]{0,80}",
        ],
    ) {
        if let Err(err) = parse_config(&text, Path::new(&path)) {
            assert_config_error(&err, &path, &text);
        }
    }
}

/// Found by `raw_arbitrary_bytes`: a channel count whose frame size overflowed wrapped to a
/// 0-byte frame (a 276-byte file then read as "is empty", as with 0 channels), and a large one
/// sized the read buffer as 16384 frames up front (`--channels 3000000` on an 8-byte file was
/// killed for memory).
#[test]
fn raw_huge_channel_counts() {
    let bytes = [0u8; 8];
    let err = read_raw("x.f32", &bytes, InputFormat::F32, 1 << 62, 4096).expect_err("overflow");
    assert_eq!(
        err.to_string(),
        "x.f32: cannot be read as 4611686018427387904 interleaved f32 channels"
    );
    let err = read_raw("x.f32", &bytes, InputFormat::F32, 0, 4096).expect_err("zero channels");
    assert_names_file(&err, "x.f32");
    let err = read_raw("x.f32", &bytes, InputFormat::F32, 3_000_000, 16384).expect_err("short");
    assert!(err.to_string().contains("truncated"), "{err}");
}
