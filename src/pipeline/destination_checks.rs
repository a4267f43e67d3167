//! Checks made before the run writes anything: no file the run writes is one it reads
//! (`refuse_overwriting_inputs`: its inputs, `--config`, and the files other flags name), and
//! every place it will write can take it (`check_destinations`: a file's folder exists and is
//! writable, a device takes an empty write, an `--output-dir` or `--rotate` folder takes new
//! files).

use crate::alerts::events::EventsTarget;
use crate::error::{FftdError, Result};
use crate::pipeline::spec::RunSpec;
use crate::sink::opening;
use crate::sink::overwrite_guard::{refuse_overwriting, standard_stream, NamedFile};
use crate::source::spec::Input;
use crate::source::InputFormat;
use std::path::{Path, PathBuf};

/// Checks that `dir`, given by `flag`, takes new files (its files are created only when their
/// rows arrive, so an unwritable folder must be found before the run): creates and removes a
/// probe file. A folder that refuses it is a usage error naming the flag.
pub(super) fn probe_writable(flag: &str, dir: &Path) -> Result<()> {
    let probe = dir.join(format!(".fftd-probe-{}", std::process::id()));
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&probe)
        .map_err(|e| {
            FftdError::Usage(format!(
                "{flag} {}: cannot create files there: {e}",
                crate::types::shown_path(dir)
            ))
        })?;
    std::fs::remove_file(&probe).map_err(|e| FftdError::io(&probe, e))
}

/// Every file fftd will write (the output `files` planned, `--meta`, `--trace`, `--events`)
/// against every file it reads (`run_inputs`), before anything is opened for writing. (A
/// `--rotate` pattern's names are checked as each file begins: `RotateOptions::guarded`.)
pub(super) fn refuse_overwriting_inputs(
    run_spec: &RunSpec,
    files: &[Option<PathBuf>],
) -> Result<()> {
    let inputs = run_inputs(run_spec);
    let role = match run_spec.output.output_dir {
        Some(_) => "--output-dir",
        None => "--output",
    };
    let mut outputs: Vec<NamedFile> = files
        .iter()
        .map(|file| match file {
            Some(path) => NamedFile::new(role, path),
            None => standard_stream("stdout"),
        })
        .collect();
    outputs.extend(other_outputs(run_spec));
    refuse_overwriting(&inputs, &outputs)
}

/// The files the run writes beside its rows: `--meta`, `--trace`, `--events`.
pub(super) fn other_outputs(run_spec: &RunSpec) -> Vec<NamedFile> {
    let meta = (run_spec.output.meta.iter()).map(|m| NamedFile::new("--meta", m));
    let trace = (run_spec.report.trace.iter()).map(|t| NamedFile::new("--trace", t));
    let events = match &run_spec.alerts.events {
        Some(EventsTarget::File(path)) => Some(NamedFile::new("--events", path)),
        _ => None,
    };
    meta.chain(trace).chain(events).collect()
}

/// Every file the run reads: its inputs (a SigMF recording's two files), `--config`, and the
/// files other flags name (`OutputSpec::also_read`).
pub(super) fn run_inputs(run_spec: &RunSpec) -> Vec<NamedFile> {
    let mut inputs: Vec<NamedFile> = match &run_spec.source.input {
        Input::Files(paths) => paths
            .iter()
            .map(|p| match p.as_str() {
                "-" => standard_stream("stdin"),
                _ => NamedFile::new("--file", p),
            })
            .collect(),
        Input::Mic(_) | Input::Nats(_) => Vec::new(),
    };
    inputs.extend(
        run_spec
            .output
            .config
            .iter()
            .map(|c| NamedFile::new("--config", c)),
    );
    // a SigMF recording is read through both of its files, whichever one was named
    if let Input::Files(paths) = &run_spec.source.input {
        let format = |p: &str| {
            run_spec
                .source
                .input_format
                .unwrap_or(InputFormat::from_extension(p))
        };
        for p in paths
            .iter()
            .filter(|p| *p != "-" && format(p) == InputFormat::Sigmf)
        {
            let (meta, data) = crate::source::sigmf::paths(p);
            // (`core:dataset` may name another file; a metadata file that cannot be read is
            // reported when the input is opened)
            let named = crate::source::sigmf::read_recording(p, None).map(|r| r.data_path);
            inputs.extend([
                NamedFile::new("--file", meta),
                NamedFile::new("--file", data),
            ]);
            inputs.extend(named.ok().map(|d| NamedFile::new("--file", d)));
        }
    }
    let others = run_spec.output.also_read.iter();
    inputs.extend(others.map(|(flag, path)| NamedFile::new(flag, path)));
    inputs
}

