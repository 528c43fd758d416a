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
use super::cache::Key;
use super::chunk::chunk_file;
use super::embed::Embedder;
use super::forest::{Forest, StoredChunk, embedding_text, key_of};
use super::share::{Found, SharedVectors};
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
    /// When this process loaded the model, the Forest on disk had been made with another
    /// embedding model, chunking or embedding text: it was set aside and rebuilt, so vectors
    /// made in two ways are never mixed. Every report of that process says so.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub replaced_forest: bool,
    /// What the agent should know about this sync (from the contract), when anything.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    pub elapsed_ms: u64,
    /// The embedding model the Forest is made with (its directory's name).
    pub model: String,
    /// Chunks whose vectors came from a shared Forest (`refs/code-intel/forest`, or a remote's
    /// staged one) instead of the model.
    pub shared_used: usize,
    /// Of those, vectors checked against the model by embedding their chunk here.
    pub shared_checked: usize,
    /// Shared records refused by the checks (not a unit vector, a scale out of range, …).
    pub shared_refused: usize,
    /// What happened with the shared Forests: refused sources and records, and any found
    /// poisoned (their vectors are embedded here instead, and they are never read again).
    pub shared_notes: Vec<String>,
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
    /// This clone's own vectors: only what its model embedded (never a shared Forest's).
    pub cache: &'a Mutex<EmbeddingCache>,
    pub progress: &'a Progress,
    /// The model's fingerprint: which shared Forests hold vectors of this model.
    pub model: [u8; 32],
    /// Take vectors from the shared Forests (false: a rebuild, which embeds everything this
    /// clone has not embedded itself).
    pub use_shared: bool,
}

/// Shared vectors checked against the model per slice: enough to catch a Forest whose vectors
/// are wrong wholesale at its first slice, for about 2% more embedding.
const SHARED_CHECKS_PER_SLICE: usize = 2;
/// A shared vector this close (cosine) to the model's own is the model's: int8 keeps it above
/// 0.999.
const SHARED_AGREEMENT: f32 = 0.98;
/// Syncs again at most this many times when shared Forests are found poisoned during a sync.
const MAX_POISON_PASSES: usize = 4;

/// Brings the Forest up to date with the work tree; `on_slice(done, total)` after each slice.
/// Vectors come from this clone's cache, then from the shared Forests (checked), then from the
/// model. When a shared Forest is found poisoned on the way, the chunks it gave are resolved
/// again without it.
pub fn sync(cx: &SyncContext, on_slice: &dyn Fn(usize, usize)) -> Result<SyncReport, Error> {
    let started = Instant::now();
    let mut total = SyncReport::default();
    for pass in 0..MAX_POISON_PASSES {
        let (report, poisoned) = sync_once(cx, on_slice)?;
        if pass == 0 {
            total = report;
        } else {
            total.files_changed += report.files_changed;
            total.chunks_added += report.chunks_added;
            total.chunks_removed += report.chunks_removed;
            total.embedded += report.embedded;
            total.cache_hits += report.cache_hits;
            total.shared_used += report.shared_used;
            total.shared_checked += report.shared_checked;
            total.shared_refused += report.shared_refused;
            total.shared_notes.extend(report.shared_notes);
            total.files = report.files;
            total.chunks = report.chunks;
        }
        if !poisoned {
            break;
        }
    }
    total.elapsed_ms = started.elapsed().as_millis() as u64;
    Ok(total)
}

