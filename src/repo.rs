//! The repository a server or command works on, and the confinement of user paths to it.

use std::path::{Component, Path, PathBuf};

/// Why a user-supplied path was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PathError {
    /// The path resolves (possibly through a symlink) to somewhere outside the repository.
    OutsideRepo { path: String },
    /// The path does not exist.
    NotFound { path: String },
}

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
        let resolved = match candidate.canonicalize() {
            Ok(resolved) => resolved,
            // An absolute path spelled outside the root is outside whether or not it exists.
            Err(_) if !candidate.starts_with(&self.root) => {
                return Err(PathError::OutsideRepo { path: user_path.to_owned() });
            }
            Err(_) => return Err(PathError::NotFound { path: user_path.to_owned() }),
        };
        if resolved.starts_with(&self.root) {
            Ok(resolved)
        } else {
            Err(PathError::OutsideRepo { path: user_path.to_owned() })
        }
    }

    /// Like [`Repo::resolve`], returning the repository-relative form (`""` for the root).
    pub fn resolve_relative(&self, user_path: &str) -> Result<String, PathError> {
        let abs = self.resolve(user_path)?;
        Ok(self.relative(&abs).unwrap_or_default())
    }

    /// Resolves a path that may not exist yet (a file about to be written): the nearest existing
    /// ancestor is resolved and confined like [`Repo::resolve`], and the rest is appended.
    /// Returns the repository-relative path and whether it exists.
    pub fn resolve_maybe_new(&self, user_path: &str) -> Result<(String, bool), PathError> {
        match self.resolve_relative(user_path) {
            Ok(rel) => return Ok((rel, true)),
            Err(PathError::OutsideRepo { path }) => return Err(PathError::OutsideRepo { path }),
            Err(PathError::NotFound { .. }) => {}
        }
        let outside = || PathError::OutsideRepo { path: user_path.to_owned() };
        let p = Path::new(user_path.trim());
        let mut missing: Vec<&std::ffi::OsStr> = Vec::new();
        let mut ancestor = p;
        loop {
            let Some(name) = ancestor.file_name() else { return Err(outside()) };
            missing.push(name);
            ancestor = ancestor.parent().unwrap_or(Path::new(""));
            let spelled = ancestor.to_string_lossy();
            match self.resolve_relative(if spelled.is_empty() { "." } else { spelled.as_ref() }) {
                Ok(base) => {
                    let mut rel = base;
                    for part in missing.iter().rev() {
                        let part = part.to_string_lossy();
                        if part == ".." || part == "." {
                            return Err(outside());
                        }
                        if !rel.is_empty() {
                            rel.push('/');
                        }
                        rel.push_str(&part);
                    }
                    return Ok((rel, false));
                }
                Err(PathError::OutsideRepo { .. }) => return Err(outside()),
                Err(PathError::NotFound { .. }) => {}
            }
        }
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
}
