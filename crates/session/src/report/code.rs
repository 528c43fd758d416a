//! What a report reads from the commits a session made: the diff from its base, and the lines
//! each `file:line` evidence points at, quoted from the commit (so the report shows what was
//! committed, not what the work tree holds now). Objects are read bounded: a report may be made
//! of a teammate's session, in a clone that has only part of it.

use std::path::Path;
use std::time::Duration;

use crate::branches::review::{cut_to, text_change};
use gix::ObjectId;
use serde::Serialize;

use code_intel_gitstate::untrusted;

/// A file larger than this is neither diffed nor quoted.
const MAX_FILE_BYTES: u64 = 2 << 20;
/// A diff is cut past this many bytes per file, and the whole diff past the total.
const MAX_DIFF_BYTES: usize = 64 * 1024;
const MAX_TOTAL_DIFF_BYTES: usize = 512 * 1024;
/// Lines shown around the cited ones, and the most cited lines quoted.
const CONTEXT_LINES: usize = 3;
/// The longest one file's diff may take to compute (the result is then coarser, never wrong).
const DIFF_TIMEOUT: Duration = Duration::from_millis(200);
const MAX_QUOTED_LINES: usize = 40;

/// One file the session changed.
#[derive(Debug, Clone, Serialize)]
pub struct FileDiff {
    pub path: String,
    /// added, modified or deleted.
    pub change: &'static str,
    pub additions: usize,
    pub deletions: usize,
    pub binary: bool,
    /// Over the size a report reads (2 MiB a side): no diff.
    pub too_large: bool,
    /// Unified diff; cut when long, or left out past the report's budget (see `truncated`).
    pub patch: String,
    pub truncated: bool,
}

/// The lines an evidence points at, read from a commit.
#[derive(Debug, Clone, Serialize)]
pub struct Quote {
    pub path: String,
    pub start: usize,
    pub end: usize,
    pub commit: String,
    /// The cited lines with a few around them.
    pub lines: Vec<QuotedLine>,
    /// Why the lines could not be quoted (the file is not in the commit, the range is past its
    /// end, …); `lines` is empty then or holds what exists.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub problem: Option<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct QuotedLine {
    pub number: usize,
    pub text: String,
    /// One of the lines the evidence names (the others are context).
    pub cited: bool,
}

pub(super) fn has_commit(repo: &gix::Repository, commit: &str) -> bool {
    ObjectId::from_hex(commit.as_bytes()).is_ok_and(|id| untrusted::commit(repo, id).is_ok())
}

/// The lines `evidence` (`path:N` or `path:N-M`) names in `commit`; None when it is no evidence.
pub(super) fn quote(repo: &gix::Repository, root: &Path, commit: &str, evidence: &str) -> Option<Quote> {
    let mut at = code_intel_workflow::engine::evidence::parse(evidence)?;
    // As the engine read it: relative to the work tree's root, `./` and `a/..` resolved.
    let relative =
        Path::new(&at.path).strip_prefix(root).map_or_else(|_| at.path.clone(), |p| p.to_string_lossy().into_owned());
    at.path = lexical(&code_intel_workflow::engine::submit::normalize_rel(&relative));
    let mut quote = Quote {
        path: at.path.clone(),
        start: at.start,
        end: at.end,
        commit: commit.to_owned(),
        lines: Vec::new(),
        problem: None,
    };
    let text = match file_in(repo, commit, &at.path) {
        Ok(Some(bytes)) => String::from_utf8_lossy(&bytes).into_owned(),
        Ok(None) => {
            quote.problem = Some(format!("{} is not in commit {}", at.path, super::short(commit)));
            return Some(quote);
        }
        Err(e) => {
            quote.problem = Some(e);
            return Some(quote);
        }
    };
    let lines: Vec<&str> = text.lines().collect();
    if at.start > lines.len() {
        quote.problem = Some(format!("{} has {} lines in commit {}", at.path, lines.len(), super::short(commit)));
        return Some(quote);
    }
    let end = at.end.min(lines.len()).min(at.start + MAX_QUOTED_LINES - 1);
    let from = at.start.saturating_sub(CONTEXT_LINES).max(1);
    let to = (end + CONTEXT_LINES).min(lines.len());
    quote.lines = (from..=to)
        .map(|n| QuotedLine { number: n, text: lines[n - 1].to_owned(), cited: (at.start..=end).contains(&n) })
        .collect();
    if end < at.end {
        quote.problem = Some(if at.end > lines.len() {
            format!("{} has {} lines in commit {}", at.path, lines.len(), super::short(commit))
        } else {
            format!("the first {MAX_QUOTED_LINES} cited lines are shown")
        });
    }
    Some(quote)
}

