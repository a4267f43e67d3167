//! The layers stay one-way: no import cycle joins two top-level modules of src/ (a `crate::`
//! path in a module's code, outside its tests, is an import), the shared types (`types`)
//! import nothing of fftd, only the top layer (`app`, and `main`) sees the options and the
//! command line (clap), no function outside tests is over 100 lines (a loose guard on the
//! project's ~80), and no file is over 600 lines outside its tests.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("read_dir").flatten() {
        let path = entry.path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The code of a file without comments and without its test module (`#[cfg(test)]` to the end,
/// as every file here places it last).
fn code(path: &Path) -> String {
    let text = std::fs::read_to_string(path).expect("read source");
    let text = match text.find("#[cfg(test)]") {
        Some(at) => &text[..at],
        None => &text[..],
    };
    text.lines()
        .map(|line| match line.find("//") {
            Some(at) => &line[..at],
            None => line,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// The top-level modules a file's code names: `crate::NAME` paths, and the first name of each
/// `use crate::{A, B::c}` group.
fn named_modules(code: &str) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    let ident = |s: &str| -> String {
        s.chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect()
    };
    let mut rest = code;
    while let Some(at) = rest.find("crate::") {
        let tail = &rest[at + "crate::".len()..];
        if let Some(group) = tail.strip_prefix('{') {
            let end = group.find('}').unwrap_or(group.len());
            for part in group[..end].split(',') {
                names.insert(ident(part.trim()));
            }
        } else {
            names.insert(ident(tail));
        }
        rest = tail;
    }
    names.retain(|n| !n.is_empty());
    names
}

/// Top-level module of a file under src/ (None for lib.rs and main.rs).
fn top_module(src: &Path, file: &Path) -> Option<String> {
    let rel = file.strip_prefix(src).ok()?;
    let first = rel.components().next()?.as_os_str().to_str()?;
    let name = first.trim_end_matches(".rs");
    (name != "lib" && name != "main").then(|| name.to_string())
}

/// module -> module it imports -> files that do.
type Graph = BTreeMap<String, BTreeMap<String, BTreeSet<String>>>;

fn graph() -> Graph {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let modules: BTreeSet<String> = files.iter().filter_map(|f| top_module(&src, f)).collect();
    let mut graph = Graph::new();
    for file in &files {
        let Some(from) = top_module(&src, file) else {
            continue;
        };
        let edges = graph.entry(from.clone()).or_default();
        for to in named_modules(&code(file)) {
            if to != from && modules.contains(&to) {
                let rel = file
                    .strip_prefix(&src)
                    .unwrap_or(file)
                    .display()
                    .to_string();
                edges.entry(to).or_default().insert(rel);
            }
        }
    }
    graph
}

/// Whether `to` is reachable from `from`.
fn reaches(graph: &Graph, from: &str, to: &str) -> bool {
    let mut seen = BTreeSet::new();
    let mut todo = vec![from.to_string()];
    while let Some(m) = todo.pop() {
        if m == to {
            return true;
        }
        if seen.insert(m.clone()) {
            todo.extend(graph.get(&m).into_iter().flat_map(|e| e.keys().cloned()));
        }
    }
    false
}

#[test]
fn no_import_cycle_joins_two_top_level_modules() {
    let graph = graph();
    let mut cycles = Vec::new();
    for (from, edges) in &graph {
        for (to, files) in edges {
            if reaches(&graph, to, from) {
                cycles.push(format!(
                    "{from} -> {to} (in {files:?}) and {to} reaches {from}"
                ));
            }
        }
    }
    assert!(cycles.is_empty(), "import cycles:\n{}", cycles.join("\n"));
}

#[test]
fn shared_types_import_nothing_of_fftd() {
    let graph = graph();
    let edges = graph.get("types").cloned().unwrap_or_default();
    assert!(edges.is_empty(), "src/types imports {edges:?}");
}

#[test]
fn only_the_top_layer_sees_the_options() {
    let graph = graph();
    let seeing: Vec<_> = graph
        .iter()
        .filter(|(from, edges)| *from != "app" && edges.contains_key("app"))
        .map(|(from, edges)| format!("{from}: {:?}", edges["app"]))
        .collect();
    assert!(seeing.is_empty(), "modules below app import it: {seeing:?}");
}

#[test]
fn the_checker_sees_a_cycle_when_there_is_one() {
    let mut graph = Graph::new();
    graph
        .entry("a".into())
        .or_default()
        .insert("b".into(), BTreeSet::new());
    graph
        .entry("b".into())
        .or_default()
        .insert("a".into(), BTreeSet::new());
    assert!(reaches(&graph, "a", "b") && reaches(&graph, "b", "a"));
    let names = named_modules("use crate::{fft::Engine, sink};\nlet x = crate::types::shown(1.0);");
    assert_eq!(names, ["fft", "sink", "types"].map(String::from).into());
}

/// Files outside `app` (and `main.rs`) that still use clap, and what each uses. A value type
/// may derive `clap::ValueEnum` (its variants' names are its command-line spellings, as they are
/// its config-file spellings); no module below `app` defines arguments or commands (`fftd
/// bench`'s are in `app::bench_args`, the fleet's in `app::fleet_args`).
const CLAP_OUTSIDE_APP: &[(&str, &[&str])] = &[
    // (`#[value(skip)]`: the engine's own `ScaledPower`, which no user names)
    ("fft/scale.rs", &["clap::ValueEnum", "#[value"]),
    ("frame.rs", &["clap::ValueEnum"]),
    ("products/measure/weighting.rs", &["clap::ValueEnum"]),
    ("sink/mod.rs", &["clap::ValueEnum"]),
    ("source/mod.rs", &["clap::ValueEnum"]),
    ("types/precision.rs", &["clap::ValueEnum"]),
    ("window.rs", &["clap::ValueEnum"]),
];

/// What a file's code uses of clap: `clap::NAME` paths and `#[arg`, `#[command`, `#[value`,
/// `#[clap` attributes.
fn clap_uses(code: &str) -> BTreeSet<String> {
    let mut uses = BTreeSet::new();
    let mut rest = code;
    while let Some(at) = rest.find("clap::") {
        let tail = &rest[at + "clap::".len()..];
        let name: String = (tail.chars())
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect();
        uses.insert(format!("clap::{name}"));
        rest = tail;
    }
    for attribute in ["#[arg", "#[command", "#[value", "#[clap"] {
        if code.contains(attribute) {
            uses.insert(attribute.to_string());
        }
    }
    if code.contains("use clap") {
        uses.insert("use clap".to_string());
    }
    uses
}

#[test]
fn only_the_top_layer_sees_the_command_line() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let mut unexpected = Vec::new();
    for file in &files {
        let rel = file.strip_prefix(&src).unwrap_or(file);
        let rel = rel.display().to_string().replace('\\', "/");
        if rel.starts_with("app/") || rel == "main.rs" {
            continue;
        }
        let allowed = CLAP_OUTSIDE_APP
            .iter()
            .find(|(path, _)| *path == rel)
            .map_or(&[][..], |(_, uses)| *uses);
        for used in clap_uses(&code(file)) {
            if !allowed.contains(&used.as_str()) {
                unexpected.push(format!("src/{rel}: {used}"));
            }
        }
    }
    assert!(
        unexpected.is_empty(),
        "clap used below app (the command line is app's):\n{}",
        unexpected.join("\n")
    );
}

/// The longest a function may be (the project's rule is about 80 lines; this guard is looser).
const MOST_LINES: usize = 100;

/// Functions over `MOST_LINES` lines that are known, each with the session whose work splits
/// it; the list only shrinks (empty since issue 29's OpenCL split).
const LONG_FUNCTIONS: &[&str] = &[];

/// `text` with comments, string and character literals blanked (line breaks kept), so braces
/// in them do not count.
fn blank_literals(text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let blank = |c: char| if c == '\n' { '\n' } else { ' ' };
    let ident = |c: char| c.is_alphanumeric() || c == '_';
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let next = chars.get(i + 1).copied();
        let end = if c == '/' && next == Some('/') {
            (i..chars.len())
                .find(|&j| chars[j] == '\n')
                .unwrap_or(chars.len())
        } else if c == '/' && next == Some('*') {
            let (mut j, mut depth) = (i + 2, 1);
            while j < chars.len() && depth > 0 {
                match (chars[j], chars.get(j + 1)) {
                    ('/', Some('*')) => (depth, j) = (depth + 1, j + 2),
                    ('*', Some('/')) => (depth, j) = (depth - 1, j + 2),
                    _ => j += 1,
                }
            }
            j
        } else if c == 'r' && matches!(next, Some('"' | '#')) && (i == 0 || !ident(chars[i - 1])) {
            let hashes = chars[i + 1..].iter().take_while(|&&h| h == '#').count();
            if chars.get(i + 1 + hashes) != Some(&'"') {
                out.push(c);
                i += 1;
                continue;
            }
            let closes =
                |j: usize| chars[j] == '"' && (1..=hashes).all(|k| chars.get(j + k) == Some(&'#'));
            let close = (i + 2 + hashes..chars.len()).find(|&j| closes(j));
            close.map_or(chars.len(), |j| j + 1 + hashes)
        } else if c == '"' {
            let mut j = i + 1;
            while j < chars.len() && chars[j] != '"' {
                j += if chars[j] == '\\' { 2 } else { 1 };
            }
            j + 1
        } else if c == '\'' {
            // a character literal ('x', '\n', '\u{..}'), not a lifetime ('a)
            match (next, chars.get(i + 2)) {
                (Some('\\'), _) => {
                    let close = (i + 3..chars.len()).find(|&j| chars[j] == '\'');
                    close.map_or(i + 1, |j| j + 1)
                }
                (Some(_), Some('\'')) => i + 3,
                _ => i + 1,
            }
        } else {
            i + 1
        };
        let end = end.min(chars.len()).max(i + 1);
        if end == i + 1 {
            out.push(c);
        } else {
            out.extend(chars[i..end].iter().map(|&c| blank(c)));
        }
        i = end;
    }
    out
}

/// The index of the `{` that opens the body of the item at `from`, None when a `;` ends it first
/// (outside brackets: `[u8; 4]` is part of a signature).
fn body_of(chars: &[char], from: usize) -> Option<usize> {
    let mut depth = 0i32;
    for (j, &c) in chars.iter().enumerate().skip(from) {
        match c {
            '(' | '[' => depth += 1,
            ')' | ']' => depth -= 1,
            '{' if depth == 0 => return Some(j),
            ';' if depth == 0 => return None,
            _ => {}
        }
    }
    None
}

/// The index of the brace that closes the one at `open`.
fn closing(chars: &[char], open: usize) -> usize {
    let mut depth = 0usize;
    for (j, &c) in chars.iter().enumerate().skip(open) {
        match c {
            '{' => depth += 1,
            '}' => {
                depth -= 1;
                if depth == 0 {
                    return j;
                }
            }
            _ => {}
        }
    }
    chars.len().saturating_sub(1)
}

/// (name, first line, lines) of every function with a body in `text`, outside `#[cfg(test)]`
/// modules and functions.
fn functions(text: &str) -> Vec<(String, usize, usize)> {
    let code = blank_literals(text);
    let chars: Vec<char> = code.chars().collect();
    let line_at = |at: usize| chars[..at].iter().filter(|&&c| c == '\n').count() + 1;
    let ident = |c: char| c.is_alphanumeric() || c == '_';
    let mut skipped: Vec<(usize, usize)> = Vec::new();
    let mut found = Vec::new();
    let mut i = 0;
    while i + 3 < chars.len() {
        if skipped.iter().any(|&(a, b)| a <= i && i <= b) {
            i += 1;
            continue;
        }
        if chars[i..].starts_with(&['#', '[', 'c', 'f', 'g', '(', 't', 'e', 's', 't', ')', ']']) {
            // the item after it: skip to the end of its body (or its `;`)
            if let Some(open) = body_of(&chars, i + 12) {
                skipped.push((i, closing(&chars, open)));
            }
            i += 1;
            continue;
        }
        let at_word = i == 0 || !ident(chars[i - 1]);
        if at_word && chars[i..].starts_with(&['f', 'n']) && chars[i + 2].is_whitespace() {
            let name: String = (chars[i + 2..].iter())
                .skip_while(|c| c.is_whitespace())
                .take_while(|&&c| ident(c))
                .collect();
            if let Some(open) = body_of(&chars, i) {
                let close = closing(&chars, open);
                found.push((name, line_at(i), line_at(close) - line_at(i) + 1));
            }
        }
        i += 1;
    }
    found
}

#[test]
fn no_function_is_over_100_lines() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let mut long = Vec::new();
    for file in &files {
        if file.file_name().is_some_and(|n| n == "tests.rs") {
            continue; // a test module of its own
        }
        let rel = file.strip_prefix(&src).unwrap_or(file);
        let rel = rel.display().to_string().replace('\\', "/");
        let text = std::fs::read_to_string(file).expect("read source");
        for (name, line, lines) in functions(&text) {
            let known = LONG_FUNCTIONS.contains(&format!("{rel}: {name}").as_str());
            if lines > MOST_LINES && !known {
                long.push(format!("src/{rel}:{line} {name}: {lines} lines"));
            }
        }
    }
    assert!(
        long.is_empty(),
        "functions over {MOST_LINES} lines (split them into steps):\n{}",
        long.join("\n")
    );
}

