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

#[cfg(unix)]
pub mod exec_bits;
#[cfg(target_os = "linux")]
mod linux;
#[cfg(target_os = "linux")]
mod mode_watch;
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

/// How a confined command ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Finished {
    /// The exit code (128 + the signal's number when a signal ended it).
    pub code: i32,
    /// Whether the command may have changed a file's mode, which no sandbox here forbids: a
    /// mode-changing system call was seen, or nothing could watch for one. False only when it
    /// certainly did not.
    pub modes_may_have_changed: bool,
    /// The time limit ended it ([`TIMED_OUT`] is then the code).
    pub timed_out: bool,
}

/// The exit code of a command the time limit ended, as `timeout(1)` reports it.
pub const TIMED_OUT: i32 = 124;

/// Runs `shell -c command` confined to `policy`, with `env` added to its environment, and
/// waits for it, at most `limit` when one is given: then the command and everything it started
/// are killed, and the code is [`TIMED_OUT`].
///
/// The caller stays outside the sandbox, and the command cannot signal it (Landlock ABI 6 and
/// later): the caller is the reaper of everything the command starts, and when the command ends
/// every process it left behind is killed, so nothing keeps the policy's rights past the call
/// and the caller always gets to act after it (the tracked files' modes, say).
pub fn run(
    policy: &Policy,
    shell: &Path,
    command: &str,
    env: &[(String, String)],
    limit: Option<std::time::Duration>,
) -> Result<Finished, Error> {
    #[cfg(target_os = "linux")]
    {
        use std::os::fd::AsRawFd;
        let ruleset = linux::ruleset(policy)?;
        let filter = mode_watch::Filter::new();
        linux::become_subreaper();
        let mut cmd = std::process::Command::new(shell);
        cmd.arg("-c").arg(command).envs(env.iter().map(|(k, v)| (k, v)));
        // Landlock and the seccomp filter go on a thread of their own, which starts the command
        // and ends: both hold for the calling thread only, the command inherits them, and this
        // thread, which answers the filter's notifications and puts modes back, has neither.
        // Without a pre_exec closure the command starts with posix_spawn, not a fork of this
        // process (half a millisecond less per command).
        let started = std::thread::scope(|scope| {
            let confined = scope.spawn(|| {
                linux::restrict_self(ruleset.as_raw_fd())
                    .map_err(|e| Error::Setup(format!("cannot put the Landlock ruleset on: {e}")))?;
                let listener = filter.as_ref().and_then(mode_watch::install);
                Ok::<_, Error>((spawn(&mut cmd, shell)?, listener))
            });
            confined.join()
        });
        let (mut child, listener) =
            started.map_err(|_| Error::Setup("the thread that starts the command panicked".into()))??;
        let watchdog = limit.map(|limit| Watchdog::start(child.id(), limit));
        let waited = match &listener {
            Some(listener) => mode_watch::wait_serving(&mut child, listener),
            None => child.wait().map(|status| (status, true)),
        };
        let (status, modes_may_have_changed) =
            waited.map_err(|source| Error::Spawn { program: shell.display().to_string(), source })?;
        let timed_out = watchdog.is_some_and(Watchdog::stop);
        drop(ruleset);
        linux::end_leftovers();
        let code = if timed_out { TIMED_OUT } else { exit_code(status) };
        Ok(Finished { code, modes_may_have_changed, timed_out })
    }
    #[cfg(target_os = "macos")]
    {
        let profile = seatbelt::profile(policy);
        let mut cmd = std::process::Command::new(seatbelt::SANDBOX_EXEC);
        cmd.arg("-p").arg(profile).arg(shell).arg("-c").arg(command).envs(env.iter().map(|(k, v)| (k, v)));
        // The profile denies file-write-mode outside the policy, but no Mac has run this yet:
        // the caller looks at the modes every time.
        let mut child = spawn(&mut cmd, shell)?;
        let watchdog = limit.map(|limit| Watchdog::start(child.id(), limit));
        let status = child.wait().map_err(|source| Error::Spawn { program: shell.display().to_string(), source })?;
        let timed_out = watchdog.is_some_and(Watchdog::stop);
        let code = if timed_out { TIMED_OUT } else { exit_code(status) };
        Ok(Finished { code, modes_may_have_changed: true, timed_out })
    }
    #[cfg(not(any(target_os = "linux", target_os = "macos")))]
    {
        let _ = (policy, shell, command, env, limit);
        Err(Error::Unsupported(format!("{} has neither Landlock nor seatbelt", std::env::consts::OS)))
    }
}

