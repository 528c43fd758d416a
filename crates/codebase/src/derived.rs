//! Derived data on disk (the symbol index, the Forest): directories that git-ignore themselves,
//! and checksummed files: an 8-byte magic with the format version, a postcard body, and a
//! 32-byte blake3 checksum of everything before it.
//! Written through a temporary file and a rename, streamed and checksummed on the way, and not
//! fsynced: it is derived data, and a torn file fails its checksum and is rebuilt.

use std::io::{BufWriter, Write};
use std::path::Path;

use serde::Serialize;
use serde::de::DeserializeOwned;

/// Creates `dir` with a `.gitignore` that ignores everything in it, before anything else is
/// written there, so git never sees the derived files, not even half-way through a sync.
pub fn ensure_ignored_dir(dir: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    let ignore = dir.join(".gitignore");
    if ignore.exists() {
        return Ok(());
    }
    const TEXT: &str = "# Derived data of git-code-intel; rebuilt on demand.\n*\n";
    // Written whole, then renamed into place, from inside `.git` where `git status` does not
    // look: written in place, the file would show as untracked while it is still empty.
    let git_dir = dir.ancestors().map(|a| a.join(".git")).find(|g| g.is_dir());
    if let Some(git_dir) = git_dir {
        let tmp = git_dir.join(format!("code-intel-gitignore.tmp.{}", std::process::id()));
        if std::fs::write(&tmp, TEXT).is_ok() && std::fs::rename(&tmp, &ignore).is_ok() {
            return Ok(());
        }
        let _ = std::fs::remove_file(&tmp);
    }
    std::fs::write(&ignore, TEXT)
}

/// The decoded body, or None when the magic or the checksum is wrong or the body does not parse.
pub fn decode<T: DeserializeOwned>(bytes: &[u8], magic: &[u8; 8]) -> Option<T> {
    if bytes.len() < magic.len() + 32 || &bytes[..magic.len()] != magic {
        return None;
    }
    let (body, sum) = bytes.split_at(bytes.len() - 32);
    if blake3::hash(body).as_bytes() != sum {
        return None;
    }
    postcard::from_bytes(&body[magic.len()..]).ok()
}

/// Writes `value` to `path` atomically.
pub fn write<T: Serialize + ?Sized>(path: &Path, magic: &[u8; 8], value: &T) -> std::io::Result<()> {
    write_atomically(path, |file| {
        let mut out = BufWriter::with_capacity(1 << 20, Checksummed { inner: file, hasher: blake3::Hasher::new() });
        out.write_all(magic)?;
        let mut out = postcard::to_io(value, out).map_err(std::io::Error::other)?;
        out.flush()?;
        let Checksummed { inner, hasher } = out.into_inner().map_err(|e| e.into_error())?;
        inner.write_all(hasher.finalize().as_bytes())
    })
}

/// Writes `path` through `write` into a temporary file beside it (named after this process,
/// see [`remove_orphans`]), renamed into place once complete: a reader sees the old file or the
/// new one, never a part. On an error the temporary file is removed and the old file stays.
pub fn write_atomically(
    path: &Path,
    write: impl FnOnce(&mut std::fs::File) -> std::io::Result<()>,
) -> std::io::Result<()> {
    let tmp = write_aside(path, write)?;
    std::fs::rename(&tmp, path).inspect_err(|_| {
        let _ = std::fs::remove_file(&tmp);
    })
}

/// Like [`write_atomically`], without the rename: returns the complete temporary file, for a
/// caller that puts it in place later (or removes it).
pub fn write_aside(
    path: &Path,
    write: impl FnOnce(&mut std::fs::File) -> std::io::Result<()>,
) -> std::io::Result<std::path::PathBuf> {
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("file");
    let tmp = path.with_file_name(format!("{name}.tmp.{}", std::process::id()));
    let written = std::fs::File::create(&tmp).and_then(|mut file| write(&mut file));
    match written {
        Ok(()) => Ok(tmp),
        Err(e) => {
            let _ = std::fs::remove_file(&tmp);
            Err(e)
        }
    }
}

/// Removes the temporary files of [`write_atomically`] in `dir` that a killed process left
/// behind (their process is gone); a live process's are left alone.
pub fn remove_orphans(dir: &Path) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name.to_str().and_then(|n| n.rsplit_once(".tmp.")).and_then(|(_, pid)| pid.parse::<u32>().ok())
        else {
            continue;
        };
        if pid != std::process::id() && !process_alive(pid) {
            let _ = std::fs::remove_file(entry.path());
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

/// Passes bytes through to `inner`, hashing them on the way.
struct Checksummed<W> {
    inner: W,
    hasher: blake3::Hasher,
}

impl<W: Write> Write for Checksummed<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.hasher.update(&buf[..n]);
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}
