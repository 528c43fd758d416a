//! On-disk form of the symbol index: `.code-intel/index/symbols.bin`.
//!
//! Layout: an 8-byte magic with the format version, the postcard-encoded file list, and a
//! 32-byte blake3 checksum of everything before it. A file that fails any check is treated as
//! absent, so a corrupt or outdated index is rebuilt, never trusted.

use std::path::{Path, PathBuf};

use super::IndexedFile;

const MAGIC: &[u8; 8] = b"GCISYM05";
pub const INDEX_DIR: &str = ".code-intel/index";
const INDEX_FILE: &str = "symbols.bin";

pub fn index_dir(repo_root: &Path) -> PathBuf {
    repo_root.join(INDEX_DIR)
}

/// Loads the stored files, or None when there is no usable index.
pub fn load(repo_root: &Path) -> Option<Vec<IndexedFile>> {
    let path = index_dir(repo_root).join(INDEX_FILE);
    let bytes = std::fs::read(&path).ok()?;
    match decode(&bytes) {
        Some(files) => Some(files),
        None => {
            tracing::warn!("{}: corrupt or from another version; rebuilding", path.display());
            None
        }
    }
}

fn decode(bytes: &[u8]) -> Option<Vec<IndexedFile>> {
    crate::derived::decode(bytes, MAGIC)
}

/// Writes the index atomically (temporary file, then rename) so a killed process never leaves a
/// half-written index behind. The directory git-ignores itself.
///
/// The file is streamed, checksummed on the way, and not fsynced: it is derived data, and if a
/// power cut leaves it torn the checksum rejects it and it is rebuilt.
pub fn save(repo_root: &Path, files: &[IndexedFile]) -> std::io::Result<()> {
    let dir = index_dir(repo_root);
    crate::derived::ensure_ignored_dir(&dir)?;
    crate::derived::write(&dir.join(INDEX_FILE), MAGIC, files)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lang::Lang;
    use crate::syntax;

    fn sample() -> Vec<IndexedFile> {
        let src = b"fn alpha() { beta(); }\nfn beta() {}\n";
        vec![IndexedFile {
            rel: "src/lib.rs".into(),
            size: src.len() as u64,
            mtime_ns: 7,
            hash: *blake3::hash(src).as_bytes(),
            lang: Lang::Rust,
            syntax: syntax::extract(Lang::Rust, src),
        }]
    }

    #[test]
    fn round_trip() {
        let dir = tempfile::tempdir().unwrap();
        save(dir.path(), &sample()).unwrap();
        let loaded = load(dir.path()).unwrap();
        assert_eq!(loaded.len(), 1);
        assert_eq!(loaded[0].syntax, sample()[0].syntax);
        let ignore = std::fs::read_to_string(index_dir(dir.path()).join(".gitignore")).unwrap();
        assert!(ignore.lines().any(|l| l == "*"));
    }

    #[test]
    fn corruption_is_detected() {
        let dir = tempfile::tempdir().unwrap();
        save(dir.path(), &sample()).unwrap();
        let path = index_dir(dir.path()).join(INDEX_FILE);
        let mut bytes = std::fs::read(&path).unwrap();
        let mid = bytes.len() / 2;
        bytes[mid] ^= 0xff;
        std::fs::write(&path, &bytes).unwrap();
        assert!(load(dir.path()).is_none());
        std::fs::write(&path, b"garbage").unwrap();
        assert!(load(dir.path()).is_none());
    }
}
