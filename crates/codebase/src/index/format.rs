//! The byte layout of the symbol index, read in place (from a memory map) and written in one
//! streaming pass.
//!
//! ```text
//! magic "GCISYM10" | blake3 checksum (32) | header: 14 little-endian u64
//! postings   one list per name: crc32, n_defs, n_refs, then its definitions as (file, symbol)
//!            and its uses as (file, line, column, enclosing symbol + 1 or 0), each sorted;
//!            keys starting with \x01 list the files whose imports contain a word
//! blobs      per file: its symbols as fixed 48-byte records (each with a crc32 over itself and
//!            its strings, so one symbol is read in place), the symbols' strings, then the rest
//!            (postcard: imports and flags)
//! files      one fixed 88-byte record per file, sorted by path
//! strings    the files' paths
//! extra      an overlay's description (the base it applies to, removed and touched files);
//!            empty in a base
//! fst        name -> offset of its posting list
//! ```
//!
//! The checksum covers the header and everything from `files` on (a few MB however large the
//! index), so opening costs little. Posting lists, symbols and blobs carry their own crc32,
//! checked when they are read: a reference lookup reads one posting list and the symbols it
//! shows, nothing else. Anything that fails a check marks the index corrupt: it is rebuilt, never
//! trusted.

use std::collections::BTreeMap;
use std::io::{Seek, SeekFrom, Write};
use std::ops::Range;
use std::sync::Arc;

use crate::lang::Lang;
use crate::syntax::{FileSyntax, Symbol, SymbolKind};

/// 10: the layout of 09; what is extracted changed (a JavaScript or TypeScript `export … from`
/// is an import), so an index of 09 is rebuilt rather than mixed with files parsed now.
pub const MAGIC: &[u8; 8] = b"GCISYM10";
/// Keys that start with this byte are not names: `IMPORT_KEY` + a word lists the files whose
/// import statements contain that word (as a whole identifier), with the import's index.
pub const IMPORT_KEY: char = '\u{1}';

/// The whole identifiers (runs of alphanumerics and `_`) in an import statement's text.
pub fn import_words(text: &str) -> impl Iterator<Item = &str> {
    text.split(|c: char| !(c.is_alphanumeric() || c == '_')).filter(|w| !w.is_empty())
}
const FIELDS: usize = 14;
pub const HEADER_LEN: usize = 8 + 32 + FIELDS * 8;
pub const RECORD_LEN: usize = 88;

/// The bytes an index is read from: a memory map of the file, or a buffer.
pub enum Backing {
    Mapped(memmap2::Mmap),
    Owned(Vec<u8>),
}

impl AsRef<[u8]> for Backing {
    fn as_ref(&self) -> &[u8] {
        match self {
            Backing::Mapped(m) => m,
            Backing::Owned(v) => v,
        }
    }
}

/// A range of shared bytes (what the fst map reads from).
#[derive(Clone)]
pub struct Shared {
    backing: Arc<Backing>,
    range: Range<usize>,
}

impl AsRef<[u8]> for Shared {
    fn as_ref(&self) -> &[u8] {
        &self.backing.as_ref().as_ref()[self.range.clone()]
    }
}

#[derive(Debug, Clone, Copy, Default)]
pub struct Header {
    pub total_len: u64,
    pub n_files: u64,
    pub n_symbols: u64,
    pub postings: (u64, u64),
    pub blobs: (u64, u64),
    pub files_off: u64,
    pub strings: (u64, u64),
    pub extra: (u64, u64),
    pub fst: (u64, u64),
}

impl Header {
    fn to_fields(self) -> [u64; FIELDS] {
        [
            self.total_len,
            self.n_files,
            self.n_symbols,
            self.postings.0,
            self.postings.1,
            self.blobs.0,
            self.blobs.1,
            self.files_off,
            self.strings.0,
            self.strings.1,
            self.extra.0,
            self.extra.1,
            self.fst.0,
            self.fst.1,
        ]
    }

