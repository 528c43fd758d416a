//! Where the agent's shell may write in the session's phase, as the policy the kernel sandbox
//! enforces (`git code-intel sandbox`, [`code_intel_sandbox`]); docs/SECURITY.md is the rule
//! in words.
//!
//! In every phase: the git-ignored entries of the work tree (build outputs, caches) and the
//! temporary and cache directories outside the repository. In READY also the explored files,
//! in place. Never the git directories, the guard's own configuration ([`PROTECTED`]), another
//! work tree of the repository, or anything else in the work tree. A temporary directory that
//! holds the repository (a checkout under `/tmp`) is granted entry by entry around it, and the
//! command gets a private `TMPDIR` beside it.

use std::path::{Path, PathBuf};

use code_intel_sandbox::Policy;
use code_intel_workflow::engine::phase::Phase;
use code_intel_workflow::engine::state::SessionState;

use crate::session::store::SessionStore;

pub use code_intel_workflow::engine::{PROTECTED, is_protected};

/// Ignored directories a build creates at the root, made (empty) before a confined command so
/// the tool can write into them: Landlock grants rights on what exists.
const BUILD_DIRS: &[&str] = &[
    "target",
    "node_modules",
    "build",
    "dist",
    "out",
    "__pycache__",
    ".pytest_cache",
    ".mypy_cache",
    ".ruff_cache",
    ".tox",
    ".venv",
    "coverage",
    ".next",
    ".cache",
];

/// The character devices a confined command may write (never control: no ioctl): the sinks and
/// sources every tool uses, and its terminal.
const DEVICES: &[&str] = &["/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom", "/dev/tty"];

/// The most rules spent granting a temporary directory around the repository.
const MAX_SPLIT_RULES: usize = 512;

