//! Putting back the executable bit of files a confined command changed (no sandbox here stops
//! `chmod`; [`crate::Finished::modes_may_have_changed`] says when to look). The caller names
//! each file with the bit it should have; a file whose bit differs and whose status changed
//! after the command started gets that bit back. A bit changed before is someone else's (the
//! user's, not yet committed) and stays.
//!
//! Files are looked at relative to their directory (one `open` per directory, then one
//! `fstatat` per file): on a repository of 20,000 files, walking each full path again was most
//! of the cost.

use std::ffi::{CString, OsString};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

/// The files of one directory, each with whether it should be executable.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Directory {
    pub path: PathBuf,
    pub files: Vec<(OsString, bool)>,
}

/// How far the file system's clock may lag the one `since` was read from: a file's change time
/// comes from the kernel's coarse clock, one tick (at most 10 ms) behind.
const CLOCK_SLACK: Duration = Duration::from_millis(20);

/// Gives each file in `dirs` whose executable bit is not the one named, and whose status
/// changed after `since`, the bit named. Returns the files it could not change, with why.
pub fn put_back(dirs: &[Directory], since: SystemTime) -> Vec<(PathBuf, std::io::Error)> {
    let since = since.checked_sub(CLOCK_SLACK).unwrap_or(since);
    let since = since.duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
    let workers = std::thread::available_parallelism().map_or(1, |n| n.get()).min(8);
    let chunk = dirs.len().div_ceil(workers).max(1);
    std::thread::scope(|scope| {
        let handles: Vec<_> = dirs
            .chunks(chunk)
            .map(|part| scope.spawn(move || part.iter().flat_map(|d| in_dir(d, since)).collect::<Vec<_>>()))
            .collect();
        handles.into_iter().flat_map(|h| h.join().unwrap_or_default()).collect()
    })
}

fn in_dir(dir: &Directory, since: Duration) -> Vec<(PathBuf, std::io::Error)> {
    let mut failed = Vec::new();
    let Some(fd) = open_dir(&dir.path) else { return failed };
    for (name, executable) in &dir.files {
        let Ok(c) = CString::new(name.as_bytes()) else { continue };
        // SAFETY: fstatat on a directory descriptor we own, a NUL-terminated name, into a
        // zeroed stat.
        let mut st: libc::stat = unsafe { std::mem::zeroed() };
        if unsafe { libc::fstatat(fd.as_raw_fd(), c.as_ptr(), &mut st, libc::AT_SYMLINK_NOFOLLOW) } != 0 {
            continue;
        }
        let mode = st.st_mode & 0o7777;
        let changed_at = Duration::new(st.st_ctime.max(0) as u64, st.st_ctime_nsec.clamp(0, 999_999_999) as u32);
        if st.st_mode & libc::S_IFMT != libc::S_IFREG || (mode & 0o111 != 0) == *executable || changed_at < since {
            continue;
        }
        let wanted = if *executable { mode | ((mode & 0o444) >> 2) } else { mode & !0o111 };
        // SAFETY: fchmodat on the same descriptor and name; the file is a regular file (the
        // command and everything it started have ended, so nothing swaps it meanwhile).
        if unsafe { libc::fchmodat(fd.as_raw_fd(), c.as_ptr(), wanted, 0) } != 0 {
            failed.push((dir.path.join(name), std::io::Error::last_os_error()));
        }
    }
    failed
}

fn open_dir(path: &Path) -> Option<OwnedFd> {
    let c = CString::new(path.as_os_str().as_bytes()).ok()?;
    // SAFETY: a valid NUL-terminated path; the descriptor returned is owned below.
    let fd = unsafe { libc::open(c.as_ptr(), libc::O_RDONLY | libc::O_DIRECTORY | libc::O_CLOEXEC) };
    // SAFETY: just opened, nothing else owns it.
    (fd >= 0).then(|| unsafe { OwnedFd::from_raw_fd(fd) })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn only_a_bit_changed_after_the_start_is_put_back_in_either_direction() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        let set =
            |f: &str, mode: u32| std::fs::set_permissions(dir.join(f), std::fs::Permissions::from_mode(mode)).unwrap();
        for f in ["users.py", "commands.py", "run.sh", "same.py"] {
            std::fs::write(dir.join(f), "x\n").unwrap();
            set(f, 0o644);
        }
        set("run.sh", 0o755);
        // Before the start: the user's own change, kept.
        set("users.py", 0o755);
        std::thread::sleep(Duration::from_millis(150));
        let started = SystemTime::now();
        set("commands.py", 0o755);
        set("run.sh", 0o644);
        let files = ["users.py", "commands.py", "run.sh", "same.py"].iter();
        let expected = files.map(|f| (OsString::from(f), *f == "run.sh")).collect();
        let failed = put_back(&[Directory { path: dir.to_owned(), files: expected }], started);
        assert!(failed.is_empty(), "{failed:?}");
        let mode = |f: &str| std::fs::metadata(dir.join(f)).unwrap().permissions().mode() & 0o777;
        assert_eq!(
            [mode("users.py"), mode("commands.py"), mode("run.sh"), mode("same.py")],
            [0o755, 0o644, 0o755, 0o644]
        );
    }
}
