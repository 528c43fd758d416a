//! The pieces of a refresh that the whole refresh ([`super::refresh`]) and the delta refresh
//! ([`super::delta`]) share: which walked files the index holds, how one file is indexed, and
//! how the files of the refreshed index are laid out from the stored indexes they keep.

use super::format::{self, Previous, Source};
use super::{FileMeta, IndexedFile, SymbolIndex};
use crate::config::Config;
use crate::lang::Lang;
use crate::repo::Repo;
use crate::syntax;
use crate::walk::{self, WalkedFile};

/// What a refresh did, and which files it could not index.
#[derive(Debug, Default, Clone)]
pub struct RefreshReport {
    pub files: usize,
    pub parsed: usize,
    pub removed: usize,
    pub changed: bool,
    pub too_large: Vec<(String, u64)>,
    pub binary: Vec<String>,
    /// The directories the walk entered: what a file watcher needs to watch.
    pub dirs: Vec<std::path::PathBuf>,
    /// The directories passed over as other repositories (they hold `.git`), relative.
    pub nested: Vec<String>,
    /// Source files that could not be read (tried again on every refresh).
    pub unreadable: Vec<String>,
    /// Set when the answer came from [`super::refresh::refresh_subset`] (no index yet), not from the index.
    pub fast_path: Option<FastPath>,
    /// The overlay has grown past its threshold: fold it into the base
    /// ([`super::compact`]), in the background.
    pub compaction_due: bool,
}

pub(super) enum Outcome {
    /// Unchanged: the live file with this id.
    Keep(u32),
    /// The live file with this id, its content unchanged and its time moved.
    Touch(u32, i64),
    /// The base's file with this id: the content is the base's again (an edit undone, a branch
    /// switched back), at this time.
    Restore(u32, i64),
    New(Box<IndexedFile>),
    /// Parsed, and stored aside in segment `.0` as its file `.1` (the refresh's segments).
    Segment(u32, u32),
    Binary(String),
    Unreadable(String),
}

/// Where a file of the refreshed index comes from: file `id` of a stored index (the base, the
/// overlay or a segment: its `slot`), whose record (with its time brought up to date) is
/// copied, or a file parsed now.
pub(super) enum Place<'a> {
    Stored { slot: usize, id: u32, record: format::Record, rel: &'a str },
    New(&'a IndexedFile),
}

/// The slots of [`Place::Stored`]: the base, the overlay, then segment `k` at `SEGMENT + k`.
pub(super) const BASE: usize = 0;
pub(super) const OVERLAY: usize = 1;

/// The sources of the `places` that `keep` accepts, in order, each kept one pointing at its
/// slot's position among the slots present; and, per slot, the new ids of its files.
pub(super) fn plan<'a>(
    places: &[Place<'a>],
    slots: &[Option<&format::Opened>],
    keep: impl Fn(&Place) -> bool,
) -> (Vec<Source<'a>>, Vec<Vec<Option<u32>>>) {
    let position: Vec<usize> = slots
        .iter()
        .scan(0, |next, s| {
            let at = *next;
            *next += usize::from(s.is_some());
            Some(at)
        })
        .collect();
    let mut ids: Vec<Vec<Option<u32>>> = slots.iter().map(|s| vec![None; s.map_or(0, |o| o.records.len())]).collect();
    let mut files = Vec::with_capacity(places.len());
    for place in places.iter().filter(|p| keep(p)) {
        match place {
            Place::Stored { slot, id, record, rel } => {
                if let Some(new_id) = ids.get_mut(*slot).and_then(|v| v.get_mut(*id as usize)) {
                    *new_id = Some(files.len() as u32);
                }
                files.push(Source::Kept {
                    record: *record,
                    rel,
                    from: position.get(*slot).copied().unwrap_or(usize::MAX),
                });
            }
            Place::New(f) => files.push(f.as_source()),
        }
    }
    (files, ids)
}

/// The slots present, as `format::write` takes them.
pub(super) fn parts_of<'a>(slots: &[Option<&'a format::Opened>], ids: &'a [Vec<Option<u32>>]) -> Vec<Previous<'a>> {
    slots.iter().zip(ids).filter_map(|(s, new_ids)| Some(Previous { opened: (*s)?, new_ids })).collect()
}

/// From how many files to parse on, a refresh stores what it parsed aside a segment at a time
/// (a few in the unit tests, so their builds are merged from segments).
#[cfg(not(test))]
pub(super) const SEGMENT_FILES: usize = 1024;
#[cfg(test)]
pub(super) const SEGMENT_FILES: usize = 4;

/// The files the index holds among `files`: those under the configured source directories, in
/// a language it parses, each with that language.
pub(super) fn source_candidates(repo: &Repo, config: &Config, files: Vec<WalkedFile>) -> Vec<(WalkedFile, Lang)> {
    let sources = config.source_prefixes(repo.root());
    files
        .into_iter()
        .filter(|f| Config::in_source_dirs(&sources, &f.rel))
        .filter_map(|f| Lang::detect(f.rel.as_ref()).map(|l| (f, l)))
        .collect()
}

pub(super) fn index_file(
    file: &WalkedFile,
    lang: Lang,
    old: Option<(u32, &FileMeta)>,
    previous: &SymbolIndex,
) -> Outcome {
    let Ok(bytes) = std::fs::read(&file.abs) else { return Outcome::Unreadable(file.rel.clone()) };
    if walk::looks_binary(&bytes) {
        return Outcome::Binary(file.rel.clone());
    }
    let hash = *blake3::hash(&bytes).as_bytes();
    if let Some((i, o)) = old
        && o.hash == hash
        && o.lang == lang
    {
        return Outcome::Touch(i, file.mtime_ns);
    }
    // The base's own version (behind the overlay's, or removed): nothing to parse.
    if let Some((id, base)) = previous.base_meta(&file.rel)
        && base.hash == hash
        && base.lang == lang
        && base.size == bytes.len() as u64
    {
        return Outcome::Restore(id, file.mtime_ns);
    }
    Outcome::New(Box::new(IndexedFile {
        rel: file.rel.clone(),
        size: bytes.len() as u64,
        mtime_ns: file.mtime_ns,
        hash,
        lang,
        syntax: syntax::extract(lang, &bytes),
    }))
}

/// How a lookup was answered before the index existed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FastPath {
    /// Source files that could matter, parsed for this answer.
    pub parsed: usize,
    /// Source files the walk saw.
    pub source_files: usize,
    /// What the candidates were chosen by (the words, or the paths).
    pub by: String,
}
