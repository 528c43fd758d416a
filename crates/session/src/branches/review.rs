//! `review_changes`: every change from the task's base commit to the work tree — committed,
//! staged, unstaged and untracked-but-not-ignored — with type, line stats and a unified diff.

use std::path::Path;

use gix::ObjectId;
use schemars::JsonSchema;
use serde::Serialize;
use similar::TextDiff;

use code_intel_gitstate::worktree::{self, ChangeKind};

/// Diffs beyond this many bytes per file are cut; the whole review stays under the MCP limit.
const MAX_DIFF_BYTES: usize = 16 * 1024;
const MAX_TOTAL_DIFF_BYTES: usize = 192 * 1024;

#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct FileChange {
    pub file: String,
    pub change: ChangeKind,
    pub additions: usize,
    pub deletions: usize,
    pub binary: bool,
    /// Unified diff (empty for binary files); cut when long, see `diff_truncated`.
    pub diff: String,
    pub diff_truncated: bool,
    /// The user's own uncommitted change from before the task: left out of the task's commit,
    /// needs no decision, and its diff is not shown (only its counts).
    pub pre_existing: bool,
    /// Why there is no diff, when the file is too large to read.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct ReviewOutput {
    pub base_branch: String,
    pub base_commit: String,
    pub task_branch: String,
    pub files: Vec<FileChange>,
    pub additions: usize,
    pub deletions: usize,
    /// What the pre-commit hook would flag in these changes.
    pub garbage: Vec<code_intel_codebase::garbage::Finding>,
}

pub fn review(
    root: &Path,
    base_commit: ObjectId,
    base_branch: &str,
    task_branch: &str,
    rules: &code_intel_codebase::garbage::GarbageRules,
    user_changes: &std::collections::BTreeMap<String, Option<ObjectId>>,
    max_file_size: u64,
) -> Result<ReviewOutput, crate::Error> {
    let repo = super::open(root)?;
    let base_tree = super::tree_of(&repo, base_commit)?;
    let changes = worktree::changes(&repo, root, base_tree, max_file_size)?;
    let mut files = Vec::new();
    let mut contents = Vec::new();
    let mut budget = MAX_TOTAL_DIFF_BYTES;
    for c in changes {
        // A side over the size limit is not read: no diff, a note instead.
        let old_size = match c.old {
            Some((id, _)) => repo.find_header(id).map_err(crate::error::git)?.size(),
            None => 0,
        };
        let too_large = c.kind != ChangeKind::Deleted && c.content.is_none() || old_size > max_file_size;
        let old = match c.old {
            Some((id, _)) if !too_large => repo.find_object(id).map_err(crate::error::git)?.data.clone(),
            _ => Vec::new(),
        };
        let new = if too_large { Vec::new() } else { c.content.clone().unwrap_or_default() };
        let binary =
            too_large || code_intel_codebase::walk::looks_binary(&old) || code_intel_codebase::walk::looks_binary(&new);
        let pre_existing = user_changes.get(&c.path).is_some_and(|u| *u == c.new.map(|n| n.0));
        if c.kind != ChangeKind::Deleted && !pre_existing {
            contents.push(code_intel_codebase::garbage::Content {
                path: c.path.clone(),
                old: old.clone(),
                new: (!too_large).then(|| new.clone()),
                size: c.size,
            });
        }
        let note = too_large.then(|| format!("over the {max_file_size}-byte limit (max_file_size): no diff"));
        let (mut additions, mut deletions, mut diff) = (0, 0, String::new());
        if !binary {
            let (old_text, new_text) = (String::from_utf8_lossy(&old), String::from_utf8_lossy(&new));
            TextChange { additions, deletions, diff } = text_change(&c.path, &old_text, &new_text, None);
        }
        // The user's own change is not the task's to review: its diff would only crowd out the
        // task's own within the budget.
        if pre_existing {
            diff.clear();
        }
        let diff_truncated = cut_to(&mut diff, MAX_DIFF_BYTES.min(budget));
        budget = budget.saturating_sub(diff.len());
        files.push(FileChange {
            file: c.path,
            change: c.kind,
            additions,
            deletions,
            binary,
            diff,
            diff_truncated,
            pre_existing,
            note,
        });
    }
    Ok(ReviewOutput {
        base_branch: base_branch.to_owned(),
        base_commit: base_commit.to_string(),
        task_branch: task_branch.to_owned(),
        garbage: code_intel_codebase::garbage::check_changes(&contents, rules),
        additions: files.iter().map(|f| f.additions).sum(),
        deletions: files.iter().map(|f| f.deletions).sum(),
        files,
    })
}

/// The files the task changed since `base_commit`: every change in the work tree except the
/// user's own from before the task (what review_changes lists without `pre_existing`).
/// One file's text change: the lines added and removed, and the unified diff (three lines of
/// context, `a/` and `b/` headers).
pub(crate) struct TextChange {
    pub(crate) additions: usize,
    pub(crate) deletions: usize,
    pub(crate) diff: String,
}

/// The change from `old` to `new` of the file at `path`; with a `timeout`, the diff is made
/// coarser (never wrong) rather than taking longer.
pub(crate) fn text_change(path: &str, old: &str, new: &str, timeout: Option<std::time::Duration>) -> TextChange {
    let mut config = TextDiff::configure();
    if let Some(t) = timeout {
        config.timeout(t);
    }
    let text_diff = config.diff_lines(old, new);
    let (mut additions, mut deletions) = (0, 0);
    for change in text_diff.iter_all_changes() {
        match change.tag() {
            similar::ChangeTag::Insert => additions += 1,
            similar::ChangeTag::Delete => deletions += 1,
            similar::ChangeTag::Equal => {}
        }
    }
    let diff =
        text_diff.unified_diff().context_radius(3).header(&format!("a/{path}"), &format!("b/{path}")).to_string();
    TextChange { additions, deletions, diff }
}

/// Cuts `text` to at most `limit` bytes, on a character boundary; whether it was cut.
pub(crate) fn cut_to(text: &mut String, limit: usize) -> bool {
    if text.len() <= limit {
        return false;
    }
    let mut cut = limit;
    while !text.is_char_boundary(cut) {
        cut -= 1;
    }
    text.truncate(cut);
    true
}

pub fn task_changes(
    root: &Path,
    base_commit: ObjectId,
    user_changes: &std::collections::BTreeMap<String, Option<ObjectId>>,
) -> Result<Vec<String>, crate::Error> {
    let repo = super::open(root)?;
    let base_tree = super::tree_of(&repo, base_commit)?;
    Ok(worktree::changes(&repo, root, base_tree, 0)
        .map_err(crate::error::git)?
        .into_iter()
        .filter(|c| user_changes.get(&c.path).is_none_or(|u| *u != c.new.map(|n| n.0)))
        .map(|c| c.path)
        .collect())
}
