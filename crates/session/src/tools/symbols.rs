//! `get_symbols`: the definitions in a file or below a directory.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::page::{MAX_RESPONSE_BYTES, take_page};
use super::{Definition, FastPathNote, SkippedFiles, ToolResult, Workspace, under};
use code_intel_codebase::index::refresh::Lookup;
use code_intel_codebase::syntax::SymbolKind;

#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema, clap::Args)]
pub struct GetSymbolsParams {
    /// A file or directory, relative to the repository root (default: everything).
    #[arg(long)]
    pub path: Option<String>,
    /// Only this kind: function, method, class (also structs, traits, interfaces, enums), struct,
    /// enum, trait, interface, type, module, macro, constant, variable, field, property, impl, …
    #[arg(long)]
    pub kind: Option<String>,
    /// Only files of this language.
    #[arg(long)]
    pub language: Option<String>,
    /// Skip this many symbols (from a previous `next_offset`).
    #[arg(long)]
    pub offset: Option<usize>,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct GetSymbolsOutput {
    pub path: String,
    /// Sorted by file and line.
    pub symbols: Vec<Definition>,
    pub total: usize,
    pub files: usize,
    pub next_offset: Option<usize>,
    pub truncated: bool,
    pub truncation_warning: Option<String>,
    pub skipped: SkippedFiles,
    /// Definitions the index leaves out (nested too deep, or too many in one file), if any.
    pub note: Option<String>,
    /// Set when the answer came before the symbol index existed.
    pub fast_path: Option<FastPathNote>,
}

pub fn get_symbols(ws: &Workspace, params: GetSymbolsParams) -> ToolResult<GetSymbolsOutput> {
    let prefix = ws.scope_prefix(params.path.as_deref())?;
    let language = ws.language_filter(params.language.as_deref())?;
    let kind = params.kind.as_deref().map(str::trim).filter(|k| !k.is_empty());
    if let Some(k) = kind
        && !SymbolKind::ALL.iter().any(|s| s.matches_filter(k))
    {
        let names: Vec<&str> = SymbolKind::ALL.iter().map(|k| k.name()).collect();
        return Err(ws.invalid_argument("kind", &format!("unknown kind '{k}'; one of {}", names.join(", "))));
    }
    let offset = params.offset.unwrap_or(0);
    // A path needs only the files under it; the whole repository needs the whole index.
    let lookup = if prefix.is_empty() { Lookup::All } else { Lookup::Paths(vec![prefix.clone()]) };
    ws.with_index_for(&lookup, |index, report| {
        let mut files = 0;
        let mut left_out = (0u64, 0usize);
        let mut stopped: Vec<&str> = Vec::new();
        let mut all = Vec::new();
        // Only the files listed are decoded.
        let listed: Vec<u32> = (0..index.file_count() as u32)
            .filter(|&i| index.meta(i).is_some_and(|m| under(m.rel, &prefix) && language.is_none_or(|l| l == m.lang)))
            .collect();
        for file in listed.into_iter().map(|i| index.file_at(i)) {
            files += 1;
            if file.outline.parse_stopped {
                stopped.push(&file.rel);
            }
            if file.outline.symbols_left_out > 0 {
                left_out = (left_out.0 + u64::from(file.outline.symbols_left_out), left_out.1 + 1);
            }
            all.extend(
                file.outline
                    .symbols
                    .iter()
                    .filter(|s| kind.is_none_or(|k| s.kind.matches_filter(k)))
                    .map(|s| Definition::new(&file.rel, file.lang, s)),
            );
        }
        let total = all.len();
        let page = take_page(all.into_iter().skip(offset), offset, usize::MAX, MAX_RESPONSE_BYTES);
        Ok(GetSymbolsOutput {
            path: prefix.clone(),
            symbols: page.items,
            total,
            files,
            next_offset: page.next_offset,
            truncated: page.truncated,
            truncation_warning: page.truncated.then(|| ws.truncation_warning()),
            // Only what was passed over where the listing looked.
            skipped: SkippedFiles::new(
                report.too_large.iter().filter(|(rel, _)| under(rel, &prefix)).cloned().collect(),
                report.binary.iter().filter(|rel| under(rel, &prefix)).cloned().collect(),
                ws.config.max_file_size,
            ),
            note: bounds_note(left_out, &stopped),
            fast_path: ws.fast_path_note(report),
        })
    })
}

/// What the per-file bounds left out of the listed files, if anything.
fn bounds_note((left_out, in_files): (u64, usize), stopped: &[&str]) -> Option<String> {
    let mut parts = Vec::new();
    if left_out > 0 {
        parts.push(format!(
            "{left_out} definition(s) in {in_files} file(s) left out: nested deeper than {} levels, or past the first {} of a file",
            code_intel_codebase::syntax::MAX_NESTING,
            code_intel_codebase::syntax::MAX_SYMBOLS
        ));
    }
    if !stopped.is_empty() {
        let shown: Vec<&str> = stopped.iter().take(5).copied().collect();
        parts.push(format!(
            "{} file(s) not parsed (parsing stopped after {} s): {}{}",
            stopped.len(),
            code_intel_codebase::syntax::PARSE_BUDGET.as_secs(),
            shown.join(", "),
            if stopped.len() > shown.len() { ", …" } else { "" }
        ));
    }
    (!parts.is_empty()).then(|| parts.join("; "))
}
