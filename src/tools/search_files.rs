//! `search_files`: glob over the repository's files (the shared, gitignore-aware walk).

use crate::contract::catalogue as msg;
use globset::GlobBuilder;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::page::{MAX_RESPONSE_BYTES, take_page};
use super::{SkippedFiles, ToolResult, Workspace, given};
use crate::lang::Lang;
use crate::walk::{self, WalkOptions};

#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema)]
pub struct SearchFilesParams {
    /// A glob such as `*.rs`, `src/**/*_test.go` or `**/README*`. A glob without `/` also matches
    /// file names at any depth.
    pub pattern: Option<String>,
    /// A directory to search in, relative to the repository root (default: everything).
    pub path: Option<String>,
    /// Skip this many files (from a previous `next_offset`).
    pub offset: Option<usize>,
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
}

pub fn search_files(ws: &Workspace, params: SearchFilesParams) -> ToolResult<SearchFilesOutput> {
    let Some(pattern) = given(&params.pattern) else {
        return Err(ws.tool_error(&msg::NO_PATTERN, &[]).into());
    };
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
    let walked = walk::walk(&ws.repo, &ws.config, &ws.repo.root().join(&start_rel), &WalkOptions::default())
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
    })
}
