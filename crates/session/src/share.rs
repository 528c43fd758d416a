//! Sharing with a team through a remote: `git code-intel share pull|push` and
//! `git code-intel forest push|fetch`.
//!
//! What travels is [`code_intel_gitstate::shared::ALL`]: the Map, the session history, the
//! OutcomeLog, the Forest's vectors and the merge notes; sessions never do. A pull fetches a
//! remote's into `refs/code-intel-remotes/<remote>/…` (the same patterns `init --share`
//! configures, so a plain `git fetch` stages them too) and merges them into this clone's refs:
//! union merges that lose no record, with everything another clone wrote checked first. A push
//! pulls, exports the Forest (merged with the teammates' vectors), and pushes every shared ref
//! in one atomic push: the logs, the Map and the notes as fast-forwards, the Forest (which keeps
//! only its latest vectors) with a lease on the tip just fetched. When a teammate pushed in
//! between, the push is refused whole, and it pulls and tries again.
//!
//! The transport is git's own (`git fetch`, `git push`: gix has no push), run only on these
//! explicit commands, never by the server. Nothing fetched is ever executed.

use std::path::Path;

use serde::Serialize;

use crate::workspace::Workspace;
use code_intel_gitstate::shared::{self, SharedRef};
use code_intel_semantic::map::MapStore;

/// How many times a push that lost a race with a teammate's is tried again.
const PUSH_ATTEMPTS: usize = 3;

/// What a pull did.
#[derive(Debug, Clone, Default, Serialize)]
pub struct PullReport {
    pub remote: String,
    /// The shared refs this remote has, as staged here.
    pub staged: Vec<String>,
    /// What was left out of the merges (entries or records that failed the checks), and why.
    pub notes: Vec<String>,
}

/// What a push did.
#[derive(Debug, Clone, Default, Serialize)]
pub struct PushReport {
    pub remote: String,
    /// The refs pushed.
    pub pushed: Vec<String>,
    /// The Forest export, when there was a model to export with.
    pub forest: Option<code_intel_semantic::share::ShareReport>,
    /// Pushes refused because a teammate pushed first (each followed by a pull and a retry).
    pub retries: usize,
    pub notes: Vec<String>,
}

/// The refs a push can carry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// Every shared ref.
    All,
    /// Only the Forest (`forest push`).
    Forest,
}

/// A remote this clone knows, with a name the staging refs can carry.
fn check_remote(root: &Path, remote: &str) -> Result<(), String> {
    let repo = gix::open(root).map_err(|e| e.to_string())?;
    if !repo.remote_names().iter().any(|n| *n == remote) {
        return Err(format!("there is no remote '{remote}'; add one with `git remote add {remote} <url>`"));
    }
    if !shared::valid_remote_name(remote) {
        return Err(format!(
            "the remote '{remote}' cannot be shared with: its name must be letters, digits, '.', '_' and '-'; add it under another name with `git remote add`"
        ));
    }
    Ok(())
}

/// Runs git in `root`; its output, or what it said on failure.
fn git(root: &Path, args: &[&str]) -> Result<std::process::Output, String> {
    let out = std::process::Command::new("git")
        .args(args)
        .current_dir(root)
        .stdin(std::process::Stdio::null())
        .output()
        .map_err(|e| format!("git {}: {e}", args.join(" ")))?;
    Ok(out)
}

fn failed(args: &[&str], out: &std::process::Output) -> String {
    let said = String::from_utf8_lossy(&out.stderr);
    format!("`git {}` failed: {}", args.join(" "), said.trim())
}

/// Fetches `remote`'s shared refs into the staging refs and merges them in.
pub fn pull(root: &Path, remote: &str) -> Result<PullReport, String> {
    check_remote(root, remote)?;
    let specs = shared::fetch_refspecs(remote);
    let mut args = vec!["fetch", "--quiet", "--no-tags", "--no-write-fetch-head", remote];
    args.extend(specs.iter().map(String::as_str));
    let out = git(root, &args)?;
    if !out.status.success() {
        return Err(failed(&args, &out));
    }
    let mut report = PullReport { remote: remote.to_owned(), ..PullReport::default() };
    let repo = gix::open(root).map_err(|e| e.to_string())?;
    for r in shared::ALL {
        if r.tracking_tips(&repo).map_err(|e| e.to_string())?.iter().any(|(name, _)| name == remote) {
            report.staged.push(r.local.to_owned());
        }
    }
    report.notes = merge_staged(root);
    Ok(report)
}

/// Merges every staged shared ref into this clone's (the Forest is read from its staging ref
/// at the next sync instead). Returns what was left out, and merges that failed.
pub fn merge_staged(root: &Path) -> Vec<String> {
    let mut notes = Vec::new();
    match MapStore::open(root).and_then(|m| m.merge_staged()) {
        Ok(n) => notes.extend(n),
        Err(e) => notes.push(format!("the Map was not merged: {e}")),
    }
    let repo = match gix::open(root) {
        Ok(r) => r,
        Err(e) => {
            notes.push(format!("not a git repository: {e}"));
            return notes;
        }
    };
    for log in [shared::HISTORY, shared::OUTCOMES] {
        match code_intel_gitstate::log::merge_staged(&repo, &log) {
            Ok(n) => notes.extend(n),
            Err(e) => notes.push(format!("{} was not merged: {e}", log.local)),
        }
    }
    match code_intel_gitstate::notes::merge_staged(&repo) {
        Ok(n) => notes.extend(n),
        Err(e) => notes.push(format!("{} was not merged: {e}", shared::NOTES.local)),
    }
    notes
}

