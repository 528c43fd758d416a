//! Garbage in a change: what the pre-commit hook and `review_changes` flag. Pure checks over the
//! added lines of each changed file; the callers find the changes.

use std::sync::OnceLock;

use regex::Regex;
use schemars::JsonSchema;
use serde::Serialize;

pub use crate::config::GarbageRules;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum GarbageKind {
    DebugStatement,
    TempFile,
    ConflictMarker,
    TodoStub,
    EmptyImplementation,
    LargeBinary,
    Secret,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, JsonSchema)]
pub struct Finding {
    pub file: String,
    /// 1-based line in the new file; 0 for whole-file findings.
    pub line: usize,
    pub kind: GarbageKind,
    pub why: String,
}

/// One changed file as the checks see it.
pub struct ChangedFile<'a> {
    pub path: &'a str,
    /// (1-based line number in the new content, text) of each added line.
    pub added: Vec<(usize, &'a str)>,
    pub binary: bool,
    pub size: u64,
}

fn re(cell: &'static OnceLock<Regex>, pattern: &str) -> &'static Regex {
    cell.get_or_init(|| Regex::new(pattern).expect("valid regex"))
}

fn debug_statement(path: &str, line: &str) -> Option<&'static str> {
    static PY: OnceLock<Regex> = OnceLock::new();
    static JS: OnceLock<Regex> = OnceLock::new();
    static RS: OnceLock<Regex> = OnceLock::new();
    static ANY: OnceLock<Regex> = OnceLock::new();
    let ext = path.rsplit_once('.').map(|(_, e)| e).unwrap_or("");
    let code = line.trim_start();
    if code.starts_with("//") || code.starts_with('#') && ext == "py" {
        return None;
    }
    match ext {
        "py" if re(&PY, r"^\s*(print\(|breakpoint\(\)|import pdb|pdb\.set_trace\(\)|import ipdb)").is_match(line) => {
            Some("debugging output or breakpoint left in Python")
        }
        "js" | "jsx" | "ts" | "tsx" | "mjs" | "cjs"
            if re(&JS, r"\b(console\.(log|debug|trace)\(|debugger;)").is_match(line) =>
        {
            Some("console logging or debugger statement")
        }
        "rs" if re(&RS, r"\b(dbg!\(|println!\(\s*\x22\s*(DEBUG|debug|XXX))").is_match(line) => {
            Some("dbg! or debug println left in Rust")
        }
        _ if re(&ANY, r"\b(binding\.pry|var_dump\(|System\.out\.println\(\x22DEBUG)").is_match(line) => {
            Some("debugging output")
        }
        _ => None,
    }
}

fn secret(line: &str) -> Option<&'static str> {
    static KEY: OnceLock<Regex> = OnceLock::new();
    static TOKEN: OnceLock<Regex> = OnceLock::new();
    if re(&KEY, r"-----BEGIN ([A-Z]+ )?PRIVATE KEY-----").is_match(line) {
        return Some("a private key");
    }
    let token = re(
        &TOKEN,
        r"(AKIA[0-9A-Z]{16}|ghp_[A-Za-z0-9]{36}|github_pat_[A-Za-z0-9_]{40,}|xox[abpr]-[A-Za-z0-9-]{10,}|sk-[A-Za-z0-9]{32,}|AIza[0-9A-Za-z_-]{35}|glpat-[A-Za-z0-9_-]{20})",
    );
    token.is_match(line).then_some("what looks like an access token")
}

fn temp_file(path: &str) -> bool {
    let name = path.rsplit('/').next().unwrap_or(path);
    name.ends_with(".orig")
        || name.ends_with(".rej")
        || name.ends_with(".bak")
        || name.ends_with('~')
        || name == ".DS_Store"
        || name.ends_with(".swp")
}

