//! Refuses any output that is also an input, before anything is opened for writing: `--output`,
//! each `--output-dir` file and `--meta` against every `--file` (stdin too, when it is a file),
//! the `--config` file and each other; and stdout, when it is redirected into an input
//! (`>> input.f32`). Two paths are the same file when they share device and inode (hard and
//! symbolic links included) or, for files not there yet, the same absolute path.
//! Non-regular files (/dev/null, FIFOs, terminals) cannot be destroyed this way and are let be.

use crate::error::{FftdError, Result};
use std::path::{Path, PathBuf};

/// A file named on the command line, and how the user named it (for the message).
#[derive(Clone, Debug)]
pub(crate) struct NamedFile {
    /// `--file`, `--output`, `--meta`, `--config`, `--output-dir`, `stdin` or `stdout`.
    pub role: &'static str,
    pub path: PathBuf,
}

impl NamedFile {
    pub(crate) fn new(role: &'static str, path: impl Into<PathBuf>) -> Self {
        NamedFile {
            role,
            path: path.into(),
        }
    }

    fn describe(&self) -> String {
        match self.role {
            "stdin" | "stdout" => {
                format!("{} ({})", self.role, crate::types::shown_path(&self.path))
            }
            role => format!("{role} {}", crate::types::shown_path(&self.path)),
        }
    }
}

/// What makes two names the same file.
#[derive(Debug, PartialEq, Eq)]
enum FileIdentity {
    Inode {
        dev: u64,
        ino: u64,
    },
    /// A file that does not exist yet: its parent folder, resolved, and its name.
    Planned(PathBuf),
}

/// The identity of a regular file (existing or planned); None for anything that writing to
/// cannot destroy (devices, FIFOs) or whose folder does not exist (opening it fails later).
fn identity(path: &Path) -> Option<FileIdentity> {
    use std::os::unix::fs::{FileTypeExt, MetadataExt};
    match std::fs::metadata(path) {
        // (a FIFO too: read and written by one run, it would feed the run its own rows)
        Ok(meta) if meta.is_file() || meta.file_type().is_fifo() => Some(FileIdentity::Inode {
            dev: meta.dev(),
            ino: meta.ino(),
        }),
        Ok(_) => None,
        Err(_) => {
            let name = path.file_name()?;
            let parent = match path.parent() {
                Some(p) if !p.as_os_str().is_empty() => p,
                _ => Path::new("."),
            };
            let parent = std::fs::canonicalize(parent).ok()?;
            Some(FileIdentity::Planned(parent.join(name)))
        }
    }
}

/// The identity of the regular file or FIFO open as stdin or stdout (`fstat` of the descriptor
/// itself: no `/dev/stdout` link is needed, which some containers lack); None for anything else.
fn stream_identity(fd: std::os::fd::BorrowedFd<'_>) -> Option<FileIdentity> {
    use std::os::unix::fs::{FileTypeExt, MetadataExt};
    let file = std::fs::File::from(fd.try_clone_to_owned().ok()?);
    let meta = file.metadata().ok()?;
    (meta.is_file() || meta.file_type().is_fifo()).then(|| FileIdentity::Inode {
        dev: meta.dev(),
        ino: meta.ino(),
    })
}

/// The identity of a named file: of the open stream itself for stdin and stdout.
fn identity_of(file: &NamedFile) -> Option<FileIdentity> {
    use std::os::fd::AsFd;
    match file.role {
        "stdin" => stream_identity(std::io::stdin().as_fd()),
        "stdout" => stream_identity(std::io::stdout().as_fd()),
        _ => identity(&file.path),
    }
}

/// Stdin (for `-`) or stdout as a named file, when it is redirected from or to a file (its path
/// only for the message; `identity_of` looks at the stream itself).
pub(crate) fn standard_stream(role: &'static str) -> NamedFile {
    let link = if role == "stdin" {
        "/proc/self/fd/0"
    } else {
        "/proc/self/fd/1"
    };
    let shown = std::fs::canonicalize(link).unwrap_or_else(|_| PathBuf::from(role));
    NamedFile { role, path: shown }
}

