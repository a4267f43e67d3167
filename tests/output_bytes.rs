//! Output bytes pinned: every format, to one `--output` and into `--output-dir`, real and complex
//! (`--fftshift`, odd and even frame sizes) input, f32 and f64 precision, several workers with
//! one frame per batch. Two checks:
//!
//! - `golden_bytes`: byte-for-byte against files written by fftd before the encode stage existed
//!   (tests/golden/output_bytes, `.golden` added to each name so `*.npy` ignores none; `FFTD_BLESS=1` rewrites them — only do that for a deliberate
//!   format change).
//! - `formats_agree_with_a_reference_formatter`: text, csv, ndjson and f32 bytes against a plain
//!   formatter written here (ryu, format!) fed the exact values of the same run's npy output, and
//!   the npy header against one built here. Independent of the golden files' machine.

use crate::common;

use common::*;
use std::path::{Path, PathBuf};

const FORMATS: [&str; 5] = ["text", "csv", "ndjson", "f32", "npy"];

/// Writes the test inputs into `dir`: a real 2-channel f32 file and a complex 2-channel cf32 file.
fn inputs(dir: &Path) -> (PathBuf, PathBuf) {
    let real = dir.join("real.f32");
    let x = noise(2 * 200, 11);
    let bytes: Vec<u8> = x.iter().flat_map(|v| (*v as f32).to_le_bytes()).collect();
    std::fs::write(&real, bytes).expect("write real");
    let complex = dir.join("iq.cf32");
    let z = noise(2 * 2 * 150, 12);
    let bytes: Vec<u8> = z.iter().flat_map(|v| (*v as f32).to_le_bytes()).collect();
    std::fs::write(&complex, bytes).expect("write complex");
    (real, complex)
}

/// One pinned run: its name and arguments (inputs named by the placeholders REAL / IQ).
struct Case {
    name: &'static str,
    args: &'static [&'static str],
    /// Into `--output-dir` (else `--output`).
    dir: bool,
}

const CASES: &[Case] = &[
    Case {
        name: "real-mix",
        args: &[
            "--file",
            "REAL",
            "--channels",
            "2",
            "--rate",
            "1000",
            "--frame",
            "16",
            "--hop",
            "8",
        ],
        dir: false,
    },
    Case {
        name: "real-mix-f64",
        args: &[
            "--file",
            "REAL",
            "--channels",
            "2",
            "--rate",
            "1000",
            "--frame",
            "16",
            "--precision",
            "f64",
        ],
        dir: false,
    },
    Case {
        name: "iq-shift-odd",
        args: &[
            "--file",
            "IQ",
            "--channels",
            "2",
            "--channel",
            "0",
            "--rate",
            "48000",
            "--frame",
            "15",
            "--fftshift",
        ],
        dir: false,
    },
    Case {
        name: "iq-shift-even-f64",
        args: &[
            "--file",
            "IQ",
            "--channels",
            "2",
            "--channel",
            "1",
            "--rate",
            "48000",
            "--frame",
            "16",
            "--fftshift",
            "--precision",
            "f64",
        ],
        dir: false,
    },
    Case {
        name: "dir-real-all",
        args: &[
            "--file",
            "REAL",
            "--channels",
            "2",
            "--channel",
            "all",
            "--rate",
            "1000",
            "--frame",
            "16",
            "--hop",
            "4",
            "--workers",
            "4",
            "--batch",
            "1",
        ],
        dir: true,
    },
    Case {
        name: "dir-iq-shift",
        args: &[
            "--file",
            "IQ",
            "--channels",
            "2",
            "--channel",
            "all",
            "--rate",
            "48000",
            "--frame",
            "8",
            "--fftshift",
            "--workers",
            "4",
            "--batch",
            "1",
        ],
        dir: true,
    },
];

/// Shared output of several streams (csv and ndjson only; rows interleave in read order).
const SHARED: Case = Case {
    name: "shared-real-all",
    args: &[
        "--file",
        "REAL",
        "--channels",
        "2",
        "--channel",
        "all",
        "--rate",
        "1000",
        "--frame",
        "16",
        "--hop",
        "4",
        "--workers",
        "4",
        "--batch",
        "1",
    ],
    dir: false,
};

