//! The byte layout of the symbol index, read in place (from a memory map) and written in one
//! streaming pass.
//!
//! ```text
//! magic "GCISYM08" | blake3 checksum (32) | header: 14 little-endian u64
//! postings   one list per name: crc32, n_defs, n_refs, then (file, symbol) and (file, name id);
//!            keys starting with \x01 list the files whose imports contain a word
//! blobs      per file: its core (postcard: symbols, imports, flags), its names (postcard), and
//!            its occurrences as fixed 16-byte records, read in place
//! files      one fixed 80-byte record per file, sorted by path
//! strings    the files' paths
//! fst        name -> offset of its posting list
//! ```
//!
//! The checksum covers the header and everything from `files` on (a few MB however large the
//! index), so opening costs little. Posting lists and blobs carry their own crc32, checked when
//! they are read. Anything that fails a check marks the index corrupt: it is rebuilt, never
//! trusted.

use std::collections::BTreeMap;
use std::io::{Seek, SeekFrom, Write};
use std::ops::Range;
use std::sync::Arc;

use crate::lang::Lang;
use crate::syntax::FileSyntax;

pub const MAGIC: &[u8; 8] = b"GCISYM08";
/// Keys that start with this byte are not names: `IMPORT_KEY` + a word lists the files whose
/// import statements contain that word (as a whole identifier), with the import's index.
pub const IMPORT_KEY: char = '\u{1}';

/// The whole identifiers (runs of alphanumerics and `_`) in an import statement's text.
pub fn import_words(text: &str) -> impl Iterator<Item = &str> {
    text.split(|c: char| !(c.is_alphanumeric() || c == '_')).filter(|w| !w.is_empty())
}
const FIELDS: usize = 14;
pub const HEADER_LEN: usize = 8 + 32 + FIELDS * 8;
pub const RECORD_LEN: usize = 80;

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
    pub stamp: (u64, u64),
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
            self.stamp.0,
            self.stamp.1,
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
            stamp: (f[10], f[11]),
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

    pub fn stamp(&self) -> &[u8] {
        let (off, len) = self.header.stamp;
        &self.bytes()[off as usize..(off + len) as usize]
    }

    /// The posting list at `offset` (within the postings section): definitions and
    /// references, or None when it fails its bounds or crc check.
    pub fn postings(&self, offset: u64) -> Option<Postings<'_>> {
        let base = (self.header.postings.0 + offset) as usize;
        let b = self.bytes();
        let crc = u32_at(b, base)?;
        let n_defs = u32_at(b, base + 4)? as usize;
        let n_refs = u32_at(b, base + 8)? as usize;
        let end = base.checked_add(12)?.checked_add((n_defs + n_refs).checked_mul(8)?)?;
        if end as u64 > self.header.postings.0 + self.header.postings.1 {
            return None;
        }
        let body = b.get(base + 4..end)?;
        if crc32fast::hash(body) != crc {
            return None;
        }
        let defs = &b[base + 12..base + 12 + n_defs * 8];
        let refs = &b[base + 12 + n_defs * 8..end];
        Some(Postings { defs, refs })
    }
}

/// One name's posting lists, as stored: pairs of little-endian u32.
pub struct Postings<'a> {
    defs: &'a [u8],
    refs: &'a [u8],
}

fn pairs(b: &[u8]) -> impl Iterator<Item = (u32, u32)> + '_ {
    b.chunks_exact(8)
        .map(|c| (u32::from_le_bytes([c[0], c[1], c[2], c[3]]), u32::from_le_bytes([c[4], c[5], c[6], c[7]])))
}

