//! The code-intelligence tools. Each takes its parameters (as MCP and the CLI deliver them) and a
//! [`Workspace`], and returns a serializable output or a [`ToolError`] from the contract.
//! Adapters (MCP, CLI) only translate; all behaviour lives here.

mod category;
pub mod context;
pub mod definitions;
pub mod function_at_line;
pub mod impact;
pub mod page;
pub mod query;
pub mod references;
pub mod reveals;
pub mod search_files;
pub mod search_text;
pub mod semantic;
pub mod structure;
pub mod symbols;

use code_intel_workflow::contract::catalogue as msg;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::workspace::Workspace;
use code_intel_codebase::lang::Lang;
use code_intel_codebase::repo::PathError;
use code_intel_workflow::contract::ContractMessage;

/// A tool failure as the agent sees it: an error code and a message from the contract.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ToolError {
    pub error: String,
    pub message: String,
}

impl From<ContractMessage> for ToolError {
    fn from(m: ContractMessage) -> Self {
        ToolError { error: m.error, message: m.message }
    }
}

impl std::fmt::Display for ToolError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.error, self.message)
    }
}

pub type ToolResult<T> = Result<T, ToolError>;

/// Present when a lookup was answered before the symbol index existed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct FastPathNote {
    /// Source files parsed for this answer: those that can matter to it.
    pub parsed_files: usize,
    /// Source files in the repository.
    pub source_files: usize,
    pub note: String,
}

impl Workspace {
    /// The note for an answer that came from the fast path, if it did.
    pub fn fast_path_note(&self, report: &code_intel_codebase::index::refresh::RefreshReport) -> Option<FastPathNote> {
        let fast = report.fast_path.as_ref()?;
        let key = if self.builds_index_in_background() { &msg::INDEX_FAST_PATH } else { &msg::INDEX_FAST_PATH_CLI };
        let (parsed, files) = (fast.parsed.to_string(), fast.source_files.to_string());
        let mut by: String = fast.by.chars().take(200).collect();
        if by.len() < fast.by.len() {
            by.push('…');
        }
        Some(FastPathNote {
            parsed_files: fast.parsed,
            source_files: fast.source_files,
            note: self.contract.message(key, &[("parsed", &parsed), ("files", &files), ("by", &by)]),
        })
    }
}

/// Files a tool passed over, so the agent knows what it did not see.
#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema)]
pub struct SkippedFiles {
    /// Files over the size limit.
    pub too_large: Vec<SkippedFile>,
    /// Files that look binary (a NUL byte near the start).
    pub binary: Vec<String>,
    /// How many were skipped in all, when the lists above are cut short.
    pub total: usize,
    pub note: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct SkippedFile {
    pub path: String,
    pub size: u64,
}

/// At most this many skipped files are listed by name.
const SKIPPED_LISTED: usize = 20;

impl SkippedFiles {
    pub fn new(mut too_large: Vec<(String, u64)>, mut binary: Vec<String>, limit: u64) -> SkippedFiles {
        let total = too_large.len() + binary.len();
        if total == 0 {
            return SkippedFiles::default();
        }
        too_large.sort();
        binary.sort();
        let note = Some(format!(
            "{} file(s) skipped: {} over the {limit}-byte limit (max_file_size in .code-intel/config.json), {} binary",
            total,
            too_large.len(),
            binary.len()
        ));
        too_large.truncate(SKIPPED_LISTED);
        binary.truncate(SKIPPED_LISTED);
        SkippedFiles {
            too_large: too_large.into_iter().map(|(path, size)| SkippedFile { path, size }).collect(),
            binary,
            total,
            note,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.total == 0
    }
}

/// A definition as every tool reports it.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct Definition {
    pub name: String,
    pub kind: String,
    pub file: String,
    pub line: u32,
    pub end_line: u32,
    pub scope: Option<String>,
    pub signature: String,
    pub language: String,
}

impl Definition {
    pub fn new(file: &str, lang: Lang, s: &code_intel_codebase::syntax::Symbol) -> Definition {
        Definition {
            name: s.name.clone(),
            kind: s.kind.name().to_owned(),
            file: file.to_owned(),
            line: s.line,
            end_line: s.end_line,
            scope: s.scope.clone(),
            signature: s.signature.clone(),
            language: lang.name().to_owned(),
        }
    }
}

impl Workspace {
    /// Maps a refused path to the contract's message.
    pub fn path_error(&self, e: PathError) -> ToolError {
        let root = self.repo.root().display().to_string();
        match e {
            PathError::OutsideRepo { path } => {
                self.tool_error(&msg::PATH_OUTSIDE_REPO, &[("path", &path), ("root", &root)]).into()
            }
            PathError::GitDir { path } => self.tool_error(&msg::PATH_IN_GIT_DIR, &[("path", &path)]).into(),
            PathError::NotFound { path } => self.tool_error(&msg::PATH_NOT_FOUND, &[("path", &path)]).into(),
        }
    }

    /// Resolves an optional `path` argument to a repository-relative prefix ("" = everything).
    pub fn scope_prefix(&self, path: Option<&str>) -> ToolResult<String> {
        match path.map(str::trim).filter(|p| !p.is_empty()) {
            None => Ok(String::new()),
            Some(p) => self.repo.resolve_relative(p).map_err(|e| self.path_error(e)),
        }
    }

    /// Parses an optional `language` argument.
    pub fn language_filter(&self, language: Option<&str>) -> ToolResult<Option<Lang>> {
        match language.map(str::trim).filter(|l| !l.is_empty()) {
            None => Ok(None),
            Some(name) => Lang::from_name(name).map(Some).ok_or_else(|| {
                self.tool_error(
                    &msg::UNSUPPORTED_LANGUAGE,
                    &[("language", name), ("supported", &Lang::supported_list())],
                )
                .into()
            }),
        }
    }

    pub fn invalid_argument(&self, name: &str, error: &str) -> ToolError {
        self.tool_error(&msg::INVALID_ARGUMENT, &[("name", name), ("error", error)]).into()
    }

    /// The contract's truncation warning.
    pub fn truncation_warning(&self) -> String {
        self.contract.message(&msg::TRUNCATION_WARNING, &[])
    }
}

/// True when `rel` is `prefix` itself or lies below it ("" matches everything).
pub fn under(rel: &str, prefix: &str) -> bool {
    prefix.is_empty() || rel == prefix || (rel.starts_with(prefix) && rel.as_bytes().get(prefix.len()) == Some(&b'/'))
}

/// What a search from `start` passed over as hidden (`hidden_not_searched`): nothing when it
/// searched hidden files too.
pub fn hidden_not_searched(ws: &Workspace, start: &std::path::Path, searched_hidden: bool) -> Vec<String> {
    if searched_hidden { Vec::new() } else { code_intel_codebase::walk::hidden_entries(&ws.repo, &ws.config, start) }
}

/// A non-empty trimmed string argument, or None.
pub fn given(arg: &Option<String>) -> Option<&str> {
    arg.as_deref().map(str::trim).filter(|s| !s.is_empty())
}