/// Checks, before any input is read (a stream's first bytes may be long in coming), that the
/// places the run will write can take it: `--output`, `--meta`, `--trace` and `--events` (a
/// device must take an empty write, a file's folder must exist and be writable) and the
/// `--output-dir` folder. Nothing is created here; FIFOs are opened later, once.
pub(super) fn check_destinations(run_spec: &RunSpec) -> Result<()> {
    if run_spec.output.rotate.is_some() {
        // issue 27: a name pattern's folders are made as files begin; its fixed part must take them
        let output = &run_spec.output;
        let given = match (&output.output_dir, &output.output) {
            (Some(dir), _) => Some(("--output-dir", dir.join("x"), dir)),
            (None, Some(path)) => Some(("--output", path.clone(), path)),
            (None, None) => None,
        };
        if let Some((flag, pattern, shown)) = given {
            let folder = crate::sink::rotate_names::literal_folder(&pattern);
            if !folder.is_dir() {
                return Err(FftdError::Usage(format!(
                    "{flag} {} (with --rotate): no such directory {}",
                    crate::types::shown_path(shown),
                    crate::types::shown_path(&folder)
                )));
            }
            return probe_writable(flag, &folder);
        }
    }
    if let Some(dir) = &run_spec.output.output_dir {
        if !dir.is_dir() {
            let what = match dir.exists() {
                true => "not a directory",
                false => "no such directory",
            };
            return Err(FftdError::Usage(format!(
                "--output-dir {}: {what}",
                crate::types::shown_path(dir)
            )));
        }
        probe_writable("--output-dir", dir)?;
    }
    // (a missing folder was refused with the flags: `record::check_record`)
    if let Some(record) = &run_spec.record {
        probe_writable("--record-on-alert", &record.dir)?;
    }
    let output = run_spec.output.output.iter().map(|p| ("--output", p));
    let meta = run_spec.output.meta.iter().map(|p| ("--meta", p));
    let trace = run_spec.report.trace.iter().map(|p| ("--trace", p));
    let events = match &run_spec.alerts.events {
        Some(EventsTarget::File(path)) => Some(("--events", path)),
        _ => None,
    };
    for (flag, path) in output.chain(meta).chain(trace).chain(events) {
        check_destination(flag, path)?;
    }
    if let Some(EventsTarget::File(path)) = &run_spec.alerts.events {
        // (an --events file that is one of the inputs is said as such, before it is found to
        // hold no events)
        refuse_overwriting(&run_inputs(run_spec), &other_outputs(run_spec))?;
        crate::alerts::events::check_appendable(path).map_err(FftdError::Usage)?;
    }
    Ok(())
}

/// One file's check for `check_destinations`; its errors name `flag`. A folder, or a file in
/// a folder that does not exist, is a usage error.
fn check_destination(flag: &str, path: &Path) -> Result<()> {
    use std::os::unix::fs::FileTypeExt;
    let shown = crate::types::shown_path(path);
    let named = |e| FftdError::io(format!("{flag} {shown}"), e);
    let hint = match flag {
        "--output" => " (--output-dir DIR writes a file per input in it)",
        _ => "",
    };
    let folder_named = path.as_os_str().as_encoded_bytes().ends_with(b"/");
    match std::fs::metadata(path) {
        Ok(meta) if meta.is_dir() => Err(FftdError::Usage(format!(
            "{flag} {shown}: is a directory, not a file{hint}"
        ))),
        // (it would fail when opened, as "Is a directory", though no such folder is there)
        Err(_) if folder_named => Err(FftdError::Usage(format!(
            "{flag} {shown}: ends in /, a folder's name: give a file{hint}"
        ))),
        Ok(meta) if meta.file_type().is_char_device() => {
            let device = std::fs::OpenOptions::new()
                .write(true)
                .open(path)
                .map_err(named)?;
            opening::check_writable(&device).map_err(named)
        }
        Ok(meta) if meta.is_file() => writable(path).map_err(named),
        Ok(_) => Ok(()), // a FIFO or socket: opened once, when the run starts
        Err(_) => {
            let parent = match path.parent() {
                Some(p) if !p.as_os_str().is_empty() => p,
                _ => Path::new("."),
            };
            // a dangling link: the file is made where it points
            if let Ok(target) = std::fs::read_link(path).map(|t| path.with_file_name(t)) {
                let folder = target.parent().filter(|f| !f.as_os_str().is_empty());
                let folder = folder.unwrap_or(Path::new("."));
                if !folder.is_dir() {
                    return Err(FftdError::Usage(format!(
                        "{flag} {shown}: a link to {}, whose folder is not there",
                        crate::types::shown_path(&target)
                    )));
                }
                return writable(folder).map_err(named);
            }
            if !parent.is_dir() {
                return Err(FftdError::Usage(format!(
                    "{flag} {shown}: no such directory {}",
                    crate::types::shown_path(parent)
                )));
            }
            writable(parent).map_err(named)
        }
    }
}

/// Whether this process may write `path` (access(2) with W_OK).
fn writable(path: &Path) -> std::io::Result<()> {
    use std::os::unix::ffi::OsStrExt;
    let name = std::ffi::CString::new(path.as_os_str().as_bytes())
        .map_err(|_| std::io::Error::from(std::io::ErrorKind::InvalidInput))?;
    // SAFETY: `name` is a NUL-terminated path alive for the call; access only reads it.
    match unsafe { libc::access(name.as_ptr(), libc::W_OK) } {
        0 => Ok(()),
        _ => Err(std::io::Error::last_os_error()),
    }
}