/// `a/./b/../c` as `a/c` (a path that climbs out of the root keeps its `..`: not in any commit).
fn lexical(path: &str) -> String {
    let mut parts: Vec<&str> = Vec::new();
    for part in path.split('/') {
        match part {
            "" | "." => {}
            ".." if parts.last().is_some_and(|p| *p != "..") => {
                parts.pop();
            }
            other => parts.push(other),
        }
    }
    parts.join("/")
}

/// The bytes of `path` in `commit`: None when the commit has no such file.
fn file_in(repo: &gix::Repository, commit: &str, path: &str) -> Result<Option<Vec<u8>>, String> {
    let id = ObjectId::from_hex(commit.as_bytes()).map_err(|e| format!("{commit}: {e}"))?;
    let info = untrusted::commit(repo, id).map_err(|e| e.to_string())?;
    let tree = repo.find_tree(info.tree).map_err(|e| e.to_string())?;
    let Some(entry) = tree.lookup_entry_by_path(path).map_err(|e| e.to_string())? else { return Ok(None) };
    if !entry.mode().is_blob() {
        return Ok(None);
    }
    untrusted::blob(repo, entry.object_id(), MAX_FILE_BYTES).map(Some).map_err(|e| e.to_string())
}

/// Every file that differs between commits `base` and `tip`, with a unified diff.
pub(super) fn diff(repo: &gix::Repository, base: &str, tip: &str) -> Result<Vec<FileDiff>, String> {
    let tree_of = |c: &str| -> Result<gix::Tree<'_>, String> {
        let id = ObjectId::from_hex(c.as_bytes()).map_err(|e| format!("{c}: {e}"))?;
        let info = untrusted::commit(repo, id).map_err(|e| e.to_string())?;
        repo.find_tree(info.tree).map_err(|e| e.to_string())
    };
    let (old, new) = (tree_of(base)?, tree_of(tip)?);
    let mut options = gix::diff::Options::default().with_rewrites(None);
    options.track_path();
    let changes = repo.diff_tree_to_tree(Some(&old), Some(&new), Some(options)).map_err(|e| e.to_string())?;
    let mut out = Vec::new();
    let mut budget = MAX_TOTAL_DIFF_BYTES;
    for change in changes {
        use gix::object::tree::diff::ChangeDetached as C;
        let (path, change, old_id, new_id, is_blob) = match &change {
            C::Addition { location, entry_mode, id, .. } => (location, "added", None, Some(*id), entry_mode.is_blob()),
            C::Deletion { location, entry_mode, id, .. } => {
                (location, "deleted", Some(*id), None, entry_mode.is_blob())
            }
            C::Modification { location, previous_id, id, entry_mode, .. } => {
                (location, "modified", Some(*previous_id), Some(*id), entry_mode.is_blob())
            }
            C::Rewrite { location, source_id, id, entry_mode, .. } => {
                (location, "renamed", Some(*source_id), Some(*id), entry_mode.is_blob())
            }
        };
        if !is_blob {
            continue;
        }
        let read = |id: Option<ObjectId>| -> Option<Vec<u8>> {
            match id {
                None => Some(Vec::new()),
                Some(id) => untrusted::blob(repo, id, MAX_FILE_BYTES).ok(),
            }
        };
        let path = path.to_string();
        let mut file = FileDiff {
            path: path.clone(),
            change,
            additions: 0,
            deletions: 0,
            binary: false,
            too_large: false,
            patch: String::new(),
            truncated: false,
        };
        // Past the budget, files are listed without their diff (nothing more is read).
        if budget == 0 {
            file.truncated = true;
            out.push(file);
            continue;
        }
        let (old, new) = (read(old_id), read(new_id));
        file.too_large = old.is_none() || new.is_none();
        match (old, new) {
            (Some(old), Some(new))
                if !code_intel_codebase::walk::looks_binary(&old) && !code_intel_codebase::walk::looks_binary(&new) =>
            {
                let (old, new) = (String::from_utf8_lossy(&old), String::from_utf8_lossy(&new));
                // Bounded in time as in size: the files may be another clone's choosing.
                let change = text_change(&path, &old, &new, Some(DIFF_TIMEOUT));
                (file.additions, file.deletions, file.patch) = (change.additions, change.deletions, change.diff);
                file.truncated = cut_to(&mut file.patch, MAX_DIFF_BYTES.min(budget));
                budget = budget.saturating_sub(file.patch.len());
            }
            _ => file.binary = !file.too_large,
        }
        out.push(file);
    }
    out.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(out)
}

#[cfg(test)]
mod tests {
    #[test]
    fn an_evidence_path_is_read_as_the_engine_read_it() {
        assert_eq!(super::lexical("./src/./a/../b.rs"), "src/b.rs");
        assert_eq!(super::lexical("../x.rs"), "../x.rs");
        assert_eq!(super::lexical("src//b.rs"), "src/b.rs");
    }
}
