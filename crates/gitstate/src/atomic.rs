//! What keeps a write whole when the process is killed: files written through a temporary
//! file and a rename, and the fault-injection points the crash tests kill the process at.

use std::path::{Path, PathBuf};

/// Writes `bytes` to `path` through a temporary file beside it and a rename (the fixed
/// temporary name: a write that runs again after a kill replaces the leftover).
pub fn write_atomically(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(|e| code_intel_files::with_path(e, "cannot create", dir))?;
    }
    code_intel_files::write_bytes(path, code_intel_files::Temp::Fixed, bytes)
}

/// The temporary file a write to `path` goes through: one name per path, so a write that runs
/// again after a kill replaces the leftover.
pub(crate) fn temp_beside(path: &Path) -> PathBuf {
    code_intel_files::Temp::Fixed.beside(path)
}

/// Fault injection for the crash tests: when `CODE_INTEL_FAILPOINT` names this point (or
/// `point#n`, the n-th time it is reached), the process kills itself with SIGKILL there. With
/// `CODE_INTEL_FAILPOINT_TRACE` set to a file, every point reached is appended to it.
pub(crate) fn failpoint(point: &str) {
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
        let appended =
            std::fs::OpenOptions::new().create(true).append(true).open(trace).and_then(|mut f| writeln!(f, "{point}"));
        if let Err(e) = appended {
            tracing::warn!("failpoint trace {}: {e}", trace.display());
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