/// The files a rotated output's names must not be (`--rotate`: the names are known only as the
/// files begin): the run's inputs, whose identities are taken now, and its other outputs
/// (`--meta`, `--trace`, `--events`), taken as each name is checked (they may be made meanwhile:
/// a file and its planned name would not compare equal).
#[derive(Clone, Debug, Default)]
pub(crate) struct GuardedFiles {
    inputs: std::sync::Arc<Vec<(String, FileIdentity)>>,
    outputs: std::sync::Arc<Vec<NamedFile>>,
}

impl GuardedFiles {
    pub(crate) fn of(inputs: &[NamedFile], outputs: Vec<NamedFile>) -> Self {
        let known = (inputs.iter())
            .filter_map(|f| Some((f.describe(), identity_of(f)?)))
            .collect();
        GuardedFiles {
            inputs: std::sync::Arc::new(known),
            outputs: std::sync::Arc::new(outputs),
        }
    }

    /// The input that `path` is, if it is one (as the user named it).
    pub(crate) fn input_at(&self, path: &Path) -> Option<&str> {
        let id = identity(path)?;
        (self.inputs.iter())
            .find(|(_, input)| *input == id)
            .map(|(name, _)| name.as_str())
    }

    /// The other output that `path` is, if it is one (as the user named it).
    pub(crate) fn output_at(&self, path: &Path) -> Option<String> {
        let id = identity(path)?;
        (self.outputs.iter())
            .find(|f| identity(&f.path).as_ref() == Some(&id))
            .map(NamedFile::describe)
    }
}

/// Ok when no output is an input or another output; else a usage error naming both.
pub(crate) fn refuse_overwriting(inputs: &[NamedFile], outputs: &[NamedFile]) -> Result<()> {
    let input_ids: Vec<_> = inputs.iter().map(identity_of).collect();
    let output_ids: Vec<_> = outputs.iter().map(identity_of).collect();
    for (k, (output, id)) in outputs.iter().zip(&output_ids).enumerate() {
        let Some(id) = id else { continue };
        if let Some(i) = input_ids
            .iter()
            .position(|other| other.as_ref() == Some(id))
        {
            return Err(FftdError::Usage(format!(
                "{} is also an input ({}): refusing to overwrite it",
                output.describe(),
                inputs[i].describe()
            )));
        }
        if let Some(j) = output_ids[..k]
            .iter()
            .position(|other| other.as_ref() == Some(id))
        {
            return Err(FftdError::Usage(format!(
                "{} and {} are the same file: each output needs its own",
                outputs[j].describe(),
                output.describe()
            )));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn files(dir: &Path) -> (PathBuf, PathBuf) {
        let input = dir.join("x.f32");
        std::fs::write(&input, [0u8; 16]).expect("write");
        (input, dir.join("out.f32"))
    }

    #[test]
    fn same_path_hard_link_and_symlink_are_refused() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (input, out) = files(dir.path());
        let hard = dir.path().join("hard.f32");
        std::fs::hard_link(&input, &hard).expect("link");
        let soft = dir.path().join("soft.f32");
        std::os::unix::fs::symlink(&input, &soft).expect("symlink");
        let inputs = [NamedFile::new("--file", &input)];
        for same in [input.clone(), hard, soft, dir.path().join("./x.f32")] {
            let err = refuse_overwriting(&inputs, &[NamedFile::new("--output", &same)])
                .expect_err("output is the input")
                .to_string();
            assert!(err.contains("--output") && err.contains("--file"), "{err}");
        }
        refuse_overwriting(&inputs, &[NamedFile::new("--output", &out)]).expect("distinct");
    }

    #[test]
    fn two_outputs_naming_one_planned_file_are_refused() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (input, out) = files(dir.path());
        let outputs = [
            NamedFile::new("--output", &out),
            NamedFile::new("--meta", dir.path().join(".").join("out.f32")),
        ];
        let err = refuse_overwriting(&[NamedFile::new("--file", &input)], &outputs)
            .expect_err("same planned file")
            .to_string();
        assert!(err.contains("same file"), "{err}");
    }

    #[test]
    fn devices_are_not_files_to_protect() {
        let null = [NamedFile::new("--output", "/dev/null")];
        refuse_overwriting(&[NamedFile::new("--file", "/dev/null")], &null).expect("a device");
    }
}
