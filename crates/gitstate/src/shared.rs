//! Which refs travel between clones, and where a fetch puts them.
//!
//! Shared (a team's): the Map, the history of finished sessions, the OutcomeLog, the Forest's
//! vectors and the merge notes. A fetch never writes them: it stages what a remote has under
//! `refs/code-intel-remotes/<remote>/<name>` (like `refs/remotes/` for branches), and this clone
//! merges that into its own refs (union merges that lose no record), after checking it, the next
//! time it reads them or when `git code-intel share` runs (a staged ref keeps its name below
//! `refs/`: `refs/code-intel-remotes/origin/code-intel/map`, `…/origin/notes/code-intel`). `refs/code-intel-local/merged/…`
//! remembers which remote tip each merge took in, so a tip is merged (and checked) once.
//!
//! Never shared: sessions and their active claim (per work tree, under `refs/worktree/`), the
//! DecisionLog, and everything under `refs/code-intel-local/`.

use gix::ObjectId;
use gix::refs::Target;
use gix::refs::transaction::{PreviousValue, RefEdit};

use crate::Error;
use crate::refs::{ref_id, update};

/// Where a fetch stages a remote's shared refs.
pub const TRACKING_PREFIX: &str = "refs/code-intel-remotes/";
/// The remote tips already merged, per remote and ref.
pub const MERGED_PREFIX: &str = "refs/code-intel-local/merged/";

/// One shared ref: its local name and its name under a remote's tracking prefix.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SharedRef {
    pub local: &'static str,
    pub short: &'static str,
}

// A staged ref keeps its name below `refs/`, so the two refspecs (`refs/code-intel/*` and the
// notes) can never write to one place, whatever refs a remote has.
pub const MAP: SharedRef = SharedRef { local: "refs/code-intel/map", short: "code-intel/map" };
pub const HISTORY: SharedRef = SharedRef { local: "refs/code-intel/history", short: "code-intel/history" };
pub const OUTCOMES: SharedRef = SharedRef { local: "refs/code-intel/logs/outcomes", short: "code-intel/logs/outcomes" };
pub const FOREST: SharedRef = SharedRef { local: "refs/code-intel/forest", short: "code-intel/forest" };
pub const NOTES: SharedRef = SharedRef { local: crate::NOTES_REF, short: "notes/code-intel" };

/// Every shared ref.
pub const ALL: [SharedRef; 5] = [MAP, HISTORY, OUTCOMES, FOREST, NOTES];

/// The fetch refspecs that stage `remote`'s shared refs under its tracking prefix: forced,
/// because a staging ref only mirrors the remote (nothing of this clone lives there), and
/// patterns, because git refuses a fetch whose exact refspec names a ref the remote does not
/// have yet. Refs of the remote's namespace other than [`ALL`] are staged too and never read.
pub fn fetch_refspecs(remote: &str) -> [String; 2] {
    [
        format!("+refs/code-intel/*:{TRACKING_PREFIX}{remote}/code-intel/*"),
        format!("+{}*:{TRACKING_PREFIX}{remote}/{}*", NOTES.local, NOTES.short),
    ]
}

/// Whether `name` can be a remote this crate stages refs for: one ref component of letters,
/// digits, `.`, `_` and `-`, not starting with `.` or `-` (git allows more; those are refused
/// with this rule's words rather than misread).
pub fn valid_remote_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 100
        && !name.starts_with(['.', '-'])
        && !name.ends_with(".lock")
        && !name.contains("..")
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
}

impl SharedRef {
    /// `refs/code-intel-remotes/<remote>/<its name below refs/>`.
    pub fn tracking(&self, remote: &str) -> String {
        format!("{TRACKING_PREFIX}{remote}/{}", self.short)
    }

    fn merged_marker(&self, remote: &str) -> String {
        format!("{MERGED_PREFIX}{remote}/{}", self.short)
    }

    /// Every remote's staged tip of this ref, by remote name (remotes whose names
    /// [`valid_remote_name`] refuses are skipped).
    pub fn tracking_tips(&self, repo: &gix::Repository) -> Result<Vec<(String, ObjectId)>, Error> {
        let mut out = Vec::new();
        let platform = repo.references().map_err(crate::git)?;
        for reference in platform.prefixed(TRACKING_PREFIX).map_err(crate::git)? {
            // A ref that cannot be read is not staged data we could use; skip it.
            let Ok(reference) = reference else { continue };
            let name = reference.name().as_bstr().to_string();
            let Some(rest) = name.strip_prefix(TRACKING_PREFIX) else { continue };
            let Some((remote, short)) = rest.split_once('/') else { continue };
            if short != self.short || !valid_remote_name(remote) {
                continue;
            }
            if let Some(id) = reference.target().try_id() {
                out.push((remote.to_owned(), id.to_owned()));
            }
        }
        out.sort();
        Ok(out)
    }

    /// The staged tips not merged yet: `(remote, tip, tip merged last time)`.
    pub fn unmerged(&self, repo: &gix::Repository) -> Result<Vec<Unmerged>, Error> {
        let mut out = Vec::new();
        for (remote, tip) in self.tracking_tips(repo)? {
            let merged = ref_id(repo, &self.merged_marker(&remote))?;
            if merged != Some(tip) {
                out.push(Unmerged { remote, tip, last_merged: merged });
            }
        }
        Ok(out)
    }

    /// The edit that records `u.tip` as merged (a compare-and-swap on the last record), to be
    /// applied in the same transaction as the merge itself.
    pub fn mark_merged(&self, u: &Unmerged) -> Result<RefEdit, Error> {
        let expected = match u.last_merged {
            Some(id) => PreviousValue::MustExistAndMatch(Target::Object(id)),
            None => PreviousValue::MustNotExist,
        };
        update(&self.merged_marker(&u.remote), expected, Target::Object(u.tip), "merged a remote's shared ref")
    }
}

/// A remote's staged tip that this clone has not merged yet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unmerged {
    pub remote: String,
    pub tip: ObjectId,
    /// The tip merged from this remote last time: what the remote had then, the base of a
    /// three-way merge.
    pub last_merged: Option<ObjectId>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn remote_names_are_single_plain_components() {
        for ok in ["origin", "team-1", "up_stream", "a.b"] {
            assert!(valid_remote_name(ok), "{ok}");
        }
        for bad in ["", "-x", ".x", "a/b", "a..b", "x.lock", "a b", "a*", "a:b"] {
            assert!(!valid_remote_name(bad), "{bad}");
        }
    }
}
