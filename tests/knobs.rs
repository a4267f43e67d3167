//! The `FFTD_*` environment knobs: read in one module (`src/knobs.rs`), listed in docs/knobs.md,
//! and no other name in the code or the docs (a knob no code reads, or one the docs do not list,
//! fails here); at most 16 of them.

use std::collections::BTreeSet;
use std::path::Path;

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Every `FFTD_...` name in `text`.
fn knob_names(text: &str) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    let mut rest = text;
    while let Some(at) = rest.find("FFTD_") {
        let tail = &rest[at..];
        let len = tail
            .find(|c: char| !(c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_'))
            .unwrap_or(tail.len());
        // a family such as `FFTD_OPENCL_*` or the prefix alone is not a name
        if !tail[..len].ends_with('_') {
            names.insert(tail[..len].to_string());
        }
        rest = &tail[len..];
    }
    names
}

fn files(dir: &Path, ext: &str, out: &mut Vec<std::path::PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("read_dir").flatten() {
        let path = entry.path();
        if path.is_dir() {
            files(&path, ext, out);
        } else if path.extension().is_some_and(|e| e == ext) {
            out.push(path);
        }
    }
}

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// The names in `KNOBS` (the table in src/knobs.rs).
fn table() -> BTreeSet<String> {
    let code = read(&root().join("src/knobs.rs"));
    let start = code.find("const KNOBS").expect("KNOBS table");
    let end = start + code[start..].find("\n];").expect("end of KNOBS");
    knob_names(&code[start..end])
}

/// Knobs are user settings and diagnostics, not A/B switches (issue 40): at most this many.
const MOST: usize = 16;

#[test]
fn at_most_16_knobs() {
    let knobs = table();
    assert!(
        knobs.len() <= MOST,
        "{} knobs, at most {MOST}: a new one replaces one, or is a plan decision: {knobs:?}",
        knobs.len()
    );
    // the shipped binary names no other (src and kernels, as `grep -rhoE "FFTD_[A-Z0-9_]+" src
    // kernels | sort -u` counts them)
    let mut sources = Vec::new();
    files(&root().join("src"), "rs", &mut sources);
    files(&root().join("kernels"), "cl", &mut sources);
    let named: BTreeSet<String> = sources.iter().flat_map(|p| knob_names(&read(p))).collect();
    assert!(
        named.len() <= MOST,
        "{} FFTD_ names in src and kernels: {named:?}",
        named.len()
    );
}

#[test]
fn the_docs_list_exactly_the_knobs_the_code_has() {
    let docs = knob_names(&read(&root().join("docs/knobs.md")));
    assert_eq!(
        docs,
        table(),
        "docs/knobs.md and src/knobs.rs list different knobs"
    );
}

#[test]
fn only_the_knobs_module_reads_the_environment_and_no_unknown_knob_is_named() {
    let known = table();
    let mut sources = Vec::new();
    files(&root().join("src"), "rs", &mut sources);
    for path in &sources {
        let text = read(path);
        if !path.ends_with("src/knobs.rs") {
            let reads =
                text.matches("env::var(\"FFTD_").count() + text.matches("var_os(\"FFTD_").count();
            assert_eq!(
                reads,
                0,
                "{} reads an FFTD_ variable itself: use crate::knobs",
                path.display()
            );
        }
        for name in knob_names(&text) {
            assert!(
                known.contains(&name),
                "{} names {name}, which src/knobs.rs does not have",
                path.display()
            );
        }
    }
    let mut docs = vec![root().join("README.md")];
    files(&root().join("docs"), "md", &mut docs);
    for path in &docs {
        for name in knob_names(&read(path)) {
            assert!(
                known.contains(&name),
                "{} names {name}, which no code reads",
                path.display()
            );
        }
    }
}
