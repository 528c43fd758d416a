//! Where the symbol index lives: `.code-intel/index/symbols.idx`, the base (the layout is in
//! [`super::format`]), and `overlay.idx`, the files changed since the base was written, both
//! mapped into memory rather than read; and `walk.stamp`, what a one-shot command checks to know
//! the index is fresh without walking the tree.
//!
//! Every file is written to a temporary file and renamed into place, so a killed process never
//! leaves a half-written file; none is fsynced (derived data: a torn file fails its checks and is
//! rebuilt). An overlay names the base it applies to by checksum, so a base replaced under it
//! (by a compaction, or another process) makes it ignored, never misread.

use std::io::BufWriter;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::format::{self, Backing, Previous, Source};
use super::{Overlay, OverlayMeta, SymbolIndex};

pub const INDEX_DIR: &str = ".code-intel/index";
const INDEX_FILE: &str = "symbols.idx";
const OVERLAY_FILE: &str = "overlay.idx";
/// The index format before it was mapped (postcard, read whole): removed when found.
const OLD_INDEX_FILE: &str = "symbols.bin";
const STAMP_FILE: &str = "walk.stamp";
const STAMP_MAGIC: &[u8; 8] = b"GCIWLK03";

pub fn index_dir(repo_root: &Path) -> PathBuf {
    repo_root.join(INDEX_DIR)
}

pub fn index_path(repo_root: &Path) -> PathBuf {
    index_dir(repo_root).join(INDEX_FILE)
}

pub fn overlay_path(repo_root: &Path) -> PathBuf {
    index_dir(repo_root).join(OVERLAY_FILE)
}

/// Maps a stored index file, or None when there is none or it fails a check.
fn map(path: &Path) -> Option<format::Opened> {
    let file = std::fs::File::open(path).ok()?;
    // SAFETY: the file is only ever replaced by a rename, never written in place, so the mapped
    // bytes do not change under us; a process that truncated it by hand would get a SIGBUS, as
    // with any mapped file.
    let map = unsafe { memmap2::Mmap::map(&file) }.ok()?;
    let opened = format::open(Backing::Mapped(map));
    if opened.is_none() {
        tracing::warn!("{}: corrupt or from another version; rebuilding", path.display());
    }
    opened
}

/// An overlay's bytes opened, with its description.
fn overlay_of(opened: format::Opened) -> Option<Overlay> {
    let meta: OverlayMeta = postcard::from_bytes(opened.extra()).ok()?;
    Some(Overlay { opened, meta })
}

/// The checksum the stored base's bytes carry (read from its first bytes, not checked), or None
/// when there is none.
pub fn stored_base_checksum(repo_root: &Path) -> Option<[u8; 32]> {
    use std::io::Read;
    let mut head = [0u8; 40];
    std::fs::File::open(index_path(repo_root)).and_then(|mut f| f.read_exact(&mut head)).ok()?;
    head[8..].try_into().ok()
}

/// Maps the stored index: the base, and the overlay when it applies to that base.
pub fn load(repo_root: &Path) -> Option<SymbolIndex> {
    let base = map(&index_path(repo_root))?;
    let overlay = map(&overlay_path(repo_root)).and_then(overlay_of);
    Some(SymbolIndex::with_overlay(base, overlay))
}

/// Writes an index of `files` to `path` (atomically) and maps it; when it cannot be stored, it
/// is built in memory instead, and the error is logged.
fn write_mapped(path: &Path, files: &[Source], previous: &[Previous], extra: &[u8]) -> Option<format::Opened> {
    let dir = path.parent().unwrap_or(path);
    crate::derived::remove_orphans(dir);
    let written = crate::derived::ensure_ignored_dir(dir).and_then(|()| {
        crate::derived::write_atomically(path, |file| {
            let mut out = BufWriter::with_capacity(1 << 20, file);
            format::write(&mut out, files, previous, extra)?;
            out.into_inner().map_err(|e| e.into_error())?;
            Ok(())
        })
    });
    match written {
        Ok(()) => {
            if let Some(opened) = map(path) {
                return Some(opened);
            }
            tracing::warn!("{} just written does not read back; keeping it in memory", path.display());
        }
        Err(e) => tracing::warn!("could not save {}: {e}", path.display()),
    }
    let mut buffer = std::io::Cursor::new(Vec::new());
    match format::write(&mut buffer, files, previous, extra) {
        Ok(()) => format::open(Backing::Owned(buffer.into_inner())),
        Err(e) => {
            tracing::warn!("could not build the symbol index: {e}");
            None
        }
    }
}

