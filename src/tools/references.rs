//! `find_references`: syntax-aware references from the index — identifier occurrences that are
//! code (not comments or strings) and not the definition's own name, each with the function or
//! class it sits in.

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

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct FindReferencesOutput {
    pub symbol: String,
    /// Sorted by file and position.
    pub references: Vec<Reference>,
    pub total: usize,
    /// How many files reference the symbol.
    pub files: usize,
    pub next_offset: Option<usize>,
    pub truncated: bool,
    pub truncation_warning: Option<String>,
    pub skipped: SkippedFiles,
    /// Set when the answer came before the symbol index existed.
    pub fast_path: Option<FastPathNote>,
}

pub fn find_references(ws: &Workspace, params: FindReferencesParams) -> ToolResult<FindReferencesOutput> {
    let Some(symbol) = given(&params.symbol) else {
        return Err(ws.tool_error(&msg::NO_SYMBOL, &[]).into());
    };
    let prefix = ws.scope_prefix(params.path.as_deref())?;
    let language = ws.language_filter(params.language.as_deref())?;
    let offset = params.offset.unwrap_or(0);
    let lookup = Lookup::Words { words: vec![symbol.to_owned()], ignore_case: false };
    ws.with_index_for(&lookup, |index, report| {
        let hits = uses(index, symbol, |rel, lang| under(rel, &prefix) && language.is_none_or(|l| l == lang));
        let total = hits.len();
        let files = {
            let mut f: Vec<u32> = hits.iter().map(|u| u.file).collect();
            f.dedup();
            f.len()
        };
        // Only the page's enclosing definitions are read, each in place; its source lines are
        // read a batch at a time, the batch's files in parallel.
        let rest = hits.get(offset..).unwrap_or_default();
        let refs = rest.chunks(LINE_BATCH).flat_map(|batch| {
            let texts = source_lines(ws, index, batch);
            batch.iter().zip(texts).filter_map(|(u, text)| {
                let meta = index.meta(u.file)?;
                let enclosing = u.enclosing.and_then(|si| index.symbol((u.file, si))).map(|(_, s)| Enclosing {
                    name: s.name,
                    kind: s.kind.name().to_owned(),
                    line: s.line,
                    scope: s.scope,
                });
                Some(Reference {
                    file: meta.rel.to_owned(),
                    line: u.line,
                    column: u.column,
                    text,
                    enclosing,
                    language: meta.lang.name().to_owned(),
                })
            })
        });
        let page = take_page(refs, offset, usize::MAX, MAX_RESPONSE_BYTES);
        Ok(FindReferencesOutput {
            symbol: symbol.to_owned(),
            references: page.items,
            total,
            files,
            next_offset: page.next_offset,
            truncated: page.truncated,
            truncation_warning: page.truncated.then(|| ws.truncation_warning()),
            skipped: SkippedFiles::new(report.too_large.clone(), report.binary.clone(), ws.config.max_file_size),
            fast_path: ws.fast_path_note(report),
        })
    })
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
