//! The persistent symbol index: every parsed file's definitions, imports and identifier
//! occurrences, keyed by blake3 content fingerprints and refreshed incrementally.
//!
//! - [`store`] reads and writes it under `.code-intel/index/` (git-ignored).
//! - [`refresh`] brings it up to date with the work tree, re-parsing only changed files.
//! - This module holds the in-memory form and its lookups.

mod build;
pub mod compact;
mod delta;
pub mod format;
pub mod refresh;
mod stamp;
pub mod store;

#[cfg(test)]
mod overlay_tests;

use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use serde::{Deserialize, Serialize};

use crate::lang::Lang;
use crate::syntax::{FileSyntax, Symbol};

pub use format::{NameUse, Outline};

/// One parsed source file, on its way into the index.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct IndexedFile {
    /// Repository-relative, `/`-separated.
    pub rel: String,
    pub size: u64,
    pub mtime_ns: i64,
    pub hash: [u8; 32],
    pub lang: Lang,
    pub syntax: FileSyntax,
}

/// (file index, symbol index within the file)
pub type SymbolRef = (u32, u32);

/// A file as the index keeps it: its definitions, imports and flags (its identifier uses are in
/// the posting lists: [`SymbolIndex::uses`]).
pub struct StoredFile {
    pub rel: String,
    pub lang: Lang,
    pub outline: Outline,
}

/// The symbol index, read in place from its stored bytes ([`mod@format`]): a memory map of
/// `.code-intel/index/symbols.idx` (the base), or a buffer when it was not stored, and an
/// optional overlay (`overlay.idx`, [`Overlay`]) holding the files changed since the base was
/// written. Lookups see one index, the live view: the base's files minus those the overlay
/// removes or replaces, plus the overlay's, numbered in path order as a rebuild would number
/// them. A file's syntax is decoded the first time a lookup needs it, so a lookup touches only
/// the files it answers from.
#[derive(Default)]
pub struct SymbolIndex {
    base: Option<format::Opened>,
    overlay: Option<Overlay>,
    /// With an overlay: where each live file is stored, in path order. Empty without one (the
    /// live ids are then the base's own).
    live: Vec<Located>,
    /// With an overlay: each base file's live id, or [`HIDDEN`] when removed or replaced.
    base_live: Vec<u32>,
    /// With an overlay: each overlay file's live id.
    overlay_live: Vec<u32>,
    /// Base files whose modification time moved without their content changing (base id →
    /// time).
    touched: std::collections::HashMap<u32, i64>,
    n_symbols: u64,
    decoded: Box<[OnceLock<StoredFile>]>,
    /// Stored bytes of the files decoded so far (what [`SymbolIndex::trim`] bounds).
    decoded_bytes: AtomicUsize,
    /// A posting list or a file failed its check while being read: the index must be rebuilt.
    corrupt: AtomicBool,
}

/// Files changed since the base was written, stored as an index of their own, with what the
/// base loses: the files removed since, and those only touched (same content, new time).
pub struct Overlay {
    pub opened: format::Opened,
    pub meta: OverlayMeta,
}

/// An overlay's description, stored in its checksummed tables.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct OverlayMeta {
    /// The checksum of the base it applies to: with any other base it is ignored.
    pub base: [u8; 32],
    /// Base files no longer there, sorted.
    pub removed: Vec<String>,
    /// Base files with the same content and a new modification time, sorted by path.
    pub touched: Vec<(String, i64)>,
}

/// Which stored index a live file is in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Part {
    Base,
    Overlay,
}

#[derive(Debug, Clone, Copy)]
struct Located {
    part: Part,
    id: u32,
}

/// A base file the overlay removes or replaces.
const HIDDEN: u32 = u32::MAX;

impl std::fmt::Debug for SymbolIndex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SymbolIndex")
            .field("files", &self.file_count())
            .field("overlay_files", &self.overlay.as_ref().map_or(0, |o| o.opened.records.len()))
            .finish()
    }
}

/// A file's stored facts, without its syntax.
#[derive(Debug, Clone, Copy)]
pub struct FileMeta<'a> {
    pub rel: &'a str,
    pub size: u64,
    pub mtime_ns: i64,
    pub hash: [u8; 32],
    pub lang: Lang,
}