    fn from_fields(f: [u64; FIELDS]) -> Header {
        Header {
            total_len: f[0],
            n_files: f[1],
            n_symbols: f[2],
            postings: (f[3], f[4]),
            blobs: (f[5], f[6]),
            files_off: f[7],
            strings: (f[8], f[9]),
            extra: (f[10], f[11]),
            fst: (f[12], f[13]),
        }
    }

    fn encode(self) -> Vec<u8> {
        self.to_fields().iter().flat_map(|v| v.to_le_bytes()).collect()
    }
}

/// One file's fixed-width record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Record {
    pub rel: (u64, u32),
    pub lang: Lang,
    pub size: u64,
    pub mtime_ns: i64,
    pub hash: [u8; 32],
    /// Offset (within the blobs section), length and crc32 of the file's syntax.
    pub blob: (u64, u32, u32),
    /// How many symbol records the blob starts with, and where (within the blob) its
    /// imports and flags start.
    pub symbols: u32,
    pub rest: u32,
}

impl Record {
    fn encode(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.rel.0.to_le_bytes());
        out.extend_from_slice(&self.rel.1.to_le_bytes());
        let lang = Lang::ALL.iter().position(|l| *l == self.lang).unwrap_or(0) as u8;
        out.extend_from_slice(&[lang, 0, 0, 0]);
        out.extend_from_slice(&self.size.to_le_bytes());
        out.extend_from_slice(&self.mtime_ns.to_le_bytes());
        out.extend_from_slice(&self.hash);
        out.extend_from_slice(&self.blob.0.to_le_bytes());
        out.extend_from_slice(&self.blob.1.to_le_bytes());
        out.extend_from_slice(&self.blob.2.to_le_bytes());
        out.extend_from_slice(&self.symbols.to_le_bytes());
        out.extend_from_slice(&self.rest.to_le_bytes());
    }

    fn decode(b: &[u8]) -> Option<Record> {
        let lang = *Lang::ALL.get(usize::from(*b.get(12)?))?;
        Some(Record {
            rel: (u64_at(b, 0)?, u32_at(b, 8)?),
            lang,
            size: u64_at(b, 16)?,
            mtime_ns: u64_at(b, 24)? as i64,
            hash: b.get(32..64)?.try_into().ok()?,
            blob: (u64_at(b, 64)?, u32_at(b, 72)?, u32_at(b, 76)?),
            symbols: u32_at(b, 80)?,
            rest: u32_at(b, 84)?,
        })
    }
}

pub fn u64_at(b: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_le_bytes(b.get(at..at + 8)?.try_into().ok()?))
}

pub fn u32_at(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_le_bytes(b.get(at..at + 4)?.try_into().ok()?))
}

/// An index opened over its bytes, its header and tables checked.
pub struct Opened {
    pub backing: Arc<Backing>,
    pub header: Header,
    pub records: Vec<Record>,
    pub fst: fst::Map<Shared>,
}

impl Opened {
    pub fn bytes(&self) -> &[u8] {
        self.backing.as_ref().as_ref()
    }

    /// Drops the mapped pages from this process's resident set; they stay in the page cache
    /// and come back on the next read. (The file is never written in place, so nothing is
    /// lost.)
    pub fn release_pages(&self) {
        if let Backing::Mapped(map) = self.backing.as_ref() {
            // SAFETY: the mapping is read-only and file-backed with no private changes, so
            // MADV_DONTNEED only drops clean pages, which are read back from the file.
            if let Err(e) = unsafe { map.unchecked_advise(memmap2::UncheckedAdvice::DontNeed) } {
                tracing::debug!("madvise: {e}");
            }
        }
    }

    pub fn rel(&self, record: &Record) -> &str {
        let start = (self.header.strings.0 + record.rel.0) as usize;
        // Checked valid UTF-8 and in bounds when opened.
        std::str::from_utf8(&self.bytes()[start..start + record.rel.1 as usize]).unwrap_or("")
    }

    /// The raw blob of a record, if its crc matches.
    pub fn blob(&self, record: &Record) -> Option<&[u8]> {
        let start = (self.header.blobs.0 + record.blob.0) as usize;
        let bytes = self.bytes().get(start..start + record.blob.1 as usize)?;
        (crc32fast::hash(bytes) == record.blob.2).then_some(bytes)
    }

