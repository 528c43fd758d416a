//! Writing files so a kill never leaves half of one: every writer of the workspace writes a
//! temporary file beside its target and renames it into place, through this crate.
//!
//! Two ways to name the temporary file, for two needs:
//! - [`Temp::PerProcess`] (`<name>.tmp.<pid>`): derived data that several processes may write at
//!   once (the symbol index, the Forest). A killed writer's file is removed by the next writer
//!   in that directory ([`remove_orphans`]), never a live one's.
//! - [`Temp::Fixed`] (`.<name>.code-intel-tmp`): files in the user's work tree and in `.git`,
//!   written under the operation lock. A write that runs again after a kill replaces the
//!   leftover, so the name must not change between runs.
//!
//! Nothing is fsynced: what is written here is either derived (a torn file fails its checksum
//! and is rebuilt) or recorded in git first (the operation journal finishes it).

// What this crate exports is its contract with the layers above: nothing public by accident.
#![warn(unreachable_pub)]

use std::io::ErrorKind;
use std::path::{Path, PathBuf};

/// How the temporary file of a write is named (see the crate's documentation).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Temp {
    PerProcess,
    Fixed,
}

impl Temp {
    /// The temporary file a write to `path` goes through.
    pub fn beside(self, path: &Path) -> PathBuf {
        let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        match self {
            Temp::PerProcess => path.with_file_name(format!("{name}.tmp.{}", std::process::id())),
            Temp::Fixed => path.with_file_name(format!(".{name}.code-intel-tmp")),
        }
    }
}

/// Writes `path` through `write` into a temporary file beside it, renamed into place once
/// complete: a reader sees the old file or the new one, never a part. On an error the temporary
/// file is removed, the old file stays, and the error names the path.
pub fn write_atomically(
    path: &Path,
    temp: Temp,
    write: impl FnOnce(&mut std::fs::File) -> std::io::Result<()>,
) -> std::io::Result<()> {
    let tmp = write_aside(path, temp, write)?;
    std::fs::rename(&tmp, path).map_err(|e| {
        discard(&tmp);
        with_path(e, "cannot put in place", path)
    })
}

/// Like [`write_atomically`] for bytes.
pub fn write_bytes(path: &Path, temp: Temp, bytes: &[u8]) -> std::io::Result<()> {
    write_atomically(path, temp, |file| std::io::Write::write_all(file, bytes))
}

/// Like [`write_atomically`], without the rename: returns the complete temporary file, for a
/// caller that puts it in place later (or discards it).
pub fn write_aside(
    path: &Path,
    temp: Temp,
    write: impl FnOnce(&mut std::fs::File) -> std::io::Result<()>,
) -> std::io::Result<PathBuf> {
    let tmp = temp.beside(path);
    if temp == Temp::Fixed {
        // A killed write's leftover (the name is the same every time).
        discard(&tmp);
    }
    let written = std::fs::File::create(&tmp).and_then(|mut file| write(&mut file));
    match written {
        Ok(()) => Ok(tmp),
        Err(e) => {
            discard(&tmp);
            Err(with_path(e, "cannot write", path))
        }
    }
}

/// Removes `path` when it is there: for temporary files and leftovers, whose removal is worth
/// trying and not worth failing over. A failure other than "not there" is logged with the path.
pub fn discard(path: impl AsRef<Path>) {
    let path = path.as_ref();
    if let Err(e) = std::fs::remove_file(path)
        && e.kind() != ErrorKind::NotFound
    {
        tracing::debug!("could not remove {}: {e}", path.display());
    }
}

/// Removes the [`Temp::PerProcess`] files in `dir` whose process is gone (a killed writer's);
/// a live process's are left alone.
pub fn remove_orphans(dir: &Path) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name.to_str().and_then(|n| n.rsplit_once(".tmp.")).and_then(|(_, pid)| pid.parse::<u32>().ok())
        else {
            continue;
        };
        if pid != std::process::id() && !process_alive(pid) {
            discard(entry.path());
        }
    }
}