/// Runs `case` in `format`; returns (file name, bytes) of every output, sorted by name.
fn run_case(
    case: &Case,
    format: &str,
    inputs: &(PathBuf, PathBuf),
    out: &Path,
) -> Vec<(String, Vec<u8>)> {
    let _ = std::fs::remove_dir_all(out);
    std::fs::create_dir_all(out).expect("out dir");
    let mut args = case_args(case, inputs);
    args.extend(["--format".into(), format.into()]);
    if case.dir {
        args.extend(["--output-dir".into(), out.display().to_string()]);
    } else {
        args.extend(["--output".into(), out.join("out").display().to_string()]);
    }
    run_ok(&args, &format!("{} {format}", case.name));
    let mut files: Vec<(String, Vec<u8>)> = std::fs::read_dir(out)
        .expect("read out")
        .map(|e| {
            let e = e.expect("entry");
            (
                e.file_name().to_string_lossy().into_owned(),
                std::fs::read(e.path()).expect("read"),
            )
        })
        .collect();
    files.sort();
    assert!(!files.is_empty(), "{} {format}: no output", case.name);
    files
}

/// fftd with `args`, which must succeed (`what` names the run in the failure).
fn run_ok(args: &[String], what: &str) -> std::process::Output {
    let refs: Vec<&str> = args.iter().map(String::as_str).collect();
    let result = run(&refs);
    assert!(result.status.success(), "{what}: {}", stderr_text(&result));
    result
}

/// A case's arguments with the inputs' paths in place of REAL and IQ.
fn case_args(case: &Case, inputs: &(PathBuf, PathBuf)) -> Vec<String> {
    (case.args.iter())
        .map(|a| match *a {
            "REAL" => inputs.0.display().to_string(),
            "IQ" => inputs.1.display().to_string(),
            other => other.to_string(),
        })
        .collect()
}

fn golden_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden/output_bytes")
}

/// Every (case, format) run.
fn all_runs() -> Vec<(&'static Case, &'static str)> {
    let mut runs: Vec<(&Case, &str)> = CASES
        .iter()
        .flat_map(|c| FORMATS.iter().map(move |f| (c, *f)))
        .collect();
    runs.push((&SHARED, "csv"));
    runs.push((&SHARED, "ndjson"));
    runs
}

#[test]
fn golden_bytes() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let ins = inputs(tmp.path());
    let bless = std::env::var_os("FFTD_BLESS").is_some();
    for (case, format) in all_runs() {
        let files = run_case(case, format, &ins, &tmp.path().join("out"));
        for (name, bytes) in files {
            let golden = golden_dir().join(format!("{}.{format}.{name}.golden", case.name));
            if bless {
                std::fs::create_dir_all(golden_dir()).expect("golden dir");
                std::fs::write(&golden, &bytes).expect("bless");
                continue;
            }
            let want =
                std::fs::read(&golden).unwrap_or_else(|e| panic!("{}: {e}", golden.display()));
            assert!(
                bytes == want,
                "{} differs from the pinned output ({} bytes, want {})",
                golden.display(),
                bytes.len(),
                want.len()
            );
        }
    }
}

/// The values of an npy file (checking the header against one built here).
fn npy_values(bytes: &[u8], wide: bool) -> (usize, Vec<f64>) {
    let dict_end = 128;
    let head = String::from_utf8_lossy(&bytes[10..dict_end]).into_owned();
    let shape = head.split("'shape': (").nth(1).expect("shape");
    let mut dims = shape
        .split(')')
        .next()
        .expect("dims")
        .split(',')
        .map(|d| d.trim().parse::<usize>().expect("dim"));
    let (rows, bins) = (dims.next().expect("rows"), dims.next().expect("bins"));
    let descr = if wide { "<f8" } else { "<f4" };
    let dict =
        format!("{{'descr': '{descr}', 'fortran_order': False, 'shape': ({rows}, {bins}), }}");
    let mut want = b"\x93NUMPY\x01\x00".to_vec();
    want.extend_from_slice(&118u16.to_le_bytes());
    want.extend_from_slice(dict.as_bytes());
    want.resize(127, b' ');
    want.push(b'\n');
    assert_eq!(&bytes[..128], &want[..], "npy header");
    let data = &bytes[128..];
    let values: Vec<f64> = if wide {
        data.chunks_exact(8)
            .map(|c| f64::from_le_bytes(c.try_into().expect("8")))
            .collect()
    } else {
        data.chunks_exact(4)
            .map(|c| f32::from_le_bytes(c.try_into().expect("4")) as f64)
            .collect()
    };
    assert_eq!(values.len(), rows * bins, "npy data length");
    (bins, values)
}

