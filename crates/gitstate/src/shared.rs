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
//!
//! Staged refs are found by their exact names, for the remotes this clone has configured: a
//! remote that fills its namespace with junk refs costs a fetch, never a read.

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

/// The fetch refspecs that stage `remote`'s shared refs under its tracking prefix, one for each
/// of [`ALL`]: forced, because a staging ref only mirrors the remote (nothing of this clone lives
/// there), and each a pattern (`refs/code-intel/map*`), because git refuses a fetch whose exact
/// refspec names a ref the remote does not have yet. Other refs the patterns happen to match are
/// staged and never read: readers look up the exact names ([`SharedRef::tracking_tips`]).
pub fn fetch_refspecs(remote: &str) -> Vec<String> {
    ALL.iter().map(|r| r.fetch_refspec(remote)).collect()
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

    /// The fetch refspec that stages `remote`'s ref (see [`fetch_refspecs`]).
    pub fn fetch_refspec(&self, remote: &str) -> String {
        format!("+{}*:{}*", self.local, self.tracking(remote))
    }

    fn merged_marker(&self, remote: &str) -> String {
        format!("{MERGED_PREFIX}{remote}/{}", self.short)
    }

    /// Every configured remote's staged tip of this ref, by remote name (remotes whose names
    /// [`valid_remote_name`] refuses are skipped). One exact ref lookup per remote, whatever else
    /// a fetch staged.
    pub fn tracking_tips(&self, repo: &gix::Repository) -> Result<Vec<(String, ObjectId)>, Error> {
        let mut out = Vec::new();
        for remote in repo.remote_names() {
            let remote = remote.to_string();
            if !valid_remote_name(&remote) {
                continue;
            }
            // A staged ref that cannot be read, or that is symbolic, is not data we could use.
            if let Ok(Some(reference)) = repo.try_find_reference(self.tracking(&remote).as_str())
                && let Some(id) = reference.target().try_id()
            {
                out.push((remote, id.to_owned()));
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
