//! `analyze_structure`: the outline of one file (or of code passed inline).

use code_intel_workflow::contract::catalogue as msg;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::page::MAX_RESPONSE_BYTES;
use super::{ToolResult, Workspace, given};
use code_intel_codebase::lang::Lang;
use code_intel_codebase::syntax::{self, FileSyntax, Symbol};
use code_intel_codebase::walk;

#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema, clap::Args)]
pub struct AnalyzeStructureParams {
    /// The file to analyze, relative to the repository root.
    #[arg(long)]
    pub file_path: Option<String>,
    /// Source code to analyze instead of a file (needs `language`).
    #[arg(long)]
    pub code: Option<String>,
    /// The language of `code`, or an override for `file_path`.
    #[arg(long)]
    pub language: Option<String>,
    /// Skip this many functions and classes (from a previous `next_offset`).
    #[arg(long)]
    pub offset: Option<usize>,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct Item {
    pub name: String,
    pub kind: String,
    pub line: u32,
    pub end_line: u32,
    pub scope: Option<String>,
    pub signature: String,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct ClassItem {
    #[serde(flatten)]
    pub item: Item,
    /// Methods and constructors defined directly inside.
    pub methods: Vec<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct ImportItem {
    pub line: u32,
    pub text: String,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct ExportItem {
    pub name: String,
    pub kind: String,
    pub line: u32,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct StructureSummary {
    pub lines: u32,
    pub functions: usize,
    pub classes: usize,
    pub imports: usize,
    pub exports: usize,
    /// "kind name: start-end" for every function and class, in source order.
    pub ranges: Vec<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct AnalyzeStructureOutput {
    /// The analyzed file, or null for inline code.
    pub file: Option<String>,
    pub language: String,
    /// Functions, methods and constructors.
    pub functions: Vec<Item>,
    /// Classes, structs, traits, interfaces and enums.
    pub classes: Vec<ClassItem>,
    pub imports: Vec<ImportItem>,
    /// Definitions visible outside the file by the language's rules.
    pub exports: Vec<ExportItem>,
    /// Counts for the whole file; `ranges` for the functions and classes listed here.
    pub summary: StructureSummary,
    /// The parser recovered from syntax errors; the outline may be partial.
    pub has_syntax_errors: bool,
    /// Where the next call should start, when the functions and classes did not all fit.
    pub next_offset: Option<usize>,
    pub truncated: bool,
    pub truncation_warning: Option<String>,
    /// What the outline leaves out: definitions nested too deep, imports past the budget.
    pub note: Option<String>,
}

/// A source file read for parsing: checked to be inside the repository, a regular text file under
/// the size limit, in a supported language.
pub struct SourceFile {
    pub rel: String,
    pub lang: Lang,
    pub bytes: Vec<u8>,
}

pub fn read_source(ws: &Workspace, file_path: &str, language: Option<&str>) -> ToolResult<SourceFile> {
    let abs = ws.repo.resolve(file_path).map_err(|e| ws.path_error(e))?;
    let rel = ws.repo.relative(&abs).unwrap_or_default();
    let meta = std::fs::metadata(&abs).map_err(|e| ws.invalid_argument("file_path", &e.to_string()))?;
    if !meta.is_file() {
        return Err(ws.tool_error(&msg::NOT_A_FILE, &[("path", &rel)]).into());
    }
    if meta.len() > ws.config.max_file_size {
        let (size, limit) = (meta.len().to_string(), ws.config.max_file_size.to_string());
        return Err(ws.tool_error(&msg::FILE_TOO_LARGE, &[("path", &rel), ("size", &size), ("limit", &limit)]).into());
    }
    let lang = match ws.language_filter(language)? {
        Some(l) => l,
        None => Lang::detect(rel.as_ref()).ok_or_else(|| {
            let ext = rel.rsplit('.').next().filter(|e| *e != rel).unwrap_or("(none)").to_owned();
            ws.tool_error(&msg::UNSUPPORTED_LANGUAGE, &[("language", &ext), ("supported", &Lang::supported_list())])
        })?,
    };
    let bytes = std::fs::read(&abs).map_err(|e| ws.invalid_argument("file_path", &e.to_string()))?;
    if walk::looks_binary(&bytes) {
        return Err(ws.tool_error(&msg::BINARY_FILE, &[("path", &rel)]).into());
    }
    Ok(SourceFile { rel, lang, bytes })
}

pub fn analyze_structure(ws: &Workspace, params: AnalyzeStructureParams) -> ToolResult<AnalyzeStructureOutput> {
    let (file, lang, syntax) = match (given(&params.file_path), params.code.as_deref()) {
        (Some(path), _) => {
            let src = read_source(ws, path, params.language.as_deref())?;
            let syntax = syntax::extract(src.lang, &src.bytes);
            (Some(src.rel), src.lang, syntax)
        }
        (None, Some(code)) => {
            let Some(lang) = ws.language_filter(params.language.as_deref())? else {
                return Err(ws.invalid_argument("language", "required with `code`"));
            };
            // Inline code obeys the same size limit as a file.
            if code.len() as u64 > ws.config.max_file_size {
                let (size, limit) = (code.len().to_string(), ws.config.max_file_size.to_string());
                return Err(ws
                    .tool_error(&msg::FILE_TOO_LARGE, &[("path", "(inline code)"), ("size", &size), ("limit", &limit)])
                    .into());
            }
            (None, lang, syntax::extract(lang, code.as_bytes()))
        }
        (None, None) => return Err(ws.tool_error(&msg::NO_FILE_PATH, &[]).into()),
    };
    let mut out = outline(file, lang, &syntax, params.offset.unwrap_or(0), MAX_RESPONSE_BYTES);
    out.truncation_warning = out.truncated.then(|| ws.truncation_warning());
    Ok(out)
}

pub fn item(s: &Symbol) -> Item {
    Item {
        name: s.name.clone(),
        kind: s.kind.name().to_owned(),
        line: s.line,
        end_line: s.end_line,
        scope: s.scope.clone(),
        signature: s.signature.clone(),
    }
}

/// One function or class of the outline, with what the other lists say about it.
#[derive(Serialize)]
struct Entry {
    function: Option<Item>,
    class: Option<ClassItem>,
    export: Option<ExportItem>,
    range: String,
}

/// The most re-exports the first page lists (each repeats its import's first line).
const MAX_REEXPORTS: usize = 200;

/// Imports get at most this share of the response.
const IMPORT_SHARE: usize = 4;

/// The outline of a file: its functions and classes from `offset` on, as many as fit in
/// `budget` bytes (`next_offset` says where to go on), and on the first page its imports.
pub fn outline(
    file: Option<String>,
    lang: Lang,
    syntax: &FileSyntax,
    offset: usize,
    budget: usize,
) -> AnalyzeStructureOutput {
    let symbols = &syntax.symbols;
    let members = members_by_parent(symbols);
    let outlined: Vec<usize> =
        (0..symbols.len()).filter(|&i| symbols[i].kind.is_callable() || symbols[i].kind.is_class_like()).collect();
    let export = |s: &Symbol| {
        (s.exported && s.kind != code_intel_codebase::syntax::SymbolKind::Impl).then(|| ExportItem {
            name: s.name.clone(),
            kind: s.kind.name().to_owned(),
            line: s.line,
        })
    };
    let entries = outlined.iter().skip(offset).map(|&i| {
        let s = &symbols[i];
        let (function, class) = if s.kind.is_class_like() {
            let methods =
                members.get(&i).into_iter().flatten().filter(|m| m.kind.is_callable()).map(|m| m.name.clone());
            (None, Some(ClassItem { item: item(s), methods: methods.collect() }))
        } else {
            (Some(item(s)), None)
        };
        Entry {
            function,
            class,
            export: export(s),
            range: format!("{} {}: {}-{}", s.kind.name(), s.name, s.line, s.end_line),
        }
    });
    let import_budget = if offset == 0 { budget / IMPORT_SHARE } else { 0 };
    let all_imports = syntax.imports.iter().map(|i| ImportItem { line: i.line, text: i.text.clone() });
    let imports = if offset == 0 {
        crate::tools::page::take_page(all_imports, 0, usize::MAX, import_budget)
    } else {
        crate::tools::page::take_page(all_imports.take(0), 0, 0, 0)
    };
    let page = crate::tools::page::take_page(entries, offset, usize::MAX, budget - import_budget);
    // Re-exports (`pub use a::B;`, `export { b } from './b'`) are exports too; they are listed
    // with the imports, on the first page.
    let mut reexports: Vec<ExportItem> = syntax
        .imports
        .iter()
        .filter(|i| is_reexport(lang, &i.text))
        .map(|i| ExportItem { name: i.text.clone(), kind: "re-export".to_owned(), line: i.line })
        .collect();
    let reexport_count = reexports.len();
    reexports.truncate(MAX_REEXPORTS);
    let (mut functions, mut classes, mut exports, mut ranges) =
        (Vec::new(), Vec::new(), if offset == 0 { reexports } else { Vec::new() }, Vec::new());
    for e in page.items {
        functions.extend(e.function);
        classes.extend(e.class);
        exports.extend(e.export);
        ranges.push(e.range);
    }
    let notes: Vec<String> = syntax
        .left_out_note()
        .into_iter()
        .chain(
            imports.next_offset.map(|n| format!("only the first {n} of {} imports are listed", syntax.imports.len())),
        )
        .chain(
            (offset == 0 && reexport_count > MAX_REEXPORTS)
                .then(|| format!("only the first {MAX_REEXPORTS} of {reexport_count} re-exports are listed")),
        )
        .collect();
    AnalyzeStructureOutput {
        file,
        language: lang.name().to_owned(),
        summary: StructureSummary {
            lines: syntax.line_count,
            functions: symbols.iter().filter(|s| s.kind.is_callable()).count(),
            classes: symbols.iter().filter(|s| s.kind.is_class_like()).count(),
            imports: syntax.imports.len(),
            exports: symbols.iter().filter(|s| export(s).is_some()).count() + reexport_count,
            ranges,
        },
        functions,
        classes,
        imports: imports.items,
        exports,
        has_syntax_errors: syntax.has_errors,
        next_offset: page.next_offset,
        truncated: page.truncated || imports.truncated,
        truncation_warning: None,
        note: (!notes.is_empty()).then(|| notes.join("; ")),
    }
}

/// Whether an import statement's text re-exports what it imports.
fn is_reexport(lang: Lang, text: &str) -> bool {
    match lang {
        Lang::Rust => text.starts_with("pub use "),
        Lang::JavaScript | Lang::TypeScript | Lang::Tsx => text.starts_with("export "),
        _ => false,
    }
}

/// For each class-like symbol, the symbols directly inside it, computed once: its children,
/// the children of an `impl` of the same name (Rust), and functions declared outside it with
/// an explicit receiver or qualifier naming it (Go, C++).
fn members_by_parent(symbols: &[Symbol]) -> std::collections::HashMap<usize, Vec<&Symbol>> {
    let mut out: std::collections::HashMap<usize, Vec<&Symbol>> = std::collections::HashMap::new();
    let mut by_name: std::collections::HashMap<&str, Vec<usize>> = std::collections::HashMap::new();
    for (i, s) in symbols.iter().enumerate() {
        if s.kind.is_class_like() {
            by_name.entry(s.name.as_str()).or_default().push(i);
        }
    }
    for s in symbols {
        let mut owners: Vec<usize> = Vec::new();
        if let Some(p) = s.parent.map(|p| p as usize) {
            if symbols[p].kind == code_intel_codebase::syntax::SymbolKind::Impl {
                // Members of an `impl X` belong to X.
                owners.extend(by_name.get(symbols[p].name.as_str()).into_iter().flatten());
            }
            owners.push(p);
        } else if s.kind.is_callable()
            && let Some(scope) = s.scope.as_deref()
        {
            owners.extend(by_name.get(scope).into_iter().flatten());
        }
        owners.dedup();
        for o in owners {
            out.entry(o).or_default().push(s);
        }
    }
    out
}
