//! Whether a confined command may have changed a file's mode: Landlock has no right for
//! `chmod` (nor for the ACL that `setxattr` can set, which changes the mode too), and git tracks
//! the executable bit, so the caller puts bits back after a command. Looking at every tracked
//! file after every command costs milliseconds per thousand files; this says when to look.
//!
//! A seccomp filter on the command (put on after Landlock, on the thread that starts it) turns each
//! mode-changing system call into a notification to the runner, which notes it and lets the
//! call go on (`SECCOMP_USER_NOTIF_FLAG_CONTINUE`): the answer is only ever "maybe", never a
//! decision taken on the command's arguments. The filter also refuses the command a seccomp
//! filter of its own (`EPERM`), whose notifications would come first and could hide a `chmod`
//! from the runner. Where any of this is not available (another architecture, an old kernel,
//! a filter that could not be put on) the answer is "maybe" and the caller looks at every file.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

/// `AUDIT_ARCH_*` of the architectures whose system call numbers are written here.
#[cfg(target_arch = "x86_64")]
const NATIVE_ARCH: u32 = 0xC000_003E;
#[cfg(target_arch = "aarch64")]
const NATIVE_ARCH: u32 = 0xC000_00B7;

/// x32's system calls carry this bit on x86_64 (same `AUDIT_ARCH`).
#[cfg(target_arch = "x86_64")]
const X32_BIT: u32 = 0x4000_0000;

/// `setxattrat(2)`, Linux 6.13, the same number on every architecture written here.
const SYS_SETXATTRAT: i64 = 463;

/// The system calls that change a mode: `chmod` (x86_64 only), `fchmod`, `fchmodat`,
/// `fchmodat2`, and the `setxattr` family (a POSIX ACL sets the mode's bits).
#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
fn mode_calls() -> Vec<i64> {
    let mut calls = vec![
        libc::SYS_fchmod,
        libc::SYS_fchmodat,
        libc::SYS_fchmodat2,
        libc::SYS_setxattr,
        libc::SYS_lsetxattr,
        libc::SYS_fsetxattr,
        SYS_SETXATTRAT,
    ];
    #[cfg(target_arch = "x86_64")]
    calls.push(libc::SYS_chmod);
    calls
}

/// The filter's program.
pub(crate) struct Filter {
    program: Vec<libc::sock_filter>,
}

impl Filter {
    /// None on an architecture whose system call numbers are not written here.
    pub(crate) fn new() -> Option<Filter> {
        #[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
        {
            Some(Filter { program: program() })
        }
        #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
        {
            None
        }
    }
}

/// The BPF program: a foreign architecture's calls (a 32-bit `int 0x80` from a 64-bit
/// process) are all notified; a mode-changing call is notified; `seccomp(2)` and
/// `prctl(PR_SET_SECCOMP)` are refused; the rest is allowed.
#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
fn program() -> Vec<libc::sock_filter> {
    use libc::{BPF_ABS, BPF_JEQ, BPF_JGE, BPF_JMP, BPF_K, BPF_LD, BPF_RET, BPF_W};
    const ARCH: u32 = 4; // offsetof(struct seccomp_data, arch)
    const NR: u32 = 0;
    const ARG0: u32 = 16; // args[0], its low word on a little-endian machine
    let stmt = |code: u32, k: u32| libc::sock_filter { code: code as u16, jt: 0, jf: 0, k };
    let jump = |code: u32, k: u32, jt: u8, jf: u8| libc::sock_filter { code: code as u16, jt, jf, k };
    let calls = mode_calls();
    // Each test's jumps are patched once the three returns at the end are placed.
    let mut p = vec![stmt(BPF_LD | BPF_W | BPF_ABS, ARCH)];
    let arch_test = p.len();
    p.push(jump(BPF_JMP | BPF_JEQ | BPF_K, NATIVE_ARCH, 0, 0));
    p.push(stmt(BPF_LD | BPF_W | BPF_ABS, NR));
    let mut to_notify = Vec::new();
    #[cfg(target_arch = "x86_64")]
    {
        to_notify.push(p.len());
        p.push(jump(BPF_JMP | BPF_JGE | BPF_K, X32_BIT, 0, 0));
    }
    for nr in &calls {
        to_notify.push(p.len());
        p.push(jump(BPF_JMP | BPF_JEQ | BPF_K, *nr as u32, 0, 0));
    }
    let mut to_refuse = vec![p.len()];
    p.push(jump(BPF_JMP | BPF_JEQ | BPF_K, libc::SYS_seccomp as u32, 0, 0));
    // prctl: refused when its first argument is PR_SET_SECCOMP; otherwise on to ALLOW.
    p.push(jump(BPF_JMP | BPF_JEQ | BPF_K, libc::SYS_prctl as u32, 0, 2));
    p.push(stmt(BPF_LD | BPF_W | BPF_ABS, ARG0));
    to_refuse.push(p.len());
    p.push(jump(BPF_JMP | BPF_JEQ | BPF_K, libc::PR_SET_SECCOMP as u32, 0, 0));
    p.push(stmt(BPF_RET | BPF_K, libc::SECCOMP_RET_ALLOW));
    let notify = p.len();
    p.push(stmt(BPF_RET | BPF_K, libc::SECCOMP_RET_USER_NOTIF));
    let refuse = p.len();
    p.push(stmt(BPF_RET | BPF_K, libc::SECCOMP_RET_ERRNO | libc::EPERM as u32));
    // Jumps count from the next instruction. The architecture test goes to NOTIFY when it
    // fails; every other test when it holds.
    let offset = |from: usize, to: usize| u8::try_from(to - from - 1).unwrap_or(u8::MAX);
    p[arch_test].jf = offset(arch_test, notify);
    for at in to_notify {
        p[at].jt = offset(at, notify);
    }
    for at in to_refuse {
        p[at].jt = offset(at, refuse);
    }
    p
}

