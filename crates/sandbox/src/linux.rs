//! Landlock: the calling thread (and so every process it starts) may write only beneath the
//! policy's trees and into its files. The write rights of the newest ABI we know are handled;
//! an older kernel enforces the subset it has (best effort), and `support` says which.

use std::ffi::CString;
use std::os::fd::{FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use landlock::{ABI, AccessFs, BitFlags, PathBeneath, Ruleset, RulesetAttr, RulesetCreatedAttr, Scope};

use crate::{Error, Policy, Support};

/// The newest ABI whose file-system write rights we ask for.
const NEWEST: ABI = ABI::V6;

/// The kernel's Landlock ABI version, or why there is none.
fn abi_version() -> Result<i64, String> {
    // landlock_create_ruleset(NULL, 0, LANDLOCK_CREATE_RULESET_VERSION) answers the version.
    // SAFETY: with a null attribute pointer and size 0 the kernel reads no memory of ours.
    let version = unsafe { libc::syscall(libc::SYS_landlock_create_ruleset, std::ptr::null::<u8>(), 0usize, 1u32) };
    if version >= 1 {
        return Ok(version);
    }
    let e = std::io::Error::last_os_error();
    Err(match e.raw_os_error() {
        Some(libc::ENOSYS) => "the kernel was built without Landlock (5.13 or later is needed)".to_owned(),
        Some(libc::EOPNOTSUPP) => "Landlock is turned off at boot (the lsm= list lacks landlock)".to_owned(),
        _ => format!("Landlock cannot be queried: {e}"),
    })
}

pub(crate) fn support() -> Support {
    match abi_version() {
        Ok(v) if v >= 3 => Support::Kernel { mechanism: "Landlock", complete: true, detail: format!("ABI {v}") },
        Ok(v) => Support::Kernel {
            mechanism: "Landlock",
            complete: false,
            detail: format!("ABI {v}: truncate(2) by path is not covered before ABI 3"),
        },
        Err(why) => Support::Advisory { why },
    }
}

/// The ruleset of `policy`, ready to be put on a process: every write right of the newest ABI
/// handled and granted only where the policy says, and (ABI 6 and later) signals and abstract
/// UNIX sockets scoped, so the confined command cannot signal the runner that watches it, or the
/// client. Reads, execution and the network are not handled.
pub(crate) fn ruleset(policy: &Policy) -> Result<OwnedFd, Error> {
    abi_version().map_err(Error::Unsupported)?;
    let setup = |e: landlock::RulesetError| Error::Setup(e.to_string());
    let write: BitFlags<AccessFs> = AccessFs::from_write(NEWEST);
    let in_place: BitFlags<AccessFs> = AccessFs::WriteFile | AccessFs::Truncate;
    // A device is written, never controlled: no ioctl (TIOCSTI on a terminal types into it).
    let device: BitFlags<AccessFs> = AccessFs::WriteFile.into();
    let mut ruleset = Ruleset::default()
        .handle_access(write)
        .map_err(setup)?
        .scope(Scope::Signal | Scope::AbstractUnixSocket)
        .map_err(setup)?
        .create()
        .map_err(setup)?;
    for dir in &policy.writable_trees {
        if let Some((fd, Kind::Dir)) = open_path(dir) {
            ruleset = ruleset.add_rule(PathBeneath::new(fd, write)).map_err(setup)?;
        }
    }
    for file in &policy.writable_files {
        match open_path(file) {
            Some((fd, Kind::File)) => ruleset = ruleset.add_rule(PathBeneath::new(fd, in_place)).map_err(setup)?,
            Some((fd, Kind::Device)) => ruleset = ruleset.add_rule(PathBeneath::new(fd, device)).map_err(setup)?,
            _ => {}
        }
    }
    let fd: Option<OwnedFd> = ruleset.into();
    fd.ok_or_else(|| Error::Unsupported("the kernel accepted the ruleset but enforces none of it".into()))
}

/// Puts the ruleset `fd` on the calling thread (and so on every process it starts from then
/// on), with `no_new_privs`, which Landlock requires; both hold for this thread alone.
pub(crate) fn restrict_self(fd: i32) -> std::io::Result<()> {
    // SAFETY: prctl with integer arguments; landlock_restrict_self with a ruleset descriptor
    // this process holds and no flags.
    unsafe {
        if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1 as libc::c_ulong, 0, 0, 0) != 0 {
            return Err(std::io::Error::last_os_error());
        }
        if libc::syscall(libc::SYS_landlock_restrict_self, fd, 0u32) != 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}

/// What a policy path is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Dir,
    File,
    /// A character device (`/dev/null`, a terminal): written and controlled, never a tree.
    Device,
}

