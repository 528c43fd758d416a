//! `find_definitions`: symbol definitions from the tree-sitter tag queries, served by the index.

use code_intel_workflow::contract::catalogue as msg;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::page::{MAX_RESPONSE_BYTES, take_page};
use super::{Definition, FastPathNote, SkippedFiles, ToolResult, Workspace, given, under};
use code_intel_codebase::index::refresh::Lookup;

#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema, clap::Args)]
pub struct FindDefinitionsParams {
    /// The symbol name to look for.
    #[arg(long, allow_hyphen_values = true)]
    pub symbol: Option<String>,
    /// Only definitions in this file or directory (relative to the repository root).
    #[arg(long)]
    pub path: Option<String>,
    /// Only definitions in this language (rust, python, javascript, typescript, tsx, go, java, c,
    /// cpp, csharp, ruby, php).
    #[arg(long)]
    pub language: Option<String>,
    /// Match the name exactly (default true); false matches names containing `symbol`, ignoring case.
    #[arg(long, num_args = 0..=1, default_missing_value = "true")]
    pub exact_match: Option<bool>,
    /// Skip this many definitions (from a previous `next_offset`).
    #[arg(long)]
    pub offset: Option<usize>,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct FindDefinitionsOutput {
    pub symbol: String,
    pub exact_match: bool,
    /// Sorted by file and line.
    pub definitions: Vec<Definition>,
    pub total: usize,
    pub next_offset: Option<usize>,
    pub truncated: bool,
    pub truncation_warning: Option<String>,
    /// Source files the index could not parse.
    pub skipped: SkippedFiles,
    /// Set when the answer came before the symbol index existed.
    pub fast_path: Option<FastPathNote>,
}

pub fn find_definitions(ws: &Workspace, params: FindDefinitionsParams) -> ToolResult<FindDefinitionsOutput> {
    let Some(symbol) = given(&params.symbol) else {
        return Err(ws.tool_error(&msg::NO_SYMBOL, &[]).into());
    };
    let prefix = ws.scope_prefix(params.path.as_deref())?;
    let language = ws.language_filter(params.language.as_deref())?;
    let exact = params.exact_match.unwrap_or(true);
    let offset = params.offset.unwrap_or(0);
    let lookup = Lookup::Definitions { words: vec![symbol.to_owned()], ignore_case: !exact };
    ws.with_index_for(&lookup, |index, report| {
        let refs = if exact { index.definitions_named(symbol).to_vec() } else { index.definitions_containing(symbol) };
        let mut defs: Vec<Definition> = refs
            .into_iter()
            .filter(|r| index.meta(r.0).is_some_and(|f| under(f.rel, &prefix) && language.is_none_or(|l| l == f.lang)))
            .filter_map(|r| index.symbol(r))
            .map(|(f, s)| Definition::new(f.rel, f.lang, &s))
            .collect();
        defs.sort_by(|a, b| (a.file.as_str(), a.line).cmp(&(b.file.as_str(), b.line)));
        let total = defs.len();
        let page = take_page(defs.into_iter().skip(offset), offset, usize::MAX, MAX_RESPONSE_BYTES);
        Ok(FindDefinitionsOutput {
            symbol: symbol.to_owned(),
            exact_match: exact,
            definitions: page.items,
            total,
            next_offset: page.next_offset,
            truncated: page.truncated,
            truncation_warning: page.truncated.then(|| ws.truncation_warning()),
            skipped: SkippedFiles::new(report.too_large.clone(), report.binary.clone(), ws.config.max_file_size),
            fast_path: ws.fast_path_note(report),
        })
    })
}