/// Puts the filter on the calling thread (after Landlock, which set `no_new_privs`) and returns
/// its listener; the processes the thread starts inherit the filter. None when it cannot be put
/// on: not an error, the runner then looks at every file.
pub(crate) fn install(filter: &Filter) -> Option<OwnedFd> {
    let prog = libc::sock_fprog { len: filter.program.len() as u16, filter: filter.program.as_ptr().cast_mut() };
    // SAFETY: seccomp(SET_MODE_FILTER, NEW_LISTENER) with a program that outlives the call.
    // Without TSYNC the filter holds for this thread alone. The listener comes close-on-exec.
    let listener = unsafe {
        libc::syscall(
            libc::SYS_seccomp,
            libc::SECCOMP_SET_MODE_FILTER,
            libc::SECCOMP_FILTER_FLAG_NEW_LISTENER,
            &prog as *const libc::sock_fprog,
        )
    };
    // SAFETY: a descriptor the kernel just made for us, owned here.
    (listener >= 0).then(|| unsafe { OwnedFd::from_raw_fd(listener as RawFd) })
}

/// Waits for `child` while answering its notifications; returns how it ended and whether a
/// mode-changing call was seen.
pub(crate) fn wait_serving(
    child: &mut std::process::Child,
    listener: &OwnedFd,
) -> std::io::Result<(std::process::ExitStatus, bool)> {
    // SAFETY: pidfd_open of our own child, which has not been reaped (we reap it below).
    let pidfd = unsafe { libc::syscall(libc::SYS_pidfd_open, child.id() as libc::pid_t, 0u32) };
    if pidfd < 0 {
        // No way to wait on both: let the calls through from another thread, and say "maybe".
        return Ok((wait_answering_in_thread(child, listener)?, true));
    }
    // SAFETY: just opened, owned here.
    let pidfd = unsafe { OwnedFd::from_raw_fd(pidfd as RawFd) };
    let mut seen = false;
    // Once every process under the filter is gone the listener reports a hang-up, possibly
    // before the pidfd is readable: it is then left out of the poll (a negative descriptor).
    let mut listening = true;
    loop {
        let mut fds = [
            libc::pollfd { fd: pidfd.as_raw_fd(), events: libc::POLLIN, revents: 0 },
            libc::pollfd { fd: if listening { listener.as_raw_fd() } else { -1 }, events: libc::POLLIN, revents: 0 },
        ];
        // SAFETY: poll on two descriptors we own (a negative one is skipped).
        let r = unsafe { libc::poll(fds.as_mut_ptr(), 2, -1) };
        if r < 0 {
            let e = std::io::Error::last_os_error();
            if e.kind() == std::io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e);
        }
        if fds[1].revents & libc::POLLIN != 0 {
            seen |= answer_one(listener);
        } else if fds[1].revents != 0 {
            listening = false;
        }
        if fds[0].revents & libc::POLLIN != 0 {
            return Ok((child.wait()?, seen));
        }
    }
}