impl SymbolIndex {
    /// An index of `files`, in memory (the fast path's, and tests').
    pub fn from_files(mut files: Vec<IndexedFile>) -> SymbolIndex {
        files.sort_by(|a, b| a.rel.cmp(&b.rel));
        files.dedup_by(|a, b| a.rel == b.rel);
        let sources: Vec<format::Source> = files.iter().map(IndexedFile::as_source).collect();
        let mut buffer = std::io::Cursor::new(Vec::new());
        if let Err(e) = format::write(&mut buffer, &sources, &[], &[]) {
            tracing::warn!("could not build the index in memory: {e}");
            return SymbolIndex::default();
        }
        drop(sources);
        let Some(index) = SymbolIndex::open(format::Backing::Owned(buffer.into_inner())) else {
            return SymbolIndex::default();
        };
        // The files are at hand: no need to decode them again.
        for (cell, file) in index.decoded.iter().zip(files) {
            // Cells made just now are empty: `set` cannot find one filled.
            if cell.set(StoredFile { rel: file.rel, lang: file.lang, outline: Outline::from(file.syntax) }).is_err() {
                tracing::debug!("a decoded file was filled twice");
            }
        }
        index
    }

    /// Opens stored bytes as a base without overlay; None when they fail any check.
    pub fn open(backing: format::Backing) -> Option<SymbolIndex> {
        Some(SymbolIndex::with_overlay(format::open(backing)?, None))
    }

    /// The live view of `base` with `overlay` applied (an overlay made for another base is
    /// ignored: its checksum names the base it applies to).
    pub fn with_overlay(base: format::Opened, overlay: Option<Overlay>) -> SymbolIndex {
        let base_sum = opened_checksum(&base);
        let overlay = overlay.filter(|o| o.meta.base == base_sum);
        let mut index = SymbolIndex { n_symbols: base.header.n_symbols, ..SymbolIndex::default() };
        if let Some(o) = &overlay {
            index.build_view(&base, o);
        }
        let n = if overlay.is_some() { index.live.len() } else { base.records.len() };
        index.decoded = (0..n).map(|_| OnceLock::new()).collect();
        index.base = Some(base);
        index.overlay = overlay;
        index
    }

    /// Merges the base's and the overlay's files in path order.
    fn build_view(&mut self, base: &format::Opened, overlay: &Overlay) {
        let o = &overlay.opened;
        let removed: std::collections::HashSet<&str> = overlay.meta.removed.iter().map(String::as_str).collect();
        let mut live = Vec::with_capacity(base.records.len() + o.records.len());
        let mut base_live = vec![HIDDEN; base.records.len()];
        let mut overlay_live = Vec::with_capacity(o.records.len());
        let mut n_symbols = o.header.n_symbols;
        let (mut i, mut j) = (0usize, 0usize);
        while i < base.records.len() || j < o.records.len() {
            let b = base.records.get(i).map(|r| base.rel(r));
            let v = o.records.get(j).map(|r| o.rel(r));
            let take_base = match (b, v) {
                (Some(b), Some(v)) => b < v,
                (Some(_), None) => true,
                _ => false,
            };
            if take_base {
                if !removed.contains(b.unwrap_or("")) {
                    base_live[i] = live.len() as u32;
                    live.push(Located { part: Part::Base, id: i as u32 });
                    n_symbols += u64::from(base.records[i].symbols);
                }
                i += 1;
            } else {
                // The overlay's version replaces the base's.
                if b == v {
                    i += 1;
                }
                overlay_live.push(live.len() as u32);
                live.push(Located { part: Part::Overlay, id: j as u32 });
                j += 1;
            }
        }
        for (rel, mtime) in &overlay.meta.touched {
            if let Ok(id) = base.records.binary_search_by(|r| base.rel(r).cmp(rel)) {
                self.touched.insert(id as u32, *mtime);
            }
        }
        self.live = live;
        self.base_live = base_live;
        self.overlay_live = overlay_live;
        self.n_symbols = n_symbols;
    }

    /// An empty index that says it must be rebuilt (what a refresh returns when it could not
    /// store its result).
    pub fn needs_rebuild() -> SymbolIndex {
        let index = SymbolIndex::default();
        index.corrupt.store(true, Ordering::Relaxed);
        index
    }

    /// Live file `index`'s stored record (its time as the live view has it) and path.
    pub(crate) fn stored(&self, index: u32) -> Option<(Part, u32, format::Record, &str)> {
        let (part, id) = self.location(index)?;
        let meta = self.meta(index)?;
        let (_, _, record) = self.locate(index)?;
        Some((part, id, format::Record { mtime_ns: meta.mtime_ns, ..*record }, meta.rel))
    }