/// One sync; also says whether a shared Forest was found poisoned (then the chunks it gave
/// are marked for the next pass).
fn sync_once(cx: &SyncContext, on_slice: &dyn Fn(usize, usize)) -> Result<(SyncReport, bool), Error> {
    let started = Instant::now();
    let mut report = SyncReport::default();
    let dim = cx.embedder.dimension;
    let mut shared = if cx.use_shared {
        let distrusted = cx.forest.read().unwrap_or_else(|p| p.into_inner()).distrusted.clone();
        SharedVectors::open(cx.repo.root(), &cx.model, dim, &distrusted)
    } else {
        SharedVectors::none(dim)
    };
    settle_shared(cx, &mut shared);
    let walked = walk::walk(cx.repo, cx.config, cx.repo.root(), &WalkOptions::default())
        .map_err(|e| Error::Walk(std::sync::Arc::new(e)))?;
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
                .map(|chunk| StoredChunk { key: key_of(&chunk), chunk, shared: None })
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
    let recent = code_intel_gitstate::recently_changed(cx.repo.root(), code_intel_gitstate::RECENT_COMMITS);
    changed.sort_by_cached_key(|c| (recent.get(&c.rel).copied().unwrap_or(usize::MAX), c.rel.clone()));

    let total: usize = changed.iter().map(|c| c.chunks.len()).sum();
    cx.progress.total.store(total, Ordering::Relaxed);
    cx.progress.done.store(0, Ordering::Relaxed);
    cx.progress.embedding.store(true, Ordering::Relaxed);
    report.files_changed = changed.len();

    // Slices of whole files, about SLICE_CHUNKS chunks each.
    let mut done = 0;
    let mut stopped = false;
    let mut poisoned: Vec<[u8; 20]> = Vec::new();
    let mut slice: Vec<Changed> = Vec::new();
    let mut slice_chunks = 0;
    let mut pending = changed.into_iter().peekable();
    while let Some(c) = pending.next() {
        slice_chunks += c.chunks.len();
        slice.push(c);
        if slice_chunks >= SLICE_CHUNKS || pending.peek().is_none() {
            let Some(n) = apply_slice(cx, std::mem::take(&mut slice), &mut report, &mut shared, &mut poisoned)? else {
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
    // What a poisoned Forest gave before it was caught is resolved again by the next pass.
    for tip in &poisoned {
        if !forest.distrusted.contains(tip) {
            forest.distrusted.push(*tip);
        }
    }
    if !poisoned.is_empty() {
        for (file, _, origin) in forest.shared_chunks() {
            if poisoned.contains(&origin.tip) {
                forest.forget_file(&file);
            }
        }
    }
    report.shared_refused += shared.refused;
    report.shared_notes.append(&mut shared.notes);
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
    Ok((report, !poisoned.is_empty()))
}

/// Before a sync: the chunks whose vectors came from shared Forests that are no longer in use
/// (a fetch moved them on, they were found poisoned, or a rebuild reads none) keep their vector
/// when a Forest in use still holds the very same record, and are resolved again otherwise.
fn settle_shared(cx: &SyncContext, shared: &mut SharedVectors) {
    let mut forest = cx.forest.write().unwrap_or_else(|p| p.into_inner());
    let tips = shared.tips();
    if forest.shared_tips == tips {
        return;
    }
    for (file, key, origin) in forest.shared_chunks() {
        if tips.contains(&origin.tip) {
            continue;
        }
        match shared.lookup(&key) {
            Some(found) if found.origin.record == origin.record => {
                forest.retag_shared(&file, &key, origin, found.origin)
            }
            _ => forest.forget_file(&file),
        }
    }
    forest.shared_tips = tips;
}

/// Embeds what neither the cache nor a shared Forest holds for `slice`, then swaps its files
/// into the Forest. Returns None, with nothing applied, when asked to stop between two
/// batches; the vectors embedded so far stay in the cache, so the next sync does not embed them
/// again. A shared vector that the model disagrees with marks its Forest `poisoned`.
fn apply_slice(
    cx: &SyncContext,
    mut slice: Vec<Changed>,
    report: &mut SyncReport,
    shared: &mut SharedVectors,
    poisoned: &mut Vec<[u8; 20]>,
) -> Result<Option<usize>, Error> {
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
    // Identical chunk texts in one slice are resolved once.
    let mut unique: Vec<(usize, usize)> = Vec::new();
    let mut seen = std::collections::HashSet::new();
    for &(fi, ci) in &missing {
        if seen.insert(slice[fi].chunks[ci].key) {
            unique.push((fi, ci));
        }
    }
    // Then the shared Forests, spot-checked against the model.
    let mut from_shared: std::collections::HashMap<Key, Found> = std::collections::HashMap::new();
    if !shared.is_empty() {
        for &(fi, ci) in &unique {
            let key = slice[fi].chunks[ci].key;
            if let Some(found) = shared.lookup(&key) {
                from_shared.insert(key, found);
            }
        }
        check_shared(cx, &slice, &unique, &mut from_shared, shared, poisoned, report)?;
    }
    // What is left to embed: neither shared nor embedded by the spot checks just now.
    {
        let cache = cx.cache.lock().unwrap_or_else(|p| p.into_inner());
        unique.retain(|&(fi, ci)| {
            let key = &slice[fi].chunks[ci].key;
            !from_shared.contains_key(key) && cache.get(key).is_none()
        });
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
    for c in &mut slice {
        for sc in &mut c.chunks {
            sc.shared = from_shared.get(&sc.key).map(|f| f.origin);
        }
    }
    report.shared_used += slice.iter().flat_map(|c| &c.chunks).filter(|c| c.shared.is_some()).count();
    let total: usize = slice.iter().map(|c| c.chunks.len()).sum();
    report.cache_hits += total - missing.len();

    let cache = cx.cache.lock().unwrap_or_else(|p| p.into_inner());
    let mut prepared = Vec::with_capacity(slice.len());
    for c in slice {
        let mut flat = Vec::with_capacity(c.chunks.len() * dim);
        for sc in &c.chunks {
            match (cache.get(&sc.key), from_shared.get(&sc.key)) {
                (Some(v), _) => flat.extend_from_slice(v),
                (None, Some(found)) => flat.extend_from_slice(&found.vector),
                (None, None) => {
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

/// Embeds a few of the slice's shared vectors' chunks here and compares: a Forest whose vector
/// the model disagrees with is poisoned (wrong vectors, a swap, another model under this one's
/// name). Its vectors are dropped from `from_shared` (embedded instead) and it is not read again.
/// A vector that agrees is replaced by the model's own, which goes into the cache.
fn check_shared(
    cx: &SyncContext,
    slice: &[Changed],
    unique: &[(usize, usize)],
    from_shared: &mut std::collections::HashMap<Key, Found>,
    shared: &mut SharedVectors,
    poisoned: &mut Vec<[u8; 20]>,
    report: &mut SyncReport,
) -> Result<(), Error> {
    let candidates: Vec<(usize, usize)> =
        unique.iter().copied().filter(|&(fi, ci)| from_shared.contains_key(&slice[fi].chunks[ci].key)).collect();
    let mut picked: Vec<(usize, usize)> = Vec::new();
    let mut rng = fastrand::Rng::new();
    while picked.len() < SHARED_CHECKS_PER_SLICE.min(candidates.len()) {
        let pick = candidates[rng.usize(..candidates.len())];
        if !picked.contains(&pick) {
            picked.push(pick);
        }
    }
    if picked.is_empty() {
        return Ok(());
    }
    let texts: Vec<String> = picked.iter().map(|&(fi, ci)| embedding_text(&slice[fi].chunks[ci].chunk)).collect();
    let vectors = cx.embedder.embed(&texts)?;
    report.shared_checked += picked.len();
    report.embedded += picked.len();
    for (&(fi, ci), own) in picked.iter().zip(&vectors) {
        let key = slice[fi].chunks[ci].key;
        let Some(found) = from_shared.get(&key) else { continue };
        let cosine: f32 = own.iter().zip(&found.vector).map(|(a, b)| a * b).sum();
        let tip = found.origin.tip;
        if cosine < SHARED_AGREEMENT {
            let note = format!(
                "the shared Forest at commit {} gave a vector the model disagrees with (cosine {cosine:.3} for {}); its vectors are embedded here instead, and it is not read again",
                tip.iter().map(|b| format!("{b:02x}")).collect::<String>(),
                slice[fi].chunks[ci].chunk.id
            );
            tracing::warn!("{note}");
            report.shared_notes.push(note);
            poisoned.push(tip);
            shared.drop_source(tip);
            from_shared.retain(|_, f| f.origin.tip != tip);
        }
        cx.cache.lock().unwrap_or_else(|p| p.into_inner()).insert(key, own);
        from_shared.remove(&key);
    }
    Ok(())
}
