//! The persistent symbol index: every parsed file's definitions, imports and identifier
//! occurrences, keyed by blake3 content fingerprints and refreshed incrementally.
//!
//! - [`store`] reads and writes it under `.code-intel/index/` (git-ignored).
//! - [`refresh`] brings it up to date with the work tree, re-parsing only changed files.
//! - This module holds the in-memory form and its lookups.

pub mod format;
pub mod refresh;
pub mod store;

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
/// `.code-intel/index/symbols.idx`, or a buffer when it was not stored. A file's syntax is
/// decoded the first time a lookup needs it, so a lookup touches only the files it answers
/// from.
#[derive(Default)]
pub struct SymbolIndex {
    opened: Option<format::Opened>,
    decoded: Box<[OnceLock<StoredFile>]>,
    /// Stored bytes of the files decoded so far (what [`SymbolIndex::trim`] bounds).
    decoded_bytes: AtomicUsize,
    /// A posting list or a file failed its check while being read: the index must be rebuilt.
    corrupt: AtomicBool,
}

impl std::fmt::Debug for SymbolIndex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SymbolIndex").field("files", &self.file_count()).finish()
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
        if let Err(e) = format::write(&mut buffer, &sources, None, &[], &[]) {
            tracing::warn!("could not build the index in memory: {e}");
            return SymbolIndex::default();
        }
        drop(sources);
        let Some(index) = SymbolIndex::open(format::Backing::Owned(buffer.into_inner())) else {
            return SymbolIndex::default();
        };
        // The files are at hand: no need to decode them again.
        for (cell, file) in index.decoded.iter().zip(files) {
            let _ = cell.set(StoredFile { rel: file.rel, lang: file.lang, outline: Outline::from(file.syntax) });
        }
        index
    }

    /// Opens stored bytes; None when they fail any check.
    pub fn open(backing: format::Backing) -> Option<SymbolIndex> {
        let opened = format::open(backing)?;
        let decoded = (0..opened.records.len()).map(|_| OnceLock::new()).collect();
        Some(SymbolIndex {
            opened: Some(opened),
            decoded,
            decoded_bytes: AtomicUsize::new(0),
            corrupt: AtomicBool::new(false),
        })
    }

    pub(crate) fn opened(&self) -> Option<&format::Opened> {
        self.opened.as_ref()
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

    /// The stored checksum (of the header and tables); zeros for an empty index.
    pub fn checksum(&self) -> [u8; 32] {
        self.opened.as_ref().and_then(|o| o.bytes().get(8..40)?.try_into().ok()).unwrap_or([0; 32])
    }

    pub fn file_count(&self) -> usize {
        self.opened.as_ref().map_or(0, |o| o.records.len())
    }

    /// Each file's stored facts, in path order, without decoding anything.
    pub fn metas(&self) -> impl Iterator<Item = FileMeta<'_>> + '_ {
        self.opened.iter().flat_map(|o| {
            o.records.iter().map(move |r| FileMeta {
                rel: o.rel(r),
                size: r.size,
                mtime_ns: r.mtime_ns,
                hash: r.hash,
                lang: r.lang,
            })
        })
    }

    /// Every file, decoding each as it comes.
    pub fn files(&self) -> impl Iterator<Item = &StoredFile> + '_ {
        (0..self.file_count() as u32).map(|i| self.file_at(i))
    }

    pub fn file(&self, rel: &str) -> Option<&StoredFile> {
        let o = self.opened.as_ref()?;
        let i = o.records.binary_search_by(|r| o.rel(r).cmp(rel)).ok()?;
        Some(self.file_at(i as u32))
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
        if let Some(o) = self.opened.as_ref() {
            o.release_pages();
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
        let Some((o, r)) = self.opened.as_ref().and_then(|o| o.records.get(index as usize).map(|r| (o, r))) else {
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
        let o = self.opened.as_ref()?;
        let found = o.records.get(r.0 as usize).and_then(|record| Some((self.meta(r.0)?, o.symbol(record, r.1)?)));
        if found.is_none() {
            self.mark_corrupt("a symbol record");
        }
        found
    }

    pub fn symbol_count(&self) -> usize {
        self.opened.as_ref().map_or(0, |o| o.header.n_symbols as usize)
    }

    fn postings(&self, name: &str) -> Option<format::Postings<'_>> {
        let o = self.opened.as_ref()?;
        let offset = o.fst.get(name)?;
        let list = o.postings(offset);
        if list.is_none() {
            self.mark_corrupt(name);
        }
        list
    }

    /// Definitions named exactly `name`, in file order.
    pub fn definitions_named(&self, name: &str) -> Vec<SymbolRef> {
        self.postings(name).map(|p| self.checked(p.defs())).unwrap_or_default()
    }

    /// Definitions whose name contains `needle`, ignoring case.
    pub fn definitions_containing(&self, needle: &str) -> Vec<SymbolRef> {
        use fst::Streamer;
        let Some(o) = self.opened.as_ref() else { return Vec::new() };
        let needle = needle.to_lowercase();
        let mut out = Vec::new();
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
                Some(list) => out.extend(self.checked(list.defs())),
                None => self.mark_corrupt(&name),
            }
        }
        out.sort_unstable();
        out
    }

    /// A file's stored facts, without decoding it.
    pub fn meta(&self, index: u32) -> Option<FileMeta<'_>> {
        let o = self.opened.as_ref()?;
        let r = o.records.get(index as usize)?;
        Some(FileMeta { rel: o.rel(r), size: r.size, mtime_ns: r.mtime_ns, hash: r.hash, lang: r.lang })
    }

    /// Files whose import statements contain `word` as a whole identifier, in path order.
    pub fn files_importing(&self, word: &str) -> Vec<u32> {
        let key = format!("{}{word}", format::IMPORT_KEY);
        let mut files: Vec<u32> = self
            .postings(&key)
            .map(|p| self.checked(p.defs()))
            .unwrap_or_default()
            .into_iter()
            .map(|(f, _)| f)
            .collect();
        files.dedup();
        files
    }

    /// Every use of `name` (not its definitions), in path and position order, read from its
    /// posting list alone.
    pub fn uses(&self, name: &str) -> Vec<NameUse> {
        let Some(list) = self.postings(name) else { return Vec::new() };
        let n = self.file_count() as u32;
        let mut out_of_range = false;
        let uses: Vec<NameUse> =
            list.uses().filter(|u| u.file < n || std::mem::replace(&mut out_of_range, true)).collect();
        if out_of_range {
            self.mark_corrupt("a posting names a file that is not there");
        }
        uses
    }

    /// Pairs whose file id exists; any other marks the index corrupt.
    fn checked(&self, pairs: impl Iterator<Item = (u32, u32)>) -> Vec<(u32, u32)> {
        let n = self.file_count() as u32;
        let mut out = Vec::new();
        let mut out_of_range = false;
        for (file, i) in pairs {
            if file < n {
                out.push((file, i));
            } else {
                out_of_range = true;
            }
        }
        if out_of_range {
            self.mark_corrupt("a posting names a file that is not there");
        }
        out
    }
}

/// Returns freed heap pages to the system (glibc keeps them otherwise, and the process's
/// resident size would stay at its peak).
fn release_free_memory() {
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