    pub fn extra(&self) -> &[u8] {
        let (off, len) = self.header.extra;
        &self.bytes()[off as usize..(off + len) as usize]
    }

    /// The posting list at `offset` (within the postings section): definitions and uses, or
    /// None when it fails its bounds or crc check.
    pub fn postings(&self, offset: u64) -> Option<Postings<'_>> {
        let base = (self.header.postings.0 + offset) as usize;
        let b = self.bytes();
        let crc = u32_at(b, base)?;
        let n_defs = u32_at(b, base + 4)? as usize;
        let n_uses = u32_at(b, base + 8)? as usize;
        let defs_end = base.checked_add(12)?.checked_add(n_defs.checked_mul(DEF_LEN)?)?;
        let end = defs_end.checked_add(n_uses.checked_mul(USE_LEN)?)?;
        if end as u64 > self.header.postings.0 + self.header.postings.1 {
            return None;
        }
        let body = b.get(base + 4..end)?;
        if crc32fast::hash(body) != crc {
            return None;
        }
        Some(Postings { defs: &b[base + 12..defs_end], uses: &b[defs_end..end] })
    }

    /// Symbol `index` of a file, read in place, or None when it is out of range or fails its
    /// crc check.
    pub fn symbol(&self, record: &Record, index: u32) -> Option<Symbol> {
        if index >= record.symbols {
            return None;
        }
        let start = usize::try_from(self.header.blobs.0 + record.blob.0).ok()?;
        let blob = self.bytes().get(start..start + record.blob.1 as usize)?;
        read_symbol(blob, index as usize, true)
    }
}

/// The size of a definition (file, symbol) and of a use (file, line, column, enclosing + 1)
/// in a posting list.
const DEF_LEN: usize = 8;
const USE_LEN: usize = 16;

/// One use of a name: where it is, and the definition it is in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct NameUse {
    pub file: u32,
    pub line: u32,
    pub column: u32,
    /// The innermost enclosing definition's index in the file's symbols.
    pub enclosing: Option<u32>,
}

impl NameUse {
    fn encode(&self, out: &mut Vec<u8>) {
        for v in [self.file, self.line, self.column, self.enclosing.map_or(0, |e| e + 1)] {
            out.extend_from_slice(&v.to_le_bytes());
        }
    }

    fn decode(b: &[u8]) -> NameUse {
        let at = |i: usize| u32::from_le_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]);
        NameUse { file: at(0), line: at(4), column: at(8), enclosing: at(12).checked_sub(1) }
    }
}

/// One name's posting lists, as stored.
pub struct Postings<'a> {
    defs: &'a [u8],
    uses: &'a [u8],
}

impl Postings<'_> {
    /// (file, symbol) pairs, or (file, import) for an import key.
    pub fn defs(&self) -> impl Iterator<Item = (u32, u32)> + '_ {
        self.defs
            .chunks_exact(DEF_LEN)
            .map(|c| (u32::from_le_bytes([c[0], c[1], c[2], c[3]]), u32::from_le_bytes([c[4], c[5], c[6], c[7]])))
    }

    pub fn uses(&self) -> impl Iterator<Item = NameUse> + '_ {
        self.uses.chunks_exact(USE_LEN).map(NameUse::decode)
    }
}

