//! What the work tree holds compared with a commit's tree: every file git would see (tracked
//! files, and untracked ones that are not ignored), hashed as blobs and compared by id.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use gix::ObjectId;
use gix::objs::tree::EntryKind;
use rayon::prelude::*;

#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum ChangeKind {
    Added,
    Modified,
    Deleted,
}

/// One file that differs. `content` is the work tree's bytes: None when deleted, and None for
/// a file over the content limit, which is hashed (and stored, when needed) as a stream and
/// never read into memory whole.
#[derive(Debug, Clone)]
pub struct Change {
    pub path: String,
    pub kind: ChangeKind,
    pub old: Option<(ObjectId, EntryKind)>,
    pub new: Option<(ObjectId, EntryKind)>,
    pub content: Option<Vec<u8>>,
    /// The work-tree file's size in bytes (0 when deleted).
    pub size: u64,
}

/// Files larger than this are streamed, not read whole, by the git operations that have no
/// use for their content (commit, snapshot, tree moves).
pub const STREAM_OVER: u64 = 1024 * 1024;

/// Every file of `tree`, by repository-relative path.
pub fn flatten(
    repo: &gix::Repository,
    tree: ObjectId,
) -> Result<BTreeMap<String, (ObjectId, EntryKind)>, crate::Error> {
    let tree = repo.find_tree(tree).map_err(crate::git)?;
    let files = tree.traverse().breadthfirst.files().map_err(crate::git)?;
    Ok(files
        .into_iter()
        .filter(|e| !e.mode.is_tree())
        .map(|e| (e.filepath.to_string(), (e.oid, e.mode.kind())))
        .collect())
}

/// The paths git would consider in the work tree: not ignored, outside `.git`.
fn visible_files(root: &Path) -> BTreeSet<String> {
    let found = std::sync::Mutex::new(Vec::new());
    ignore::WalkBuilder::new(root)
        .hidden(false)
        .git_ignore(true)
        .git_exclude(true)
        .git_global(true)
        .require_git(false)
        .parents(false)
        .threads(rayon::current_num_threads().max(1))
        // Our own temporary files (see `restore`) are never the user's changes, and a directory
        // below the root that holds `.git` is another repository or work tree (a `git worktree`
        // inside the checkout): not this work tree's files, as git sees it.
        .filter_entry(|e| {
            e.file_name() != ".git"
                && !e.file_name().to_string_lossy().ends_with(".code-intel-tmp")
                && !(e.depth() > 0 && e.file_type().is_some_and(|t| t.is_dir()) && e.path().join(".git").exists())
        })
        .build_parallel()
        .run(|| {
            let found = &found;
            Box::new(move |entry| {
                if let Ok(entry) = entry
                    && entry.file_type().is_some_and(|t| t.is_file() || t.is_symlink())
                    && let Ok(rel) = entry.path().strip_prefix(root)
                {
                    let rel = rel.to_string_lossy().replace('\\', "/");
                    found.lock().unwrap_or_else(|p| p.into_inner()).push(rel);
                }
                ignore::WalkState::Continue
            })
        });
    found.into_inner().unwrap_or_else(|p| p.into_inner()).into_iter().collect()
}

/// A work-tree file as a blob: id, kind, size, and its bytes unless it is over `limit` (then it
/// is hashed as a stream).
struct Read {
    id: ObjectId,
    kind: EntryKind,
    size: u64,
    bytes: Option<Vec<u8>>,
}