/// Every finding in `files`, in order.
pub fn check(files: &[ChangedFile], rules: &GarbageRules) -> Vec<Finding> {
    static CONFLICT: OnceLock<Regex> = OnceLock::new();
    static TODO: OnceLock<Regex> = OnceLock::new();
    let conflict = re(&CONFLICT, r"^(<{7} |={7}$|>{7} )");
    let todo = re(&TODO, r"\b(TODO|FIXME)\b");
    let mut out = Vec::new();
    let mut push =
        |file: &str, line: usize, kind, why: String| out.push(Finding { file: file.to_owned(), line, kind, why });
    for f in files {
        if rules.temp_files && temp_file(f.path) {
            push(f.path, 0, GarbageKind::TempFile, "temporary, backup or merge-leftover file".into());
        }
        if f.binary {
            if rules.large_binaries && f.size > rules.max_binary_bytes {
                push(
                    f.path,
                    0,
                    GarbageKind::LargeBinary,
                    format!("binary file of {} bytes (limit {})", f.size, rules.max_binary_bytes),
                );
            }
            continue;
        }
        // Debug output and TODO stubs are judged in source code only; prose may say "TODO".
        let code = crate::lang::Lang::detect(std::path::Path::new(f.path)).is_some();
        for (n, text) in &f.added {
            if rules.conflict_markers && conflict.is_match(text) {
                push(f.path, *n, GarbageKind::ConflictMarker, "merge conflict marker".into());
            }
            if code
                && rules.debug_statements
                && let Some(why) = debug_statement(f.path, text)
            {
                push(f.path, *n, GarbageKind::DebugStatement, why.into());
            }
            if code && rules.todo_stubs && todo.is_match(text) {
                push(f.path, *n, GarbageKind::TodoStub, "TODO/FIXME added".into());
            }
            if rules.secrets
                && let Some(why) = secret(text)
            {
                push(f.path, *n, GarbageKind::Secret, format!("{why}; keep secrets out of the repository"));
            }
        }
        if code && rules.todo_stubs {
            for (start, end) in stub_bodies(f) {
                push(
                    f.path,
                    start,
                    GarbageKind::EmptyImplementation,
                    format!("lines {start}-{end} are a stub with no implementation"),
                );
            }
        }
    }
    out
}

/// Runs of added lines that open a definition whose added body is only a placeholder, judged
/// like checklist evidence.
fn stub_bodies(f: &ChangedFile) -> Vec<(usize, usize)> {
    static PLACEHOLDER: OnceLock<Regex> = OnceLock::new();
    let placeholder = re(
        &PLACEHOLDER,
        r"^\s*(pass|\.\.\.|todo!\(.*\);?|unimplemented!\(.*\);?|raise NotImplementedError.*|throw new Error\(.*not implemented.*\);?)\s*$",
    );
    let mut out = Vec::new();
    // Consecutive runs of added lines.
    let mut runs: Vec<Vec<(usize, String)>> = Vec::new();
    for (n, text) in &f.added {
        match runs.last_mut() {
            Some(run) if run.last().is_some_and(|(m, _)| m + 1 == *n) => run.push((*n, (*text).to_owned())),
            _ => runs.push(vec![(*n, (*text).to_owned())]),
        }
    }
    for run in runs {
        if !run.iter().any(|(_, t)| placeholder.is_match(t)) {
            continue;
        }
        let lines: Vec<String> = run.iter().map(|(_, t)| t.clone()).collect();
        if code_intel_workflow::engine::evidence::is_empty_implementation(f.path, &lines) {
            out.push((run[0].0, run[run.len() - 1].0));
        }
    }
    out
}

/// (1-based new line number, text) of every line `new` adds to `old`.
pub fn added_lines(old: &str, new: &str) -> Vec<(usize, String)> {
    let diff = similar::TextDiff::from_lines(old, new);
    diff.iter_all_changes()
        .filter(|c| c.tag() == similar::ChangeTag::Insert)
        .filter_map(|c| c.new_index().map(|i| (i + 1, c.value().trim_end_matches(['\n', '\r']).to_owned())))
        .collect()
}

/// A changed file's added lines, ready for the garbage checks.
struct Added {
    path: String,
    lines: Vec<(usize, String)>,
    binary: bool,
    size: u64,
}

