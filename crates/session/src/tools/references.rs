//! `find_references`: syntax-aware references from the index — identifier occurrences that are
//! code (not comments or strings) and not the definition's own name, each with the function or
//! class it sits in. An answer is sized for an agent to read: a page of references (50 unless
//! `limit` says otherwise, code before tests), the total, and `callers`, the definitions all the
//! references sit in, most uses first.

use code_intel_workflow::contract::catalogue as msg;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::page::{MAX_RESPONSE_BYTES, take_page};
use super::{FastPathNote, SkippedFiles, ToolResult, Workspace, given, under};
use code_intel_codebase::index::refresh::Lookup;
use code_intel_codebase::index::{NameUse, SymbolIndex};

#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema, clap::Args)]
pub struct FindReferencesParams {
    /// The symbol name whose uses to find.
    #[arg(long, allow_hyphen_values = true)]
    pub symbol: Option<String>,
    /// Only references in this file or directory (relative to the repository root).
    #[arg(long)]
    pub path: Option<String>,
    /// Only references in files of this language.
    #[arg(long)]
    pub language: Option<String>,
    /// Skip this many references (from a previous `next_offset`).
    #[arg(long)]
    pub offset: Option<usize>,
    /// References per page (default 50, at most 500).
    #[arg(long)]
    pub limit: Option<usize>,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct Enclosing {
    pub name: String,
    pub kind: String,
    pub line: u32,
    pub scope: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct Reference {
    pub file: String,
    pub line: u32,
    pub column: u32,
    /// The source line.
    pub text: String,
    /// The innermost function, method, class or module containing the reference.
    pub enclosing: Option<Enclosing>,
    pub language: String,
}

/// A definition that uses the symbol (or a file's top-level code, when `enclosing` is null), and
/// how many times.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct Caller {
    pub file: String,
    pub enclosing: Option<Enclosing>,
    pub uses: usize,
    /// Whether the file is a test.
    pub test: bool,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct FindReferencesOutput {
    pub symbol: String,
    /// This page of the references: code before tests, each part in file and position order
    /// (so a definition's uses sit together).
    pub references: Vec<Reference>,
    /// How many references there are in all (every page).
    pub total: usize,
    /// How many files reference the symbol.
    pub files: usize,
    /// Where all the references are, by enclosing definition: code before tests, most uses
    /// first; at most 20, `callers_total` counts them all.
    pub callers: Vec<Caller>,
    pub callers_total: usize,
    /// Call again with this `offset` for the next page.
    pub next_offset: Option<usize>,
    pub truncated: bool,
    pub truncation_warning: Option<String>,
    pub skipped: SkippedFiles,
    /// Set when the answer came before the symbol index existed.
    pub fast_path: Option<FastPathNote>,
}

/// References in an answer when the call gives no `limit`: what an agent reads at once.
pub const DEFAULT_LIMIT: usize = 50;
/// The most references one answer holds, whatever the `limit`.
pub const MAX_LIMIT: usize = 500;
/// The most bytes of references one answer holds (a page of long lines stops earlier).
pub const PAGE_BYTES: usize = 48 * 1024;
/// Callers listed in an answer.
pub const MAX_CALLERS: usize = 20;

pub fn find_references(ws: &Workspace, params: FindReferencesParams) -> ToolResult<FindReferencesOutput> {
    let Some(symbol) = given(&params.symbol) else {
        return Err(ws.tool_error(&msg::NO_SYMBOL, &[]).into());
    };
    let prefix = ws.scope_prefix(params.path.as_deref())?;
    let language = ws.language_filter(params.language.as_deref())?;
    let offset = params.offset.unwrap_or(0);
    let limit = params.limit.unwrap_or(DEFAULT_LIMIT).clamp(1, MAX_LIMIT);
    let lookup = Lookup::Words { words: vec![symbol.to_owned()], ignore_case: false };
    ws.with_index_for(&lookup, |index, report| {
        let hits = uses(index, symbol, |rel, lang| under(rel, &prefix) && language.is_none_or(|l| l == lang));
        let total = hits.len();
        let files = {
            let mut f: Vec<u32> = hits.iter().map(|u| u.file).collect();
            f.dedup();
            f.len()
        };
        let test_files: std::collections::HashSet<u32> = hits
            .chunk_by(|a, b| a.file == b.file)
            .filter_map(|run| run.first().map(|u| u.file))
            .filter(|&f| index.meta(f).is_some_and(|m| super::category::category(m.rel) == "test"))
            .collect();
        let is_test = |file: u32| test_files.contains(&file);
        // Code first, then tests; each part keeps path and position order.
        let (code, tests): (Vec<NameUse>, Vec<NameUse>) = hits.into_iter().partition(|u| !is_test(u.file));
        let hits: Vec<NameUse> = code.into_iter().chain(tests).collect();
        let (callers, callers_total) = callers(index, &hits, &is_test);
        // Only the page's enclosing definitions are read, each in place; its source lines are
        // read a batch at a time, the batch's files in parallel.
        let rest = hits.get(offset..).unwrap_or_default();
        let refs = rest.chunks(LINE_BATCH).flat_map(|batch| {
            let texts = source_lines(ws, index, batch);
            batch.iter().zip(texts).filter_map(|(u, text)| {
                let meta = index.meta(u.file)?;
                Some(Reference {
                    file: meta.rel.to_owned(),
                    line: u.line,
                    column: u.column,
                    text,
                    enclosing: enclosing(index, u.file, u.enclosing),
                    language: meta.lang.name().to_owned(),
                })
            })
        });
        let page = take_page(refs, offset, limit, PAGE_BYTES.min(MAX_RESPONSE_BYTES));
        Ok(FindReferencesOutput {
            symbol: symbol.to_owned(),
            references: page.items,
            total,
            files,
            callers,
            callers_total,
            next_offset: page.next_offset,
            truncated: page.truncated,
            truncation_warning: page.truncated.then(|| ws.truncation_warning()),
            skipped: SkippedFiles::new(report.too_large.clone(), report.binary.clone(), ws.config.max_file_size),
            fast_path: ws.fast_path_note(report),
        })
    })
}

/// The enclosing definition `si` of file `file`, read in place.
pub(super) fn enclosing(index: &SymbolIndex, file: u32, si: Option<u32>) -> Option<Enclosing> {
    si.and_then(|si| index.symbol((file, si))).map(|(_, s)| Enclosing {
        name: s.name,
        kind: s.kind.name().to_owned(),
        line: s.line,
        scope: s.scope,
    })
}

/// The definitions `hits` sit in, with their counts: code before tests, most uses first, then
/// path and position; the first [`MAX_CALLERS`] read from the index, and how many there are.
fn callers(index: &SymbolIndex, hits: &[NameUse], is_test: &dyn Fn(u32) -> bool) -> (Vec<Caller>, usize) {
    let mut counts: std::collections::HashMap<(u32, Option<u32>), usize> = std::collections::HashMap::new();
    for u in hits {
        *counts.entry((u.file, u.enclosing)).or_default() += 1;
    }
    let mut ranked: Vec<((u32, Option<u32>), usize, bool)> =
        counts.into_iter().map(|(key, n)| (key, n, is_test(key.0))).collect();
    ranked.sort_by_key(|&((file, si), n, test)| (test, std::cmp::Reverse(n), file, si));
    let total = ranked.len();
    let listed = ranked
        .into_iter()
        .take(MAX_CALLERS)
        .filter_map(|((file, si), uses, test)| {
            let meta = index.meta(file)?;
            Some(Caller { file: meta.rel.to_owned(), enclosing: enclosing(index, file, si), uses, test })
        })
        .collect();
    (listed, total)
}

/// Every use of `name` in files accepted by `keep`, in path and position order: one posting
/// list, nothing of the files decoded.
pub fn uses(
    index: &SymbolIndex,
    name: &str,
    keep: impl Fn(&str, code_intel_codebase::lang::Lang) -> bool,
) -> Vec<NameUse> {
    let mut uses = index.uses(name);
    uses.retain(|u| index.meta(u.file).is_some_and(|m| keep(m.rel, m.lang)));
    uses
}

/// How many references' source lines are read at a time: a page holds a few hundred, and at
/// most one batch is read past the page's end.
const LINE_BATCH: usize = 128;

/// The source line of each use in `batch` (in path and position order), each file read by one
/// of rayon's threads: opening files, not reading them, is most of a page's cost.
fn source_lines(ws: &Workspace, index: &SymbolIndex, batch: &[NameUse]) -> Vec<String> {
    use rayon::prelude::*;
    let runs: Vec<&[NameUse]> = batch.chunk_by(|a, b| a.file == b.file).collect();
    let per_file: Vec<Vec<String>> = runs
        .par_iter()
        .map(|run| {
            let Some(rel) = run.first().and_then(|u| index.meta(u.file)).map(|m| m.rel) else {
                return vec![String::new(); run.len()];
            };
            let mut lines = LineCache::new(ws);
            run.iter().map(|u| lines.line(rel, u.line)).collect()
        })
        .collect();
    per_file.into_iter().flatten().collect()
}

/// Reads source lines for the references on the current page, one file at a time. References
/// come in position order, so each file is opened once and read forward only as far as the
/// last line shown (a reference near the top of a large file reads a few KB, not the file).
struct LineCache<'w> {
    ws: &'w Workspace,
    rel: String,
    file: Option<std::fs::File>,
    bytes: Vec<u8>,
    /// `at` is where 1-based line `line` starts.
    line: u32,
    at: usize,
}

/// How much more of a file is read at a time.
const READ_AHEAD: usize = 16 * 1024;

impl<'w> LineCache<'w> {
    fn new(ws: &'w Workspace) -> Self {
        LineCache { ws, rel: String::new(), file: None, bytes: Vec::new(), line: 1, at: 0 }
    }