/// Pulls, exports the Forest, and pushes the shared refs to `remote` atomically, retrying when
/// a teammate pushed in between.
pub fn push(ws: &Workspace, remote: &str, scope: Scope) -> Result<PushReport, String> {
    let root = ws.repo.root();
    let mut report = PushReport { remote: remote.to_owned(), ..PushReport::default() };
    for attempt in 0..PUSH_ATTEMPTS {
        let pulled = pull(root, remote)?;
        report.notes = pulled.notes;
        report.forest = export_forest(ws, &mut report.notes);
        let repo = gix::open(root).map_err(|e| e.to_string())?;
        let mut specs: Vec<String> = Vec::new();
        let mut pushed = Vec::new();
        let refs: &[SharedRef] = match scope {
            Scope::All => &[shared::MAP, shared::HISTORY, shared::OUTCOMES, shared::NOTES],
            Scope::Forest => &[],
        };
        for r in refs {
            let Some(local) = code_intel_gitstate::refs::ref_id(&repo, r.local).map_err(|e| e.to_string())? else {
                continue;
            };
            let staged = staged_tip(&repo, r, remote)?;
            // Just pulled, the local ref holds the remote's unless the merge refused it whole
            // (not a log, not a Map): then that is replaced, if the remote still has it.
            let merged = staged.is_none_or(|s| {
                s == local || code_intel_gitstate::untrusted::is_ancestor(&repo, s, local, 10_000) == Some(true)
            });
            if merged {
                specs.push(format!("{0}:{0}", r.local));
            } else {
                let lease = staged.map(|s| s.to_string()).unwrap_or_default();
                specs.push(format!("--force-with-lease={}:{lease}", r.local));
                specs.push(format!("+{0}:{0}", r.local));
                report.notes.push(format!(
                    "the remote's {} could not be merged (the notes above say why): it is replaced by this clone's",
                    r.local
                ));
            }
            pushed.push(r.local.to_owned());
        }
        let other_model = report.forest.as_ref().is_some_and(|f| {
            let staged = shared::FOREST.tracking(remote);
            f.notes.iter().any(|n| n.starts_with(&staged) && n.contains(code_intel_semantic::share::OTHER_MODEL))
        });
        if other_model {
            report.notes.push(format!(
                "{remote}'s Forest holds vectors of another model: it is not replaced by this clone's (switch embedding_model to share it)"
            ));
        } else if report.forest.is_some()
            && code_intel_gitstate::refs::ref_id(&repo, shared::FOREST.local).map_err(|e| e.to_string())?.is_some()
        {
            // The Forest keeps only its latest vectors (no history to fast-forward), so it is
            // replaced, but only if the remote still has what was just fetched and merged.
            let expected = staged_tip(&repo, &shared::FOREST, remote)?.map(|t| t.to_string()).unwrap_or_default();
            specs.push(format!("--force-with-lease={}:{expected}", shared::FOREST.local));
            specs.push(format!("+{0}:{0}", shared::FOREST.local));
            pushed.push(shared::FOREST.local.to_owned());
        }
        if pushed.is_empty() {
            report.notes.push("nothing to push: this clone has no shared refs yet".into());
            return Ok(report);
        }
        let mut args = vec!["push", "--atomic", "--porcelain", "--quiet", remote];
        args.extend(specs.iter().map(String::as_str));
        let out = git(root, &args)?;
        if out.status.success() {
            report.pushed = pushed;
            // Stage what the remote has now, so the next merge has nothing to do.
            pull(root, remote)?;
            return Ok(report);
        }
        let said = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
        // A teammate's push got there first: refused as not a fast-forward, a stale lease, or
        // (pushing at the same moment) a ref the remote had locked.
        let lost_race = ["rejected", "stale info", "fetch first", "cannot lock ref", "failed to lock"]
            .iter()
            .any(|sign| said.contains(sign));
        if !lost_race || attempt + 1 == PUSH_ATTEMPTS {
            let mut error = failed(&args, &out);
            if !report.notes.is_empty() {
                error.push_str(&format!("; the pull before it noted: {}", report.notes.join("; ")));
            }
            return Err(error);
        }
        report.retries += 1;
    }
    Err("the remote kept changing while pushing; retry".into())
}

/// `remote`'s staged tip of `r`, if it has one.
fn staged_tip(repo: &gix::Repository, r: &SharedRef, remote: &str) -> Result<Option<gix::ObjectId>, String> {
    Ok(r.tracking_tips(repo).map_err(|e| e.to_string())?.into_iter().find(|(name, _)| name == remote).map(|(_, t)| t))
}

/// Syncs the Forest and writes it into `refs/code-intel/forest`, merged with the staged
/// Forests; None (with a note) without a model.
fn export_forest(ws: &Workspace, notes: &mut Vec<String>) -> Option<code_intel_semantic::share::ShareReport> {
    let loaded = match ws.semantic.available().then(|| ws.semantic.loaded()) {
        Some(Ok(l)) => l,
        _ => {
            notes.push("no embedding model here: the Forest was not shared (bash scripts/model.sh installs it)".into());
            return None;
        }
    };
    let generation = ws.index_generation();
    if let Err(e) = ws.semantic.sync_now(&ws.repo, &ws.config, false, generation, &|_, _| {}) {
        notes.push(format!("the Forest was not shared: its sync failed: {e}"));
        return None;
    }
    match code_intel_semantic::share::export(ws.repo.root(), &loaded) {
        Ok(r) => Some(r),
        Err(e) => {
            notes.push(format!("the Forest was not shared: {e}"));
            None
        }
    }
}
