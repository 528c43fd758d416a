//! What the work tree holds compared with a commit's tree: every file git would see (tracked
//! files, and untracked ones that are not ignored), hashed as blobs and compared by id.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use gix::ObjectId;
use gix::objs::tree::EntryKind;

#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum ChangeKind {
    Added,
    Modified,
    Deleted,
}

/// One file that differs. `content` is the work tree's bytes (None when deleted).
#[derive(Debug, Clone)]
pub struct Change {
    pub path: String,
    pub kind: ChangeKind,
    pub old: Option<(ObjectId, EntryKind)>,
    pub new: Option<(ObjectId, EntryKind)>,
    pub content: Option<Vec<u8>>,
}

/// Every file of `tree`, by repository-relative path.
pub fn flatten(repo: &gix::Repository, tree: ObjectId) -> Result<BTreeMap<String, (ObjectId, EntryKind)>, String> {
    let tree = repo.find_tree(tree).map_err(|e| e.to_string())?;
    let files = tree.traverse().breadthfirst.files().map_err(|e| e.to_string())?;
    Ok(files
        .into_iter()
        .filter(|e| !e.mode.is_tree())
        .map(|e| (e.filepath.to_string(), (e.oid, e.mode.kind())))
        .collect())
}

/// The paths git would consider in the work tree: not ignored, outside `.git`.
fn visible_files(root: &Path) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let walk = ignore::WalkBuilder::new(root)
        .hidden(false)
        .git_ignore(true)
        .git_exclude(true)
        .git_global(true)
        .require_git(false)
        .parents(false)
        .filter_entry(|e| e.file_name() != ".git")
        .build();
    for entry in walk.flatten() {
        let is_file = entry.file_type().is_some_and(|t| t.is_file() || t.is_symlink());
        if is_file && let Ok(rel) = entry.path().strip_prefix(root) {
            out.insert(rel.to_string_lossy().replace('\\', "/"));
        }
    }
    out
}

/// The blob id, kind and bytes of a work-tree file, or None if it is not there.
fn read(repo: &gix::Repository, root: &Path, rel: &str) -> Result<Option<(ObjectId, EntryKind, Vec<u8>)>, String> {
    let path = root.join(rel);
    let Ok(meta) = std::fs::symlink_metadata(&path) else { return Ok(None) };
    let (kind, bytes) = if meta.file_type().is_symlink() {
        let target = std::fs::read_link(&path).map_err(|e| e.to_string())?;
        (EntryKind::Link, target.to_string_lossy().into_owned().into_bytes())
    } else if meta.is_file() {
        let bytes = std::fs::read(&path).map_err(|e| e.to_string())?;
        (if is_executable(&meta) { EntryKind::BlobExecutable } else { EntryKind::Blob }, bytes)
    } else {
        return Ok(None);
    };
    let id = gix::objs::compute_hash(repo.object_hash(), gix::objs::Kind::Blob, &bytes).map_err(|e| e.to_string())?;
    Ok(Some((id, kind, bytes)))
}

#[cfg(unix)]
fn is_executable(meta: &std::fs::Metadata) -> bool {
    use std::os::unix::fs::PermissionsExt;
    meta.permissions().mode() & 0o111 != 0
}

#[cfg(not(unix))]
fn is_executable(_meta: &std::fs::Metadata) -> bool {
    false
}

/// Every difference between `base_tree` and the work tree, in path order.
pub fn changes(repo: &gix::Repository, root: &Path, base_tree: ObjectId) -> Result<Vec<Change>, String> {
    let base = flatten(repo, base_tree)?;
    let mut paths = visible_files(root);
    // Tracked files stay visible even when an ignore rule matches them.
    paths.extend(base.keys().cloned());
    let mut out = Vec::new();
    for path in paths {
        let old = base.get(&path).copied();
        let current = read(repo, root, &path)?;
        let change = match (old, current) {
            (None, None) => None,
            (Some(o), None) => Some(Change { path, kind: ChangeKind::Deleted, old: Some(o), new: None, content: None }),
            (None, Some((id, kind, bytes))) => {
                Some(Change { path, kind: ChangeKind::Added, old: None, new: Some((id, kind)), content: Some(bytes) })
            }
            (Some(o), Some((id, kind, bytes))) => (o.0 != id || o.1 != kind).then_some(Change {
                path,
                kind: ChangeKind::Modified,
                old: Some(o),
                new: Some((id, kind)),
                content: Some(bytes),
            }),
        };
        out.extend(change);
    }
    Ok(out)
}

/// Writes a blob of `tree` back to the work tree (or removes the file when the tree lacks it).
pub fn restore(
    repo: &gix::Repository,
    root: &Path,
    rel: &str,
    entry: Option<(ObjectId, EntryKind)>,
) -> Result<(), String> {
    let path = root.join(rel);
    match entry {
        None => match std::fs::remove_file(&path) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e.to_string()),
            _ => Ok(()),
        },
        Some((id, kind)) => {
            let blob = repo.find_object(id).map_err(|e| e.to_string())?;
            if let Some(dir) = path.parent() {
                std::fs::create_dir_all(dir).map_err(|e| e.to_string())?;
            }
            let _ = std::fs::remove_file(&path);
            if kind == EntryKind::Link {
                #[cfg(unix)]
                {
                    let target = String::from_utf8_lossy(&blob.data).into_owned();
                    return std::os::unix::fs::symlink(target, &path).map_err(|e| e.to_string());
                }
            }
            std::fs::write(&path, &blob.data).map_err(|e| e.to_string())?;
            #[cfg(unix)]
            if kind == EntryKind::BlobExecutable {
                use std::os::unix::fs::PermissionsExt;
                let _ = std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755));
            }
            Ok(())
        }
    }
}