/// Checks the magic, the bounds and the checksum, and reads the file table.
pub fn open(backing: Backing) -> Option<Opened> {
    let bytes = backing.as_ref();
    if bytes.len() < HEADER_LEN || &bytes[..8] != MAGIC {
        return None;
    }
    let mut fields = [0u64; FIELDS];
    for (i, f) in fields.iter_mut().enumerate() {
        *f = u64_at(bytes, 40 + i * 8)?;
    }
    let header = Header::from_fields(fields);
    let len = bytes.len() as u64;
    let within = |(off, n): (u64, u64)| off.checked_add(n).is_some_and(|end| end <= len) && off >= HEADER_LEN as u64;
    let files_len = header.n_files.checked_mul(RECORD_LEN as u64)?;
    if header.total_len != len
        || ![header.postings, header.blobs, (header.files_off, files_len), header.strings, header.extra, header.fst]
            .into_iter()
            .all(within)
        || header.files_off > header.strings.0
        || header.strings.0 > header.extra.0
        || header.extra.0 > header.fst.0
    {
        return None;
    }
    // On every core: the tables of a large index are a few MB, and a one-shot lookup opens it.
    let mut hasher = blake3::Hasher::new();
    hasher.update(&bytes[40..HEADER_LEN]);
    hasher.update_rayon(&bytes[header.files_off as usize..]);
    if hasher.finalize().as_bytes() != &bytes[8..40] {
        return None;
    }
    let table = &bytes[header.files_off as usize..(header.files_off + files_len) as usize];
    let mut records = Vec::with_capacity(header.n_files as usize);
    let mut previous: Option<&str> = None;
    for raw in table.chunks_exact(RECORD_LEN) {
        let r = Record::decode(raw)?;
        let start = header.strings.0.checked_add(r.rel.0)?;
        let end = start.checked_add(u64::from(r.rel.1))?;
        let symbols_end = u64::from(r.symbols).checked_mul(SYMBOL_LEN as u64)?;
        if end > header.strings.0 + header.strings.1
            || r.blob.0.checked_add(u64::from(r.blob.1))? > header.blobs.1
            || symbols_end > u64::from(r.rest)
            || r.rest > r.blob.1
        {
            return None;
        }
        let rel = std::str::from_utf8(&bytes[start as usize..end as usize]).ok()?;
        // Sorted and unique, so paths can be found by binary search.
        if previous.is_some_and(|p| p >= rel) {
            return None;
        }
        previous = Some(rel);
        records.push(r);
    }
    let fst_range = header.fst.0 as usize..(header.fst.0 + header.fst.1) as usize;
    let backing = Arc::new(backing);
    let fst = fst::Map::new(Shared { backing: Arc::clone(&backing), range: fst_range }).ok()?;
    Some(Opened { backing, header, records, fst })
}

/// (file id, symbol or import) pairs.
type Pairs = Vec<(u32, u32)>;
/// (file id, range of the file's occurrences) of a new file's uses of one name.
type NewUses = Vec<(u32, Range<u32>)>;

/// A file of the index being written: one kept from a previous index (`from`: its position in
/// `write`'s `previous`; its blob is copied as it is), or one parsed now.
pub enum Source<'a> {
    Kept { record: Record, rel: &'a str, from: usize },
    New { rel: &'a str, size: u64, mtime_ns: i64, hash: [u8; 32], lang: Lang, syntax: &'a FileSyntax },
}

/// An index whose files the one being written keeps: `new_ids` maps its file ids to the new
/// index's (None: not kept).
pub struct Previous<'a> {
    pub opened: &'a Opened,
    pub new_ids: &'a [Option<u32>],
}

impl Previous<'_> {
    fn new_id(&self, file: u32) -> Option<u32> {
        self.new_ids.get(file as usize).copied().flatten()
    }
}

impl Source<'_> {
    pub fn rel(&self) -> &str {
        match self {
            Source::Kept { rel, .. } | Source::New { rel, .. } => rel,
        }
    }
}