/// A changed file for the garbage checks: its old and new bytes, or only its size when it is
/// too large to read (then it is judged as binary).
pub struct Content {
    pub path: String,
    pub old: Vec<u8>,
    pub new: Option<Vec<u8>>,
    pub size: u64,
}

/// The garbage findings for a set of changed files, from their old and new content.
pub fn check_changes(changes: &[Content], rules: &GarbageRules) -> Vec<Finding> {
    let added: Vec<Added> = changes
        .iter()
        .map(|c| match &c.new {
            Some(new) => {
                let binary = crate::walk::looks_binary(new);
                let lines = if binary {
                    Vec::new()
                } else {
                    added_lines(&String::from_utf8_lossy(&c.old), &String::from_utf8_lossy(new))
                };
                Added { path: c.path.clone(), lines, binary, size: c.size }
            }
            None => Added { path: c.path.clone(), lines: Vec::new(), binary: true, size: c.size },
        })
        .collect();
    let files: Vec<ChangedFile> = added
        .iter()
        .map(|a| ChangedFile {
            path: &a.path,
            added: a.lines.iter().map(|(n, t)| (*n, t.as_str())).collect(),
            binary: a.binary,
            size: a.size,
        })
        .collect();
    check(&files, rules)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file<'a>(path: &'a str, lines: &'a [&'a str]) -> ChangedFile<'a> {
        ChangedFile {
            path,
            added: lines.iter().enumerate().map(|(i, l)| (i + 1, *l)).collect(),
            binary: false,
            size: 0,
        }
    }

    fn kinds(files: &[ChangedFile]) -> Vec<GarbageKind> {
        check(files, &GarbageRules::default()).into_iter().map(|f| f.kind).collect()
    }

    #[test]
    fn each_kind_is_found() {
        use GarbageKind::*;
        assert_eq!(kinds(&[file("a.py", &["    print(x)"])]), vec![DebugStatement]);
        assert_eq!(kinds(&[file("a.py", &["    breakpoint()"])]), vec![DebugStatement]);
        assert_eq!(kinds(&[file("a.ts", &["  console.log(state);"])]), vec![DebugStatement]);
        assert_eq!(kinds(&[file("a.rs", &["    dbg!(&x);"])]), vec![DebugStatement]);
        assert_eq!(kinds(&[file("src/a.py.orig", &[])]), vec![TempFile]);
        assert_eq!(kinds(&[file(".DS_Store", &[])]), vec![TempFile]);
        assert_eq!(kinds(&[file("a.txt", &["<<<<<<< HEAD", "=======", ">>>>>>> branch"])]), vec![ConflictMarker; 3]);
        assert_eq!(kinds(&[file("a.py", &["# TODO: later"])]), vec![TodoStub]);
        assert_eq!(kinds(&[file("a.py", &["def f():", "    pass"])]), vec![EmptyImplementation]);
        assert_eq!(kinds(&[file("a.rs", &["fn f() {", "    todo!()", "}"])]), vec![EmptyImplementation]);
        assert_eq!(kinds(&[file("k.pem", &["-----BEGIN RSA PRIVATE KEY-----"])]), vec![Secret]);
        assert_eq!(kinds(&[file("c.env", &["TOKEN=ghp_abcdefghijklmnopqrstuvwxyz0123456789"])]), vec![Secret]);
        let big = ChangedFile { path: "x.bin", added: vec![], binary: true, size: 5 << 20 };
        assert_eq!(kinds(&[big]), vec![LargeBinary]);
    }

    #[test]
    fn clean_code_passes_and_rules_switch_off() {
        assert!(kinds(&[file("a.py", &["def f(x):", "    return x + 1", "# the printer prints"])]).is_empty());
        assert!(kinds(&[file("a.rs", &["// dbg!(x) was here", "let y = 2;"])]).is_empty());
        assert!(kinds(&[file("README.md", &["TODO list: print(x) is fine in prose"])]).is_empty());
        let rules = GarbageRules { debug_statements: false, ..GarbageRules::default() };
        assert!(check(&[file("a.py", &["print(1)"])], &rules).is_empty());
    }
}