/// The work-tree file at `rel` as a blob, or None if it is not there.
fn read(hash: gix::hash::Kind, root: &Path, rel: &str, limit: u64) -> Result<Option<Read>, crate::Error> {
    let path = root.join(rel);
    let Ok(meta) = std::fs::symlink_metadata(&path) else { return Ok(None) };
    if meta.file_type().is_symlink() {
        let target = std::fs::read_link(&path).map_err(crate::git)?;
        let bytes = target.to_string_lossy().into_owned().into_bytes();
        let id = gix::objs::compute_hash(hash, gix::objs::Kind::Blob, &bytes).map_err(crate::git)?;
        return Ok(Some(Read { id, kind: EntryKind::Link, size: bytes.len() as u64, bytes: Some(bytes) }));
    }
    if !meta.is_file() {
        return Ok(None);
    }
    let kind = if is_executable(&meta) { EntryKind::BlobExecutable } else { EntryKind::Blob };
    if meta.len() > limit {
        let mut file = std::fs::File::open(&path).map_err(crate::git)?;
        let never = std::sync::atomic::AtomicBool::new(false);
        let id = gix::objs::compute_stream_hash(
            hash,
            gix::objs::Kind::Blob,
            &mut file,
            meta.len(),
            &mut gix::progress::Discard,
            &never,
        )
        .map_err(crate::git)?;
        return Ok(Some(Read { id, kind, size: meta.len(), bytes: None }));
    }
    let bytes = std::fs::read(&path).map_err(crate::git)?;
    let id = gix::objs::compute_hash(hash, gix::objs::Kind::Blob, &bytes).map_err(crate::git)?;
    Ok(Some(Read { id, kind, size: bytes.len() as u64, bytes: Some(bytes) }))
}