    /// The base's file `id`, as stored there.
    pub(crate) fn base_record(&self, id: u32) -> Option<(format::Record, &str)> {
        let b = self.base.as_ref()?;
        let r = b.records.get(id as usize)?;
        Some((*r, b.rel(r)))
    }

    /// The base's version of `rel` (hidden by the overlay or not): its id and stored facts.
    pub fn base_meta(&self, rel: &str) -> Option<(u32, FileMeta<'_>)> {
        let b = self.base.as_ref()?;
        let id = b.records.binary_search_by(|r| b.rel(r).cmp(rel)).ok()?;
        let r = &b.records[id];
        Some((id as u32, FileMeta { rel: b.rel(r), size: r.size, mtime_ns: r.mtime_ns, hash: r.hash, lang: r.lang }))
    }

    /// The stored base and overlay, to write the next index from.
    pub(crate) fn parts(&self) -> (Option<&format::Opened>, Option<&Overlay>) {
        (self.base.as_ref(), self.overlay.as_ref())
    }

    /// Takes the base back (to reuse its mapping under a new overlay).
    pub(crate) fn into_base(self) -> Option<format::Opened> {
        self.base
    }

    /// Where live file `index` is stored.
    pub fn location(&self, index: u32) -> Option<(Part, u32)> {
        if self.overlay.is_none() {
            return ((index as usize) < self.file_count()).then_some((Part::Base, index));
        }
        self.live.get(index as usize).map(|l| (l.part, l.id))
    }

    fn part(&self, part: Part) -> Option<&format::Opened> {
        match part {
            Part::Base => self.base.as_ref(),
            Part::Overlay => self.overlay.as_ref().map(|o| &o.opened),
        }
    }

    fn locate(&self, index: u32) -> Option<(Part, &format::Opened, &format::Record)> {
        let (part, id) = self.location(index)?;
        let o = self.part(part)?;
        Some((part, o, o.records.get(id as usize)?))
    }

    /// The live id of a stored file: `Some(None)` when the overlay hides it, None when there is
    /// no such file (a corrupt posting).
    fn live_id(&self, part: Part, id: u32) -> Option<Option<u32>> {
        match (part, &self.overlay) {
            (Part::Base, None) => ((id as usize) < self.file_count()).then_some(Some(id)),
            (Part::Base, Some(_)) => self.base_live.get(id as usize).map(|&l| (l != HIDDEN).then_some(l)),
            (Part::Overlay, Some(_)) => self.overlay_live.get(id as usize).map(|&l| Some(l)),
            (Part::Overlay, None) => None,
        }
    }

