//! The Forest's chunks: every function and method, every class-like definition (without the
//! methods, which are their own chunks) and the module-level code between definitions. A file
//! without a grammar is cut into line windows. Oversized chunks are split at statement
//! boundaries (lines at the body's indentation: in a function, the lines indented deeper than
//! its first), up to `max_tokens`.
//!
//! Chunk ids are `path#symbol.path#n`: repository-relative, so moving the repository keeps
//! them, and numbered, so two definitions with the same path stay two chunks.

use std::collections::HashMap;

use code_intel_codebase::lang::Lang;
use code_intel_codebase::syntax::{FileSyntax, SymbolKind};

#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
pub struct Chunk {
    /// `path#symbol.path#n`.
    #[serde(rename = "chunk_id")]
    pub id: String,
    pub file: String,
    /// 1-based, inclusive.
    pub start_line: u32,
    pub end_line: u32,
    /// `Auth.login`, `<module>` for module-level code, `<lines>` for line windows.
    pub symbol: String,
    pub kind: String,
    /// What the embedding sees first: file, symbol path and signature.
    pub header: String,
    pub text: String,
}

/// Lines per window for files without a grammar.
const WINDOW_LINES: usize = 40;

/// A rough token count (about four bytes per token for code), enough to bound chunk sizes.
pub(crate) fn estimate_tokens(text: &str) -> usize {
    text.len().div_ceil(4)
}

/// Chunks of one file. `syntax` is the file's parse (None: no grammar).
pub fn chunk_file(rel: &str, source: &str, syntax: Option<(Lang, &FileSyntax)>, max_tokens: usize) -> Vec<Chunk> {
    let lines: Vec<&str> = source.lines().collect();
    let mut pieces: Vec<(u32, u32, String, String, String)> = Vec::new(); // start, end, symbol, kind, signature
    match syntax {
        None => {
            for (i, window) in lines.chunks(WINDOW_LINES).enumerate() {
                let start = (i * WINDOW_LINES) as u32 + 1;
                pieces.push((start, start + window.len() as u32 - 1, "<lines>".into(), "lines".into(), String::new()));
            }
        }
        Some((lang, syn)) => {
            let sep = if matches!(lang, Lang::Rust | Lang::Cpp | Lang::Php | Lang::Ruby) { "::" } else { "." };
            let mut covered = vec![false; lines.len() + 1];
            let path_of = |i: usize| {
                let s = &syn.symbols[i];
                match &s.scope {
                    Some(scope) => format!("{scope}{sep}{}", s.name),
                    None => s.name.clone(),
                }
            };
            // Functions and methods first: they are chunks of their own.
            for (i, s) in syn.symbols.iter().enumerate() {
                if s.kind.is_callable() {
                    let start = with_leading_comments(&lines, &covered, s.line);
                    pieces.push((start, s.end_line, path_of(i), s.kind.name().into(), s.signature.clone()));
                    for l in start..=s.end_line.min(lines.len() as u32) {
                        covered[l as usize] = true;
                    }
                }
            }
            // Class-like definitions: what their methods do not cover.
            for (i, s) in syn.symbols.iter().enumerate() {
                let classy = s.kind.is_class_like() || s.kind == SymbolKind::Impl;
                if !classy || s.parent.is_some_and(|p| syn.symbols[p as usize].kind.is_callable()) {
                    continue;
                }
                let runs = uncovered_runs(&covered, s.line, s.end_line.min(lines.len() as u32));
                let whole = runs.len() == 1 && runs[0] == (s.line, s.end_line.min(lines.len() as u32));
                for (a, b) in runs {
                    // A shell left around methods (`impl Circle {` … `}`) says nothing the
                    // methods' headers do not; it would only add noise to the rankings.
                    if !whole && meaningful_lines(&lines, a, b) <= 1 {
                        continue;
                    }
                    pieces.push((a, b, path_of(i), s.kind.name().into(), s.signature.clone()));
                }
                for l in s.line..=s.end_line.min(lines.len() as u32) {
                    covered[l as usize] = true;
                }
            }
            // Module-level code between definitions.
            for (a, b) in uncovered_runs(&covered, 1, lines.len() as u32) {
                pieces.push((a, b, "<module>".into(), "module".into(), String::new()));
            }
        }
    }
    pieces.sort_by_key(|p| (p.0, p.1));
    let mut seen: HashMap<String, usize> = HashMap::new();
    let mut out = Vec::new();
    for (start, end, symbol, kind, signature) in pieces {
        let callable = SymbolKind::from_name(&kind).is_some_and(SymbolKind::is_callable);
        for (a, b) in split(&lines, start, end, max_tokens, callable) {
            let text = bounded(lines[(a - 1) as usize..b as usize].join("\n"), rel, a, b, max_tokens);
            if !text.chars().any(char::is_alphanumeric) {
                continue;
            }
            let n = seen.entry(symbol.clone()).or_insert(0);
            *n += 1;
            let header =
                if signature.is_empty() { format!("{rel} {symbol}") } else { format!("{rel} {symbol}: {signature}") };
            out.push(Chunk {
                id: format!("{rel}#{symbol}#{n}"),
                file: rel.to_owned(),
                start_line: a,
                end_line: b,
                symbol: symbol.clone(),
                kind: kind.clone(),
                header,
                text,
            });
        }
    }
    out
}