/// Stores the work-tree content of `change` as a blob: from memory, or streamed from the file
/// when it was too large to read whole.
pub fn store_blob(repo: &gix::Repository, root: &Path, change: &Change) -> Result<ObjectId, crate::Error> {
    match &change.content {
        Some(bytes) => Ok(repo.write_blob(bytes).map_err(crate::git)?.detach()),
        None => {
            let mut file = std::fs::File::open(root.join(&change.path)).map_err(crate::git)?;
            let store = gix::odb::loose::Store::at(repo.objects.store_ref().path().to_owned(), repo.object_hash());
            gix::objs::Write::write_stream(&store, gix::objs::Kind::Blob, change.size, &mut file).map_err(crate::git)
        }
    }
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

/// Every difference between `base_tree` and the work tree, in path order. Files over
/// `content_limit` bytes come without their content.
pub fn changes(
    repo: &gix::Repository,
    root: &Path,
    base_tree: ObjectId,
    content_limit: u64,
) -> Result<Vec<Change>, crate::Error> {
    let base = flatten(repo, base_tree)?;
    let mut paths = visible_files(root);
    // Tracked files stay visible even when an ignore rule matches them.
    paths.extend(base.keys().cloned());
    // Like git status: a file whose index entry matches the base blob and whose stat data is
    // unchanged (and not racy) is not read at all. The rest are read and hashed in parallel.
    let index = repo.index_or_empty().map_err(crate::git)?;
    let hash = repo.object_hash();
    let paths: Vec<String> = paths.into_iter().collect();
    let results: Vec<Result<Option<Change>, crate::Error>> = paths
        .into_par_iter()
        .map(|path| {
            let old = base.get(&path).copied();
            if let Some((id, _)) = old
                && unchanged_by_stat(&index, root, &path, id)
            {
                return Ok(None);
            }
            let current = read(hash, root, &path, content_limit)?;
            Ok(match (old, current) {
                (None, None) => None,
                (Some(o), None) => {
                    Some(Change { path, kind: ChangeKind::Deleted, old: Some(o), new: None, content: None, size: 0 })
                }
                (None, Some(r)) => Some(Change {
                    path,
                    kind: ChangeKind::Added,
                    old: None,
                    new: Some((r.id, r.kind)),
                    content: r.bytes,
                    size: r.size,
                }),
                (Some(o), Some(r)) => (o.0 != r.id || o.1 != r.kind).then_some(Change {
                    path,
                    kind: ChangeKind::Modified,
                    old: Some(o),
                    new: Some((r.id, r.kind)),
                    content: r.bytes,
                    size: r.size,
                }),
            })
        })
        .collect();
    let mut out = Vec::new();
    for r in results {
        out.extend(r?);
    }
    Ok(out)
}

fn stat_options() -> gix::index::entry::stat::Options {
    gix::index::entry::stat::Options::default()
}

fn unchanged_by_stat(index: &gix::index::File, root: &Path, rel: &str, expected: ObjectId) -> bool {
    let Some(entry) = index.entry_by_path(rel.as_bytes().into()) else { return false };
    if entry.id != expected {
        return false;
    }
    let Ok(meta) = gix::index::fs::Metadata::from_path_no_follow(&root.join(rel)) else { return false };
    let Ok(stat) = gix::index::entry::Stat::from_fs(&meta) else { return false };
    entry.stat.matches(&stat, stat_options()) && !entry.stat.is_racy(index.timestamp(), stat_options())
}

/// Rewrites the index from `tree`, with the stat data of the work-tree files so git does not
/// have to re-read them; files in `differs` (whose work-tree content is not the tree's) keep
/// empty stat data, so git sees them as modified.
pub fn write_index(
    repo: &gix::Repository,
    root: &Path,
    tree: ObjectId,
    differs: &BTreeSet<String>,
) -> Result<(), crate::Error> {
    let mut index = repo.index_from_tree(&tree).map_err(crate::git)?;
    let mut stats = Vec::new();
    for (i, entry) in index.entries().iter().enumerate() {
        let path = entry.path(&index).to_string();
        if differs.contains(&path) {
            continue;
        }
        if let Ok(meta) = gix::index::fs::Metadata::from_path_no_follow(&root.join(&path))
            && let Ok(stat) = gix::index::entry::Stat::from_fs(&meta)
        {
            stats.push((i, stat));
        }
    }
    let entries = index.entries_mut();
    for (i, stat) in stats {
        entries[i].stat = stat;
    }
    index.write(Default::default()).map_err(crate::git)
}

/// Bringing the work tree from one tree to another: only the files that differ are rewritten,
/// and never over uncommitted work.
pub struct TreeMove {
    pub(crate) to_tree: ObjectId,
    pub(crate) from: BTreeMap<String, (ObjectId, EntryKind)>,
    pub(crate) to: BTreeMap<String, (ObjectId, EntryKind)>,
    pub(crate) touched: BTreeSet<String>,
    pub(crate) dirty: BTreeSet<String>,
}

impl TreeMove {
    /// Plans the move from `from_tree` (what the work tree is based on) to `to_tree`. Fails
    /// with the first path whose uncommitted changes the move would overwrite.
    pub fn plan(
        repo: &gix::Repository,
        root: &Path,
        from_tree: ObjectId,
        to_tree: ObjectId,
    ) -> Result<TreeMove, crate::Error> {
        let from = flatten(repo, from_tree)?;
        let to = flatten(repo, to_tree)?;
        let dirty: BTreeSet<String> = changes(repo, root, from_tree, 0)?.into_iter().map(|c| c.path).collect();
        let touched: BTreeSet<String> =
            from.keys().chain(to.keys()).filter(|p| from.get(*p) != to.get(*p)).cloned().collect();
        if let Some(p) = touched.iter().find(|p| dirty.contains(*p)) {
            return Err(crate::Error::Invalid(format!("uncommitted changes in {p} would be overwritten")));
        }
        Ok(TreeMove { to_tree, from, to, touched, dirty })
    }
}

/// The work tree's differences from `tree`, with their contents stored as blobs: path → blob
/// id (None: deleted). What the user had changed before a task started.
pub fn snapshot(
    repo: &gix::Repository,
    root: &Path,
    tree: ObjectId,
) -> Result<BTreeMap<String, Option<ObjectId>>, crate::Error> {
    let mut out = BTreeMap::new();
    for c in changes(repo, root, tree, STREAM_OVER)? {
        let id = match c.kind {
            ChangeKind::Deleted => None,
            _ => Some(store_blob(repo, root, &c)?),
        };
        out.insert(c.path, id);
    }
    Ok(out)
}

/// Writes a blob back to the work tree (or removes the file when `entry` is None). The new
/// content goes through a temporary file beside it and a rename, so the file is at every moment
/// either its old or its new self, never missing or cut short.
pub fn restore(
    repo: &gix::Repository,
    root: &Path,
    rel: &str,
    entry: Option<(ObjectId, EntryKind)>,
) -> Result<(), crate::Error> {
    let path = root.join(rel);
    match entry {
        None => match std::fs::remove_file(&path) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(crate::file("remove", &path)(e)),
            _ => Ok(()),
        },
        Some((id, kind)) => {
            let blob = repo.find_object(id).map_err(crate::git)?;
            if let Some(dir) = path.parent() {
                std::fs::create_dir_all(dir).map_err(crate::file("create", dir))?;
            }
            let tmp = crate::atomic::temp_beside(&path);
            code_intel_files::discard(&tmp);
            if kind == EntryKind::Link {
                #[cfg(unix)]
                {
                    let target = String::from_utf8_lossy(&blob.data).into_owned();
                    std::os::unix::fs::symlink(target, &tmp).map_err(crate::git)?;
                    return std::fs::rename(&tmp, &path).map_err(crate::git);
                }
            }
            // Through the one writer; an executable blob comes back executable, or the restore
            // fails and says so (the file as it was stays in place).
            let tmp = code_intel_files::write_aside(&path, code_intel_files::Temp::Fixed, |file| {
                std::io::Write::write_all(file, &blob.data)?;
                #[cfg(unix)]
                if kind == EntryKind::BlobExecutable {
                    use std::os::unix::fs::PermissionsExt;
                    file.set_permissions(std::fs::Permissions::from_mode(0o755))?;
                }
                Ok(())
            })
            .map_err(crate::git)?;
            crate::atomic::failpoint("file-written");
            std::fs::rename(&tmp, &path).map_err(|e| {
                code_intel_files::discard(&tmp);
                crate::git(e)
            })
        }
    }
}