/// Receives one notification and lets its call go on. Whether one was received.
fn answer_one(listener: &OwnedFd) -> bool {
    // SAFETY: NOTIF_RECV fills a zeroed seccomp_notif; NOTIF_SEND reads the response.
    unsafe {
        let mut notif: libc::seccomp_notif = std::mem::zeroed();
        if libc::ioctl(listener.as_raw_fd(), libc::SECCOMP_IOCTL_NOTIF_RECV, &mut notif) != 0 {
            return false;
        }
        let mut resp: libc::seccomp_notif_resp = std::mem::zeroed();
        resp.id = notif.id;
        resp.flags = libc::SECCOMP_USER_NOTIF_FLAG_CONTINUE as u32;
        // Fails only when the caller is gone (killed while waiting): nothing to answer.
        libc::ioctl(listener.as_raw_fd(), libc::SECCOMP_IOCTL_NOTIF_SEND, &mut resp);
    }
    true
}

/// Without a pidfd (before Linux 5.3): a thread answers notifications until the listener
/// closes, while this one waits.
fn wait_answering_in_thread(
    child: &mut std::process::Child,
    listener: &OwnedFd,
) -> std::io::Result<std::process::ExitStatus> {
    let fd = listener.try_clone()?;
    std::thread::spawn(move || {
        loop {
            let mut pfd = libc::pollfd { fd: fd.as_raw_fd(), events: libc::POLLIN, revents: 0 };
            // SAFETY: poll on one descriptor we own.
            let r = unsafe { libc::poll(&mut pfd, 1, -1) };
            if r < 0 || pfd.revents & (libc::POLLHUP | libc::POLLERR | libc::POLLNVAL) != 0 {
                return;
            }
            answer_one(&fd);
        }
    });
    child.wait()
}

#[cfg(all(test, any(target_arch = "x86_64", target_arch = "aarch64")))]
mod tests {
    use super::*;

    /// Runs the program over a `seccomp_data` as the kernel would, for the few instructions it
    /// uses.
    fn verdict(program: &[libc::sock_filter], arch: u32, nr: i64, arg0: u64) -> u32 {
        let mut data = [0u8; 64];
        data[0..4].copy_from_slice(&(nr as i32).to_le_bytes());
        data[4..8].copy_from_slice(&arch.to_le_bytes());
        data[16..24].copy_from_slice(&arg0.to_le_bytes());
        let mut acc = 0u32;
        let mut pc = 0;
        loop {
            let i = program[pc];
            let code = u32::from(i.code);
            if code == libc::BPF_LD | libc::BPF_W | libc::BPF_ABS {
                let k = i.k as usize;
                acc = u32::from_le_bytes(data[k..k + 4].try_into().unwrap());
                pc += 1;
            } else if code == libc::BPF_RET | libc::BPF_K {
                return i.k;
            } else {
                let holds = if code == libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K {
                    acc == i.k
                } else if code == libc::BPF_JMP | libc::BPF_JGE | libc::BPF_K {
                    acc >= i.k
                } else {
                    panic!("unexpected instruction {code:#x}")
                };
                pc += 1 + usize::from(if holds { i.jt } else { i.jf });
            }
        }
    }

    #[test]
    fn the_program_notifies_mode_changes_refuses_filters_and_allows_the_rest() {
        let p = program();
        let notify = libc::SECCOMP_RET_USER_NOTIF;
        let eperm = libc::SECCOMP_RET_ERRNO | libc::EPERM as u32;
        for nr in mode_calls() {
            assert_eq!(verdict(&p, NATIVE_ARCH, nr, 0), notify, "call {nr}");
        }
        assert_eq!(verdict(&p, NATIVE_ARCH, libc::SYS_seccomp, 1), eperm);
        assert_eq!(verdict(&p, NATIVE_ARCH, libc::SYS_prctl, libc::PR_SET_SECCOMP as u64), eperm);
        assert_eq!(verdict(&p, NATIVE_ARCH, libc::SYS_prctl, libc::PR_SET_NAME as u64), libc::SECCOMP_RET_ALLOW);
        for nr in [libc::SYS_read, libc::SYS_write, libc::SYS_openat, libc::SYS_execve, libc::SYS_getpid] {
            assert_eq!(verdict(&p, NATIVE_ARCH, nr, 0), libc::SECCOMP_RET_ALLOW, "call {nr}");
        }
        // A foreign architecture's calls are all notified (i386's chmod is 15).
        assert_eq!(verdict(&p, 0x4000_0003, 15, 0), notify);
        #[cfg(target_arch = "x86_64")]
        assert_eq!(verdict(&p, NATIVE_ARCH, i64::from(X32_BIT) + 90, 0), notify);
    }
}