/// Runs `shell -c command` as it is, unconfined (no session to guard), and waits for it, at
/// most `limit` when one is given (then the code is [`TIMED_OUT`]).
#[cfg(unix)]
pub fn run_unconfined(
    shell: &Path,
    command: &str,
    env: &[(String, String)],
    limit: Option<std::time::Duration>,
) -> Result<i32, Error> {
    let mut cmd = std::process::Command::new(shell);
    cmd.arg("-c").arg(command).envs(env.iter().map(|(k, v)| (k, v)));
    let mut child = spawn(&mut cmd, shell)?;
    let watchdog = limit.map(|limit| Watchdog::start(child.id(), limit));
    let status = child.wait().map_err(|source| Error::Spawn { program: shell.display().to_string(), source })?;
    Ok(if watchdog.is_some_and(Watchdog::stop) { TIMED_OUT } else { exit_code(status) })
}

/// Kills a command that outlives its time limit (SIGKILL to the shell; the runner then ends
/// what it started, as after any command).
#[cfg(unix)]
struct Watchdog {
    stop: std::sync::mpsc::Sender<()>,
    fired: std::sync::Arc<std::sync::atomic::AtomicBool>,
}

#[cfg(unix)]
impl Watchdog {
    fn start(pid: u32, limit: std::time::Duration) -> Watchdog {
        let (stop, stopped) = std::sync::mpsc::channel::<()>();
        let fired = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let flag = fired.clone();
        // On Linux the child is named by a pidfd, which never names another process once the
        // child is reaped; elsewhere the pid, in the moment between its reaping and `stop`.
        #[cfg(target_os = "linux")]
        // SAFETY: pidfd_open of our own child; the descriptor is owned below.
        let pidfd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid as libc::pid_t, 0u32) };
        #[cfg(target_os = "linux")]
        // SAFETY: just opened (when not negative), nothing else owns it.
        let pidfd = (pidfd >= 0)
            .then(|| unsafe { <std::os::fd::OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(pidfd as i32) });
        std::thread::spawn(move || {
            if let Err(std::sync::mpsc::RecvTimeoutError::Timeout) = stopped.recv_timeout(limit) {
                flag.store(true, std::sync::atomic::Ordering::SeqCst);
                #[cfg(target_os = "linux")]
                if let Some(fd) = &pidfd {
                    // SAFETY: a signal through a pidfd we own; no memory is passed.
                    unsafe {
                        libc::syscall(
                            libc::SYS_pidfd_send_signal,
                            std::os::fd::AsRawFd::as_raw_fd(fd),
                            libc::SIGKILL,
                            std::ptr::null::<u8>(),
                            0u32,
                        )
                    };
                    return;
                }
                // SAFETY: a signal to our child's pid.
                unsafe { libc::kill(pid as libc::pid_t, libc::SIGKILL) };
            }
        });
        Watchdog { stop, fired }
    }

    /// Stops the watch; whether the limit had ended the command.
    fn stop(self) -> bool {
        // The thread is gone when it fired; the send then fails, which is fine.
        self.stop.send(()).ok();
        self.fired.load(std::sync::atomic::Ordering::SeqCst)
    }
}

/// Spawns `cmd`, then leaves SIGINT and SIGQUIT to the child (as `system(3)` does), so an
/// interrupt ends the command and the runner reports how it ended.
#[cfg(unix)]
fn spawn(cmd: &mut std::process::Command, shell: &Path) -> Result<std::process::Child, Error> {
    let child = cmd.spawn().map_err(|source| Error::Spawn { program: shell.display().to_string(), source })?;
    // SAFETY: SIG_IGN for two signals of this process; no handler runs our code.
    unsafe {
        libc::signal(libc::SIGINT, libc::SIG_IGN);
        libc::signal(libc::SIGQUIT, libc::SIG_IGN);
    }
    Ok(child)
}