/// Writes an index of `files` (sorted by path, unique) to `out`. Posting lists of kept files
/// come from the `previous` indexes they are kept from (the base and an overlay, merged key by
/// key); new files' names are gathered from their syntax. Nothing of a kept file is decoded.
/// `extra` is stored in the checksummed tables (an overlay's description; empty for a base).
pub fn write<W: Write + Seek>(
    out: &mut W,
    files: &[Source],
    previous: &[Previous],
    extra: &[u8],
) -> std::io::Result<()> {
    let started = std::time::Instant::now();
    let mut position = HEADER_LEN as u64;
    out.write_all(&[0u8; HEADER_LEN])?;

    // Names of the new files: their definitions as (file, symbol), their uses as (file, range
    // of the file's occurrences), expanded to positions when written. The ranges are found here,
    // walking each file's occurrences in order, not by searching them name by name later.
    let mut fresh: BTreeMap<std::borrow::Cow<str>, (Pairs, NewUses)> = BTreeMap::new();
    let mut n_symbols = 0u64;
    for (id, f) in files.iter().enumerate() {
        let Source::New { syntax, .. } = f else { continue };
        let id = id as u32;
        n_symbols += syntax.symbols.len() as u64;
        for (si, s) in syntax.symbols.iter().enumerate() {
            fresh.entry(s.name.as_str().into()).or_default().0.push((id, si as u32));
        }
        let mut at = 0u32;
        for run in syntax.refs.chunk_by(|a, b| a.name == b.name) {
            let range = at..at + run.len() as u32;
            at = range.end;
            if let Some(name) = syntax.names.get(run[0].name as usize) {
                fresh.entry(name.as_str().into()).or_default().1.push((id, range));
            }
        }
        for (ii, import) in syntax.imports.iter().enumerate() {
            for word in import_words(&import.text) {
                let list = &mut fresh.entry(format!("{IMPORT_KEY}{word}").into()).or_default().0;
                if list.last() != Some(&(id, ii as u32)) {
                    list.push((id, ii as u32));
                }
            }
        }
    }
    let expand = |(file, range): (u32, Range<u32>), into: &mut Vec<NameUse>| {
        if let Some(Source::New { syntax, .. }) = files.get(file as usize) {
            let run = syntax.refs.get(range.start as usize..range.end as usize).unwrap_or_default();
            into.extend(run.iter().map(|o| NameUse { file, line: o.line, column: o.column, enclosing: o.enclosing }));
        }
    };

    tracing::debug!("index write: names gathered in {:?}", started.elapsed());
    // Postings: the previous index's names and the new ones, merged in key order.
    let postings_off = position;
    let mut fst = fst::MapBuilder::memory();
    let mut buf: Vec<u8> = Vec::new();
    let mut emit = |key: &[u8], defs: &mut Pairs, uses: &mut Vec<NameUse>, position: &mut u64| {
        if defs.is_empty() && uses.is_empty() {
            return Ok(());
        }
        defs.sort_unstable();
        uses.sort_unstable();
        buf.clear();
        buf.extend_from_slice(&(defs.len() as u32).to_le_bytes());
        buf.extend_from_slice(&(uses.len() as u32).to_le_bytes());
        for (a, b) in defs.iter() {
            buf.extend_from_slice(&a.to_le_bytes());
            buf.extend_from_slice(&b.to_le_bytes());
        }
        for u in uses.iter() {
            u.encode(&mut buf);
        }
        let offset = *position - postings_off;
        out.write_all(&crc32fast::hash(&buf).to_le_bytes())?;
        out.write_all(&buf)?;
        *position += 4 + buf.len() as u64;
        fst.insert(key, offset).map_err(std::io::Error::other)
    };
    let mut fresh_iter = fresh.into_iter().peekable();
    let mut released_at = 0u64;
    let (mut defs, mut uses) = (Vec::new(), Vec::new());
    let emit_fresh = |(d, u): (Pairs, NewUses), defs: &mut Pairs, uses: &mut Vec<NameUse>| {
        defs.extend(d);
        for pair in u {
            expand(pair, uses);
        }
    };
    {
        use fst::Streamer;
        let mut union = previous.iter().fold(fst::map::OpBuilder::new(), |op, p| op.add(p.opened.fst.stream())).union();
        while let Some((key, values)) = union.next() {
            // New names that sort before this one.
            while let Some((k, _)) = fresh_iter.peek()
                && k.as_bytes() < key
            {
                let Some((k, lists)) = fresh_iter.next() else { break };
                defs.clear();
                uses.clear();
                emit_fresh(lists, &mut defs, &mut uses);
                emit(k.as_bytes(), &mut defs, &mut uses, &mut position)?;
            }
            defs.clear();
            uses.clear();
            for value in values {
                let Some(prev) = previous.get(value.index) else { continue };
                let list =
                    prev.opened.postings(value.value).ok_or_else(|| std::io::Error::other("corrupt posting list"))?;
                defs.extend(list.defs().filter_map(|(f, i)| prev.new_id(f).map(|n| (n, i))));
                uses.extend(list.uses().filter_map(|u| prev.new_id(u.file).map(|file| NameUse { file, ..u })));
            }
            if let Some((k, _)) = fresh_iter.peek()
                && k.as_bytes() == key
                && let Some((_, lists)) = fresh_iter.next()
            {
                emit_fresh(lists, &mut defs, &mut uses);
            }
            let key = key.to_vec();
            emit(&key, &mut defs, &mut uses, &mut position)?;
            release_read_pages(previous, position, &mut released_at);
        }
    }
    for (k, lists) in fresh_iter {
        defs.clear();
        uses.clear();
        emit_fresh(lists, &mut defs, &mut uses);
        emit(k.as_bytes(), &mut defs, &mut uses, &mut position)?;
    }
    let postings = (postings_off, position - postings_off);
    tracing::debug!("index write: postings {} MB in {:?}", postings.1 >> 20, started.elapsed());

    // Blobs, and the records that point at them.
    let blobs_off = position;
    let mut records = Vec::with_capacity(files.len());
    let mut strings = Vec::new();
    // New files' blobs are encoded a chunk at a time on every core, then written in order.
    let mut encoded = Vec::new();
    for (i, f) in files.iter().enumerate() {
        if i % BLOB_CHUNK == 0 {
            use rayon::prelude::*;
            let chunk = &files[i..files.len().min(i + BLOB_CHUNK)];
            encoded = chunk
                .par_iter()
                .map(|f| match f {
                    Source::New { syntax, .. } => encode_blob(syntax).map(Some),
                    Source::Kept { .. } => Ok(None),
                })
                .collect::<std::io::Result<Vec<_>>>()?;
            encoded.reverse();
        }
        let blob = encoded.pop().flatten();
        let rel = (strings.len() as u64, f.rel().len() as u32);
        strings.extend_from_slice(f.rel().as_bytes());
        let at = position - blobs_off;
        let record = match f {
            Source::Kept { record, from, .. } => {
                let prev =
                    previous.get(*from).ok_or_else(|| std::io::Error::other("a kept file without a previous index"))?;
                let blob = prev.opened.blob(record).ok_or_else(|| std::io::Error::other("corrupt blob"))?;
                n_symbols += u64::from(record.symbols);
                out.write_all(blob)?;
                position += blob.len() as u64;
                release_read_pages(previous, position, &mut released_at);
                Record { rel, blob: (at, record.blob.1, record.blob.2), ..*record }
            }
            Source::New { size, mtime_ns, hash, lang, syntax, .. } => {
                let (blob, rest) = blob.ok_or_else(|| std::io::Error::other("a new file's blob was not encoded"))?;
                out.write_all(&blob)?;
                position += blob.len() as u64;
                Record {
                    rel,
                    lang: *lang,
                    size: *size,
                    mtime_ns: *mtime_ns,
                    hash: *hash,
                    blob: (at, blob.len() as u32, crc32fast::hash(&blob)),
                    symbols: syntax.symbols.len() as u32,
                    rest,
                }
            }
        };
        records.push(record);
    }
    let blobs = (blobs_off, position - blobs_off);
    tracing::debug!("index write: blobs {} MB, {:?} since start", blobs.1 >> 20, started.elapsed());

    // The checksummed tables.
    let mut tables = Vec::with_capacity(records.len() * RECORD_LEN + strings.len() + extra.len());
    for r in &records {
        r.encode(&mut tables);
    }
    let files_off = position;
    let strings_off = files_off + tables.len() as u64;
    tables.extend_from_slice(&strings);
    let extra_off = files_off + tables.len() as u64;
    tables.extend_from_slice(extra);
    let fst_off = files_off + tables.len() as u64;
    let fst = fst.into_inner().map_err(std::io::Error::other)?;
    tables.extend_from_slice(&fst);
    out.write_all(&tables)?;
    let header = Header {
        total_len: files_off + tables.len() as u64,
        n_files: records.len() as u64,
        n_symbols,
        postings,
        blobs,
        files_off,
        strings: (strings_off, strings.len() as u64),
        extra: (extra_off, extra.len() as u64),
        fst: (fst_off, fst.len() as u64),
    };
    let fields = header.encode();
    let mut hasher = blake3::Hasher::new();
    hasher.update(&fields);
    hasher.update(&tables);
    out.seek(SeekFrom::Start(0))?;
    out.write_all(MAGIC)?;
    out.write_all(hasher.finalize().as_bytes())?;
    out.write_all(&fields)?;
    out.flush()
}

