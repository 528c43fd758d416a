//! Incremental sync of the Forest with the work tree.
//!
//! A file is re-read only when its size or mtime changed, and re-chunked only when its blake3
//! fingerprint changed. The chunks and vectors of modified and deleted files are removed from
//! faiss and BM25. Vectors come from the embedding cache when the chunk text was embedded
//! before; the rest are embedded in slices, and each slice is applied as soon as it is done, so
//! a search made during a long sync sees what is there so far (marked partial by the caller).

use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Mutex, RwLock};
use std::time::Instant;

use rayon::prelude::*;

use super::cache::EmbeddingCache;
use super::chunk::chunk_file;
use super::embed::Embedder;
use super::forest::{Forest, StoredChunk, embedding_text, key_of};
use crate::Error;
use code_intel_codebase::config::Config;
use code_intel_codebase::lang::Lang;
use code_intel_codebase::repo::Repo;
use code_intel_codebase::walk::{self, WalkOptions};

/// Files without a grammar that the Forest still holds, as line windows.
const TEXT_EXTENSIONS: &[&str] = &["md", "markdown", "rst", "txt", "toml", "yaml", "yml", "sh", "bash", "sql", "proto"];
/// Chunks embedded per slice; a slice is applied to the Forest at once.
const SLICE_CHUNKS: usize = 128;

/// What a sync did.
#[derive(Debug, Clone, Default, serde::Serialize, schemars::JsonSchema)]
pub struct SyncReport {
    /// Files the Forest covers now.
    pub files: usize,
    pub chunks: usize,
    /// Files whose content changed (or are new) and were chunked again.
    pub files_changed: usize,
    pub files_removed: usize,
    pub chunks_added: usize,
    pub chunks_removed: usize,
    /// Chunks sent to the model.
    pub embedded: usize,
    /// Chunks whose vector came from the embedding cache.
    pub cache_hits: usize,
    /// The Forest was discarded and rebuilt (`--rebuild`, or an unreadable index).
    pub rebuilt: bool,
    pub elapsed_ms: u64,
    /// The embedding model the Forest is made with (its directory's name).
    pub model: String,
}

/// A running sync's progress, readable while it runs.
#[derive(Debug, Default)]
pub struct Progress {
    pub running: AtomicBool,
    pub done: AtomicUsize,
    pub total: AtomicUsize,
    /// The files are read and chunked: `total` is known and embedding runs.
    pub embedding: AtomicBool,
    /// Asks a running sync to stop at its next slice boundary (the server is shutting down).
    pub stop: AtomicBool,
}

/// Whether the Forest holds `rel`: a file with a grammar, or a text file of a known kind.
pub fn covers(rel: &str) -> bool {
    let path = Path::new(rel);
    if Lang::detect(path).is_some() {
        return true;
    }
    path.extension()
        .and_then(|e| e.to_str())
        .is_some_and(|e| TEXT_EXTENSIONS.contains(&e.to_ascii_lowercase().as_str()))
}

struct Changed {
    rel: String,
    stat: (u64, i64, [u8; 32]),
    chunks: Vec<StoredChunk>,
}

enum Scan {
    /// Same content, new mtime.
    Touch(String, i64),
    Changed(Changed),
    Gone(String),
}

pub struct SyncContext<'a> {
    pub repo: &'a Repo,
    pub config: &'a Config,
    pub forest: &'a RwLock<Forest>,
    pub embedder: &'a Embedder,
    pub cache: &'a Mutex<EmbeddingCache>,
    pub progress: &'a Progress,
}

