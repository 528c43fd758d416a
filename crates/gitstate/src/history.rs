//! What the repository's recent history says about its files: which ones changed lately, most
//! recent first. The Forest embeds those first, so a search made while it is still syncing finds
//! the code people are working on.

use std::collections::HashMap;
use std::path::Path;

/// How many commits back from HEAD are looked at.
pub const RECENT_COMMITS: usize = 200;

/// The files changed by the last `max_commits` commits reachable from HEAD (first-parent diffs,
/// newest commit first), each with the rank of the newest commit that touched it (0 = HEAD).
/// Empty when there is no repository, no commit, or the history cannot be read: the order is a
/// preference, never a reason to fail.
pub fn recently_changed(root: &Path, max_commits: usize) -> HashMap<String, usize> {
    let mut ranks = HashMap::new();
    if let Err(e) = collect(root, max_commits, &mut ranks) {
        tracing::debug!("recent history not read: {e}");
    }
    ranks
}

fn collect(root: &Path, max_commits: usize, ranks: &mut HashMap<String, usize>) -> Result<(), crate::Error> {
    let repo = gix::open(root).map_err(crate::git)?;
    let head = repo.head_id().map_err(crate::git)?;
    let walk = repo
        .rev_walk([head.detach()])
        .first_parent_only()
        .sorting(gix::revision::walk::Sorting::ByCommitTime(Default::default()))
        .all()
        .map_err(crate::git)?;
    let mut options = gix::diff::Options::default().with_rewrites(None);
    options.track_path();
    for (rank, info) in walk.take(max_commits).enumerate() {
        let info = info.map_err(crate::git)?;
        let commit = info.object().map_err(crate::git)?;
        let tree = commit.tree().map_err(crate::git)?;
        let parent_tree = match info.parent_ids().next() {
            Some(parent) => Some(parent.object().map_err(crate::git)?.into_commit().tree().map_err(crate::git)?),
            None => None,
        };
        let changes = repo.diff_tree_to_tree(parent_tree.as_ref(), Some(&tree), Some(options)).map_err(crate::git)?;
        for change in changes {
            if change.entry_mode().is_blob() {
                ranks.entry(change.location().to_string()).or_insert(rank);
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn git(root: &Path, args: &[&str]) {
        let ok = std::process::Command::new("git")
            .args(["-c", "user.name=t", "-c", "user.email=t@t", "-c", "commit.gpgsign=false"])
            .args(args)
            .current_dir(root)
            .output()
            .unwrap()
            .status
            .success();
        assert!(ok, "git {args:?}");
    }

    #[test]
    fn newest_changes_rank_first_and_a_repository_without_commits_gives_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        git(root, &["init", "-q"]);
        assert!(recently_changed(root, 10).is_empty());
        for (i, name) in ["a.rs", "b.rs", "c.rs"].iter().enumerate() {
            std::fs::write(root.join(name), format!("fn f{i}() {{}}\n")).unwrap();
            git(root, &["add", name]);
            git(root, &["commit", "-q", "-m", name]);
        }
        std::fs::write(root.join("a.rs"), "fn changed() {}\n").unwrap();
        git(root, &["commit", "-q", "-am", "a again"]);
        let ranks = recently_changed(root, 10);
        assert_eq!(ranks.get("a.rs"), Some(&0));
        assert_eq!(ranks.get("c.rs"), Some(&1));
        assert_eq!(ranks.get("b.rs"), Some(&2));
        // Only the last two commits: b.rs is older than that.
        let ranks = recently_changed(root, 2);
        assert_eq!(ranks.get("b.rs"), None);
    }
}