/// Every this many bytes written, the mapped pages read from the previous indexes so far are
/// dropped from the process (they stay in the page cache): merging segments into a base reads
/// each once, and would otherwise hold them all in the resident set.
const RELEASE_EVERY: u64 = 32 << 20;

fn release_read_pages(previous: &[Previous], position: u64, released_at: &mut u64) {
    if position >= *released_at + RELEASE_EVERY {
        *released_at = position;
        for p in previous {
            p.opened.release_pages();
        }
    }
}

/// How many files' blobs are encoded at once (in parallel) before they are written.
const BLOB_CHUNK: usize = 512;

/// A symbol record: crc32 (over the rest of the record and the symbol's strings), then name,
/// scope (length `u32::MAX` for none) and signature as (offset within the blob, length), line,
/// end line, column, parent + 1 (0 for none), kind, exported, two zero bytes.
const SYMBOL_LEN: usize = 48;
const NO_SCOPE: u32 = u32::MAX;

/// What follows a file's symbols and their strings (postcard).
#[derive(serde::Serialize)]
struct RestRef<'a> {
    imports: &'a [crate::syntax::Import],
    line_count: u32,
    has_errors: bool,
    symbols_left_out: u32,
    parse_stopped: bool,
}

#[derive(serde::Deserialize)]
struct Rest {
    imports: Vec<crate::syntax::Import>,
    line_count: u32,
    has_errors: bool,
    symbols_left_out: u32,
    parse_stopped: bool,
}