/// Brings the Forest up to date with the work tree; `on_slice(done, total)` after each slice.
pub fn sync(cx: &SyncContext, on_slice: &dyn Fn(usize, usize)) -> Result<SyncReport, Error> {
    let started = Instant::now();
    let mut report = SyncReport::default();
    let walked = walk::walk(cx.repo, cx.config, cx.repo.root(), &WalkOptions::default())
        .map_err(|e| Error::Walk(e.to_string()))?;
    let sources = cx.config.source_prefixes(cx.repo.root());
    let candidates: Vec<walk::WalkedFile> = walked
        .files
        .into_iter()
        .filter(|f| covers(&f.rel) && code_intel_codebase::config::Config::in_source_dirs(&sources, &f.rel))
        .collect();
    let max_tokens = (cx.config.chunk_max_tokens as usize).max(32);
    let by_syntax = cx.config.chunking() != Some(code_intel_codebase::config::ChunkStrategy::Lines);

    // What to read again, what is gone, and the old fingerprints to compare with: one read of
    // the Forest.
    let (to_scan, deleted, old_hashes) = {
        let forest = cx.forest.read().unwrap_or_else(|p| p.into_inner());
        let present: std::collections::HashSet<&str> = candidates.iter().map(|f| f.rel.as_str()).collect();
        let deleted: Vec<String> = forest.files.keys().filter(|rel| !present.contains(rel.as_str())).cloned().collect();
        let to_scan: Vec<&walk::WalkedFile> = candidates
            .iter()
            .filter(|f| forest.files.get(&f.rel).is_none_or(|e| e.size != f.size || e.mtime_ns != f.mtime_ns))
            .collect();
        let old_hashes: std::collections::HashMap<String, [u8; 32]> =
            to_scan.iter().filter_map(|f| forest.files.get(&f.rel).map(|e| (f.rel.clone(), e.hash))).collect();
        (to_scan, deleted, old_hashes)
    };
    let scans: Vec<Scan> = to_scan
        .par_iter()
        .map(|f| {
            let Ok(bytes) = std::fs::read(&f.abs) else { return Scan::Gone(f.rel.clone()) };
            if walk::looks_binary(&bytes) {
                return Scan::Gone(f.rel.clone());
            }
            let hash = *blake3::hash(&bytes).as_bytes();
            if old_hashes.get(&f.rel) == Some(&hash) {
                return Scan::Touch(f.rel.clone(), f.mtime_ns);
            }
            let source = String::from_utf8_lossy(&bytes);
            let lang = Lang::detect(Path::new(&f.rel)).filter(|_| by_syntax);
            let syntax = lang.map(|l| (l, code_intel_codebase::syntax::extract(l, &bytes)));
            let chunks = chunk_file(&f.rel, &source, syntax.as_ref().map(|(l, s)| (*l, s)), max_tokens)
                .into_iter()
                .map(|chunk| StoredChunk { key: key_of(&chunk), chunk })
                .collect();
            Scan::Changed(Changed { rel: f.rel.clone(), stat: (bytes.len() as u64, f.mtime_ns, hash), chunks })
        })
        .collect();

    let mut changed: Vec<Changed> = Vec::new();
    let mut gone = deleted;
    {
        let mut forest = cx.forest.write().unwrap_or_else(|p| p.into_inner());
        for scan in scans {
            match scan {
                Scan::Touch(rel, mtime) => {
                    if let Some(e) = forest.files.get_mut(&rel) {
                        e.mtime_ns = mtime;
                    }
                }
                Scan::Changed(c) => changed.push(c),
                Scan::Gone(rel) => gone.push(rel),
            }
        }
        for rel in &gone {
            report.chunks_removed += forest.remove_file(rel)?;
        }
    }
    report.files_removed = gone.len();

    // Embed first what is most likely to be asked about: the files the recent history changed,
    // newest first; then the rest in path order.
    let recent =
        code_intel_gitstate::history::recently_changed(cx.repo.root(), code_intel_gitstate::history::RECENT_COMMITS);
    changed.sort_by_cached_key(|c| (recent.get(&c.rel).copied().unwrap_or(usize::MAX), c.rel.clone()));

    let total: usize = changed.iter().map(|c| c.chunks.len()).sum();
    cx.progress.total.store(total, Ordering::Relaxed);
    cx.progress.done.store(0, Ordering::Relaxed);
    cx.progress.embedding.store(true, Ordering::Relaxed);
    report.files_changed = changed.len();

    // Slices of whole files, about SLICE_CHUNKS chunks each.
    let mut done = 0;
    let mut stopped = false;
    let mut slice: Vec<Changed> = Vec::new();
    let mut slice_chunks = 0;
    let mut pending = changed.into_iter().peekable();
    while let Some(c) = pending.next() {
        slice_chunks += c.chunks.len();
        slice.push(c);
        if slice_chunks >= SLICE_CHUNKS || pending.peek().is_none() {
            let Some(n) = apply_slice(cx, std::mem::take(&mut slice), &mut report)? else {
                stopped = true;
                break;
            };
            done += n;
            slice_chunks = 0;
            cx.progress.done.store(done, Ordering::Relaxed);
            on_slice(done, total);
            if cx.progress.stop.load(Ordering::Relaxed) {
                stopped = true;
                break;
            }
        }
    }

    let mut forest = cx.forest.write().unwrap_or_else(|p| p.into_inner());
    // A stopped sync saves what it did; the files it did not reach still differ, so the next
    // sync takes them up.
    if !stopped {
        forest.synced_at = chrono::Utc::now().timestamp();
    }
    report.files = forest.files.len();
    report.chunks = forest.chunk_count();
    let mut cache = cx.cache.lock().unwrap_or_else(|p| p.into_inner());
    if let Err(e) = cache.save() {
        tracing::warn!("could not save the embedding cache: {e}");
    }
    if let Err(e) = cache.compact(forest.holds_key()) {
        tracing::warn!("could not compact the embedding cache: {e}");
    }
    drop(cache);
    if let Err(e) = forest.save(cx.repo.root()) {
        tracing::warn!("could not save the Forest: {e}");
    }
    report.elapsed_ms = started.elapsed().as_millis() as u64;
    Ok(report)
}