impl Postings<'_> {
    pub fn defs(&self) -> impl Iterator<Item = (u32, u32)> + '_ {
        pairs(self.defs)
    }

    pub fn refs(&self) -> impl Iterator<Item = (u32, u32)> + '_ {
        pairs(self.refs)
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
        || ![header.postings, header.blobs, (header.files_off, files_len), header.strings, header.stamp, header.fst]
            .into_iter()
            .all(within)
        || header.files_off > header.strings.0
        || header.strings.0 > header.stamp.0
        || header.stamp.0 > header.fst.0
    {
        return None;
    }
    let mut hasher = blake3::Hasher::new();
    hasher.update(&bytes[40..HEADER_LEN]);
    hasher.update(&bytes[header.files_off as usize..]);
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
        if end > header.strings.0 + header.strings.1 || r.blob.0.checked_add(u64::from(r.blob.1))? > header.blobs.1 {
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

/// (file id, symbol or name id) pairs of one posting list.
type Pairs = Vec<(u32, u32)>;

/// A file of the index being written: one kept from the previous index (its blob is copied as
/// it is), or one parsed now.
pub enum Source<'a> {
    Kept { record: Record, rel: &'a str },
    New { rel: &'a str, size: u64, mtime_ns: i64, hash: [u8; 32], lang: Lang, syntax: &'a FileSyntax },
}

impl Source<'_> {
    pub fn rel(&self) -> &str {
        match self {
            Source::Kept { rel, .. } | Source::New { rel, .. } => rel,
        }
    }
}