/// The exit code a shell reports for `status`: 128 + the signal's number when a signal ended it.
#[cfg(unix)]
fn exit_code(status: std::process::ExitStatus) -> i32 {
    use std::os::unix::process::ExitStatusExt;
    status.code().unwrap_or_else(|| 128 + status.signal().unwrap_or(0))
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;

    /// One run at a time: the runner is the reaper of every child of this process and kills
    /// the ones left when a command ends, a concurrent test's among them.
    static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

    /// Runs `command` with `sh` confined to a policy that grants only `dir`; None where the
    /// kernel has no Landlock (the test then says so and passes).
    fn confined(dir: &Path, command: &str) -> Option<Finished> {
        let _one = ONE_AT_A_TIME.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if !support().is_kernel() {
            eprintln!("skipped: no kernel sandbox here");
            return None;
        }
        let policy = Policy { writable_trees: vec![dir.join("w")], writable_files: vec![PathBuf::from("/dev/null")] };
        let limit = Some(std::time::Duration::from_secs(2));
        Some(run(&policy, Path::new("/bin/sh"), &format!("cd {} && {command}", dir.display()), &[], limit).unwrap())
    }

    fn dir() -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("w")).unwrap();
        std::fs::write(dir.path().join("f"), "x").unwrap();
        dir
    }

    #[test]
    fn a_mode_change_is_seen_and_a_command_without_one_is_known_not_to_have_made_one() {
        let dir = dir();
        let Some(plain) = confined(dir.path(), "cat f >/dev/null && echo y > w/out && ls w >/dev/null") else { return };
        assert_eq!(plain, Finished { code: 0, modes_may_have_changed: false, timed_out: false });
        let chmod = confined(dir.path(), "chmod +x f").unwrap();
        assert!(chmod.modes_may_have_changed, "{chmod:?}");
        let fchmod =
            confined(dir.path(), "python3 -c \"import os; os.fchmod(os.open('f', os.O_RDONLY), 0o700)\"").unwrap();
        assert!(fchmod.modes_may_have_changed, "{fchmod:?}");
        // The write outside the policy failed; the modes changed (the caller puts them back).
        let denied = confined(dir.path(), "echo y > f").unwrap();
        assert_ne!(denied.code, 0);
        assert_eq!(std::fs::read_to_string(dir.path().join("f")).unwrap(), "x");
    }

    #[test]
    fn the_time_limit_ends_the_command_and_what_it_started() {
        let dir = dir();
        let started = std::time::Instant::now();
        let Some(ran) = confined(dir.path(), "(sleep 30; echo late > w/late) & sleep 30") else { return };
        assert_eq!((ran.code, ran.timed_out), (TIMED_OUT, true), "{ran:?}");
        assert!(started.elapsed() < std::time::Duration::from_secs(10));
        std::thread::sleep(std::time::Duration::from_millis(200));
        assert!(!dir.path().join("w/late").exists());
    }

    #[test]
    fn the_command_cannot_put_a_seccomp_filter_of_its_own_on() {
        let dir = dir();
        // prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, NULL): EFAULT when allowed, EPERM when
        // refused; seccomp(SECCOMP_SET_MODE_FILTER, 0, NULL) likewise.
        let probe = format!(
            "python3 -c \"import ctypes; c = ctypes.CDLL(None, use_errno=True); \
             c.prctl(22, 2, 0, 0, 0); a = ctypes.get_errno(); c.syscall({}, 1, 0, 0); \
             raise SystemExit(0 if (a, ctypes.get_errno()) == (1, 1) else 10 + a)\"",
            libc::SYS_seccomp
        );
        let Some(ran) = confined(dir.path(), &probe) else { return };
        assert_eq!(ran.code, 0, "a filter of the command's own was not refused: {ran:?}");
    }
}