/// Shortest round-trip text of a value at the run's precision.
fn shortest(v: f64, wide: bool) -> String {
    let mut b = ryu::Buffer::new();
    if wide {
        b.format_finite(v).to_string()
    } else {
        b.format_finite(v as f32).to_string()
    }
}

/// A case's stream parameters: (rate, frame, hop, complex, fftshift, f64).
fn params(case: &Case) -> (f64, usize, usize, bool, bool, bool) {
    let get = |flag: &str| {
        case.args
            .iter()
            .position(|a| *a == flag)
            .map(|i| case.args[i + 1])
    };
    let n: usize = get("--frame").expect("frame").parse().expect("n");
    let hop = get("--hop").map_or(n, |h| h.parse().expect("hop"));
    (
        get("--rate").expect("rate").parse().expect("rate"),
        n,
        hop,
        case.args.contains(&"IQ"),
        case.args.contains(&"--fftshift"),
        get("--precision") == Some("f64"),
    )
}

#[test]
fn formats_agree_with_a_reference_formatter() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let ins = inputs(tmp.path());
    let out = tmp.path().join("out");
    for case in CASES {
        let (rate, n, hop, complex, shift, wide) = params(case);
        let npy = run_case(case, "npy", &ins, &out);
        for format in ["text", "csv", "ndjson", "f32"] {
            let files = run_case(case, format, &ins, &out);
            assert_eq!(files.len(), npy.len(), "{} {format}: outputs", case.name);
            for (stream, ((_, got), (_, npy_bytes))) in files.iter().zip(&npy).enumerate() {
                let (bins, values) = npy_values(npy_bytes, wide);
                let id = if case.dir { stream } else { 0 };
                let mut want = Vec::new();
                if format == "csv" {
                    let step = rate / n as f64;
                    let mut f: Vec<f64> = if complex {
                        (0..n).map(|k| if k < n.div_ceil(2) { k as f64 } else { k as f64 - n as f64 } * step).collect()
                    } else {
                        (0..bins).map(|k| k as f64 * step).collect()
                    };
                    if shift && complex {
                        f.rotate_left(n.div_ceil(2));
                    }
                    let hz: Vec<String> = f.iter().map(|v| shortest(*v, true)).collect();
                    want.extend_from_slice(
                        format!("stream,frame,time_s,{}\n", hz.join(",")).as_bytes(),
                    );
                }
                for (frame, row) in values.chunks_exact(bins).enumerate() {
                    let t = shortest((frame * hop) as f64 / rate, true);
                    let text: Vec<String> = row.iter().map(|v| shortest(*v, wide)).collect();
                    match format {
                        "text" => want.extend_from_slice(format!("{}\n", text.join(" ")).as_bytes()),
                        "csv" => want.extend_from_slice(format!("{id},{frame},{t},{}\n", text.join(",")).as_bytes()),
                        "ndjson" => want.extend_from_slice(
                            format!("{{\"stream\":{id},\"frame\":{frame},\"time_s\":{t},\"bins\":[{}]}}\n", text.join(",")).as_bytes(),
                        ),
                        _ => want.extend(row.iter().flat_map(|v| (*v as f32).to_le_bytes())),
                    }
                }
                assert!(
                    *got == want,
                    "{} {format} stream {stream}: bytes differ from the reference formatter",
                    case.name
                );
            }
        }
    }
}

#[test]
fn encode_stage_keeps_order_with_several_workers_and_encoders() {
    // 4 workers and 4 encode threads, one frame per batch: batches finish out of order; the
    // output must equal a one-worker, one-encoder run with large batches
    let tmp = tempfile::tempdir().expect("tempdir");
    let input = tmp.path().join("long.f32");
    let x = noise(2 * 64 * 400, 13);
    let bytes: Vec<u8> = x.iter().flat_map(|v| (*v as f32).to_le_bytes()).collect();
    std::fs::write(&input, bytes).expect("write");
    let inp = input.to_str().expect("utf8");
    let run_with = |encoders: &str, workers: &str, batch: &str| {
        let out = fftd()
            .env("FFTD_ENCODERS", encoders)
            .args([
                "--file",
                inp,
                "--channels",
                "2",
                "--channel",
                "all",
                "--frame",
                "64",
            ])
            .args([
                "--format",
                "ndjson",
                "--device",
                "cpu",
                "--workers",
                workers,
                "--batch",
                batch,
            ])
            .output()
            .expect("fftd runs");
        assert!(out.status.success(), "{}", stderr_text(&out));
        out.stdout
    };
    let reference = run_with("1", "1", "64");
    assert_eq!(String::from_utf8_lossy(&reference).lines().count(), 800);
    for _ in 0..3 {
        assert!(run_with("4", "4", "1") == reference, "rows out of order");
    }
}