/// Why a command cannot be run in the sandbox.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error("{0} is not inside a git work tree")]
    NotGit(String),
    /// A session exists but cannot be read: the runner fails closed.
    #[error("the active session cannot be read: {0}")]
    SessionUnreadable(#[source] crate::Error),
    #[error("the ignored entries of the work tree cannot be listed: {0}")]
    Walk(#[source] code_intel_gitstate::Error),
    #[error("the ignored entries of the work tree cannot be listed: the walk stopped short")]
    WalkFailed,
    #[error(transparent)]
    Sandbox(#[from] code_intel_sandbox::Error),
}

/// How a confined command went, for the note the runner prints.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outcome {
    pub code: i32,
    /// The phase whose policy applied; None: no active session, the command ran unconfined.
    pub phase: Option<Phase>,
}

/// Runs `command` with `shell -c` under the policy of the session active in the work tree at
/// `root`. No active session (or a finished one): unconfined, as the hooks allow it. A session
/// that cannot be read, or a machine without a kernel sandbox: refused, nothing runs. Either
/// way the build directories the root's `.gitignore` names are made (empty) first.
pub fn run(root: &Path, shell: &Path, command: &str, limit: Option<std::time::Duration>) -> Result<Outcome, RunError> {
    let store = SessionStore::open(root).map_err(|e| RunError::NotGit(format!("{} ({e})", root.display())))?;
    // What git ignores (on a large work tree, hundreds of `.gitignore` stamps to check) is
    // worked out while the session is read: the runner runs once per shell command. The
    // build directories are made first, so they are among the ignored entries granted.
    let (stored, ignored) = std::thread::scope(|scope| {
        let ignored = scope.spawn(|| {
            let repo = store.repository();
            if let Some(root) = repo.workdir() {
                make_build_dirs(root);
            }
            code_intel_gitstate::worktree::ignored_entries_cached(&repo)
        });
        (store.active(), ignored.join())
    });
    let stored = stored.map_err(RunError::SessionUnreadable)?;
    let Some(stored) = stored.filter(|s| !s.checkpoint.orchestrator_state.is_complete()) else {
        let code = code_intel_sandbox::run_unconfined(shell, command, &[], limit)?;
        return Ok(Outcome { code, phase: None });
    };
    let state = &stored.checkpoint.orchestrator_state;
    if let code_intel_sandbox::Support::Advisory { why } = code_intel_sandbox::support() {
        return Err(RunError::Sandbox(code_intel_sandbox::Error::Unsupported(why)));
    }
    let ignored = ignored.map_err(|_| RunError::WalkFailed)?.map_err(RunError::Walk)?;
    let repo = store.repository();
    let (policy, env) = policy(&repo, state, &ignored)?;
    #[cfg(unix)]
    ModesPending::recover(&repo);
    let started = std::time::SystemTime::now();
    #[cfg(unix)]
    let pending = ModesPending::begin(&repo, started);
    let finished = code_intel_sandbox::run(&policy, shell, command, &env, limit);
    // The index is read after: the command cannot write it.
    #[cfg(unix)]
    {
        if finished.as_ref().is_ok_and(|f| f.modes_may_have_changed) {
            TrackedModes::read(&repo).restore(started);
        }
        if let Some(pending) = pending {
            pending.done();
        }
    }
    Ok(Outcome { code: finished?.code, phase: Some(state.phase()) })
}

/// The note a runner leaves in the work tree's git directory (out of the command's reach) while
/// its command runs: `code-intel/modes-pending-<pid>`, holding the command's start. A runner
/// that dies before it could look at the modes (the client's timeout killed it, say) leaves its
/// note behind, and the next runner in the work tree puts back what that command changed.
#[cfg(unix)]
struct ModesPending {
    path: PathBuf,
}

#[cfg(unix)]
impl ModesPending {
    const PREFIX: &str = "modes-pending-";

    fn dir(repo: &gix::Repository) -> PathBuf {
        repo.git_dir().join("code-intel")
    }

    /// None when the note cannot be written: then only this runner's own look remains.
    fn begin(repo: &gix::Repository, started: std::time::SystemTime) -> Option<ModesPending> {
        let dir = Self::dir(repo);
        let path = dir.join(format!("{}{}", Self::PREFIX, std::process::id()));
        let nanos = started.duration_since(std::time::UNIX_EPOCH).ok()?.as_nanos();
        let written = code_intel_gitstate::write_atomically(&path, nanos.to_string().as_bytes());
        match written {
            Ok(()) => Some(ModesPending { path }),
            Err(e) => {
                tracing::warn!("cannot note the command in {}: {e}", path.display());
                None
            }
        }
    }

    fn done(self) {
        if let Err(e) = std::fs::remove_file(&self.path) {
            tracing::warn!("cannot remove {}: {e}", self.path.display());
        }
    }

    /// Puts back the bits the commands of dead runners changed, then drops their notes.
    fn recover(repo: &gix::Repository) {
        let Ok(entries) = std::fs::read_dir(Self::dir(repo)) else { return };
        let mut dead = Vec::new();
        let mut since: Option<std::time::SystemTime> = None;
        for entry in entries.flatten() {
            let name = entry.file_name();
            let Some(pid) = name.to_str().and_then(|n| n.strip_prefix(Self::PREFIX)).and_then(|p| p.parse().ok())
            else {
                continue;
            };
            if alive(pid) {
                continue;
            }
            let started = std::fs::read_to_string(entry.path())
                .ok()
                .and_then(|t| t.trim().parse::<u64>().ok())
                .map(|n| std::time::UNIX_EPOCH + std::time::Duration::from_nanos(n));
            // A note that cannot be read: it was written when its command started.
            let written = entry.metadata().and_then(|m| m.modified()).unwrap_or(std::time::UNIX_EPOCH);
            let started = started.unwrap_or(written);
            since = Some(since.map_or(started, |s| s.min(started)));
            dead.push(entry.path());
        }
        if let Some(since) = since {
            TrackedModes::read(repo).restore(since);
        }
        for path in dead {
            if let Err(e) = std::fs::remove_file(&path) {
                tracing::warn!("cannot remove {}: {e}", path.display());
            }
        }
    }
}

/// A process `pid` exists (another user's counts).
#[cfg(unix)]
fn alive(pid: libc::pid_t) -> bool {
    // SAFETY: kill with signal 0 sends nothing; it only checks that the process exists.
    pid > 0
        && (unsafe { libc::kill(pid, 0) } == 0 || std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM))
}

/// The tracked files with whether git records them executable: the one part of a file git
/// tracks that Landlock does not guard (`chmod` is not a write). After a command that may have
/// changed a mode, the bit of each tracked file the command changed is put back as the index
/// records it ([`code_intel_sandbox::exec_bits`]).
#[cfg(unix)]
struct TrackedModes {
    /// The tracked regular files, by directory, in the index's order.
    dirs: Vec<code_intel_sandbox::exec_bits::Directory>,
}

