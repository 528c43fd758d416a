//! `find_references`: syntax-aware references from the index — identifier occurrences that are
//! code (not comments or strings) and not the definition's own name, each with the function or
//! class it sits in.

use crate::contract::catalogue as msg;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::page::{MAX_RESPONSE_BYTES, take_page};
use super::{FastPathNote, SkippedFiles, ToolResult, Workspace, given, under};
use crate::index::SymbolIndex;
use crate::index::refresh::Lookup;
use crate::syntax::Occurrence;

#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema)]
pub struct FindReferencesParams {
    /// The symbol name whose uses to find.
    pub symbol: Option<String>,
    /// Only references in this file or directory (relative to the repository root).
    pub path: Option<String>,
    /// Only references in files of this language.
    pub language: Option<String>,
    /// Skip this many references (from a previous `next_offset`).
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
        let hits = occurrences(index, symbol, |rel, lang| under(rel, &prefix) && language.is_none_or(|l| l == lang));
        let total = hits.len();
        let files = {
            let mut f: Vec<u32> = hits.iter().map(|(fi, _)| *fi).collect();
            f.dedup();
            f.len()
        };
        let mut lines = LineCache::new(ws);
        let refs = hits.into_iter().skip(offset).map(|(fi, occ)| {
            let file = index.file_at(fi);
            let enclosing = occ.enclosing.map(|si| {
                let s = &file.syntax.symbols[si as usize];
                Enclosing { name: s.name.clone(), kind: s.kind.name().to_owned(), line: s.line, scope: s.scope.clone() }
            });
            Reference {
                file: file.rel.clone(),
                line: occ.line,
                column: occ.column,
                text: lines.line(&file.rel, occ.line),
                enclosing,
                language: file.lang.name().to_owned(),
            }
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

/// Every occurrence of `name` in files accepted by `keep`, in path and position order.
pub fn occurrences(
    index: &SymbolIndex,
    name: &str,
    keep: impl Fn(&str, crate::lang::Lang) -> bool,
) -> Vec<(u32, Occurrence)> {
    // Read in place: a file is decoded only when its references are shown.
    let mut out = Vec::new();
    for (fi, name_id) in index.files_referencing(name) {
        let Some(meta) = index.meta(fi) else { continue };
        if keep(meta.rel, meta.lang) {
            out.extend(index.occurrences_of(fi, name_id).into_iter().map(|o| (fi, o)));
        }
    }
    out
}

/// Reads source lines for the references on the current page, one file at a time. References
/// come in position order, so each file is read once and scanned forward for line breaks.
struct LineCache<'w> {
    ws: &'w Workspace,
    rel: String,
    bytes: Vec<u8>,
    /// `at` is where 1-based line `line` starts.
    line: u32,
    at: usize,
}

impl<'w> LineCache<'w> {
    fn new(ws: &'w Workspace) -> Self {
        LineCache { ws, rel: String::new(), bytes: Vec::new(), line: 1, at: 0 }
    }

    fn line(&mut self, rel: &str, line: u32) -> String {
        if self.rel != rel {
            rel.clone_into(&mut self.rel);
            self.bytes = std::fs::read(self.ws.repo.root().join(rel)).unwrap_or_default();
            (self.line, self.at) = (1, 0);
        }
        if line < self.line {
            (self.line, self.at) = (1, 0);
        }
        if self.line < line {
            let newlines_to_skip = (line - self.line - 1) as usize;
            match memchr::memchr_iter(b'\n', &self.bytes[self.at..]).nth(newlines_to_skip) {
                Some(i) => {
                    self.at += i + 1;
                    self.line = line;
                }
                None => return String::new(),
            }
        }
        let rest = &self.bytes[self.at..];
        let end = memchr::memchr(b'\n', rest).unwrap_or(rest.len());
        let text = String::from_utf8_lossy(&rest[..end]);
        let text = text.trim();
        match text.char_indices().nth(400) {
            Some((i, _)) => format!("{}…", &text[..i]),
            None => text.to_owned(),
        }
    }
}
