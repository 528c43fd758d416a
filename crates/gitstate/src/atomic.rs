//! What keeps a write whole when the process is killed: files written through a temporary
//! file and a rename, and the fault-injection points the crash tests kill the process at.

use std::path::{Path, PathBuf};

/// Writes `bytes` to `path` through a temporary file beside it and a rename.
pub fn write_atomically(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let tmp = temp_beside(path);
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    std::fs::write(&tmp, bytes)?;
    std::fs::rename(&tmp, path).inspect_err(|_| {
        let _ = std::fs::remove_file(&tmp);
    })
}

/// The temporary file a write to `path` goes through: one name per path, so a write that runs
/// again after a kill replaces the leftover.
pub fn temp_beside(path: &Path) -> PathBuf {
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    path.with_file_name(format!(".{name}.code-intel-tmp"))
}

/// Fault injection for the crash tests: when `CODE_INTEL_FAILPOINT` names this point (or
/// `point#n`, the n-th time it is reached), the process kills itself with SIGKILL there. With
/// `CODE_INTEL_FAILPOINT_TRACE` set to a file, every point reached is appended to it.
pub fn failpoint(point: &str) {
    static SPEC: std::sync::OnceLock<Option<(String, usize)>> = std::sync::OnceLock::new();
    static HITS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    static TRACE: std::sync::OnceLock<Option<PathBuf>> = std::sync::OnceLock::new();
    let spec = SPEC.get_or_init(|| {
        let v = std::env::var("CODE_INTEL_FAILPOINT").ok()?;
        Some(match v.split_once('#') {
            Some((p, n)) => (p.to_owned(), n.parse().unwrap_or(1)),
            None => (v, 1),
        })
    });
    if let Some(trace) = TRACE.get_or_init(|| std::env::var_os("CODE_INTEL_FAILPOINT_TRACE").map(PathBuf::from)) {
        use std::io::Write;
        if let Ok(mut f) = std::fs::OpenOptions::new().create(true).append(true).open(trace) {
            let _ = writeln!(f, "{point}");
        }
    }
    let Some((name, n)) = spec else { return };
    if name == point && HITS.fetch_add(1, std::sync::atomic::Ordering::SeqCst) + 1 == *n {
        #[cfg(unix)]
        // SAFETY: sends a signal to this process; nothing is touched afterwards.
        unsafe {
            libc::kill(libc::getpid(), libc::SIGKILL);
        }
        std::process::abort();
    }
}
