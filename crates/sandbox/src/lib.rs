//! Running a shell command with the file system writable only where a [`Policy`] says, for the
//! command and every process it starts, enforced by the kernel: Landlock on Linux (5.13 and
//! later, unprivileged), a seatbelt profile (`sandbox-exec`) on macOS. Reads, execution and the
//! network are untouched.
//!
//! This crate knows paths, not sessions: what a phase allows is decided above it
//! (`code_intel_session::confine`). Where neither mechanism exists, [`support`] says so and
//! [`run`] refuses, so a caller never believes a command was confined when it was not.

// What this crate exports is its contract with the layers above: nothing public by accident.
#![warn(unreachable_pub)]

#[cfg(target_os = "linux")]
mod linux;
pub mod seatbelt;

use std::path::{Path, PathBuf};

/// Where a confined command may write. Everything else is read-only to it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Policy {
    /// Directories where anything beneath may be written, created, renamed or removed.
    pub writable_trees: Vec<PathBuf>,
    /// Existing files that may be written in place (opened for writing, truncated); not removed,
    /// renamed or replaced.
    pub writable_files: Vec<PathBuf>,
}

/// Whether commands can be confined on this machine, and by what.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Support {
    /// The kernel enforces the policy. `complete` is false on a kernel that enforces only part
    /// of it (Landlock before ABI 3 does not cover `truncate(2)`); `detail` says what is missing.
    Kernel { mechanism: &'static str, complete: bool, detail: String },
    /// Nothing here can confine a command: the guard is advisory.
    Advisory { why: String },
}

impl Support {
    pub fn is_kernel(&self) -> bool {
        matches!(self, Support::Kernel { .. })
    }

    /// One line for people: what enforces the policy, or why nothing does.
    pub fn describe(&self) -> String {
        match self {
            Support::Kernel { mechanism, complete: true, detail } => format!("{mechanism} ({detail})"),
            Support::Kernel { mechanism, complete: false, detail } => format!("{mechanism}, partly ({detail})"),
            Support::Advisory { why } => format!("none: {why}"),
        }
    }
}

/// Why a command could not be run confined.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("no kernel sandbox on this machine: {0}")]
    Unsupported(String),
    #[error("the sandbox could not be set up: {0}")]
    Setup(String),
    #[error("cannot start {program}: {source}")]
    Spawn {
        program: String,
        #[source]
        source: std::io::Error,
    },
}

/// Set (to anything but empty), the machine is taken to offer no sandbox: the hooks fall back
/// to judging a command's text, and say that this is advisory. For the tests of that guard, and
/// for a user whose kernel misbehaves; only the environment of the client's process sets it
/// (a command the agent runs is confined before it can set anything).
pub const OFF_SWITCH: &str = "CODE_INTEL_NO_SANDBOX";

/// What this machine offers.
pub fn support() -> Support {
    if std::env::var_os(OFF_SWITCH).is_some_and(|v| !v.is_empty()) {
        return Support::Advisory { why: format!("{OFF_SWITCH} is set") };
    }
    #[cfg(target_os = "linux")]
    {
        linux::support()
    }
    #[cfg(target_os = "macos")]
    {
        seatbelt::support()
    }
    #[cfg(not(any(target_os = "linux", target_os = "macos")))]
    {
        Support::Advisory { why: format!("{} has neither Landlock nor seatbelt", std::env::consts::OS) }
    }
}

/// Runs `shell -c command` confined to `policy`, with `env` added to its environment, and
/// waits for it. Returns the exit code (128 + the signal's number when a signal ended it).
///
/// The caller stays outside the sandbox, and the command cannot signal it (Landlock ABI 6 and
/// later): the caller is the reaper of everything the command starts, and when the command ends
/// every process it left behind is killed, so nothing keeps the policy's rights past the call
/// and the caller always gets to act after it (the tracked files' modes, say).
pub fn run(policy: &Policy, shell: &Path, command: &str, env: &[(String, String)]) -> Result<i32, Error> {
    #[cfg(target_os = "linux")]
    {
        use std::os::fd::AsRawFd;
        use std::os::unix::process::CommandExt;
        let ruleset = linux::ruleset(policy)?;
        let fd = ruleset.as_raw_fd();
        linux::become_subreaper();
        let mut cmd = std::process::Command::new(shell);
        cmd.arg("-c").arg(command).envs(env.iter().map(|(k, v)| (k, v)));
        // SAFETY: the closure runs in the child between fork and exec and makes only the raw
        // system calls of `restrict_self`.
        unsafe {
            cmd.pre_exec(move || linux::restrict_self(fd));
        }
        let code = wait(&mut cmd, shell);
        drop(ruleset);
        linux::end_leftovers();
        code
    }
    #[cfg(target_os = "macos")]
    {
        let profile = seatbelt::profile(policy);
        let mut cmd = std::process::Command::new(seatbelt::SANDBOX_EXEC);
        cmd.arg("-p").arg(profile).arg(shell).arg("-c").arg(command).envs(env.iter().map(|(k, v)| (k, v)));
        wait(&mut cmd, shell)
    }
    #[cfg(not(any(target_os = "linux", target_os = "macos")))]
    {
        let _ = (policy, shell, command, env);
        Err(Error::Unsupported(format!("{} has neither Landlock nor seatbelt", std::env::consts::OS)))
    }
}

/// Runs `shell -c command` as it is, unconfined (no session to guard), and waits for it.
#[cfg(unix)]
pub fn run_unconfined(shell: &Path, command: &str, env: &[(String, String)]) -> Result<i32, Error> {
    let mut cmd = std::process::Command::new(shell);
    cmd.arg("-c").arg(command).envs(env.iter().map(|(k, v)| (k, v)));
    wait(&mut cmd, shell)
}

/// Spawns `cmd` and waits, with SIGINT and SIGQUIT left to the child (as `system(3)` does), so
/// an interrupt ends the command and the runner reports how it ended.
#[cfg(unix)]
fn wait(cmd: &mut std::process::Command, shell: &Path) -> Result<i32, Error> {
    use std::os::unix::process::ExitStatusExt;
    let mut child = cmd.spawn().map_err(|source| Error::Spawn { program: shell.display().to_string(), source })?;
    // SAFETY: SIG_IGN for two signals of this process; no handler runs our code.
    unsafe {
        libc::signal(libc::SIGINT, libc::SIG_IGN);
        libc::signal(libc::SIGQUIT, libc::SIG_IGN);
    }
    let status = child.wait().map_err(|source| Error::Spawn { program: shell.display().to_string(), source })?;
    Ok(status.code().unwrap_or_else(|| 128 + status.signal().unwrap_or(0)))
}
