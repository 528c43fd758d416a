//! Reading objects that another clone may have written: every object's kind and size are
//! checked from its header before a byte of it is loaded, so a 100 MB blob, a gitlink, a blob
//! where a tree belongs or a missing object is a [`Refusal`] that names it, never a panic, an
//! out-of-memory or a failure of everything around it.

use gix::ObjectId;
use gix::bstr::BString;
use gix::objs::tree::EntryKind;

/// Why an object was not read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    #[error("{0} is missing from the object store")]
    Missing(ObjectId),
    #[error("{id} is a {found}, not a {expected}")]
    WrongKind { id: ObjectId, expected: &'static str, found: String },
    #[error("{id} is {size} bytes, over the limit of {limit}")]
    TooLarge { id: ObjectId, size: u64, limit: u64 },
    #[error("{id} cannot be read: {error}")]
    Unreadable { id: ObjectId, error: String },
}

fn header(repo: &gix::Repository, id: ObjectId, expected: gix::object::Kind, limit: u64) -> Result<(), Refusal> {
    let header = repo
        .try_find_header(id)
        .map_err(|e| Refusal::Unreadable { id, error: e.to_string() })?
        .ok_or(Refusal::Missing(id))?;
    if header.kind() != expected {
        return Err(Refusal::WrongKind { id, expected: kind_name(expected), found: kind_name(header.kind()).into() });
    }
    if header.size() > limit {
        return Err(Refusal::TooLarge { id, size: header.size(), limit });
    }
    Ok(())
}

fn kind_name(kind: gix::object::Kind) -> &'static str {
    match kind {
        gix::object::Kind::Blob => "blob",
        gix::object::Kind::Tree => "tree",
        gix::object::Kind::Commit => "commit",
        gix::object::Kind::Tag => "tag",
    }
}

/// The bytes of blob `id`, when it is a blob of at most `limit` bytes.
pub fn blob(repo: &gix::Repository, id: ObjectId, limit: u64) -> Result<Vec<u8>, Refusal> {
    header(repo, id, gix::object::Kind::Blob, limit)?;
    let object = repo.find_object(id).map_err(|e| Refusal::Unreadable { id, error: e.to_string() })?;
    Ok(object.detach().data)
}

/// One entry of a tree read with [`tree`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TreeEntry {
    pub name: BString,
    pub kind: EntryKind,
    pub oid: ObjectId,
}

impl TreeEntry {
    /// A blob (plain or executable): not a tree, a symbolic link or a gitlink.
    pub fn is_blob(&self) -> bool {
        matches!(self.kind, EntryKind::Blob | EntryKind::BlobExecutable)
    }
}

/// The entries of tree `id`, when it is a tree of at most `limit` bytes (about 40 bytes an
/// entry). An entry that does not decode ends the list with an error.
pub fn tree(repo: &gix::Repository, id: ObjectId, limit: u64) -> Result<Vec<TreeEntry>, Refusal> {
    header(repo, id, gix::object::Kind::Tree, limit)?;
    let object = repo.find_object(id).map_err(|e| Refusal::Unreadable { id, error: e.to_string() })?;
    let tree = object.try_into_tree().map_err(|e| Refusal::Unreadable { id, error: e.to_string() })?;
    let mut out = Vec::new();
    for entry in tree.iter() {
        let entry = entry.map_err(|e| Refusal::Unreadable { id, error: e.to_string() })?;
        out.push(TreeEntry {
            name: entry.filename().to_owned(),
            kind: entry.mode().kind(),
            oid: entry.oid().to_owned(),
        });
    }
    Ok(out)
}

/// Whether every object tree `id` (of at most `limit` bytes) names is in the object store (one
/// level: the trees git-code-intel writes are flat but for the Forest's shards), so a commit of
/// it can become a parent without making the history impossible to push.
pub fn complete_tree(repo: &gix::Repository, id: ObjectId, limit: u64) -> Result<(), Refusal> {
    for entry in tree(repo, id, limit)? {
        if entry.kind == EntryKind::Commit {
            // A gitlink names a commit of another repository: never present, never needed.
            continue;
        }
        match repo.try_find_header(entry.oid) {
            Ok(Some(_)) => {}
            Ok(None) => return Err(Refusal::Missing(entry.oid)),
            Err(e) => return Err(Refusal::Unreadable { id: entry.oid, error: e.to_string() }),
        }
    }
    Ok(())
}

/// A commit's tree, parents and committer time (seconds), read from a commit of at most 64 KB.
#[derive(Debug, Clone)]
pub struct CommitInfo {
    pub tree: ObjectId,
    pub parents: Vec<ObjectId>,
    pub time: i64,
}

/// Commits with more parents than this are refused: none of ours has more than two.
pub const MAX_PARENTS: usize = 16;
const MAX_COMMIT_BYTES: u64 = 64 * 1024;

pub fn commit(repo: &gix::Repository, id: ObjectId) -> Result<CommitInfo, Refusal> {
    header(repo, id, gix::object::Kind::Commit, MAX_COMMIT_BYTES)?;
    let unreadable = |e: &dyn std::fmt::Display| Refusal::Unreadable { id, error: e.to_string() };
    let commit = repo.find_commit(id).map_err(|e| unreadable(&e))?;
    let parents: Vec<ObjectId> = commit.parent_ids().map(|p| p.detach()).collect();
    if parents.len() > MAX_PARENTS {
        return Err(unreadable(&format!("{} parents", parents.len())));
    }
    let tree = commit.tree_id().map_err(|e| unreadable(&e))?.detach();
    let time = commit.time().map_err(|e| unreadable(&e))?.seconds;
    Ok(CommitInfo { tree, parents, time })
}

/// Whether `ancestor` is `of` or in its history, looking at no more than `budget` commits:
/// `None` when the walk ran out of budget first (a deep history, or one that another clone
/// made deep on purpose), so callers can choose the answer that is always safe.
pub fn is_ancestor(repo: &gix::Repository, ancestor: ObjectId, of: ObjectId, budget: usize) -> Option<bool> {
    let mut seen = std::collections::HashSet::new();
    let mut queue = std::collections::VecDeque::from([of]);
    while let Some(id) = queue.pop_front() {
        if id == ancestor {
            return Some(true);
        }
        if !seen.insert(id) {
            continue;
        }
        if seen.len() > budget {
            return None;
        }
        match commit(repo, id) {
            Ok(c) => queue.extend(c.parents),
            // A history with holes (a shallow fetch, a missing object) ends there.
            Err(_) => continue,
        }
    }
    Some(false)
}

/// How many characters of another clone's text a note quotes.
pub const QUOTED_CHARS: usize = 60;

/// Text another clone wrote (a name, an id), made safe to put in a note or a log line: control
/// and other invisible characters escaped, and cut at `max` characters (marked with `…`).
pub fn quote(text: &str, max: usize) -> String {
    let mut out = String::new();
    for (n, c) in text.chars().enumerate() {
        if n == max {
            out.push('…');
            break;
        }
        out.extend(c.escape_debug());
    }
    out
}

/// [`quote`] of bytes that may not be UTF-8.
pub fn quote_bytes(bytes: &[u8], max: usize) -> String {
    quote(&String::from_utf8_lossy(bytes), max)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quotes_are_escaped_and_cut() {
        assert_eq!(quote("plain", 10), "plain");
        assert_eq!(quote("a\u{1b}[2Jb", 10), "a\\u{1b}[2Jb");
        assert_eq!(quote(&"\u{85}".repeat(8000), 3), "\\u{85}\\u{85}\\u{85}…");
    }
}