/// True while process `pid` runs (elsewhere than on Unix, assumed alive).
pub fn process_alive(pid: u32) -> bool {
    #[cfg(unix)]
    {
        let Ok(pid) = libc::pid_t::try_from(pid) else { return false };
        // SAFETY: signal 0 only checks that the process exists and may be signalled.
        let sent = unsafe { libc::kill(pid, 0) };
        // EPERM: it exists, under another user.
        sent == 0 || std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM)
    }
    #[cfg(not(unix))]
    {
        let _ = pid;
        true
    }
}

/// `e` with what was being done and to which path. The result keeps `e`'s kind, and `e` itself
/// as its `source()`.
pub fn with_path(e: std::io::Error, doing: &str, path: &Path) -> std::io::Error {
    let kind = e.kind();
    std::io::Error::new(kind, AtPath { doing: doing.to_owned(), path: path.to_owned(), source: e })
}

/// An I/O error with what was being done and to which file ([`with_path`]).
#[derive(Debug)]
pub struct AtPath {
    pub doing: String,
    pub path: PathBuf,
    pub source: std::io::Error,
}

impl std::fmt::Display for AtPath {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}: {}", self.doing, self.path.display(), self.source)
    }
}

impl std::error::Error for AtPath {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.source)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failed_write_leaves_the_old_file_and_no_temporary_one() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        std::fs::write(&path, "old").unwrap();
        for temp in [Temp::PerProcess, Temp::Fixed] {
            let e = write_atomically(&path, temp, |f| {
                std::io::Write::write_all(f, b"half")?;
                Err(std::io::Error::other("disk full"))
            })
            .unwrap_err();
            assert!(e.to_string().contains("disk full") && e.to_string().contains("cannot write"), "{e}");
            assert_eq!(std::fs::read_to_string(&path).unwrap(), "old");
            assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
        }
        write_bytes(&path, Temp::Fixed, b"new").unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "new");
    }

    #[test]
    fn a_fixed_name_leftover_is_replaced_and_a_dead_writers_file_removed() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        std::fs::write(Temp::Fixed.beside(&path), "a killed write's leftover").unwrap();
        write_bytes(&path, Temp::Fixed, b"new").unwrap();
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
        // A process id no process has (beyond Linux's pid_max).
        std::fs::write(dir.path().join("g.tmp.4294967"), "dead").unwrap();
        std::fs::write(dir.path().join(format!("h.tmp.{}", std::process::id())), "ours").unwrap();
        remove_orphans(dir.path());
        assert!(!dir.path().join("g.tmp.4294967").exists());
        assert!(dir.path().join(format!("h.tmp.{}", std::process::id())).exists());
    }

    #[test]
    fn writing_where_a_directory_is_names_the_path() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("d");
        std::fs::create_dir_all(path.join("inside")).unwrap();
        let e = write_bytes(&path, Temp::PerProcess, b"x").unwrap_err();
        assert!(e.to_string().contains(&path.display().to_string()), "{e}");
        assert!(path.join("inside").is_dir());
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
    }

    #[test]
    fn a_failed_write_names_the_path_and_keeps_its_cause() {
        let dir = tempfile::tempdir().unwrap();
        // A directory where the temporary file would go: creating it fails.
        let path = dir.path().join("missing-dir").join("file");
        let e = write_bytes(&path, Temp::Fixed, b"x").unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::NotFound);
        assert!(e.to_string().contains(&path.display().to_string()), "{e}");
        let at = e.get_ref().and_then(|inner| inner.downcast_ref::<AtPath>()).expect("an AtPath inside");
        assert_eq!(at.path, path);
        let cause = std::error::Error::source(&e).expect("the cause is kept");
        assert!(cause.downcast_ref::<std::io::Error>().is_some(), "{cause:?}");
    }
}