/// Writes a whole index of `files` (no overlay) and maps it. `previous` supplies the kept
/// files' blobs and posting lists. An overlay left on disk for the replaced base is removed.
pub fn save(repo_root: &Path, files: &[Source], previous: &[Previous]) -> SymbolIndex {
    let path = index_path(repo_root);
    let opened = write_mapped(&path, files, previous, &[]);
    crate::derived::discard(index_dir(repo_root).join(OLD_INDEX_FILE));
    remove_stale_overlay(repo_root);
    opened.map(|base| SymbolIndex::with_overlay(base, None)).unwrap_or_default()
}

/// Writes an overlay of `files` (with `meta`, what the base lost) and maps it. With nothing to
/// say (no file changed, touched or removed since the base), the overlay file is removed and
/// there is no overlay. Kept in memory when it cannot be stored; an error when it cannot be
/// built at all.
pub fn write_overlay(
    repo_root: &Path,
    files: &[Source],
    previous: &[Previous],
    meta: &OverlayMeta,
) -> std::io::Result<Option<Overlay>> {
    let path = overlay_path(repo_root);
    if files.is_empty() && meta.removed.is_empty() && meta.touched.is_empty() {
        if let Err(e) = std::fs::remove_file(&path)
            && e.kind() != std::io::ErrorKind::NotFound
        {
            tracing::warn!("could not remove {}: {e}", path.display());
        }
        return Ok(None);
    }
    let extra = postcard::to_allocvec(meta).map_err(std::io::Error::other)?;
    let opened = write_mapped(&path, files, previous, &extra)
        .ok_or_else(|| std::io::Error::other("the overlay could not be built"))?;
    overlay_of(opened).map(Some).ok_or_else(|| std::io::Error::other("the overlay's description does not read back"))
}

/// Removes the overlay file unless it applies to the stored base.
fn remove_stale_overlay(repo_root: &Path) {
    let path = overlay_path(repo_root);
    if !path.exists() {
        return;
    }
    let base = map(&index_path(repo_root)).map(|b| super::opened_checksum(&b));
    let applies = map(&path).and_then(overlay_of).is_some_and(|o| Some(o.meta.base) == base);
    if !applies {
        crate::derived::discard(&path);
    }
}

/// Puts a base written aside ([`crate::derived::write_aside`]) in place of the stored index
/// (its overlay goes with it) and maps it.
pub fn install_base(repo_root: &Path, aside: &Path) -> std::io::Result<SymbolIndex> {
    std::fs::rename(aside, index_path(repo_root)).inspect_err(|_| {
        crate::derived::discard(aside);
    })?;
    remove_stale_overlay(repo_root);
    load(repo_root).ok_or_else(|| std::io::Error::other("the compacted index does not read back"))
}

/// What the last walk saw, so a one-shot command can tell the index is fresh by looking at
/// each directory and file once (no directory listing, no ignore rules).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct WalkStamp {
    /// The index this stamp vouches for: the blake3 of its header and tables.
    pub index_checksum: [u8; 32],
    /// Directories the walk entered (repository-relative, `""` for the root), with their
    /// modification times (`i64::MIN`: not trusted, list it again).
    pub dirs: Vec<(String, i64)>,
    /// The ignore files that rule the walk (those present), `info/exclude`, the config, and the
    /// source files it passed over, with their modification times (-1: absent): when one
    /// changes, the tree is walked again.
    pub paths: Vec<(String, i64)>,
    /// What the walk passed over, as a refresh reports it: too large (with sizes), binary.
    pub too_large: Vec<(String, u64)>,
    pub binary: Vec<String>,
    /// Directories passed over because they hold `.git`: when one loses it, the tree is walked
    /// again.
    pub nested: Vec<String>,
    /// Source files that could not be read: tried again when they can be opened.
    pub unreadable: Vec<String>,
}

pub fn load_stamp(repo_root: &Path) -> Option<WalkStamp> {
    let bytes = std::fs::read(index_dir(repo_root).join(STAMP_FILE)).ok()?;
    crate::derived::decode(&bytes, STAMP_MAGIC)
}

