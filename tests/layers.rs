//! The layers stay one-way: no import cycle joins two top-level modules of src/ (a `crate::`
//! path in a module's code, outside its tests, is an import), the shared types (`types`)
//! import nothing of fftd, and only the top layer (`app`, and `main`) sees the options.

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