/// Embeds what the cache does not hold for `slice`, then swaps its files into the Forest.
/// Returns None, with nothing applied, when asked to stop between two batches; the vectors
/// embedded so far stay in the cache, so the next sync does not embed them again.
fn apply_slice(cx: &SyncContext, slice: Vec<Changed>, report: &mut SyncReport) -> Result<Option<usize>, Error> {
    let dim = cx.embedder.dimension;
    let mut missing: Vec<(usize, usize)> = Vec::new(); // (file in slice, chunk in file)
    {
        let cache = cx.cache.lock().unwrap_or_else(|p| p.into_inner());
        for (fi, c) in slice.iter().enumerate() {
            for (ci, sc) in c.chunks.iter().enumerate() {
                if cache.get(&sc.key).is_none() {
                    missing.push((fi, ci));
                }
            }
        }
    }
    // Identical chunk texts in one slice are embedded once.
    let mut unique: Vec<(usize, usize)> = Vec::new();
    let mut seen = std::collections::HashSet::new();
    for &(fi, ci) in &missing {
        if seen.insert(slice[fi].chunks[ci].key) {
            unique.push((fi, ci));
        }
    }
    if !unique.is_empty() {
        // Similar lengths share a batch, so batches are padded less.
        unique.sort_by_cached_key(|&(fi, ci)| embedding_text(&slice[fi].chunks[ci].chunk).len());
        for batch in unique.chunks(super::embed::BATCH) {
            if cx.progress.stop.load(Ordering::Relaxed) {
                return Ok(None);
            }
            let texts: Vec<String> =
                batch.iter().map(|&(fi, ci)| embedding_text(&slice[fi].chunks[ci].chunk)).collect();
            let vectors = cx.embedder.embed(&texts)?;
            let mut cache = cx.cache.lock().unwrap_or_else(|p| p.into_inner());
            for (&(fi, ci), v) in batch.iter().zip(&vectors) {
                cache.insert(slice[fi].chunks[ci].key, v);
            }
            report.embedded += batch.len();
        }
    }
    let total: usize = slice.iter().map(|c| c.chunks.len()).sum();
    report.cache_hits += total - missing.len();

    let cache = cx.cache.lock().unwrap_or_else(|p| p.into_inner());
    let mut prepared = Vec::with_capacity(slice.len());
    for c in slice {
        let mut flat = Vec::with_capacity(c.chunks.len() * dim);
        for sc in &c.chunks {
            match cache.get(&sc.key) {
                Some(v) => flat.extend_from_slice(v),
                None => {
                    return Err(Error::Embedding("a vector went missing from the cache".into()));
                }
            }
        }
        prepared.push((c, flat));
    }
    drop(cache);
    let mut forest = cx.forest.write().unwrap_or_else(|p| p.into_inner());
    for (c, flat) in prepared {
        let (removed, added) = forest.put_file(&c.rel, c.stat, c.chunks, &flat)?;
        report.chunks_removed += removed;
        report.chunks_added += added;
    }
    Ok(Some(total))
}