/// Points the stored stamp, which must be `old`, at the index with checksum `index_checksum`:
/// what a refresh that changed only files does (the rest of the stamp holds as it was). Written
/// in place, not through a new file (renaming a new file over the old one makes the file system
/// flush it, a few ms): the checksum in the body and the file's trailer. A reader that catches
/// it half-way, or a kill between the two writes, leaves a stamp whose trailer does not match:
/// it is not trusted, and the next refresh walks the tree. Anything unexpected on disk: the
/// whole stamp is written instead.
pub fn repoint_stamp(repo_root: &Path, old: &WalkStamp, index_checksum: [u8; 32]) {
    use std::os::unix::fs::FileExt;
    let path = index_dir(repo_root).join(STAMP_FILE);
    let patched = (|| -> std::io::Result<bool> {
        let file = std::fs::OpenOptions::new().read(true).write(true).open(&path)?;
        let mut bytes = Vec::new();
        std::io::Read::read_to_end(&mut &file, &mut bytes)?;
        let body_end = bytes.len().saturating_sub(32);
        // The body starts with the magic and then the checksum it vouches for (postcard writes
        // a byte array as its bytes).
        let in_place = crate::derived::decode::<WalkStamp>(&bytes, STAMP_MAGIC).is_some_and(|on_disk| on_disk == *old)
            && bytes.get(STAMP_MAGIC.len()..STAMP_MAGIC.len() + 32) == Some(&old.index_checksum[..]);
        if !in_place {
            return Ok(false);
        }
        bytes[STAMP_MAGIC.len()..STAMP_MAGIC.len() + 32].copy_from_slice(&index_checksum);
        let trailer = *blake3::hash(&bytes[..body_end]).as_bytes();
        file.write_all_at(&index_checksum, STAMP_MAGIC.len() as u64)?;
        file.write_all_at(&trailer, body_end as u64)?;
        Ok(true)
    })();
    match patched {
        Ok(true) => {}
        Ok(false) => save_stamp(repo_root, &WalkStamp { index_checksum, ..old.clone() }),
        Err(e) => {
            tracing::debug!("walk stamp: {e}; writing it whole");
            save_stamp(repo_root, &WalkStamp { index_checksum, ..old.clone() });
        }
    }
}

