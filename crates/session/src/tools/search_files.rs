//! `search_files`: glob over the repository's files (the shared, gitignore-aware walk).

use code_intel_workflow::contract::catalogue as msg;
use globset::GlobBuilder;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::page::{MAX_RESPONSE_BYTES, take_page};
use super::{SkippedFiles, ToolResult, Workspace, given};
use code_intel_codebase::lang::Lang;
use code_intel_codebase::walk::{self, WalkOptions};

#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema, clap::Args)]
pub struct SearchFilesParams {
    /// A glob (`*.rs`, `src/**/*_test.go`); one without `/` matches file names at any depth.
    #[arg(long, allow_hyphen_values = true)]
    pub pattern: Option<String>,
    /// A directory to search in (default: everything).
    #[arg(long)]
    pub path: Option<String>,
    /// Skip this many files (from a previous `next_offset`).
    #[arg(long)]
    pub offset: Option<usize>,
    /// Also search hidden files (`.github/`, `.env`; never `.git`).
    #[arg(long, num_args = 0..=1, default_missing_value = "true")]
    pub hidden: Option<bool>,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct FileHit {
    pub path: String,
    pub size: u64,
    pub language: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct SearchFilesOutput {
    pub pattern: String,
    /// Sorted by path.
    pub files: Vec<FileHit>,
    pub total: usize,
    pub next_offset: Option<usize>,
    pub truncated: bool,
    pub truncation_warning: Option<String>,
    pub skipped: SkippedFiles,
    /// Hidden entries directly under the searched directory that were not searched (pass
    /// `hidden: true` to search them); absent when there are none or they were searched.
    #[serde(skip_serializing_if = "Vec::is_empty", default)]
    pub hidden_not_searched: Vec<String>,
}

/// The longest glob taken, in bytes.
pub const MAX_GLOB_BYTES: usize = 1024;
/// The deepest `{a,b}` nesting taken. (globset turns each level into a regex group, and panics
/// when the regex parser refuses the nesting.)
pub const MAX_GLOB_NESTING: usize = 16;

fn check_glob(ws: &Workspace, pattern: &str) -> ToolResult<()> {
    if pattern.len() > MAX_GLOB_BYTES {
        let why = format!("a glob of {} bytes; at most {MAX_GLOB_BYTES}", pattern.len());
        return Err(ws.invalid_argument("pattern", &why));
    }
    let (mut depth, mut deepest, mut escaped) = (0usize, 0usize, false);
    for c in pattern.chars() {
        match c {
            _ if escaped => escaped = false,
            '\\' => escaped = true,
            '{' => {
                depth += 1;
                deepest = deepest.max(depth);
            }
            '}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    if deepest > MAX_GLOB_NESTING {
        let why = format!("`{{…}}` nested {deepest} deep; at most {MAX_GLOB_NESTING}");
        return Err(ws.invalid_argument("pattern", &why));
    }
    Ok(())
}

pub fn search_files(ws: &Workspace, params: SearchFilesParams) -> ToolResult<SearchFilesOutput> {
    let Some(pattern) = given(&params.pattern) else {
        return Err(ws.tool_error(&msg::NO_PATTERN, &[]).into());
    };
    check_glob(ws, pattern)?;
    let glob = GlobBuilder::new(pattern)
        .literal_separator(pattern.contains('/'))
        .backslash_escape(true)
        .build()
        .map_err(|e| {
            let msg = e.to_string();
            ws.tool_error(&msg::INVALID_GLOB, &[("pattern", pattern), ("error", &msg)])
        })?
        .compile_matcher();
    let start_rel = ws.scope_prefix(params.path.as_deref())?;
    let start = ws.repo.root().join(&start_rel);
    let hidden = params.hidden.unwrap_or(false);
    let walked = walk::walk(&ws.repo, &ws.config, &start, &WalkOptions { hidden, ..WalkOptions::default() })
        .map_err(|e| ws.invalid_argument("path", &e.to_string()))?;
    let by_name = !pattern.contains('/');
    let hits: Vec<FileHit> = walked
        .files
        .iter()
        .filter(|f| {
            glob.is_match(&f.rel) || (by_name && f.rel.rsplit('/').next().is_some_and(|name| glob.is_match(name)))
        })
        .map(|f| FileHit {
            path: f.rel.clone(),
            size: f.size,
            language: Lang::detect(f.rel.as_ref()).map(|l| l.name().to_owned()),
        })
        .collect();
    let too_large: Vec<(String, u64)> = walked
        .too_large
        .into_iter()
        .filter(|(rel, _)| glob.is_match(rel) || (by_name && rel.rsplit('/').next().is_some_and(|n| glob.is_match(n))))
        .collect();
    let total = hits.len() + too_large.len();
    let offset = params.offset.unwrap_or(0);
    let page = take_page(hits.into_iter().skip(offset), offset, usize::MAX, MAX_RESPONSE_BYTES);
    Ok(SearchFilesOutput {
        pattern: pattern.to_owned(),
        files: page.items,
        total,
        next_offset: page.next_offset,
        truncated: page.truncated,
        truncation_warning: page.truncated.then(|| ws.truncation_warning()),
        skipped: SkippedFiles::new(too_large, Vec::new(), ws.config.max_file_size),
        hidden_not_searched: super::hidden_not_searched(ws, &start, hidden),
    })
}