/// The blob id and kind the work-tree file at `rel` would have, or None if it is not there.
pub fn current_blob(
    repo: &gix::Repository,
    root: &Path,
    rel: &str,
) -> Result<Option<(ObjectId, EntryKind)>, crate::Error> {
    Ok(read(repo.object_hash(), root, rel, 0)?.map(|r| (r.id, r.kind)))
}

/// A staged change: the path, the HEAD blob (if any) and the staged blob.
#[derive(Debug, Clone)]
pub struct Staged {
    pub path: String,
    pub old: Option<ObjectId>,
    pub new: ObjectId,
}

/// Added or modified files in the index compared with HEAD (deletions carry no new content).
pub fn staged(repo: &gix::Repository) -> Result<Vec<Staged>, crate::Error> {
    let head_tree = match repo.head_commit() {
        Ok(c) => Some(c.tree_id().map_err(crate::git)?.detach()),
        Err(_) => None,
    };
    let base = match head_tree {
        Some(t) => flatten(repo, t)?,
        None => BTreeMap::new(),
    };
    let index = repo.index_or_empty().map_err(crate::git)?;
    let mut out = Vec::new();
    for entry in index.entries() {
        if entry.stage_raw() != 0 || entry.mode.is_submodule() {
            continue;
        }
        let path = entry.path(&index).to_string();
        let old = base.get(&path).map(|(id, _)| *id);
        if old != Some(entry.id) {
            out.push(Staged { path, old, new: entry.id });
        }
    }
    Ok(out)
}

