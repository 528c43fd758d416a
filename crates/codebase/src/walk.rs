//! The file walk every tool shares: `.gitignore`-aware (via `ignore`), with the project's exclude
//! patterns, an optional ripgrep file type, and a size limit whose victims are reported.

use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::UNIX_EPOCH;

use ignore::overrides::OverrideBuilder;
use ignore::types::TypesBuilder;
use ignore::{WalkBuilder, WalkState};

use crate::Error;
use crate::config::Config;
use crate::repo::Repo;

#[derive(Debug, Clone)]
pub struct WalkedFile {
    pub abs: PathBuf,
    /// Repository-relative, `/`-separated.
    pub rel: String,
    pub size: u64,
    /// Modification time in nanoseconds since the epoch (0 when unknown).
    pub mtime_ns: i64,
}

#[derive(Debug, Default)]
pub struct Walk {
    /// Sorted by `rel`.
    pub files: Vec<WalkedFile>,
    /// Files over the size limit: (relative path, size).
    pub too_large: Vec<(String, u64)>,
    /// Every directory the walk entered (absolute), including the start.
    pub dirs: Vec<PathBuf>,
    /// Directories below the start that hold `.git` (another repository or work tree),
    /// repository-relative: passed over, with everything under them.
    pub nested: Vec<String>,
}

#[derive(Debug, Default, Clone)]
pub struct WalkOptions<'a> {
    /// ripgrep file type name (`rust`, `py`, `js`, …).
    pub file_type: Option<&'a str>,
    /// Descend at most this many levels below the start (1: its entries only).
    pub max_depth: Option<usize>,
    /// Walk hidden files and directories too (names starting with `.`: `.github/`, `.env`).
    /// `.git` and code-intel's derived directories ([`DERIVED_DIRS`]) are never walked.
    pub hidden: bool,
}

/// code-intel's own derived data under the repository root: never searched, hidden or not.
pub const DERIVED_DIRS: &[&str] = &[".code-intel/index", ".code-intel/forest"];

/// Walks `start` (a directory or a single file inside `repo`).
pub fn walk(repo: &Repo, config: &Config, start: &Path, opts: &WalkOptions) -> Result<Walk, Error> {
    let files = Mutex::new(Vec::new());
    let rest = walk_each(repo, config, start, opts, |file| {
        files.lock().unwrap_or_else(|p| p.into_inner()).push(file);
    })?;
    let mut files = files.into_inner().unwrap_or_else(|p| p.into_inner());
    files.sort_unstable_by(|a, b| a.rel.cmp(&b.rel));
    Ok(Walk { files, ..rest })
}

/// Walks like [`walk`] but hands each file to `on_file` as soon as it is found, on the walker's
/// threads, so the caller's work overlaps the walk. Returns the rest of the walk (no `files`).
pub fn walk_each(
    repo: &Repo,
    config: &Config,
    start: &Path,
    opts: &WalkOptions,
    on_file: impl Fn(WalkedFile) + Sync,
) -> Result<Walk, Error> {
    let mut builder = WalkBuilder::new(start);
    builder.threads(rayon::current_num_threads().max(1));
    builder.max_depth(opts.max_depth);
    // Behave like ripgrep run inside the repository: honour .gitignore even before `git init`
    // only when a .git exists (the `ignore` default), skip hidden files unless asked for (and
    // then, as `rg --hidden -g '!.git'`, never `.git`, nor our derived directories).
    builder.hidden(!opts.hidden);
    let derived: Vec<PathBuf> = DERIVED_DIRS.iter().map(|d| repo.root().join(d)).collect();
    builder.filter_entry(move |e| e.file_name() != ".git" && !derived.iter().any(|d| d == e.path()));
    if let Some(built) = exclusions(repo, config) {
        builder.overrides(built);
    }
    if let Some(name) = opts.file_type.filter(|t| !t.is_empty()) {
        let mut types = TypesBuilder::new();
        types.add_defaults();
        types.select(name);
        let built = types.build().map_err(|_| Error::UnknownFileType(name.to_owned()))?;
        if !built.definitions().iter().any(|d| d.name() == name) {
            return Err(Error::UnknownFileType(name.to_owned()));
        }
        builder.types(built);
    }

    let max = config.max_file_size;
    let found = Mutex::new(Walk::default());
    let on_file = &on_file;
    builder.build_parallel().run(|| {
        let found = &found;
        Box::new(move |entry| {
            let Ok(entry) = entry else { return WalkState::Continue };
            if entry.file_type().is_some_and(|t| t.is_dir()) {
                let mut found = found.lock().unwrap_or_else(|p| p.into_inner());
                // A directory below the start that holds `.git` (a `git worktree` inside the
                // checkout, a nested clone) is another repository's: not this one's files, as
                // git sees it.
                if is_nested_repository(&entry) {
                    found.nested.extend(repo.relative(entry.path()));
                    return WalkState::Skip;
                }
                found.dirs.push(entry.into_path());
                return WalkState::Continue;
            }
            if !entry.file_type().is_some_and(|t| t.is_file()) {
                return WalkState::Continue;
            }
            let Ok(meta) = entry.metadata() else { return WalkState::Continue };
            let Some(rel) = repo.relative(entry.path()) else { return WalkState::Continue };
            if meta.len() > max {
                found.lock().unwrap_or_else(|p| p.into_inner()).too_large.push((rel, meta.len()));
            } else {
                on_file(WalkedFile { abs: entry.into_path(), rel, size: meta.len(), mtime_ns: mtime_ns(&meta) });
            }
            WalkState::Continue
        })
    });
    let mut walk = found.into_inner().unwrap_or_else(|p| p.into_inner());
    walk.too_large.sort();
    walk.nested.sort();
    Ok(walk)
}