/// Writes an index of `files` (sorted by path, unique) to `out`. Posting lists of kept files
/// come from `previous` (whose file ids `old_ids` maps to the new ones); new files' names are
/// gathered from their syntax. Nothing of a kept file is decoded.
pub fn write<W: Write + Seek>(
    out: &mut W,
    files: &[Source],
    previous: Option<&Opened>,
    old_ids: &[Option<u32>],
    stamp: &[u8],
) -> std::io::Result<()> {
    let mut position = HEADER_LEN as u64;
    out.write_all(&[0u8; HEADER_LEN])?;

    // Names of the new files, with new ids.
    let mut fresh: BTreeMap<std::borrow::Cow<str>, (Pairs, Pairs)> = BTreeMap::new();
    let mut n_symbols = 0u64;
    for (id, f) in files.iter().enumerate() {
        match f {
            Source::New { syntax, .. } => {
                n_symbols += syntax.symbols.len() as u64;
                for (si, s) in syntax.symbols.iter().enumerate() {
                    fresh.entry(s.name.as_str().into()).or_default().0.push((id as u32, si as u32));
                }
                for (ni, n) in syntax.names.iter().enumerate() {
                    fresh.entry(n.as_str().into()).or_default().1.push((id as u32, ni as u32));
                }
                for (ii, import) in syntax.imports.iter().enumerate() {
                    for word in import_words(&import.text) {
                        let list = &mut fresh.entry(format!("{IMPORT_KEY}{word}").into()).or_default().0;
                        if list.last() != Some(&(id as u32, ii as u32)) {
                            list.push((id as u32, ii as u32));
                        }
                    }
                }
            }
            Source::Kept { .. } => {}
        }
    }

    // Postings: the previous index's names and the new ones, merged in key order.
    let postings_off = position;
    let mut fst = fst::MapBuilder::memory();
    let mut buf: Vec<u8> = Vec::new();
    let mut emit = |key: &[u8], defs: &mut Vec<(u32, u32)>, refs: &mut Vec<(u32, u32)>, position: &mut u64| {
        if defs.is_empty() && refs.is_empty() {
            return Ok(());
        }
        defs.sort_unstable();
        refs.sort_unstable();
        buf.clear();
        buf.extend_from_slice(&(defs.len() as u32).to_le_bytes());
        buf.extend_from_slice(&(refs.len() as u32).to_le_bytes());
        for (a, b) in defs.iter().chain(refs.iter()) {
            buf.extend_from_slice(&a.to_le_bytes());
            buf.extend_from_slice(&b.to_le_bytes());
        }
        let offset = *position - postings_off;
        out.write_all(&crc32fast::hash(&buf).to_le_bytes())?;
        out.write_all(&buf)?;
        *position += 4 + buf.len() as u64;
        fst.insert(key, offset).map_err(std::io::Error::other)
    };
    let remap = |pairs: &mut dyn Iterator<Item = (u32, u32)>, into: &mut Vec<(u32, u32)>| {
        into.extend(pairs.filter_map(|(f, i)| old_ids.get(f as usize).copied().flatten().map(|n| (n, i))));
    };
    let mut fresh_iter = fresh.into_iter().peekable();
    let (mut defs, mut refs) = (Vec::new(), Vec::new());
    if let Some(prev) = previous {
        use fst::Streamer;
        let mut stream = prev.fst.stream();
        while let Some((key, offset)) = stream.next() {
            // New names that sort before this one.
            while let Some((k, _)) = fresh_iter.peek()
                && k.as_bytes() < key
            {
                let Some((k, (mut d, mut r))) = fresh_iter.next() else { break };
                emit(k.as_bytes(), &mut d, &mut r, &mut position)?;
            }
            defs.clear();
            refs.clear();
            let list = prev.postings(offset).ok_or_else(|| std::io::Error::other("corrupt posting list"))?;
            remap(&mut list.defs(), &mut defs);
            remap(&mut list.refs(), &mut refs);
            if let Some((k, _)) = fresh_iter.peek()
                && k.as_bytes() == key
                && let Some((_, (d, r))) = fresh_iter.next()
            {
                defs.extend(d);
                refs.extend(r);
            }
            let key = key.to_vec();
            emit(&key, &mut defs, &mut refs, &mut position)?;
        }
    }
    for (k, (mut d, mut r)) in fresh_iter {
        emit(k.as_bytes(), &mut d, &mut r, &mut position)?;
    }
    let postings = (postings_off, position - postings_off);

    // Blobs, and the records that point at them.
    let blobs_off = position;
    let mut records = Vec::with_capacity(files.len());
    let mut strings = Vec::new();
    for f in files {
        let rel = (strings.len() as u64, f.rel().len() as u32);
        strings.extend_from_slice(f.rel().as_bytes());
        let at = position - blobs_off;
        let record = match f {
            Source::Kept { record, .. } => {
                let prev = previous.ok_or_else(|| std::io::Error::other("a kept file without a previous index"))?;
                let blob = prev.blob(record).ok_or_else(|| std::io::Error::other("corrupt blob"))?;
                n_symbols += blob_symbols(blob);
                out.write_all(blob)?;
                position += blob.len() as u64;
                Record { rel, blob: (at, record.blob.1, record.blob.2), ..*record }
            }
            Source::New { size, mtime_ns, hash, lang, syntax, .. } => {
                let blob = encode_blob(syntax)?;
                out.write_all(&blob)?;
                position += blob.len() as u64;
                Record {
                    rel,
                    lang: *lang,
                    size: *size,
                    mtime_ns: *mtime_ns,
                    hash: *hash,
                    blob: (at, blob.len() as u32, crc32fast::hash(&blob)),
                }
            }
        };
        records.push(record);
    }
    let blobs = (blobs_off, position - blobs_off);

    // The checksummed tables.
    let mut tables = Vec::with_capacity(records.len() * RECORD_LEN + strings.len() + stamp.len());
    for r in &records {
        r.encode(&mut tables);
    }
    let files_off = position;
    let strings_off = files_off + tables.len() as u64;
    tables.extend_from_slice(&strings);
    let stamp_off = files_off + tables.len() as u64;
    tables.extend_from_slice(stamp);
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
        stamp: (stamp_off, stamp.len() as u64),
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

/// A file's blob: `u32` length of the core, the core (postcard: symbols, imports and the
/// flags), the names (postcard), then the occurrences as fixed 16-byte records (name, line,
/// column, enclosing + 1 or 0), sorted by name then position, so a reference lookup reads
/// them in place, without decoding the file.
#[derive(serde::Serialize)]
struct CoreRef<'a> {
    symbols: &'a [crate::syntax::Symbol],
    imports: &'a [crate::syntax::Import],
    line_count: u32,
    has_errors: bool,
    symbols_left_out: u32,
    parse_stopped: bool,
}

#[derive(serde::Deserialize)]
struct Core {
    symbols: Vec<crate::syntax::Symbol>,
    imports: Vec<crate::syntax::Import>,
    line_count: u32,
    has_errors: bool,
    symbols_left_out: u32,
    parse_stopped: bool,
}

const OCCURRENCE_LEN: usize = 16;