#[cfg(unix)]
impl TrackedModes {
    fn read(repo: &gix::Repository) -> TrackedModes {
        use code_intel_sandbox::exec_bits::Directory;
        use gix::index::entry::Mode;
        use std::os::unix::ffi::OsStrExt;
        let mut dirs: Vec<Directory> = Vec::new();
        // The index's checksum is not verified: hashing a 20,000-entry index took longer than
        // decoding it, and the command cannot have written it (the git directory is out of its
        // reach); a torn index fails to decode all the same.
        let decoded =
            gix::index::File::at(repo.index_path(), repo.object_hash(), true, gix::index::decode::Options::default());
        let (Some(root), Ok(index)) = (repo.workdir(), decoded) else { return TrackedModes { dirs } };
        let mut last: Option<&[u8]> = None;
        for e in index.entries() {
            if !matches!(e.mode, Mode::FILE | Mode::FILE_EXECUTABLE) {
                continue;
            }
            let path: &[u8] = e.path(&index);
            let (dir, name) = match path.iter().rposition(|b| *b == b'/') {
                Some(i) => (&path[..i], &path[i + 1..]),
                None => (&path[..0], path),
            };
            // Entries of one directory are together in the index, save where a subdirectory's
            // come between: then the directory is listed again. Compared as the index's bytes,
            // before any path is made.
            if last != Some(dir) {
                last = Some(dir);
                dirs.push(Directory { path: root.join(std::ffi::OsStr::from_bytes(dir)), files: Vec::new() });
            }
            if let Some(d) = dirs.last_mut() {
                d.files.push((std::ffi::OsStr::from_bytes(name).to_owned(), e.mode == Mode::FILE_EXECUTABLE));
            }
        }
        TrackedModes { dirs }
    }

    /// Puts back the bit of each tracked file whose status changed after `since` (the command's
    /// start) and whose bit is not the index's: a bit the user flipped before, and has not
    /// committed, is theirs.
    fn restore(&self, since: std::time::SystemTime) {
        for (path, e) in code_intel_sandbox::exec_bits::put_back(&self.dirs, since) {
            tracing::warn!("cannot restore the mode of {}: {e}", path.display());
        }
    }
}

/// The policy of `state`'s phase in `repo`'s work tree, whose git-ignored entries are `ignored`
/// ([`code_intel_gitstate::worktree::ignored_entries_cached`]), and the environment the command
/// gets (a private temporary directory and caches, made by `private_dirs`).
pub fn policy(
    repo: &gix::Repository,
    state: &SessionState,
    ignored: &[String],
) -> Result<(Policy, Vec<(String, String)>), RunError> {
    let root = repo.workdir().map(canonical).ok_or_else(|| RunError::NotGit("a bare repository".into()))?;
    let mut protected: Vec<PathBuf> =
        code_intel_gitstate::worktree::all_worktrees(repo).iter().map(|p| canonical(p)).collect();
    protected.push(canonical(repo.git_dir()));
    protected.push(canonical(repo.common_dir()));
    protected.extend(outside_protected());
    if !protected.contains(&root) {
        protected.push(root.clone());
    }
    let mut policy = Policy::default();
    let temp = canonical(&std::env::var_os("TMPDIR").map(PathBuf::from).unwrap_or_else(|| PathBuf::from("/tmp")));
    let env = private_dirs(&temp);
    // Outside: the temporary directories, each granted whole unless it holds a protected path,
    // then around it. Never a cache the user's own (unconfined) tools read code from later.
    let mut outside = vec![temp, PathBuf::from("/tmp"), PathBuf::from("/var/tmp"), PathBuf::from("/dev/shm")];
    outside.extend(std::env::var_os("CARGO_TARGET_DIR").map(PathBuf::from).filter(|p| p.is_absolute()));
    for dir in outside {
        grant(&canonical(&dir), &protected, &mut policy);
    }
    // The character devices a command writes to (never a disk: /dev is not granted whole).
    policy.writable_files.extend(DEVICES.iter().map(PathBuf::from));
    // Inside: what git ignores (around another work tree or a PATH directory inside it), and
    // in READY the explored files.
    let inner: Vec<PathBuf> = protected.iter().filter(|p| **p != root).cloned().collect();
    for rel in ignored {
        if is_protected(rel) {
            continue;
        }
        let path = root.join(rel);
        match std::fs::symlink_metadata(&path) {
            Ok(m) if m.is_dir() => grant(&path, &inner, &mut policy),
            Ok(m) if m.is_file() && !inner.iter().any(|p| within(&path, p)) => policy.writable_files.push(path),
            _ => {}
        }
    }
    if state.phase() == Phase::Ready {
        for rel in &state.explored_files {
            if is_protected(rel) {
                continue;
            }
            let path = root.join(rel);
            if std::fs::symlink_metadata(&path).is_ok_and(|m| m.is_file()) {
                policy.writable_files.push(path);
            }
        }
    }
    Ok((policy, env))
}