/// Bytes a chunk's text may hold per token of `max_tokens`. Pieces are cut by lines at about
/// four bytes a token, so only a line longer than the whole budget (minified code, one-line
/// nests) reaches this; past it the model, which reads 256 tokens, would see nothing more, and
/// every definition on such a line would otherwise carry the whole line again.
const MAX_BYTES_PER_TOKEN: usize = 8;

/// `text`, cut at `max_tokens * MAX_BYTES_PER_TOKEN` bytes with a note naming the full range.
fn bounded(mut text: String, rel: &str, a: u32, b: u32, max_tokens: usize) -> String {
    let limit = max_tokens * MAX_BYTES_PER_TOKEN;
    if text.len() <= limit {
        return text;
    }
    let total = text.len();
    let cut = (0..=limit).rev().find(|&i| text.is_char_boundary(i)).unwrap_or(0);
    text.truncate(cut);
    text.push_str(&format!("\n… (cut at {cut} of {total} bytes: read {rel}:{a}-{b} for the rest)"));
    text
}

/// The first line of the doc comments and attributes right above `line` (`///`, `//`, `#`,
/// `/** … */`, `#[…]`, `@decorator`), so a function's chunk carries its documentation.
fn with_leading_comments(lines: &[&str], covered: &[bool], line: u32) -> u32 {
    let mut start = line;
    while start > 1 && !covered.get((start - 1) as usize).copied().unwrap_or(true) {
        let above = lines[(start - 2) as usize].trim_start();
        let comment = ["//", "#", "/*", "*", "@", "--"].iter().any(|p| above.starts_with(p));
        if !comment || above.is_empty() {
            break;
        }
        start -= 1;
    }
    start
}

/// Lines in `from..=to` with a letter or digit (not only brackets and blanks).
fn meaningful_lines(lines: &[&str], from: u32, to: u32) -> usize {
    (from..=to).filter(|&l| lines.get((l - 1) as usize).is_some_and(|t| t.chars().any(char::is_alphanumeric))).count()
}

/// Runs of lines in `from..=to` not yet covered, trimmed of blank edges by the caller's filter.
fn uncovered_runs(covered: &[bool], from: u32, to: u32) -> Vec<(u32, u32)> {
    let mut runs = Vec::new();
    let mut start = None;
    for l in from..=to {
        let free = !covered.get(l as usize).copied().unwrap_or(true);
        match (free, start) {
            (true, None) => start = Some(l),
            (false, Some(s)) => {
                runs.push((s, l - 1));
                start = None;
            }
            _ => {}
        }
    }
    if let Some(s) = start {
        runs.push((s, to));
    }
    runs
}

