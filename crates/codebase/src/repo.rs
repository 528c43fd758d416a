//! The repository a server or command works on, and the confinement of user paths to it.

use std::path::{Component, Path, PathBuf};

/// Why a user-supplied path was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PathError {
    /// The path resolves (possibly through a symlink, dangling or not) to somewhere outside the
    /// repository.
    OutsideRepo { path: String },
    /// The path is in `.git/`, which no tool reads or writes.
    GitDir { path: String },
    /// The path does not exist.
    NotFound { path: String },
}

/// How many symlinks one path may pass through before it counts as a loop.
const MAX_LINK_HOPS: usize = 40;

#[derive(Debug, Clone)]
pub struct Repo {
    root: PathBuf,
}

impl Repo {
    /// Opens the repository that contains `start`: the nearest ancestor holding `.git`, or `start`
    /// itself when there is none (plain directories can be explored too).
    pub fn discover(start: &Path) -> std::io::Result<Repo> {
        let start = start.canonicalize()?;
        let root = start.ancestors().find(|dir| dir.join(".git").exists()).map(Path::to_path_buf).unwrap_or(start);
        Ok(Repo { root })
    }

    /// Uses `root` as it is (canonicalized), without looking for `.git` above it.
    pub fn at(root: &Path) -> std::io::Result<Repo> {
        Ok(Repo { root: root.canonicalize()? })
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Resolves a user path (relative to the root, or absolute) to an existing path inside the
    /// repository. `..` components and symlinks are resolved before the check.
    pub fn resolve(&self, user_path: &str) -> Result<PathBuf, PathError> {
        let trimmed = user_path.trim();
        let candidate = if trimmed.is_empty() || trimmed == "." {
            self.root.clone()
        } else {
            let p = Path::new(trimmed);
            if p.is_absolute() { p.to_path_buf() } else { self.root.join(p) }
        };
        // Reject lexical escapes even when the target does not exist, so the error says "outside"
        // rather than "not found".
        if !self.lexically_inside(&candidate) {
            return Err(PathError::OutsideRepo { path: user_path.to_owned() });
        }
        let resolved = self.confine(&candidate, user_path)?;
        if std::fs::metadata(&resolved).is_err() {
            return Err(PathError::NotFound { path: user_path.to_owned() });
        }
        Ok(resolved)
    }

    /// Where `candidate` leads, which must be inside the repository and outside `.git/`.
    fn confine(&self, candidate: &Path, user_path: &str) -> Result<PathBuf, PathError> {
        let outside = || PathError::OutsideRepo { path: user_path.to_owned() };
        let resolved = follow(candidate).ok_or_else(outside)?;
        if !resolved.starts_with(&self.root) {
            return Err(outside());
        }
        if resolved.strip_prefix(&self.root).is_ok_and(|rel| rel.starts_with(".git")) {
            return Err(PathError::GitDir { path: user_path.to_owned() });
        }
        // A directory below the root that holds `.git` is another repository or work tree (a
        // `git worktree` inside the checkout, a nested clone): outside this one, as git sees it.
        if resolved
            .ancestors()
            .take_while(|dir| *dir != self.root)
            .any(|dir| dir != resolved && dir.join(".git").exists())
            || (resolved != self.root && resolved.join(".git").exists())
        {
            return Err(outside());
        }
        Ok(resolved)
    }

    /// Like [`Repo::resolve`], returning the repository-relative form (`""` for the root).
    pub fn resolve_relative(&self, user_path: &str) -> Result<String, PathError> {
        let abs = self.resolve(user_path)?;
        Ok(self.relative(&abs).unwrap_or_default())
    }

    /// Resolves a path that may not exist yet (a file about to be written). Every component that
    /// exists is resolved, symlinks included (a dangling link is followed to where a write would
    /// land), and the rest is taken as written; the result must be inside the repository.
    /// Returns the repository-relative path of where the write lands, and whether it exists.
    pub fn resolve_maybe_new(&self, user_path: &str) -> Result<(String, bool), PathError> {
        let trimmed = user_path.trim();
        if trimmed.is_empty() {
            return Err(PathError::NotFound { path: user_path.to_owned() });
        }
        let p = Path::new(trimmed);
        let candidate = if p.is_absolute() { p.to_path_buf() } else { self.root.join(p) };
        if !self.lexically_inside(&candidate) {
            return Err(PathError::OutsideRepo { path: user_path.to_owned() });
        }
        let resolved = self.confine(&candidate, user_path)?;
        let rel = self.relative(&resolved).unwrap_or_default();
        if rel.is_empty() {
            return Err(PathError::NotFound { path: user_path.to_owned() });
        }
        Ok((rel, std::fs::symlink_metadata(&resolved).is_ok()))
    }

    fn lexically_inside(&self, path: &Path) -> bool {
        let mut normal = PathBuf::new();
        for c in path.components() {
            match c {
                Component::ParentDir => {
                    if !normal.pop() {
                        return false;
                    }
                }
                Component::CurDir => {}
                other => normal.push(other.as_os_str()),
            }
        }
        // Only `..` escapes from a path spelled under the root are caught here; anything else is
        // judged after canonicalization, which also sees through symlinks.
        normal.starts_with(&self.root) || !path.starts_with(&self.root)
    }

    /// The repository-relative path with `/` separators, or None when `abs` is not inside.
    pub fn relative(&self, abs: &Path) -> Option<String> {
        let rel = abs.strip_prefix(&self.root).ok()?;
        Some(to_slash(rel))
    }

    /// The repository's `info/exclude` (the ignore file git keeps outside the tree): under
    /// `.git/`, or for a linked work tree (whose `.git` is a file naming its git directory)
    /// under the common directory of the repository it belongs to.
    pub fn info_exclude(&self) -> PathBuf {
        let dot_git = self.root.join(".git");
        let git_dir = match std::fs::read_to_string(&dot_git) {
            Ok(text) => match text.trim().strip_prefix("gitdir:") {
                Some(dir) => self.root.join(dir.trim()),
                None => dot_git,
            },
            Err(_) => dot_git,
        };
        let common = match std::fs::read_to_string(git_dir.join("commondir")) {
            Ok(text) => git_dir.join(text.trim()),
            Err(_) => git_dir,
        };
        common.join("info").join("exclude")
    }
}

/// Where `path` (absolute) leads: each component that exists is resolved, a symlink (dangling
/// or not) replaced by its target, and components that do not exist are taken as written.
/// None when the links loop.
fn follow(path: &Path) -> Option<PathBuf> {
    let mut out = PathBuf::new();
    let mut pending: std::collections::VecDeque<std::ffi::OsString> =
        path.components().map(|c| c.as_os_str().to_owned()).collect();
    let mut hops = 0;
    while let Some(part) = pending.pop_front() {
        match Path::new(&part).components().next() {
            Some(Component::RootDir | Component::Prefix(_)) => out.push(&part),
            Some(Component::ParentDir) => {
                out.pop();
            }
            Some(Component::CurDir) | None => {}
            Some(Component::Normal(name)) => {
                let next = out.join(name);
                match std::fs::symlink_metadata(&next) {
                    Ok(meta) if meta.file_type().is_symlink() => {
                        hops += 1;
                        if hops > MAX_LINK_HOPS {
                            return None;
                        }
                        let target = std::fs::read_link(&next).ok()?;
                        if target.is_absolute() {
                            out = PathBuf::new();
                        }
                        for c in target.components().rev() {
                            pending.push_front(c.as_os_str().to_owned());
                        }
                    }
                    _ => out = next,
                }
            }
        }
    }
    Some(out)
}

/// A relative path rendered with `/` separators on every platform.
pub fn to_slash(rel: &Path) -> String {
    let mut out = String::new();
    for (i, c) in rel.components().enumerate() {
        if i > 0 {
            out.push('/');
        }
        out.push_str(&c.as_os_str().to_string_lossy());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn info_exclude_of_a_linked_work_tree_is_the_main_repositorys() {
        let dir = tempfile::tempdir().unwrap();
        let main = dir.path().join("main");
        std::fs::create_dir_all(main.join(".git/info")).unwrap();
        std::fs::create_dir_all(main.join(".git/worktrees/wt")).unwrap();
        std::fs::write(main.join(".git/worktrees/wt/commondir"), "../..\n").unwrap();
        let wt = dir.path().join("wt");
        std::fs::create_dir_all(&wt).unwrap();
        std::fs::write(wt.join(".git"), format!("gitdir: {}\n", main.join(".git/worktrees/wt").display())).unwrap();
        let exclude = Repo::at(&wt).unwrap().info_exclude();
        assert_eq!(exclude.parent().unwrap().canonicalize().unwrap(), main.join(".git/info").canonicalize().unwrap());
        assert_eq!(Repo::at(&main).unwrap().info_exclude(), main.join(".git/info/exclude"));
    }

    fn repo() -> (tempfile::TempDir, Repo) {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("src")).unwrap();
        std::fs::write(dir.path().join("src/a.rs"), "fn a() {}").unwrap();
        let repo = Repo::at(dir.path()).unwrap();
        (dir, repo)
    }

    #[test]
    fn relative_and_absolute_inside_paths_resolve() {
        let (_d, repo) = repo();
        assert_eq!(repo.resolve_relative("src/a.rs").unwrap(), "src/a.rs");
        assert_eq!(repo.resolve_relative("./src/../src/a.rs").unwrap(), "src/a.rs");
        let abs = repo.root().join("src/a.rs");
        assert_eq!(repo.resolve_relative(abs.to_str().unwrap()).unwrap(), "src/a.rs");
        assert_eq!(repo.resolve_relative("").unwrap(), "");
        assert_eq!(repo.resolve_relative(".").unwrap(), "");
    }

    #[test]
    fn escapes_are_rejected() {
        let (_d, repo) = repo();
        assert!(matches!(repo.resolve("../x"), Err(PathError::OutsideRepo { .. })));
        assert!(matches!(repo.resolve("src/../../etc/passwd"), Err(PathError::OutsideRepo { .. })));
        assert!(matches!(repo.resolve("/etc/passwd"), Err(PathError::OutsideRepo { .. })));
        assert!(matches!(repo.resolve("/no/such/place"), Err(PathError::OutsideRepo { .. })));
        assert!(matches!(repo.resolve("src/missing.rs"), Err(PathError::NotFound { .. })));
    }

    #[cfg(unix)]
    #[test]
    fn symlink_leading_out_is_rejected() {
        let (_d, repo) = repo();
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("secret.txt"), "s").unwrap();
        std::os::unix::fs::symlink(outside.path(), repo.root().join("link")).unwrap();
        assert!(matches!(repo.resolve("link/secret.txt"), Err(PathError::OutsideRepo { .. })));
        assert!(matches!(repo.resolve("link"), Err(PathError::OutsideRepo { .. })));
    }