fn encode_blob(syntax: &FileSyntax) -> std::io::Result<Vec<u8>> {
    let core = CoreRef {
        symbols: &syntax.symbols,
        imports: &syntax.imports,
        line_count: syntax.line_count,
        has_errors: syntax.has_errors,
        symbols_left_out: syntax.symbols_left_out,
        parse_stopped: syntax.parse_stopped,
    };
    let core = postcard::to_allocvec(&core).map_err(std::io::Error::other)?;
    let names = postcard::to_allocvec(&syntax.names).map_err(std::io::Error::other)?;
    let mut out = Vec::with_capacity(8 + core.len() + names.len() + syntax.refs.len() * OCCURRENCE_LEN);
    out.extend_from_slice(&(core.len() as u32).to_le_bytes());
    out.extend_from_slice(&core);
    out.extend_from_slice(&(names.len() as u32).to_le_bytes());
    out.extend_from_slice(&names);
    for o in &syntax.refs {
        out.extend_from_slice(&o.name.to_le_bytes());
        out.extend_from_slice(&o.line.to_le_bytes());
        out.extend_from_slice(&o.column.to_le_bytes());
        out.extend_from_slice(&o.enclosing.map_or(0, |e| e + 1).to_le_bytes());
    }
    Ok(out)
}

/// The blob's three parts: core, names, occurrences.
fn blob_parts(blob: &[u8]) -> Option<(&[u8], &[u8], &[u8])> {
    let core_len = u32_at(blob, 0)? as usize;
    let core = blob.get(4..4 + core_len)?;
    let names_len = u32_at(blob, 4 + core_len)? as usize;
    let names_start = 8 + core_len;
    let names = blob.get(names_start..names_start + names_len)?;
    let refs = blob.get(names_start + names_len..)?;
    (refs.len() % OCCURRENCE_LEN == 0).then_some((core, names, refs))
}

fn occurrence(r: &[u8]) -> crate::syntax::Occurrence {
    let at = |i: usize| u32::from_le_bytes([r[i], r[i + 1], r[i + 2], r[i + 3]]);
    crate::syntax::Occurrence { name: at(0), line: at(4), column: at(8), enclosing: at(12).checked_sub(1) }
}

/// The occurrences of the name with id `name` in a blob, read in place.
pub fn blob_occurrences(blob: &[u8], name: u32) -> Option<Vec<crate::syntax::Occurrence>> {
    let (_, _, refs) = blob_parts(blob)?;
    // Binary search over the records by their first field, in place.
    let record = |i: usize| &refs[i * OCCURRENCE_LEN..(i + 1) * OCCURRENCE_LEN];
    let name_at = |i: usize| occurrence(record(i)).name;
    let count = refs.len() / OCCURRENCE_LEN;
    let first_not_below = |bound: u32| {
        let (mut low, mut high) = (0, count);
        while low < high {
            let mid = (low + high) / 2;
            if name_at(mid) < bound { low = mid + 1 } else { high = mid }
        }
        low
    };
    let start = first_not_below(name);
    let end = name.checked_add(1).map_or(count, first_not_below);
    Some((start..end).map(|i| occurrence(record(i))).collect())
}

/// How many symbols a stored blob holds: postcard writes the symbol list's length first.
fn blob_symbols(blob: &[u8]) -> u64 {
    let mut n = 0u64;
    for (i, byte) in blob.iter().skip(4).take(10).enumerate() {
        n |= u64::from(byte & 0x7f) << (7 * i);
        if byte & 0x80 == 0 {
            break;
        }
    }
    n
}

/// Decodes a blob.
pub fn decode_syntax(blob: &[u8]) -> Option<FileSyntax> {
    let (core, names, refs) = blob_parts(blob)?;
    let core: Core = postcard::from_bytes(core).ok()?;
    let names: Vec<String> = postcard::from_bytes(names).ok()?;
    let refs = refs.chunks_exact(OCCURRENCE_LEN).map(occurrence).collect();
    Some(FileSyntax {
        symbols: core.symbols,
        names,
        refs,
        imports: core.imports,
        line_count: core.line_count,
        has_errors: core.has_errors,
        symbols_left_out: core.symbols_left_out,
        parse_stopped: core.parse_stopped,
    })
}
