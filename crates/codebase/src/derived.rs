//! Derived data on disk (the symbol index, the Forest): directories that git-ignore themselves,
//! and checksummed files: an 8-byte magic with the format version, a postcard body, and a
//! 32-byte blake3 checksum of everything before it.
//! Written through a temporary file and a rename, streamed and checksummed on the way, and not
//! fsynced: it is derived data, and a torn file fails its checksum and is rebuilt.

use std::io::{BufWriter, Write};
use std::path::Path;

use code_intel_files::Temp;

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
        discard(&tmp);
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

/// Writes `path` through `write` atomically (see [`code_intel_files`]; derived data names its
/// temporary files after the process, so concurrent writers never share one).
pub fn write_atomically(
    path: &Path,
    write: impl FnOnce(&mut std::fs::File) -> std::io::Result<()>,
) -> std::io::Result<()> {
    code_intel_files::write_atomically(path, Temp::PerProcess, write)
}

/// Like [`write_atomically`], without the rename: returns the complete temporary file, for a
/// caller that puts it in place later (or discards it).
pub fn write_aside(
    path: &Path,
    write: impl FnOnce(&mut std::fs::File) -> std::io::Result<()>,
) -> std::io::Result<std::path::PathBuf> {
    code_intel_files::write_aside(path, Temp::PerProcess, write)
}

pub use code_intel_files::{discard, process_alive, remove_orphans};

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