pub fn save_stamp(repo_root: &Path, stamp: &WalkStamp) {
    let dir = index_dir(repo_root);
    if let Err(e) = crate::derived::ensure_ignored_dir(&dir)
        .and_then(|()| crate::derived::write(&dir.join(STAMP_FILE), STAMP_MAGIC, stamp))
    {
        tracing::warn!("could not save the walk stamp: {e}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::index::IndexedFile;
    use crate::lang::Lang;
    use crate::syntax;

    fn sample() -> Vec<IndexedFile> {
        let a = b"fn alpha() { beta(); }\nfn beta() {}\n";
        let b = b"fn gamma() { alpha(); }\n";
        [("src/lib.rs", &a[..]), ("src/other.rs", &b[..])]
            .into_iter()
            .map(|(rel, src)| IndexedFile {
                rel: rel.into(),
                size: src.len() as u64,
                mtime_ns: 7,
                hash: *blake3::hash(src).as_bytes(),
                lang: Lang::Rust,
                syntax: syntax::extract(Lang::Rust, src),
            })
            .collect()
    }

    fn stored(dir: &Path) -> SymbolIndex {
        let files = sample();
        let sources: Vec<Source> = files.iter().map(IndexedFile::as_source).collect();
        save(dir, &sources, &[])
    }

    #[test]
    fn a_stamp_repointed_in_place_reads_back_with_the_new_checksum() {
        let dir = tempfile::tempdir().unwrap();
        let stamp = WalkStamp {
            index_checksum: [7; 32],
            dirs: vec![(String::new(), 5), ("src".into(), 9)],
            paths: vec![(".gitignore".into(), 3)],
            binary: vec!["a.bin".into()],
            ..WalkStamp::default()
        };
        save_stamp(dir.path(), &stamp);
        let stamped = std::fs::metadata(index_dir(dir.path()).join(STAMP_FILE)).unwrap();
        repoint_stamp(dir.path(), &stamp, [9; 32]);
        assert_eq!(load_stamp(dir.path()), Some(WalkStamp { index_checksum: [9; 32], ..stamp.clone() }));
        // In place: the same file.
        let repointed = std::fs::metadata(index_dir(dir.path()).join(STAMP_FILE)).unwrap();
        assert_eq!(std::os::unix::fs::MetadataExt::ino(&repointed), std::os::unix::fs::MetadataExt::ino(&stamped));
        // Not the stamp it expects: written whole.
        repoint_stamp(dir.path(), &stamp, [1; 32]);
        assert_eq!(load_stamp(dir.path()), Some(WalkStamp { index_checksum: [1; 32], ..stamp.clone() }));
    }

    #[test]
    fn round_trip_through_the_mapped_file() {
        let dir = tempfile::tempdir().unwrap();
        stored(dir.path());
        let loaded = load(dir.path()).unwrap();
        assert_eq!(loaded.file_count(), 2);
        let file = loaded.file("src/lib.rs").unwrap();
        assert_eq!(file.outline.symbols, sample()[0].syntax.symbols);
        assert_eq!(file.outline.imports, sample()[0].syntax.imports);
        assert_eq!(loaded.definitions_named("alpha"), vec![(0, 0)]);
        assert_eq!(loaded.symbol((0, 1)).unwrap().1, sample()[0].syntax.symbols[1]);
        // gamma calls alpha in the other file; alpha's own definition is not a use.
        let uses = loaded.uses("alpha");
        assert_eq!(uses.len(), 1);
        assert_eq!((uses[0].file, uses[0].line, uses[0].enclosing), (1, 1, Some(0)));
        assert_eq!(loaded.symbol_count(), 3);
        let ignore = std::fs::read_to_string(index_dir(dir.path()).join(".gitignore")).unwrap();
        assert!(ignore.lines().any(|l| l == "*"));
    }

    #[test]
    fn a_torn_or_foreign_file_is_never_trusted() {
        let dir = tempfile::tempdir().unwrap();
        stored(dir.path());
        let path = index_path(dir.path());
        let good = std::fs::read(&path).unwrap();
        // Torn: every shorter length is refused.
        for cut in [0, 8, 40, format::HEADER_LEN, good.len() / 2, good.len() - 1] {
            std::fs::write(&path, &good[..cut]).unwrap();
            assert!(load(dir.path()).is_none(), "cut at {cut}");
        }
        // Foreign: another format's magic, or garbage.
        let mut foreign = good.clone();
        foreign[..8].copy_from_slice(b"GCISYM05");
        std::fs::write(&path, &foreign).unwrap();
        assert!(load(dir.path()).is_none());
        std::fs::write(&path, b"garbage").unwrap();
        assert!(load(dir.path()).is_none());
        // A flipped byte in the checksummed tables is refused at once.
        let mut flipped = good.clone();
        let last = flipped.len() - 3;
        flipped[last] ^= 0xff;
        std::fs::write(&path, &flipped).unwrap();
        assert!(load(dir.path()).is_none());
        // A flipped byte in a posting list or a blob is found when read, and marks the index
        // corrupt (the workspace then rebuilds it).
        for at in format::HEADER_LEN..format::HEADER_LEN + 64 {
            let mut flipped = good.clone();
            flipped[at] ^= 0x55;
            std::fs::write(&path, &flipped).unwrap();
            let index = load(dir.path()).expect("the tables still check out");
            let _ = index.definitions_named("alpha");
            let _ = index.uses("beta");
            let _ = index.definitions_named("gamma");
            let _ = index.files().count();
            assert!(index.is_corrupt(), "byte {at} flipped went unnoticed");
        }
        // A flipped byte in a file's symbols or their strings is found when that symbol is read
        // in place, and when the file is decoded whole.
        let opened = load(dir.path());
        let (blobs, symbols_len) =
            opened.as_ref().and_then(|i| i.parts().0).map(|o| (o.header.blobs, o.records[0].rest)).unwrap();
        drop(opened);
        for at in blobs.0 as usize..blobs.0 as usize + symbols_len as usize {
            let mut flipped = good.clone();
            flipped[at] ^= 0x55;
            std::fs::write(&path, &flipped).unwrap();
            let index = load(dir.path()).expect("the tables still check out");
            let read = [index.symbol((0, 0)), index.symbol((0, 1))];
            assert!(index.is_corrupt(), "byte {at} of a symbol flipped went unnoticed");
            assert!(read.iter().any(Option::is_none));
            let index = load(dir.path()).unwrap();
            let _ = index.files().count();
            assert!(index.is_corrupt(), "byte {at} of a blob flipped went unnoticed by a decode");
        }
    }
}