    /// A link whose target does not exist yet still leads out: writing through it would create
    /// a file outside the repository.
    #[cfg(unix)]
    #[test]
    fn dangling_links_leading_out_are_refused_for_writing() {
        let (_d, repo) = repo();
        let outside = tempfile::tempdir().unwrap();
        std::os::unix::fs::symlink(outside.path().join("new.py"), repo.root().join("evil.py")).unwrap();
        std::os::unix::fs::symlink(outside.path().join("nodir"), repo.root().join("evil_dir")).unwrap();
        std::os::unix::fs::symlink("../../escape.py", repo.root().join("src/rel.py")).unwrap();
        for path in ["evil.py", "evil_dir/new.py", "src/rel.py", "src/../evil.py"] {
            assert!(matches!(repo.resolve_maybe_new(path), Err(PathError::OutsideRepo { .. })), "{path}");
            assert!(matches!(repo.resolve(path), Err(PathError::OutsideRepo { .. })), "{path}");
        }
        // A dangling link inside is where the write lands.
        std::os::unix::fs::symlink("a_new.rs", repo.root().join("src/inner.rs")).unwrap();
        assert_eq!(repo.resolve_maybe_new("src/inner.rs").unwrap(), ("src/a_new.rs".into(), false));
        assert_eq!(repo.resolve_maybe_new("src/brand_new.rs").unwrap(), ("src/brand_new.rs".into(), false));
        assert_eq!(repo.resolve_maybe_new("src/a.rs").unwrap(), ("src/a.rs".into(), true));
        // Links that loop lead nowhere.
        std::os::unix::fs::symlink("loop_b", repo.root().join("loop_a")).unwrap();
        std::os::unix::fs::symlink("loop_a", repo.root().join("loop_b")).unwrap();
        assert!(matches!(repo.resolve_maybe_new("loop_a"), Err(PathError::OutsideRepo { .. })));
    }

    #[test]
    fn the_git_directory_is_never_a_tool_path() {
        let (_d, repo) = repo();
        std::fs::create_dir_all(repo.root().join(".git")).unwrap();
        std::fs::write(repo.root().join(".git/config"), "[remote]").unwrap();
        assert!(matches!(repo.resolve(".git/config"), Err(PathError::GitDir { .. })));
        assert!(matches!(repo.resolve(".git"), Err(PathError::GitDir { .. })));
        assert!(matches!(repo.resolve_maybe_new(".git/hooks/pre-commit"), Err(PathError::GitDir { .. })));
        assert!(repo.resolve(".gitignore_not").is_err());
    }
}
