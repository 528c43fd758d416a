//! Folding the overlay back into the base.
//!
//! An overlay makes an edit cheap to index (only the changed files are written), and a lookup
//! merges it with the base. When it grows past [`due`]'s threshold, the live view is written as
//! a new base: beside the index first, then renamed into place, so a reader keeps reading the
//! files it mapped and never waits for the write. Nothing is parsed: every file's blob and
//! postings are copied from the base or the overlay.
//!
//! One compaction runs at a time per repository ([`Lock`]); a killed one leaves its temporary
//! file (removed by the next writer) and the index as it was.

use std::path::{Path, PathBuf};

use super::format::{self, Previous, Source};
use super::{Part, SymbolIndex, store};

/// The overlay's size, in stored bytes, past which it is folded into the base: an eighth of the
/// base, within these bounds. Each refresh rewrites the overlay, so it stays small.
const MIN_OVERLAY_BYTES: u64 = 256 << 10;
const MAX_OVERLAY_BYTES: u64 = 16 << 20;

/// True when `index`'s overlay is large enough to fold into its base.
pub fn due(index: &SymbolIndex) -> bool {
    let (files, bytes) = index.overlay_size();
    files > 0 && bytes > (index.base_size() / 8).clamp(MIN_OVERLAY_BYTES, MAX_OVERLAY_BYTES)
}

/// Writes the live view of `index` as one base, beside the stored index (not yet in place:
/// [`store::install_base`] does that). Returns the file written.
pub fn write_aside(repo_root: &Path, index: &SymbolIndex) -> std::io::Result<PathBuf> {
    let (Some(base), overlay) = index.parts() else {
        return Err(std::io::Error::other("no stored base to compact"));
    };
    let mut base_ids = vec![None; base.records.len()];
    let mut overlay_ids = vec![None; overlay.map_or(0, |o| o.opened.records.len())];
    let mut files = Vec::with_capacity(index.file_count());
    for live in 0..index.file_count() as u32 {
        let (Some((part, id)), Some(meta)) = (index.location(live), index.meta(live)) else {
            return Err(std::io::Error::other("a live file without its record"));
        };
        let (opened, from, ids) = match (part, overlay) {
            (Part::Base, _) => (base, 0, &mut base_ids),
            (Part::Overlay, Some(o)) => (&o.opened, 1, &mut overlay_ids),
            (Part::Overlay, None) => return Err(std::io::Error::other("an overlay file without an overlay")),
        };
        let record = opened.records[id as usize];
        ids[id as usize] = Some(live);
        files.push(Source::Kept { record: format::Record { mtime_ns: meta.mtime_ns, ..record }, rel: meta.rel, from });
    }
    let mut previous = vec![Previous { opened: base, new_ids: &base_ids }];
    if let Some(o) = overlay {
        previous.push(Previous { opened: &o.opened, new_ids: &overlay_ids });
    }
    let dir = store::index_dir(repo_root);
    crate::derived::write_aside(&dir.join("compacted.idx"), |file| {
        let mut out = std::io::BufWriter::with_capacity(1 << 20, file);
        format::write(&mut out, &files, &previous, &[])?;
        out.into_inner().map_err(|e| e.into_error())?;
        Ok(())
    })
}

/// Compacts `index` now: writes its live view as the base, puts it in place, and carries the
/// walk stamp over to it (what the stamp vouched for is unchanged). Returns the new index.
pub fn compact(repo_root: &Path, index: &SymbolIndex) -> std::io::Result<SymbolIndex> {
    let aside = write_aside(repo_root, index)?;
    install(repo_root, &aside, index.checksum())
}

/// Puts a base written by [`write_aside`] from the index whose checksum was `absorbed` in
/// place, and moves the walk stamp from that index to it.
pub fn install(repo_root: &Path, aside: &Path, absorbed: [u8; 32]) -> std::io::Result<SymbolIndex> {
    let index = store::install_base(repo_root, aside)?;
    if let Some(mut stamp) = store::load_stamp(repo_root)
        && stamp.index_checksum == absorbed
    {
        stamp.index_checksum = index.checksum();
        store::save_stamp(repo_root, &stamp);
    }
    Ok(index)
}

/// Held while a compaction runs: an advisory lock (`flock`) on `.code-intel/index/compact.lock`,
/// which also holds the holder's process id for a person to read. The system releases it when
/// its process ends, however it ends; the file itself stays.
pub struct Lock {
    _file: std::fs::File,
}

impl Lock {
    /// The lock, or None while another process (or another thread of this one) holds it.
    pub fn take(repo_root: &Path) -> Option<Lock> {
        let dir = store::index_dir(repo_root);
        let opened = crate::derived::ensure_ignored_dir(&dir).and_then(|()| {
            std::fs::OpenOptions::new().read(true).write(true).create(true).truncate(false).open(dir.join(LOCK_FILE))
        });
        let mut file = match opened {
            Ok(file) => file,
            Err(e) => {
                tracing::debug!("compaction lock: {e}");
                return None;
            }
        };
        match file.try_lock() {
            Ok(()) => {
                use std::io::{Seek, Write};
                // The process id is for a person to read; the lock is the flock.
                if let Err(e) =
                    file.set_len(0).and_then(|()| file.rewind()).and_then(|()| write!(file, "{}", std::process::id()))
                {
                    tracing::debug!("compaction lock: cannot write the holder's id: {e}");
                }
                Some(Lock { _file: file })
            }
            Err(std::fs::TryLockError::WouldBlock) => None,
            Err(std::fs::TryLockError::Error(e)) => {
                tracing::debug!("compaction lock: {e}");
                None
            }
        }
    }
}

const LOCK_FILE: &str = "compact.lock";