/// issue 41: f32 rows of f32 spectra to a pipe are written from the spectra buffers themselves
/// (no encoder copies them; `--stats` counts them), and their bytes are the pinned ones; rows
/// that must be encoded (`--fftshift`, f64 spectra as f32) are, and match too.
#[test]
fn f32_rows_to_a_pipe_go_out_without_a_copy_and_match_the_pinned_bytes() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let ins = inputs(tmp.path());
    for case in CASES.iter().filter(|c| !c.dir) {
        let mut args = case_args(case, &ins);
        args.extend(["--format", "f32", "--stats"].map(String::from));
        let result = run_ok(&args, case.name);
        let golden = golden_dir().join(format!("{}.f32.out.golden", case.name));
        let want = std::fs::read(&golden).unwrap_or_else(|e| panic!("{}: {e}", golden.display()));
        assert!(
            result.stdout == want,
            "{}: stdout differs from {}",
            case.name,
            golden.display()
        );
        let stats = stderr_text(&result);
        let uncopied: u64 = stats
            .split("encoders; ")
            .nth(1)
            .and_then(|rest| rest.split(' ').next())
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("{}: no count of rows without a copy in {stats}", case.name));
        let frames_out: u64 = (stats.split("frames out ").nth(1))
            .and_then(|rest| rest.split(',').next())
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("{}: no frames out in {stats}", case.name));
        let in_memory = !case.args.contains(&"--fftshift") && !case.name.ends_with("f64");
        let want_uncopied = if in_memory { frames_out } else { 0 };
        assert!(frames_out > 0, "{}: {stats}", case.name);
        assert_eq!(uncopied, want_uncopied, "{}: {stats}", case.name);
    }
}

/// issue 41: the pinned f64 cases with f32 output on the OpenCL device (PoCL in tests), whose
/// f64 run moves f32 over the bus where it may (`dispatch::carriage`): samples up as f32 where
/// they are f32 values (one channel of the cf32 file; the two channels of the real file mixed
/// are not), rows down as f32 where nothing reads them (not with `--fftshift`). The bytes are
/// the pinned ones, to a pipe and into a file.
#[test]
fn f64_cases_on_the_device_match_the_pinned_f32_bytes() {
    if std::env::var("FFTD_SKIP_OPENCL_TESTS").is_ok_and(|v| v == "1") {
        return;
    }
    let tmp = tempfile::tempdir().expect("tempdir");
    let ins = inputs(tmp.path());
    let file = tmp.path().join("out.f32");
    for case in CASES.iter().filter(|c| c.name.ends_with("f64")) {
        let golden = golden_dir().join(format!("{}.f32.out.golden", case.name));
        let want = std::fs::read(&golden).unwrap_or_else(|e| panic!("{}: {e}", golden.display()));
        let mut args = case_args(case, &ins);
        args.extend(["--format", "f32", "--device", "gpu", "--stats"].map(String::from));
        let piped = run_ok(&args, case.name);
        assert!(
            piped.stdout == want,
            "{}: stdout differs from {}",
            case.name,
            golden.display()
        );
        let stats = stderr_text(&piped);
        let carried = stats
            .split("f32 over the bus: ")
            .nth(1)
            .unwrap_or_else(|| panic!("{}: nothing crossed as f32: {stats}", case.name));
        let shifted = case.args.contains(&"--fftshift");
        assert_eq!(
            carried.contains(" 0 batches' rows down"),
            shifted,
            "{stats}"
        );
        if shifted {
            assert!(
                !carried.starts_with("0 "),
                "the cf32 samples go up as f32: {stats}"
            );
        }
        args.extend(["--output".to_string(), file.display().to_string()]);
        run_ok(&args, case.name);
        let written = std::fs::read(&file).expect("output file");
        assert!(
            written == want,
            "{}: the file differs from {}",
            case.name,
            golden.display()
        );
    }
}