/// A file's blob (see the module's layout) and where its rest starts. Identifier uses are not
/// in it: they are in the posting lists.
fn encode_blob(syntax: &FileSyntax) -> std::io::Result<(Vec<u8>, u32)> {
    let mut pool = StringPool { base: syntax.symbols.len() * SYMBOL_LEN, ..StringPool::default() };
    let mut located = Vec::with_capacity(syntax.symbols.len());
    for s in &syntax.symbols {
        let name = pool.place(&s.name)?;
        let scope = match &s.scope {
            Some(scope) => pool.place_scope(scope)?,
            None => (0, NO_SCOPE),
        };
        let signature = pool.place(&s.signature)?;
        located.push((name, scope, signature));
    }
    let mut records = Vec::with_capacity(pool.base + pool.bytes.len());
    // Strings are placed first so each record's crc can cover its strings' bytes.
    for (s, (name, scope, signature)) in syntax.symbols.iter().zip(located) {
        let mut record = [0u8; SYMBOL_LEN];
        let fields = [
            name.0,
            name.1,
            scope.0,
            scope.1,
            signature.0,
            signature.1,
            s.line,
            s.end_line,
            s.column,
            s.parent.map_or(0, |p| p + 1),
        ];
        for (i, v) in fields.iter().enumerate() {
            record[4 + i * 4..8 + i * 4].copy_from_slice(&v.to_le_bytes());
        }
        record[44] = SymbolKind::ALL.iter().position(|k| *k == s.kind).unwrap_or(0) as u8;
        record[45] = u8::from(s.exported);
        let mut crc = crc32fast::Hasher::new();
        crc.update(&record[4..]);
        for (at, len) in [name, scope, signature] {
            if len != NO_SCOPE {
                let from = at as usize - pool.base;
                crc.update(&pool.bytes[from..from + len as usize]);
            }
        }
        record[..4].copy_from_slice(&crc.finalize().to_le_bytes());
        records.extend_from_slice(&record);
    }
    let rest = RestRef {
        imports: &syntax.imports,
        line_count: syntax.line_count,
        has_errors: syntax.has_errors,
        symbols_left_out: syntax.symbols_left_out,
        parse_stopped: syntax.parse_stopped,
    };
    records.extend_from_slice(&pool.bytes);
    let rest_at = u32::try_from(records.len()).map_err(|_| too_big())?;
    postcard::to_extend(&rest, records).map(|blob| (blob, rest_at)).map_err(std::io::Error::other)
}