/// A file's modification time in nanoseconds since the epoch (0 when unknown), as the walk and
/// the index record it.
pub fn mtime_ns(meta: &std::fs::Metadata) -> i64 {
    meta.modified().ok().and_then(|t| t.duration_since(UNIX_EPOCH).ok()).map_or(0, |d| d.as_nanos() as i64)
}

pub fn looks_binary(bytes: &[u8]) -> bool {
    bytes[..bytes.len().min(8192)].contains(&0)
}

/// Whether `dir` is a directory whose entries are all [`DERIVED_DIRS`] (or it is empty).
fn holds_only_derived(repo: &Repo, dir: &Path) -> bool {
    let Ok(entries) = std::fs::read_dir(dir) else { return false };
    let mut entries = entries.filter_map(Result::ok);
    dir.is_dir() && entries.all(|e| DERIVED_DIRS.iter().any(|d| repo.root().join(d) == e.path()))
}

/// The project's exclude patterns, as the walk applies them.
fn exclusions(repo: &Repo, config: &Config) -> Option<ignore::overrides::Override> {
    let mut overrides = OverrideBuilder::new(repo.root());
    for pattern in &config.exclude_patterns {
        if let Err(e) = overrides.add(&format!("!{pattern}")) {
            tracing::warn!("ignoring exclude pattern '{pattern}': {e}");
        }
    }
    overrides.build().ok()
}

/// The hidden entries directly under `dir` (names starting with `.`, not `.git` and not ignored)
/// that a walk without [`WalkOptions::hidden`] passes over, repository-relative and sorted: what
/// a search can tell the agent it did not look at. A `.code-intel` that holds only the derived
/// directories (never searched) is left out: there is nothing in it to search.
pub fn hidden_entries(repo: &Repo, config: &Config, dir: &Path) -> Vec<String> {
    // The walk itself, one level deep and hidden files included: its rules (ignore files,
    // excludes, never `.git` or the derived directories) are the ones a search would apply.
    let one_level = WalkOptions { max_depth: Some(1), hidden: true, ..WalkOptions::default() };
    let Ok(level) = walk(repo, config, dir, &one_level) else { return Vec::new() };
    let too_large = level.too_large.iter().map(|(rel, _)| repo.root().join(rel));
    let mut found: Vec<String> = level
        .files
        .into_iter()
        .map(|f| f.abs)
        .chain(too_large)
        .chain(level.dirs)
        .filter(|p| p != dir && p.file_name().is_some_and(|n| n.to_string_lossy().starts_with('.')))
        .filter(|p| !holds_only_derived(repo, p))
        .filter_map(|p| repo.relative(&p))
        .collect();
    found.sort();
    found
}

/// Whether `entry` is a directory below the walk's start that holds `.git` (another repository
/// or work tree).
pub fn is_nested_repository(entry: &ignore::DirEntry) -> bool {
    entry.depth() > 0 && entry.file_type().is_some_and(|t| t.is_dir()) && entry.path().join(".git").exists()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rels(walked: &Walk) -> Vec<&str> {
        walked.files.iter().map(|f| f.rel.as_str()).collect()
    }

    #[test]
    fn hidden_files_are_walked_when_asked_and_git_and_derived_data_never() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        for (rel, text) in [
            ("src/a.py", "a = 1\n"),
            (".github/workflows/ci.yml", "run: pytest\n"),
            (".git/HEAD", "ref: refs/heads/main\n"),
            (".code-intel/index/leftover.yml", "x\n"),
            (".code-intel/forest/leftover.yml", "x\n"),
        ] {
            std::fs::create_dir_all(root.join(rel).parent().unwrap()).unwrap();
            std::fs::write(root.join(rel), text).unwrap();
        }
        let repo = Repo::at(root).unwrap();
        let config = Config::default();
        let plain = walk(&repo, &config, root, &WalkOptions::default()).unwrap();
        assert_eq!(rels(&plain), ["src/a.py"]);
        let hidden = WalkOptions { hidden: true, ..WalkOptions::default() };
        let all = walk(&repo, &config, root, &hidden).unwrap();
        assert_eq!(rels(&all), [".github/workflows/ci.yml", "src/a.py"]);
        // Walked from inside, the derived directories stay out too.
        let inside = walk(&repo, &config, &root.join(".code-intel"), &WalkOptions::default()).unwrap();
        assert_eq!(rels(&inside), Vec::<&str>::new());
        // What a search passed over: .github, not .git, not a .code-intel holding only derived data.
        assert_eq!(hidden_entries(&repo, &config, root), [".github"]);
        std::fs::write(root.join(".code-intel/context.yml"), "x: 1\n").unwrap();
        assert_eq!(hidden_entries(&repo, &config, root), [".code-intel", ".github"]);
    }
}