/// Grants `dir` whole, or around the protected paths inside it; nothing when it lies inside
/// one.
fn grant(dir: &Path, protected: &[PathBuf], policy: &mut Policy) {
    if !dir.is_dir() || protected.iter().any(|p| within(dir, p)) {
        return;
    }
    if protected.iter().any(|p| within(p, dir)) {
        grant_around(dir, protected, &mut policy.writable_trees);
    } else if !policy.writable_trees.iter().any(|t| t.as_os_str() == dir.as_os_str()) {
        policy.writable_trees.push(dir.to_owned());
    }
}

fn env_path(name: &str) -> Option<PathBuf> {
    std::env::var_os(name).map(PathBuf::from).filter(|p| p.is_absolute())
}

/// The caches a confined command writes to instead of the user's, which the user's own tools
/// (unconfined) would read code from later: one private directory per user beside the
/// temporary directory, its `tmp/` as `TMPDIR` and its `cache/` for every tool named here.
/// Not Python's bytecode: with `PYTHONPYCACHEPREFIX` set Python reads no existing `__pycache__`
/// and compiles the standard library and every package again on each run (pytest took 1.05 s
/// instead of 0.36 s); where it cannot write `__pycache__` it simply does not. Empty when the
/// directory is not ours (another user made it first): then the variables stay as they are.
fn private_dirs(temp: &Path) -> Vec<(String, String)> {
    let base = temp.join(format!("git-code-intel-sandbox-{}", uid()));
    let (tmp, cache) = (base.join("tmp"), base.join("cache"));
    for dir in [&base, &tmp, &cache] {
        if std::fs::create_dir(dir).is_err() && !dir.is_dir() {
            return Vec::new();
        }
    }
    if !owned_by_us(&base) {
        return Vec::new();
    }
    let mut env = vec![("TMPDIR".to_owned(), tmp.display().to_string())];
    for (name, sub) in [
        ("XDG_CACHE_HOME", ""),
        ("npm_config_cache", "npm"),
        ("YARN_CACHE_FOLDER", "yarn"),
        ("PIP_CACHE_DIR", "pip"),
        ("UV_CACHE_DIR", "uv"),
        ("GOCACHE", "go-build"),
    ] {
        env.push((name.to_owned(), cache.join(sub).display().to_string()));
    }
    env
}

#[cfg(unix)]
fn owned_by_us(dir: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    std::fs::symlink_metadata(dir).is_ok_and(|m| m.is_dir() && m.uid() == uid())
}

#[cfg(not(unix))]
fn owned_by_us(dir: &Path) -> bool {
    dir.is_dir()
}

/// What outside the repository no confined command may write, even inside a granted
/// directory: this program (a replaced hook binary would judge nothing), every directory on
/// `PATH` (a program put there runs unconfined when a hook or the user calls it by name), the
/// runtime and models the server loads, and the clients' settings and hooks.
fn outside_protected() -> Vec<PathBuf> {
    let mut out = Vec::new();
    if let Some(dir) = std::env::current_exe().ok().map(|e| canonical(&e)).and_then(|e| e.parent().map(Path::to_owned))
    {
        out.push(dir);
    }
    if let Some(path) = std::env::var_os("PATH") {
        out.extend(std::env::split_paths(&path).filter(|p| p.is_absolute()).map(|p| canonical(&p)));
    }
    if let Some(lib) = env_path("ORT_DYLIB_PATH").and_then(|p| p.parent().map(Path::to_owned)) {
        out.push(canonical(&lib));
    }
    let named = ["CODEX_HOME", "CLAUDE_CONFIG_DIR", "CODE_INTEL_MODEL_CACHE", "CODE_INTEL_MODEL_DIR"];
    out.extend(named.iter().filter_map(|n| env_path(n)).map(|p| canonical(&p)));
    if let Some(home) = env_path("HOME") {
        out.extend(
            [".claude", ".codex", ".claude.json", ".cache/git-code-intel"].iter().map(|d| canonical(&home.join(d))),
        );
    }
    out
}

