//! `analyze_structure`: the outline of one file (or of code passed inline).

use crate::contract::catalogue as msg;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{ToolResult, Workspace, given};
use crate::lang::Lang;
use crate::syntax::{self, FileSyntax, Symbol};
use crate::walk;

#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema)]
pub struct AnalyzeStructureParams {
    /// The file to analyze, relative to the repository root.
    pub file_path: Option<String>,
    /// Source code to analyze instead of a file (needs `language`).
    pub code: Option<String>,
    /// The language of `code`, or an override for `file_path`.
    pub language: Option<String>,
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
    pub summary: StructureSummary,
    /// The parser recovered from syntax errors; the outline may be partial.
    pub has_syntax_errors: bool,
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
            (None, lang, syntax::extract(lang, code.as_bytes()))
        }
        (None, None) => return Err(ws.tool_error(&msg::NO_FILE_PATH, &[]).into()),
    };
    Ok(outline(file, lang, &syntax))
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

pub fn outline(file: Option<String>, lang: Lang, syntax: &FileSyntax) -> AnalyzeStructureOutput {
    let symbols = &syntax.symbols;
    let functions: Vec<Item> = symbols.iter().filter(|s| s.kind.is_callable()).map(item).collect();
    let classes: Vec<ClassItem> = symbols
        .iter()
        .enumerate()
        .filter(|(_, s)| s.kind.is_class_like())
        .map(|(i, s)| ClassItem {
            item: item(s),
            methods: members_of(symbols, i).iter().filter(|m| m.kind.is_callable()).map(|m| m.name.clone()).collect(),
        })
        .collect();
    let imports: Vec<ImportItem> =
        syntax.imports.iter().map(|i| ImportItem { line: i.line, text: i.text.clone() }).collect();
    let exports: Vec<ExportItem> = symbols
        .iter()
        .filter(|s| s.exported && s.kind != crate::syntax::SymbolKind::Impl)
        .map(|s| ExportItem { name: s.name.clone(), kind: s.kind.name().to_owned(), line: s.line })
        .collect();
    let ranges = symbols
        .iter()
        .filter(|s| s.kind.is_callable() || s.kind.is_class_like())
        .map(|s| format!("{} {}: {}-{}", s.kind.name(), s.name, s.line, s.end_line))
        .collect();
    AnalyzeStructureOutput {
        file,
        language: lang.name().to_owned(),
        summary: StructureSummary {
            lines: syntax.line_count,
            functions: functions.len(),
            classes: classes.len(),
            imports: imports.len(),
            exports: exports.len(),
            ranges,
        },
        functions,
        classes,
        imports,
        exports,
        has_syntax_errors: syntax.has_errors,
    }
}

/// Symbols directly inside symbol `parent`, including through an `impl` of the same name (Rust)
/// and methods declared outside it with an explicit receiver or qualifier (Go, C++).
fn members_of(symbols: &[Symbol], parent: usize) -> Vec<&Symbol> {
    let name = &symbols[parent].name;
    let impls: Vec<usize> = symbols
        .iter()
        .enumerate()
        .filter(|(_, s)| s.kind == crate::syntax::SymbolKind::Impl && &s.name == name)
        .map(|(i, _)| i)
        .collect();
    symbols
        .iter()
        .filter(|s| {
            s.parent.is_some_and(|p| p as usize == parent || impls.contains(&(p as usize)))
                || (s.parent.is_none() && s.kind.is_callable() && s.scope.as_deref() == Some(name.as_str()))
        })
        .collect()
}