/// Splits `start..=end` into pieces of at most `max_tokens`, cutting before lines at the
/// smallest indentation of the body (statement starts) when it can, else at any line. In a
/// function (`callable`) the body is what is indented deeper than its first line: a signature's
/// own lines at that level (`) -> T`, `where`, `{`) are not statements, and cutting there left a
/// piece that held the signature alone. Elsewhere (module code, the rest of a class, windows)
/// every line counts, so top-level statements stay the cut points.
fn split(lines: &[&str], start: u32, end: u32, max_tokens: usize, callable: bool) -> Vec<(u32, u32)> {
    let text_of = |a: u32, b: u32| lines[(a - 1) as usize..b as usize].join("\n");
    if start > end || estimate_tokens(&text_of(start, end)) <= max_tokens {
        return vec![(start, end)];
    }
    let indent = |l: u32| {
        let line = lines[(l - 1) as usize];
        (!line.trim().is_empty()).then(|| line.len() - line.trim_start().len())
    };
    let head_indent = indent(start).unwrap_or(0);
    let any_level = (start + 1..=end).filter_map(indent).min().unwrap_or(0);
    let deeper = (start + 1..=end).filter_map(indent).filter(|&i| i > head_indent).min();
    let body_indent = if callable { deeper.unwrap_or(any_level) } else { any_level };
    let mut out = Vec::new();
    let mut piece_start = start;
    let mut last_boundary = None;
    let mut tokens = 0;
    for l in start..=end {
        let line_tokens = estimate_tokens(lines[(l - 1) as usize]) + 1;
        if l > piece_start && tokens + line_tokens > max_tokens {
            let cut = last_boundary.filter(|&b| b > piece_start).unwrap_or(l);
            out.push((piece_start, cut - 1));
            piece_start = cut;
            tokens = estimate_tokens(&text_of(piece_start, l - 1)) + 1;
            last_boundary = None;
        }
        if l > piece_start && indent(l) == Some(body_indent) {
            last_boundary = Some(l);
        }
        tokens += line_tokens;
    }
    out.push((piece_start, end));
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use code_intel_codebase::syntax;

    fn chunks(rel: &str, src: &str, max: usize) -> Vec<Chunk> {
        let lang = Lang::detect(std::path::Path::new(rel));
        let syn = lang.map(|l| (l, syntax::extract(l, src.as_bytes())));
        chunk_file(rel, src, syn.as_ref().map(|(l, s)| (*l, s)), max)
    }

    #[test]
    fn functions_classes_and_module_code_are_chunks() {
        let src = "import os\n\nclass Auth:\n    retries = 3\n\n    def login(self, user):\n        return user\n\n    def logout(self):\n        return None\n\ndef helper():\n    return 1\n\nprint(helper())\n";
        let c = chunks("src/auth.py", src, 512);
        let ids: Vec<&str> = c.iter().map(|c| c.id.as_str()).collect();
        assert_eq!(
            ids,
            vec![
                "src/auth.py#<module>#1",
                "src/auth.py#Auth#1",
                "src/auth.py#Auth.login#1",
                "src/auth.py#Auth.logout#1",
                "src/auth.py#helper#1",
                "src/auth.py#<module>#2"
            ]
        );
        let login = &c[2];
        assert_eq!((login.start_line, login.end_line), (6, 7));
        assert!(login.header.starts_with("src/auth.py Auth.login: def login(self, user)"), "{}", login.header);
        assert!(c[1].text.contains("retries = 3") && !c[1].text.contains("def login"));
    }

    #[test]
    fn same_named_definitions_stay_apart_and_ids_are_repo_relative() {
        let src = "struct A;\nimpl A {\n    fn new() -> A { A }\n}\nstruct B;\nimpl B {\n    fn new() -> B { B }\n}\n";
        let c = chunks("src/lib.rs", src, 512);
        let news: Vec<&str> = c.iter().filter(|c| c.symbol.ends_with("new")).map(|c| c.id.as_str()).collect();
        assert_eq!(news, vec!["src/lib.rs#A::new#1", "src/lib.rs#B::new#1"]);
        assert!(c.iter().all(|c| c.id.starts_with("src/lib.rs#")));
    }

    #[test]
    fn oversized_bodies_split_at_statements_and_unknown_files_use_windows() {
        let mut src = String::from("def big():\n");
        for i in 0..200 {
            src.push_str(&format!("    value_{i} = compute_something_long({i}, {i})\n"));
        }
        let c = chunks("big.py", &src, 128);
        assert!(c.len() > 3, "{}", c.len());
        assert!(c.iter().all(|c| estimate_tokens(&c.text) <= 128 + 20), "pieces stay near the limit");
        assert_eq!(c[0].start_line, 1);
        assert_eq!(c.last().unwrap().end_line, 201);
        for w in c.windows(2) {
            assert_eq!(w[0].end_line + 1, w[1].start_line, "no gaps or overlaps");
        }
        let ids: std::collections::BTreeSet<&str> = c.iter().map(|c| c.id.as_str()).collect();
        assert_eq!(ids.len(), c.len());
        let text: String = (1..=100).map(|i| format!("line {i}\n")).collect();
        let w = chunks("notes.txt", &text, 512);
        assert_eq!(w.len(), 3);
        assert_eq!((w[0].start_line, w[0].end_line, w[2].end_line), (1, 40, 100));
        assert_eq!(w[0].id, "notes.txt#<lines>#1");
    }

    #[test]
    fn oversized_module_code_is_cut_at_its_top_level_statements() {
        let mut src = String::new();
        for i in 0..80 {
            src.push_str(&format!("value_{i} = compute_something_long({i}, {i})\n"));
            if i % 10 == 0 {
                src.push_str(&format!("if value_{i}:\n    log(value_{i})\n"));
            }
        }
        let c = chunks("script.py", &src, 128);
        assert!(c.len() > 2, "{}", c.len());
        for w in c.windows(2) {
            let first = src.lines().nth(w[1].start_line as usize - 1).unwrap();
            assert!(!first.starts_with(' '), "a piece starts at a top-level statement, not at {first:?}");
        }
    }

    #[test]
    fn a_signature_over_several_lines_stays_with_the_start_of_its_body() {
        // As heck's `transform`: parameters, `) -> T`, `where` and `{` on lines of their own at
        // the function's indentation, then a body too long for one piece.
        let mut src = String::from(
            "fn transform<F, G>(\n    s: &str,\n    mut with_word: F,\n) -> fmt::Result\nwhere\n    F: FnMut(&str) -> fmt::Result,\n{\n",
        );
        for i in 0..60 {
            src.push_str(&format!("    let value_{i} = compute_something_long({i}, {i});\n"));
        }
        src.push_str("}\n");
        let c = chunks("src/lib.rs", &src, 128);
        assert!(c.len() > 2, "{}", c.len());
        assert_eq!(c[0].start_line, 1);
        assert!(c[0].text.contains("let value_0"), "the first piece holds more than the signature: {}", c[0].text);
        assert!(c.iter().all(|c| estimate_tokens(&c.text) <= 128 + 20), "pieces stay near the limit");
        for w in c.windows(2) {
            assert_eq!(w[0].end_line + 1, w[1].start_line, "no gaps or overlaps");
            assert!(src.lines().nth(w[1].start_line as usize - 1).unwrap().starts_with("    let"), "cut at statements");
        }
    }

    #[test]
    fn a_line_longer_than_the_budget_is_cut_with_a_note_in_every_chunk_on_it() {
        // Minified code: many definitions on one line, each a chunk of that line.
        let src: String = (0..2000).map(|i| format!("function f{i}(a){{return a+{i}}}")).collect();
        let c = chunks("app.min.js", &src, 512);
        assert!(c.len() > 100, "{}", c.len());
        let limit = 512 * MAX_BYTES_PER_TOKEN + 100;
        assert!(c.iter().all(|c| c.text.len() <= limit), "every chunk stays near the byte limit");
        let cut = &c[0].text;
        assert!(cut.ends_with("read app.min.js:1-1 for the rest)"), "{}", &cut[cut.len() - 80..]);
        assert!(cut.contains(&format!("of {} bytes", src.len())), "the note gives the full size");
        // Multi-byte text is cut at a character boundary.
        let wide = format!("def f():\n    return '{}'\n", "é".repeat(5000));
        assert!(chunks("w.py", &wide, 64).iter().all(|c| c.text.len() <= 64 * MAX_BYTES_PER_TOKEN + 100));
    }
}