/// Grants everything beneath `dir` except the protected paths and the directories leading to
/// them: each entry beside the way down is granted whole.
fn grant_around(dir: &Path, protected: &[PathBuf], out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for entry in entries.flatten() {
        if out.len() >= MAX_SPLIT_RULES {
            return;
        }
        let path = entry.path();
        if protected.iter().any(|p| within(&path, p)) {
            continue;
        }
        let is_dir = entry.file_type().is_ok_and(|t| t.is_dir());
        if is_dir && protected.iter().any(|p| within(p, &path)) {
            grant_around(&path, protected, out);
        } else if is_dir && !out.iter().any(|o| o.as_os_str() == path.as_os_str()) {
            out.push(path);
        }
    }
}

/// Creates the ignored build directories named at the root's `.gitignore` (`name/`, or a name
/// of [`BUILD_DIRS`]) that do not exist yet: empty and ignored, git sees nothing.
fn make_build_dirs(root: &Path) {
    let Ok(text) = std::fs::read_to_string(root.join(".gitignore")) else { return };
    let mut made = 0;
    for line in text.lines() {
        let line = line.trim();
        let trailing = line.ends_with('/');
        let name = line.trim_start_matches('/').trim_end_matches('/');
        let plain = !name.is_empty()
            && name != "."
            && name != ".."
            && name.chars().all(|c| c.is_ascii_alphanumeric() || "._-".contains(c));
        if !plain || is_protected(name) || !(trailing || BUILD_DIRS.contains(&name)) {
            continue;
        }
        let path = root.join(name);
        if std::fs::symlink_metadata(&path).is_err() && std::fs::create_dir(&path).is_ok() {
            made += 1;
        }
        if made >= 16 {
            return;
        }
    }
}

/// `path` with every symlink resolved; a path that does not exist (yet) is only tidied (no
/// `//`, `/./` or trailing `/`), so [`within`] can compare it byte by byte.
fn canonical(path: &Path) -> PathBuf {
    std::fs::canonicalize(path).unwrap_or_else(|_| path.components().collect())
}

/// `path` is `dir` or beneath it: `Path::starts_with` on paths [`canonical`] made, by bytes.
/// The policy asks it tens of thousands of times per command (every entry of a temporary
/// directory against every protected path), and parsing components each time was a tenth of
/// the runner's cost.
fn within(path: &Path, dir: &Path) -> bool {
    let (path, dir) = (path.as_os_str().as_encoded_bytes(), dir.as_os_str().as_encoded_bytes());
    path.starts_with(dir) && (path.len() == dir.len() || dir.ends_with(b"/") || path[dir.len()] == b'/')
}

#[cfg(unix)]
fn uid() -> u32 {
    // SAFETY: getuid has no preconditions and cannot fail.
    unsafe { libc::getuid() }
}

#[cfg(not(unix))]
fn uid() -> u32 {
    0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn within_is_path_prefix_by_whole_components() {
        let w = |p: &str, d: &str| within(Path::new(p), Path::new(d));
        assert!(w("/tmp/repo", "/tmp/repo") && w("/tmp/repo/.git", "/tmp/repo") && w("/tmp/x", "/"));
        assert!(!w("/tmp/repository", "/tmp/repo") && !w("/tmp", "/tmp/repo"));
        // A path that does not exist is tidied, as Path::starts_with would see it.
        let untidy = canonical(Path::new("/nonexistent-gci//bin/./tools/"));
        assert_eq!(untidy, Path::new("/nonexistent-gci/bin/tools"));
        assert!(within(&untidy, Path::new("/nonexistent-gci/bin")));
    }

    #[test]
    fn a_temporary_directory_holding_the_repository_is_granted_around_it() {
        let tmp = tempfile::tempdir().unwrap();
        let t = tmp.path();
        for d in ["a", "b/repo", "b/c", "d"] {
            std::fs::create_dir_all(t.join(d)).unwrap();
        }
        std::fs::write(t.join("file"), "x").unwrap();
        let mut out = Vec::new();
        grant_around(t, &[t.join("b/repo")], &mut out);
        out.sort();
        assert_eq!(out, [t.join("a"), t.join("b/c"), t.join("d")]);
    }
}