/// The ignored entries of the work tree that sit in a tracked directory: a directory whose
/// whole content is ignored is one entry (`target`), never walked into. Paths are relative to
/// the root, `/`-separated.
///
/// Only the directories that hold tracked files are read (their entries' kinds come from the
/// directory listing, no `stat` per file), and only the untracked entries met there are matched
/// against the ignore rules: what `git status --ignored` shows, less what lies inside an
/// untracked directory that is not ignored as a whole. The index says which directories to read,
/// so the cost follows the number of tracked directories, not of files.
pub fn ignored_entries(repo: &gix::Repository) -> Result<Vec<String>, crate::Error> {
    use gix::bstr::ByteSlice;
    let Some(root) = repo.workdir().map(Path::to_owned) else { return Ok(Vec::new()) };
    let index = repo.index_or_empty().map_err(crate::git)?;
    let mut tracked: std::collections::HashSet<&[u8]> = std::collections::HashSet::new();
    let mut dirs: std::collections::BTreeSet<&[u8]> = std::collections::BTreeSet::new();
    dirs.insert(b"");
    for entry in index.entries() {
        let path: &[u8] = entry.path(&index).as_bytes();
        tracked.insert(path);
        let mut at = path.len();
        while let Some(slash) = path[..at].rfind_byte(b'/') {
            if !dirs.insert(&path[..slash]) {
                break;
            }
            at = slash;
        }
    }
    let mut excludes = repo
        .excludes(&index, None, gix::worktree::stack::state::ignore::Source::WorktreeThenIdMappingIfNotSkipped)
        .map_err(crate::git)?;
    let mut out = Vec::new();
    for dir in &dirs {
        let dir = dir.to_str_lossy();
        let Ok(listing) = std::fs::read_dir(if dir.is_empty() { root.clone() } else { root.join(dir.as_ref()) }) else {
            continue;
        };
        for entry in listing.flatten() {
            let name = entry.file_name();
            let Some(name) = name.to_str() else { continue };
            if name == ".git" {
                continue;
            }
            let rel = if dir.is_empty() { name.to_owned() } else { format!("{dir}/{name}") };
            let Ok(kind) = entry.file_type() else { continue };
            if tracked.contains(rel.as_bytes()) || (kind.is_dir() && dirs.contains(rel.as_bytes())) {
                continue;
            }
            let mode = if kind.is_dir() { gix::index::entry::Mode::DIR } else { gix::index::entry::Mode::FILE };
            let platform = excludes.at_path(Path::new(&rel), Some(mode)).map_err(crate::git)?;
            if platform.is_excluded() {
                out.push(rel);
            }
        }
    }
    Ok(out)
}

/// [`ignored_entries`], remembered in the work tree's git directory
/// (`code-intel/ignored.json`, out of the agent's reach) and used again while nothing it
/// depends on has changed: the index, `info/exclude`, the user's global excludes, the root
/// directory (a new build directory there), and every `.gitignore` the walk read. A cache that
/// misses a newer ignored entry grants less, never more; any change to what is tracked (the
/// index) or to the rules read starts a new walk.
pub fn ignored_entries_cached(repo: &gix::Repository) -> Result<Vec<String>, crate::Error> {
    let Some(root) = repo.workdir().map(Path::to_owned) else { return Ok(Vec::new()) };
    let cache = repo.git_dir().join("code-intel").join("ignored.json");
    let mut inputs = vec![repo.index_path(), repo.common_dir().join("info/exclude"), root.clone()];
    if let Some(home) = std::env::var_os("HOME").map(std::path::PathBuf::from) {
        let xdg =
            std::env::var_os("XDG_CONFIG_HOME").map(std::path::PathBuf::from).unwrap_or_else(|| home.join(".config"));
        inputs.push(xdg.join("git/ignore"));
    }
    if let Ok(text) = std::fs::read(&cache)
        && let Ok(stored) = serde_json::from_slice::<IgnoredCache>(&text)
        && stored.inputs.iter().all(|(path, stamp)| file_stamp(Path::new(path)) == *stamp)
        && inputs.iter().all(|p| stored.inputs.iter().any(|(q, _)| Path::new(q) == p))
    {
        return Ok(stored.entries);
    }
    let index = repo.index_or_empty().map_err(crate::git)?;
    for entry in index.entries() {
        let path = entry.path(&index).to_string();
        if path == ".gitignore" || path.ends_with("/.gitignore") {
            inputs.push(root.join(path));
        }
    }
    drop(index);
    // The stamps are taken before the walk: a change during it makes the next call walk again.
    let stamps: Vec<(String, Option<Stamp>)> =
        inputs.iter().map(|p| (p.display().to_string(), file_stamp(p))).collect();
    let entries = ignored_entries(repo)?;
    let stored = IgnoredCache { inputs: stamps, entries };
    if let Ok(bytes) = serde_json::to_vec(&stored) {
        let written = cache
            .parent()
            .map(std::fs::create_dir_all)
            .transpose()
            .and_then(|_| code_intel_files::write_bytes(&cache, code_intel_files::Temp::PerProcess, &bytes));
        if let Err(e) = written {
            tracing::warn!("cannot remember the ignored entries in {}: {e}", cache.display());
        }
    }
    Ok(stored.entries)
}