fn too_big() -> std::io::Error {
    std::io::Error::other("a file's syntax over 4 GB")
}

/// A file's symbol strings. A scope the same as the previous symbol's (siblings share theirs)
/// is stored once, as is a string the same as the one placed just before it.
#[derive(Default)]
struct StringPool<'a> {
    base: usize,
    bytes: Vec<u8>,
    last: Option<(&'a str, (u32, u32))>,
    last_scope: Option<(&'a str, (u32, u32))>,
}

impl<'a> StringPool<'a> {
    fn place(&mut self, text: &'a str) -> std::io::Result<(u32, u32)> {
        if let Some((last, at)) = self.last
            && last == text
        {
            return Ok(at);
        }
        let at = (
            u32::try_from(self.base + self.bytes.len()).map_err(|_| too_big())?,
            u32::try_from(text.len()).map_err(|_| too_big())?,
        );
        self.bytes.extend_from_slice(text.as_bytes());
        self.last = Some((text, at));
        Ok(at)
    }

    fn place_scope(&mut self, scope: &'a str) -> std::io::Result<(u32, u32)> {
        if let Some((last, at)) = self.last_scope
            && last == scope
        {
            return Ok(at);
        }
        let at = self.place(scope)?;
        self.last_scope = Some((scope, at));
        Ok(at)
    }
}

/// Symbol `i` of a blob; `check` verifies its crc (not needed when the whole blob's was).
fn read_symbol(blob: &[u8], i: usize, check: bool) -> Option<Symbol> {
    let record = blob.get(i * SYMBOL_LEN..(i + 1) * SYMBOL_LEN)?;
    let field = |n: usize| u32_at(record, 4 + n * 4);
    let text = |at: u32, len: u32| -> Option<&str> {
        std::str::from_utf8(blob.get(at as usize..(at as usize).checked_add(len as usize)?)?).ok()
    };
    let (name, scope_at, scope_len, signature) =
        (text(field(0)?, field(1)?)?, field(2)?, field(3)?, text(field(4)?, field(5)?)?);
    let scope = if scope_len == NO_SCOPE { None } else { Some(text(scope_at, scope_len)?) };
    if check {
        let mut crc = crc32fast::Hasher::new();
        crc.update(&record[4..]);
        crc.update(name.as_bytes());
        crc.update(scope.unwrap_or("").as_bytes());
        crc.update(signature.as_bytes());
        if crc.finalize() != u32_at(record, 0)? {
            return None;
        }
    }
    Some(Symbol {
        name: name.to_owned(),
        kind: *SymbolKind::ALL.get(usize::from(record[44]))?,
        line: field(6)?,
        end_line: field(7)?,
        column: field(8)?,
        scope: scope.map(str::to_owned),
        signature: signature.to_owned(),
        parent: field(9)?.checked_sub(1),
        exported: record[45] != 0,
    })
}

/// A file's definitions, imports and flags, decoded whole from a blob whose crc was checked.
#[derive(Default)]
pub struct Outline {
    pub symbols: Vec<Symbol>,
    pub imports: Vec<crate::syntax::Import>,
    pub line_count: u32,
    pub has_errors: bool,
    pub symbols_left_out: u32,
    pub parse_stopped: bool,
}

pub fn decode_outline(blob: &[u8], record: &Record) -> Option<Outline> {
    let symbols = (0..record.symbols as usize).map(|i| read_symbol(blob, i, false)).collect::<Option<Vec<_>>>()?;
    let rest: Rest = postcard::from_bytes(blob.get(record.rest as usize..)?).ok()?;
    Some(Outline {
        symbols,
        imports: rest.imports,
        line_count: rest.line_count,
        has_errors: rest.has_errors,
        symbols_left_out: rest.symbols_left_out,
        parse_stopped: rest.parse_stopped,
    })
}