    /// Reads the next part of the file; false at its end (or on an error).
    fn read_more(&mut self) -> bool {
        use std::io::Read;
        let Some(file) = self.file.as_mut() else { return false };
        let len = self.bytes.len();
        self.bytes.resize(len + READ_AHEAD.max(len), 0);
        let n = file.read(&mut self.bytes[len..]).unwrap_or(0);
        self.bytes.truncate(len + n);
        if n == 0 {
            self.file = None;
        }
        n > 0
    }

    fn line(&mut self, rel: &str, line: u32) -> String {
        if self.rel != rel {
            rel.clone_into(&mut self.rel);
            self.file = std::fs::File::open(self.ws.repo.root().join(rel)).ok();
            self.bytes.clear();
            (self.line, self.at) = (1, 0);
        }
        if line < self.line {
            (self.line, self.at) = (1, 0);
        }
        // Forward to the line's start, reading more as needed.
        let mut scanned = self.at;
        while self.line < line {
            match memchr::memchr(b'\n', &self.bytes[scanned..]) {
                Some(i) => {
                    scanned += i + 1;
                    self.at = scanned;
                    self.line += 1;
                }
                None => {
                    scanned = self.bytes.len();
                    if !self.read_more() {
                        return String::new();
                    }
                }
            }
        }
        // And to its end.
        let end = loop {
            match memchr::memchr(b'\n', &self.bytes[scanned..]) {
                Some(i) => break scanned + i,
                None => {
                    scanned = self.bytes.len();
                    if !self.read_more() {
                        break self.bytes.len();
                    }
                }
            }
        };
        let text = String::from_utf8_lossy(&self.bytes[self.at..end]);
        let text = text.trim();
        match text.char_indices().nth(400) {
            Some((i, _)) => format!("{}…", &text[..i]),
            None => text.to_owned(),
        }
    }
}