/// What a file's stat says of it, enough to tell it changed: modification time, size, inode.
type Stamp = (i64, u32, u64, u64);

fn file_stamp(path: &Path) -> Option<Stamp> {
    let meta = std::fs::symlink_metadata(path).ok()?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        Some((meta.mtime(), meta.mtime_nsec() as u32, meta.size(), meta.ino()))
    }
    #[cfg(not(unix))]
    {
        let modified = meta.modified().ok()?.duration_since(std::time::UNIX_EPOCH).ok()?;
        Some((modified.as_secs() as i64, modified.subsec_nanos(), meta.len(), 0))
    }
}

#[derive(serde::Serialize, serde::Deserialize)]
struct IgnoredCache {
    inputs: Vec<(String, Option<Stamp>)>,
    entries: Vec<String>,
}

/// Every work tree of the repository `repo` belongs to (the main one and each linked one that
/// still exists), as absolute paths.
pub fn all_worktrees(repo: &gix::Repository) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    if let Ok(main) = repo.main_repo()
        && let Some(dir) = main.workdir()
    {
        out.push(dir.to_owned());
    }
    if let Ok(linked) = repo.worktrees() {
        out.extend(linked.iter().filter_map(|w| w.base().ok()));
    }
    if let Some(dir) = repo.workdir()
        && !out.iter().any(|d| d == dir)
    {
        out.push(dir.to_owned());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn git(dir: &Path, args: &[&str]) {
        let ok = std::process::Command::new("git")
            .args(["-c", "user.name=t", "-c", "user.email=t@x"])
            .args(args)
            .current_dir(dir)
            .output()
            .expect("git")
            .status
            .success();
        assert!(ok, "git {args:?}");
    }

    #[test]
    fn ignored_entries_follow_the_rules_and_the_cache_follows_their_changes() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path();
        git(root, &["init", "-q", "-b", "main"]);
        std::fs::create_dir_all(root.join("src/__pycache__")).unwrap();
        std::fs::write(root.join("src/a.py"), "x").unwrap();
        std::fs::write(root.join("src/__pycache__/a.pyc"), "x").unwrap();
        std::fs::write(root.join(".gitignore"), "target/\n__pycache__/\n*.log\n").unwrap();
        std::fs::create_dir_all(root.join("target/debug")).unwrap();
        std::fs::write(root.join("run.log"), "x").unwrap();
        std::fs::create_dir_all(root.join("untracked/target")).unwrap();
        git(root, &["add", "src/a.py", ".gitignore"]);
        git(root, &["commit", "-q", "-m", "i"]);
        let repo = gix::open(root).unwrap();
        let mut found = ignored_entries_cached(&repo).unwrap();
        found.sort();
        // Inside an untracked directory that is not ignored as a whole nothing is looked for.
        assert_eq!(found, ["run.log", "src/__pycache__", "target"]);
        assert!(repo.git_dir().join("code-intel/ignored.json").is_file());
        // A changed rule is seen at once.
        std::fs::write(root.join(".gitignore"), "target/\n").unwrap();
        let mut found = ignored_entries_cached(&repo).unwrap();
        found.sort();
        assert_eq!(found, ["target"]);
        // A new build directory at the root too.
        std::fs::write(root.join(".gitignore"), "target/\ndist/\n").unwrap();
        ignored_entries_cached(&repo).unwrap();
        std::fs::create_dir(root.join("dist")).unwrap();
        let mut found = ignored_entries_cached(&repo).unwrap();
        found.sort();
        assert_eq!(found, ["dist", "target"]);
    }
}