/// The most lines a source file holds before its test module (the brief's ~600).
const MOST_FILE_LINES: usize = 600;

#[test]
fn no_file_is_over_600_lines_outside_its_tests() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let mut long: Vec<String> = files
        .iter()
        .filter(|f| f.file_name().is_some_and(|n| n != "tests.rs"))
        .filter_map(|file| {
            let text = std::fs::read_to_string(file).expect("read source");
            // (up to the test module: a `#[cfg(test)]` item earlier in the file is code)
            let code = text.split("#[cfg(test)]\nmod ").next().unwrap_or_default();
            let lines = code.lines().count();
            (lines > MOST_FILE_LINES).then(|| format!("{}: {lines} lines", file.display()))
        })
        .collect();
    long.sort();
    assert!(
        long.is_empty(),
        "files over {MOST_FILE_LINES} lines outside their tests (split them by job):\n{}",
        long.join("\n")
    );
}

#[test]
fn the_function_lengths_are_measured_right() {
    let text = "fn a() {\n    let s = \"}\";\n    let c = '}';\n    // }\n}\n\n#[cfg(test)]\nmod tests {\n    fn t() {\n    }\n}\nfn b<'x>(v: &'x str) -> &'x str {\n    let r = r#\"}\"#;\n    v\n}\n";
    let found = functions(text);
    let names: Vec<_> = found
        .iter()
        .map(|(n, line, len)| (n.as_str(), *line, *len))
        .collect();
    assert_eq!(names, [("a", 1, 5), ("b", 12, 4)]);
    let uses = clap_uses("#[derive(clap::ValueEnum)]\nenum E { A }\n#[arg(long)]");
    assert_eq!(uses, ["#[arg", "clap::ValueEnum"].map(String::from).into());
}