/// `path` opened without following a symlink at its end (a rule then holds the inode the
/// policy named, never where a link points), with its kind. None: missing, a symlink, or
/// anything else (a block device, a socket).
fn open_path(path: &Path) -> Option<(OwnedFd, Kind)> {
    let c = CString::new(path.as_os_str().as_bytes()).ok()?;
    // SAFETY: a valid NUL-terminated path; the descriptor returned is owned below.
    let fd = unsafe { libc::open(c.as_ptr(), libc::O_PATH | libc::O_CLOEXEC | libc::O_NOFOLLOW) };
    if fd < 0 {
        return None;
    }
    // SAFETY: `fd` was just opened and nothing else owns it.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    // SAFETY: fstat on a descriptor we own (an O_PATH descriptor is enough), into a zeroed stat.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    if unsafe { libc::fstat(std::os::fd::AsRawFd::as_raw_fd(&fd), &mut st) } != 0 {
        return None;
    }
    let kind = match st.st_mode & libc::S_IFMT {
        libc::S_IFDIR => Kind::Dir,
        libc::S_IFREG => Kind::File,
        libc::S_IFCHR => Kind::Device,
        _ => return None,
    };
    Some((fd, kind))
}

/// Makes this process the reaper of every orphan among its descendants, so a process the
/// command left behind (`cmd &`, a double fork, `setsid`) stays findable as our child.
pub(crate) fn become_subreaper() {
    // SAFETY: prctl with an integer argument; no memory is passed.
    let r = unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1 as libc::c_ulong, 0, 0, 0) };
    if r != 0 {
        eprintln!(
            "git-code-intel sandbox: cannot become the reaper of the command's processes: {}",
            std::io::Error::last_os_error()
        );
    }
}

/// Kills and reaps every child of this process still running (the command's leftovers, which
/// were reparented here), until none is left.
pub(crate) fn end_leftovers() {
    let me = std::process::id();
    for _ in 0..64 {
        let children = children_of(me);
        if children.is_empty() {
            return;
        }
        for pid in &children {
            // SAFETY: a signal to a process that is our child; a race with its exit is harmless.
            unsafe { libc::kill(*pid, libc::SIGKILL) };
        }
        for pid in &children {
            let mut status = 0;
            // SAFETY: waits for our own child; `status` is a valid out pointer.
            unsafe { libc::waitpid(*pid, &mut status, 0) };
        }
    }
}

/// The pids whose parent is `parent` (this process): from its threads' `children` lists where
/// the kernel keeps them, else by reading every process's parent in /proc.
fn children_of(parent: u32) -> Vec<i32> {
    if let Ok(tasks) = std::fs::read_dir("/proc/self/task") {
        let mut out = Vec::new();
        let mut listed = true;
        for task in tasks.flatten() {
            match std::fs::read_to_string(task.path().join("children")) {
                Ok(text) => out.extend(text.split_whitespace().filter_map(|p| p.parse::<i32>().ok())),
                Err(_) => listed = false,
            }
        }
        if listed {
            return out;
        }
    }
    children_by_scan(parent)
}

fn children_by_scan(parent: u32) -> Vec<i32> {
    let Ok(entries) = std::fs::read_dir("/proc") else { return Vec::new() };
    entries
        .flatten()
        .filter_map(|e| e.file_name().to_str().and_then(|n| n.parse::<i32>().ok()))
        .filter(|pid| {
            std::fs::read_to_string(format!("/proc/{pid}/stat")).ok().is_some_and(|stat| {
                // pid (comm) state ppid …: comm may hold spaces and parentheses; read after the last ')'.
                stat.rsplit_once(')')
                    .and_then(|(_, rest)| rest.split_whitespace().nth(1))
                    .and_then(|p| p.parse::<u32>().ok())
                    == Some(parent)
            })
        })
        .collect()
}