    /// The live id of `rel`, by binary search over the live files.
    pub(crate) fn position(&self, rel: &str) -> Option<u32> {
        let (mut lo, mut hi) = (0u32, self.file_count() as u32);
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            let here = self.locate(mid).map(|(_, o, r)| o.rel(r))?;
            match here.cmp(rel) {
                std::cmp::Ordering::Less => lo = mid + 1,
                std::cmp::Ordering::Greater => hi = mid,
                std::cmp::Ordering::Equal => return Some(mid),
            }
        }
        None
    }

    /// True when a check failed while reading: what was answered may be incomplete, and the
    /// index must be rebuilt.
    pub fn is_corrupt(&self) -> bool {
        self.corrupt.load(Ordering::Relaxed)
    }

    fn mark_corrupt(&self, what: &str) {
        if !self.corrupt.swap(true, Ordering::Relaxed) {
            tracing::warn!("the symbol index is corrupt ({what}); rebuilding it");
        }
    }

    /// The stored checksum: the base's, or with an overlay the overlay's (which covers the
    /// base's, named in its description); zeros for an empty index.
    pub fn checksum(&self) -> [u8; 32] {
        match (&self.overlay, &self.base) {
            (Some(o), _) => opened_checksum(&o.opened),
            (None, Some(b)) => opened_checksum(b),
            (None, None) => [0; 32],
        }
    }

    pub fn file_count(&self) -> usize {
        if self.overlay.is_some() { self.live.len() } else { self.base.as_ref().map_or(0, |o| o.records.len()) }
    }

    /// How many files the overlay holds, and its stored size in bytes (0, 0 without one).
    pub fn overlay_size(&self) -> (usize, u64) {
        self.overlay.as_ref().map_or((0, 0), |o| {
            (o.opened.records.len() + o.meta.removed.len() + o.meta.touched.len(), o.opened.bytes().len() as u64)
        })
    }

    /// The base's stored size in bytes.
    pub fn base_size(&self) -> u64 {
        self.base.as_ref().map_or(0, |b| b.bytes().len() as u64)
    }

    /// Each file's stored facts, in path order, without decoding anything.
    pub fn metas(&self) -> impl Iterator<Item = FileMeta<'_>> + '_ {
        (0..self.file_count() as u32).filter_map(|i| self.meta(i))
    }

    /// Every file, decoding each as it comes.
    pub fn files(&self) -> impl Iterator<Item = &StoredFile> + '_ {
        (0..self.file_count() as u32).map(|i| self.file_at(i))
    }

    pub fn file(&self, rel: &str) -> Option<&StoredFile> {
        Some(self.file_at(self.position(rel)?))
    }

    /// The file with id `index` (ids come from this index's lookups).
    pub fn file_at(&self, index: u32) -> &StoredFile {
        self.decoded[index as usize].get_or_init(|| self.decode(index))
    }

    /// Releases the mapped pages a lookup read, and forgets the decoded files once they came
    /// from more than `max_bytes` of stored syntax, handing the memory back to the system: a long-running server keeps what repeated
    /// lookups need, not every file it ever read.
    pub fn trim(&mut self, max_bytes: usize) {
        // The pages a lookup read are the page cache's, not ours to keep.
        for part in [Part::Base, Part::Overlay] {
            if let Some(o) = self.part(part) {
                o.release_pages();
            }
        }
        if *self.decoded_bytes.get_mut() <= max_bytes {
            return;
        }
        for cell in self.decoded.iter_mut() {
            cell.take();
        }
        *self.decoded_bytes.get_mut() = 0;
        release_free_memory();
    }

    fn decode(&self, index: u32) -> StoredFile {
        let Some((_, o, r)) = self.locate(index) else {
            self.mark_corrupt("a file id out of range");
            return StoredFile { rel: String::new(), lang: Lang::ALL[0], outline: Outline::default() };
        };
        self.decoded_bytes.fetch_add(r.blob.1 as usize, Ordering::Relaxed);
        let outline = match o.blob(r).and_then(|b| format::decode_outline(b, r)) {
            Some(outline) => outline,
            None => {
                self.mark_corrupt(o.rel(r));
                Outline::default()
            }
        };
        StoredFile { rel: o.rel(r).to_owned(), lang: r.lang, outline }
    }

    /// A definition, read in place (nothing else of its file is decoded), with its file's
    /// facts; None (and the index marked corrupt) when it fails its check.
    pub fn symbol(&self, r: SymbolRef) -> Option<(FileMeta<'_>, Symbol)> {
        let found = self.locate(r.0).and_then(|(_, o, record)| Some((self.meta(r.0)?, o.symbol(record, r.1)?)));
        if found.is_none() {
            self.mark_corrupt("a symbol record");
        }
        found
    }

    pub fn symbol_count(&self) -> usize {
        self.n_symbols as usize
    }

    /// The posting lists of `key` in the base and the overlay, with the part each comes from.
    fn postings(&self, key: &str) -> Vec<(Part, format::Postings<'_>)> {
        let mut lists = Vec::with_capacity(2);
        for part in [Part::Base, Part::Overlay] {
            let Some(o) = self.part(part) else { continue };
            let Some(offset) = o.fst.get(key) else { continue };
            match o.postings(offset) {
                Some(list) => lists.push((part, list)),
                None => self.mark_corrupt(key),
            }
        }
        lists
    }

    /// Definitions named exactly `name`, in file order.
    pub fn definitions_named(&self, name: &str) -> Vec<SymbolRef> {
        let lists = self.postings(name);
        let mut out = Vec::new();
        for (part, list) in &lists {
            self.map_pairs(*part, list.defs(), &mut out);
        }
        if lists.len() > 1 || self.overlay.is_some() {
            out.sort_unstable();
        }
        out
    }

    /// Definitions whose name contains `needle`, ignoring case.
    pub fn definitions_containing(&self, needle: &str) -> Vec<SymbolRef> {
        use fst::Streamer;
        let needle = needle.to_lowercase();
        let mut out = Vec::new();
        for part in [Part::Base, Part::Overlay] {
            let Some(o) = self.part(part) else { continue };
            let mut stream = o.fst.stream();
            while let Some((key, offset)) = stream.next() {
                if key.first() == Some(&(format::IMPORT_KEY as u8)) {
                    continue;
                }
                let name = String::from_utf8_lossy(key);
                if !name.to_lowercase().contains(&needle) {
                    continue;
                }
                match o.postings(offset) {
                    Some(list) => self.map_pairs(part, list.defs(), &mut out),
                    None => self.mark_corrupt(&name),
                }
            }
        }
        out.sort_unstable();
        out
    }

    /// A file's stored facts, without decoding it.
    pub fn meta(&self, index: u32) -> Option<FileMeta<'_>> {
        let (part, o, r) = self.locate(index)?;
        let mtime_ns = match part {
            Part::Base if !self.touched.is_empty() => {
                let (_, id) = self.location(index)?;
                self.touched.get(&id).copied().unwrap_or(r.mtime_ns)
            }
            _ => r.mtime_ns,
        };
        Some(FileMeta { rel: o.rel(r), size: r.size, mtime_ns, hash: r.hash, lang: r.lang })
    }

    /// Files whose import statements contain `word` as a whole identifier, in path order.
    pub fn files_importing(&self, word: &str) -> Vec<u32> {
        let key = format!("{}{word}", format::IMPORT_KEY);
        let mut pairs = Vec::new();
        for (part, list) in &self.postings(&key) {
            self.map_pairs(*part, list.defs(), &mut pairs);
        }
        let mut files: Vec<u32> = pairs.into_iter().map(|(f, _)| f).collect();
        files.sort_unstable();
        files.dedup();
        files
    }

    /// Every use of `name` (not its definitions), in path and position order, read from its
    /// posting lists alone.
    pub fn uses(&self, name: &str) -> Vec<NameUse> {
        let lists = self.postings(name);
        let mut uses = Vec::new();
        let mut out_of_range = false;
        for (part, list) in &lists {
            let mut last: Option<(u32, Option<u32>)> = None;
            for u in list.uses() {
                // Uses come grouped by file: map each file once.
                let live = match last {
                    Some((file, live)) if file == u.file => live,
                    _ => {
                        let live = match self.live_id(*part, u.file) {
                            Some(live) => live,
                            None => {
                                out_of_range = true;
                                None
                            }
                        };
                        last = Some((u.file, live));
                        live
                    }
                };
                if let Some(file) = live {
                    uses.push(NameUse { file, ..u });
                }
            }
        }
        if out_of_range {
            self.mark_corrupt("a posting names a file that is not there");
        }
        if self.overlay.is_some() {
            uses.sort_unstable();
        }
        uses
    }

    /// Maps stored (file, item) pairs of `part` to live ones, into `out`; a file that does not
    /// exist marks the index corrupt.
    fn map_pairs(&self, part: Part, pairs: impl Iterator<Item = (u32, u32)>, out: &mut Vec<(u32, u32)>) {
        let mut out_of_range = false;
        for (file, i) in pairs {
            match self.live_id(part, file) {
                Some(Some(live)) => out.push((live, i)),
                Some(None) => {}
                None => out_of_range = true,
            }
        }
        if out_of_range {
            self.mark_corrupt("a posting names a file that is not there");
        }
    }
}

/// The checksum stored in an index's bytes (of its header and tables).
fn opened_checksum(o: &format::Opened) -> [u8; 32] {
    o.bytes().get(8..40).and_then(|b| b.try_into().ok()).unwrap_or([0; 32])
}

/// Returns freed heap pages to the system (glibc keeps them otherwise, and the process's
/// resident size would stay at its peak).
pub(crate) fn release_free_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only walks the allocator's own free lists.
    unsafe {
        libc::malloc_trim(0);
    }
}

impl From<FileSyntax> for Outline {
    /// What the index keeps of a parse: everything but the identifier uses.
    fn from(s: FileSyntax) -> Outline {
        Outline {
            symbols: s.symbols,
            imports: s.imports,
            line_count: s.line_count,
            has_errors: s.has_errors,
            symbols_left_out: s.symbols_left_out,
            parse_stopped: s.parse_stopped,
        }
    }
}

impl IndexedFile {
    pub(crate) fn as_source(&self) -> format::Source<'_> {
        format::Source::New {
            rel: &self.rel,
            size: self.size,
            mtime_ns: self.mtime_ns,
            hash: self.hash,
            lang: self.lang,
            syntax: &self.syntax,
        }
    }
}
