//! Semantic search for one repository: the model (loaded on first use), the Forest, the
//! embedding cache, the Map's vector index, and the background sync.
//!
//! Freshness: a search starts a background sync when the Forest was never synced, when the
//! symbol index saw files change since the last sync, or when the last sync is older than
//! `sync_ttl_hours`. It waits for that sync up to [`sync_wait`]; a sync still running after
//! that gives partial results, marked as such.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, RwLock};
use std::time::Duration;

use super::cache::EmbeddingCache;
use super::embed::Embedder;
use super::forest::{DEFAULT_FUSION, Discarded, Forest, ForestHit, Fusion, forest_dir};
use super::map::{MapEntry, MapStore, Origin, Stored};
use super::sync::{self, Progress, SyncContext, SyncReport};
use super::vectors::VectorIndex;
use crate::Error;
use code_intel_codebase::config::Config;
use code_intel_codebase::repo::Repo;

/// How long a search waits for a running sync before answering with partial results
/// (`CODE_INTEL_SYNC_WAIT_MS` overrides it).
pub fn sync_wait() -> Duration {
    std::env::var("CODE_INTEL_SYNC_WAIT_MS")
        .ok()
        .and_then(|v| v.parse().ok())
        .map_or(Duration::from_secs(2), Duration::from_millis)
}

pub use crate::loaded::Loaded;

/// At most this many Map entries are searched (this clone's first): embedding a teammate's
/// (or an attacker's) tens of thousands of queries on the first search would take minutes.
pub const MAX_MAP_SEARCHED: usize = 2_000;
/// A Map entry is found by the start of its query: at most this many characters are embedded.
const MAP_QUERY_EMBEDDED_CHARS: usize = 1_000;
/// Map queries embedded between two looks at the clock (the model takes them `embed::BATCH` at
/// a time: larger batches of these short texts were no faster on 2 cores, and took twice the
/// memory).
const MAP_QUERIES_PER_TURN: usize = 32;

/// How long one search spends embedding Map queries it has never seen (after a fetch brought
/// many): the rest are embedded by the searches after it, and searched from then on.
const MAP_EMBED_BUDGET: Duration = Duration::from_millis(600);

#[derive(Default)]
struct MapIndex {
    /// The Map tip and the remotes' staged tips this index was built from.
    state: Option<Vec<Option<gix::ObjectId>>>,
    entries: Vec<Stored>,
    skipped: Vec<String>,
    skipped_count: usize,
    not_searched: usize,
    /// The vectors of the entries embedded so far (ids are positions in `entries`).
    vectors: Option<VectorIndex>,
    /// Entries not embedded yet.
    pending: usize,
}

/// A Map entry, how close its query is to the search query (cosine similarity), and where it
/// came from.
#[derive(Debug, Clone)]
pub struct MapHit {
    pub entry: MapEntry,
    pub score: f32,
    pub origin: Origin,
}

/// What a Map search found, and what it left out.
#[derive(Debug, Clone, Default)]
pub struct MapSearch {
    pub hits: Vec<MapHit>,
    /// Entries that failed the checks, each with why (the first few; `skipped_count` counts all).
    pub skipped: Vec<String>,
    pub skipped_count: usize,
    /// Entries over [`MAX_MAP_SEARCHED`], not searched.
    pub not_searched: usize,
    /// Entries not embedded yet (more than one search's embedding budget arrived at once):
    /// the next searches embed them.
    pub pending: usize,
    /// Entries searched.
    pub searched: usize,
}

pub struct Semantic {
    root: PathBuf,
    model_dir: Result<PathBuf, Error>,
    loaded: OnceLock<Result<Arc<Loaded>, Error>>,
    /// Held for the whole of a sync: one sync at a time.
    sync_lock: Arc<Mutex<()>>,
    pub progress: Arc<Progress>,
    /// The symbol-index generation the last sync saw.
    synced_generation: AtomicU64,
    map: Mutex<MapIndex>,
    /// The Map's ref store, opened on first use (not on every search).
    map_store: OnceLock<Result<MapStore, Error>>,
    last_sync: Mutex<Option<Result<SyncReport, Error>>>,
    /// How files are cut into chunks, as the Forest's fingerprint records it.
    chunking: String,
    /// How searches merge the dense and lexical rankings.
    fusion: Fusion,
    /// Vectors of texts embedded outside the Forest (documents' sections), by blake3 of the
    /// text, for this process's lifetime.
    text_vectors: Mutex<std::collections::HashMap<super::cache::Key, Vec<f32>>>,
}

/// The fusion `search_fusion` and `dense_weight` name; anything unknown is the default.
pub fn fusion_of(config: &Config) -> Fusion {
    match config.search_fusion.trim().to_ascii_lowercase().as_str() {
        "rrf" | "reciprocal_rank" => Fusion::ReciprocalRank,
        _ if config.dense_weight.is_finite() => Fusion::Weighted { dense_weight: config.dense_weight.clamp(0.0, 1.0) },
        _ => DEFAULT_FUSION,
    }
}

/// Resolves `embedding_model`: `CODE_INTEL_MODEL_DIR` wins; a path to a directory (absolute or
/// relative to the repository) is used as it is; a name is looked up in the model cache that
/// `scripts/model.sh` fills ([`super::embed::named_model_dir`]).
pub fn resolve_model_dir(root: &Path, name: &str) -> Result<PathBuf, Error> {
    if let Some(dir) = super::embed::model_dir_override() {
        return Ok(dir);
    }
    let as_path = root.join(name);
    if !name.is_empty() && as_path.is_dir() {
        return Ok(as_path);
    }
    super::embed::named_model_dir(name).ok_or_else(|| Error::ModelMissing(format!("{name} (HOME is not set)")))
}

impl Semantic {
    pub fn new(root: &Path, config: &Config) -> Semantic {
        Semantic {
            root: root.to_path_buf(),
            model_dir: resolve_model_dir(root, &config.embedding_model),
            chunking: format!(
                "{:?}:{}:text{}",
                config.chunking().unwrap_or(code_intel_codebase::config::ChunkStrategy::Ast),
                config.chunk_max_tokens.max(32),
                super::forest::EMBEDDING_TEXT_VERSION
            ),
            fusion: fusion_of(config),
            loaded: OnceLock::new(),
            sync_lock: Arc::new(Mutex::new(())),
            progress: Arc::new(Progress::default()),
            synced_generation: AtomicU64::new(u64::MAX),
            map: Mutex::new(MapIndex::default()),
            map_store: OnceLock::new(),
            text_vectors: Mutex::new(std::collections::HashMap::new()),
            last_sync: Mutex::new(None),
        }
    }

    /// Whether semantic search can run here: the runtime and the model files are present.
    /// (Cheap: it looks at files, it does not load the model.)
    pub fn available(&self) -> bool {
        if let Some(Ok(_)) = self.loaded.get() {
            return true;
        }
        let runtime = std::env::var_os("ORT_DYLIB_PATH").is_some_and(|p| Path::new(&p).is_file());
        runtime && self.model_dir.as_ref().is_ok_and(|d| d.join("model.onnx").is_file())
    }

    /// The model and the Forest, loading them on first use.
    pub fn loaded(&self) -> Result<Arc<Loaded>, Error> {
        self.loaded.get_or_init(|| self.load().map(Arc::new)).clone()
    }

    fn load(&self) -> Result<Loaded, Error> {
        let dir = self.model_dir.clone()?;
        let threads = std::thread::available_parallelism().map_or(2, |n| n.get());
        let embedder = Embedder::load(&dir, threads)?;
        let fingerprint = model_fingerprint(&dir);
        let mut hasher = blake3::Hasher::new();
        hasher.update(&fingerprint).update(self.chunking.as_bytes());
        let forest_fingerprint = *hasher.finalize().as_bytes();
        let dim = embedder.dimension as u32;
        let vector_error = |e: Error| Error::Embedding(e.to_string());
        let saved = Forest::load(&self.root, forest_fingerprint, dim);
        let replaced = saved.as_ref().is_err_and(|why| *why == Discarded::OtherModel);
        let forest = match saved {
            Ok(f) => f,
            Err(_) => Forest::new(forest_fingerprint, dim).map_err(vector_error)?,
        };
        let cache = EmbeddingCache::open(&forest_dir(&self.root).join("embeddings.bin"), fingerprint, dim as usize);
        let model = dir.file_name().map_or_else(|| dir.display().to_string(), |n| n.to_string_lossy().into_owned());
        let loaded = Loaded {
            embedder,
            model,
            fingerprint,
            forest_fingerprint,
            forest: RwLock::new(forest),
            replaced_forest: std::sync::atomic::AtomicBool::new(replaced),
            cache: Mutex::new(cache),
        };
        Ok(loaded)
    }

    pub fn is_syncing(&self) -> bool {
        self.progress.running.load(Ordering::Relaxed)
    }

    /// Syncs now, in the calling thread (waiting for a sync already running to finish first).
    /// `rebuild` discards the Forest (not the embedding cache) first.
    pub fn sync_now(
        &self,
        repo: &Repo,
        config: &Config,
        rebuild: bool,
        generation: u64,
        on_slice: &dyn Fn(usize, usize),
    ) -> Result<SyncReport, Error> {
        let loaded = self.loaded()?;
        let _guard = self.sync_lock.lock().unwrap_or_else(|p| p.into_inner());
        run_sync(&loaded, &self.progress, repo, config, rebuild, on_slice).inspect(|_| {
            self.synced_generation.store(generation, Ordering::Relaxed);
        })
    }

    /// Whether the Forest should be synced before a search: never synced, the symbol index saw
    /// changes since, or older than the TTL.
    pub fn needs_sync(&self, config: &Config, generation: u64) -> bool {
        let Ok(loaded) = self.loaded() else { return false };
        let synced_at = loaded.forest.read().unwrap_or_else(|p| p.into_inner()).synced_at;
        if synced_at == 0 || self.synced_generation.load(Ordering::Relaxed) != generation {
            return true;
        }
        let age_hours = (chrono::Utc::now().timestamp() - synced_at) as f64 / 3600.0;
        age_hours >= config.sync_ttl_hours
    }

    /// Starts a sync on a background thread unless one is running; returns its handle.
    pub fn start_sync(
        self: &Arc<Self>,
        repo: Repo,
        config: Config,
        generation: u64,
    ) -> Option<std::thread::JoinHandle<()>> {
        let loaded = self.loaded().ok()?;
        let lock = Arc::clone(&self.sync_lock);
        // Claim the sync before spawning, so two searches do not start two.
        if self.progress.running.swap(true, Ordering::SeqCst) {
            return None;
        }
        let this = Arc::clone(self);
        let spawned = std::thread::Builder::new().name("forest-sync".into()).spawn(move || {
            let _guard = lock.lock().unwrap_or_else(|p| p.into_inner());
            let result = run_sync(&loaded, &this.progress, &repo, &config, false, &|_, _| {});
            match &result {
                Ok(r) => {
                    this.synced_generation.store(generation, Ordering::Relaxed);
                    tracing::info!(
                        "forest sync: {} files changed, {} embedded in {} ms",
                        r.files_changed,
                        r.embedded,
                        r.elapsed_ms
                    );
                }
                Err(e) => tracing::warn!("forest sync failed: {e}"),
            }
            *this.last_sync.lock().unwrap_or_else(|p| p.into_inner()) = Some(result);
        });
        match spawned {
            Ok(h) => Some(h),
            Err(e) => {
                tracing::warn!("cannot start the forest sync: {e}");
                self.progress.running.store(false, Ordering::SeqCst);
                None
            }
        }
    }

    /// Asks a running sync to stop at its next slice (what it did is saved), and waits up to
    /// `wait` for it; true when none is running any more.
    pub fn stop_sync(&self, wait: Duration) -> bool {
        self.progress.stop.store(true, Ordering::SeqCst);
        self.wait_for_sync(wait)
    }

    /// Waits up to `wait` for a running sync to finish; true when none is running any more.
    pub fn wait_for_sync(&self, wait: Duration) -> bool {
        let deadline = std::time::Instant::now() + wait;
        while self.is_syncing() {
            if std::time::Instant::now() >= deadline {
                return false;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        true
    }

    /// The last background sync's error, if it failed.
    pub fn last_sync_error(&self) -> Option<Error> {
        match &*self.last_sync.lock().unwrap_or_else(|p| p.into_inner()) {
            Some(Err(e)) => Some(e.clone()),
            _ => None,
        }
    }

    /// Hybrid Forest search.
    pub fn search_forest(&self, query_vector: &[f32], query: &str, n: usize) -> Result<Vec<ForestHit>, Error> {
        let loaded = self.loaded()?;
        let forest = loaded.forest.read().unwrap_or_else(|p| p.into_inner());
        forest.search(query_vector, query, n, self.fusion)
    }

    /// The Map entries closest to `query_vector`, best first, with where each came from. The
    /// Map is read again (merging in what a fetch staged, checking every entry) and its vectors
    /// rebuilt (from the embedding cache where possible) whenever its tip or a remote's staged
    /// tip moved.
    pub fn search_map(&self, query_vector: &[f32], n: usize) -> Result<MapSearch, Error> {
        let loaded = self.loaded()?;
        let store = self.map_store.get_or_init(|| MapStore::open(&self.root)).as_ref().map_err(Clone::clone)?;
        let mut map = self.map.lock().unwrap_or_else(|p| p.into_inner());
        let state = store.state()?;
        if map.state.as_ref() != Some(&state) {
            let read = store.read()?;
            // Reading merged what was staged: the state to remember is the one after the merge.
            let state = store.state()?;
            let mut entries = read.entries;
            let not_searched = entries.len().saturating_sub(MAX_MAP_SEARCHED);
            entries.truncate(MAX_MAP_SEARCHED);
            *map = MapIndex {
                state: Some(state),
                entries,
                skipped: read.skipped,
                skipped_count: read.skipped_count,
                not_searched,
                vectors: None,
                pending: 0,
            };
        }
        if map.vectors.is_none() || map.pending > 0 {
            let (vectors, pending) = map_vectors(&loaded, &map.entries, MAP_EMBED_BUDGET)?;
            map.vectors = Some(vectors);
            map.pending = pending;
        }
        let mut out = MapSearch {
            hits: Vec::new(),
            skipped: map.skipped.clone(),
            skipped_count: map.skipped_count,
            not_searched: map.not_searched,
            pending: map.pending,
            searched: map.entries.len() - map.pending,
        };
        let Some(vectors) = map.vectors.as_ref().filter(|_| !map.entries.is_empty()) else { return Ok(out) };
        let hits = vectors.search(query_vector, n)?;
        out.hits = hits
            .into_iter()
            .filter_map(|(i, score)| {
                map.entries.get(i as usize).map(|e| MapHit { entry: e.entry.clone(), score, origin: e.origin.clone() })
            })
            .collect();
        Ok(out)
    }

    /// Vectors for `texts`, in order, as texts to be found (the model's document prefix before
    /// each): those seen before from memory, the rest embedded now (as batch work, which lets a
    /// waiting query go first). Loads the model on first use.
    pub fn embed_texts(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, Error> {
        let loaded = self.loaded()?;
        let keys: Vec<super::cache::Key> = texts.iter().map(|t| super::cache::key_of(t)).collect();
        let missing: Vec<usize> = {
            let known = self.text_vectors.lock().unwrap_or_else(|p| p.into_inner());
            (0..texts.len()).filter(|&i| !known.contains_key(&keys[i])).collect()
        };
        if !missing.is_empty() {
            let batch: Vec<&str> = missing.iter().map(|&i| texts[i].as_str()).collect();
            let vectors = loaded.embedder.embed(&batch)?;
            let mut known = self.text_vectors.lock().unwrap_or_else(|p| p.into_inner());
            for (&i, v) in missing.iter().zip(vectors) {
                known.insert(keys[i], v);
            }
        }
        let known = self.text_vectors.lock().unwrap_or_else(|p| p.into_inner());
        Ok(keys.iter().map(|k| known.get(k).cloned().unwrap_or_default()).collect())
    }

    /// The vector of a text that searches (a query: the model's query prefix before it), ahead
    /// of any batch work.
    pub fn embed_one(&self, text: &str) -> Result<Vec<f32>, Error> {
        let loaded = self.loaded()?;
        loaded.embedder.embed_now(&[text])?.into_iter().next().ok_or_else(|| Error::Embedding("no vector".into()))
    }
}

fn run_sync(
    loaded: &Loaded,
    progress: &Progress,
    repo: &Repo,
    config: &Config,
    rebuild: bool,
    on_slice: &dyn Fn(usize, usize),
) -> Result<SyncReport, Error> {
    progress.running.store(true, Ordering::SeqCst);
    progress.embedding.store(false, Ordering::Relaxed);
    progress.done.store(0, Ordering::Relaxed);
    progress.total.store(0, Ordering::Relaxed);
    let result = (|| {
        if rebuild {
            let mut fresh = Forest::new(loaded.forest_fingerprint, loaded.embedder.dimension as u32)?;
            let mut forest = loaded.forest.write().unwrap_or_else(|p| p.into_inner());
            // A Forest found poisoned stays distrusted.
            fresh.distrusted = std::mem::take(&mut forest.distrusted);
            *forest = fresh;
        }
        let cx = SyncContext {
            repo,
            config,
            forest: &loaded.forest,
            embedder: &loaded.embedder,
            cache: &loaded.cache,
            progress,
            model: loaded.fingerprint,
            use_shared: !rebuild,
        };
        let mut report = sync::sync(&cx, on_slice)?;
        report.rebuilt = rebuild;
        report.replaced_forest = loaded.replaced_forest.load(Ordering::Relaxed);
        report.model.clone_from(&loaded.model);
        Ok(report)
    })();
    progress.running.store(false, Ordering::SeqCst);
    result
}

/// The text a Map entry is embedded as: the start of its query.
fn map_text(entry: &MapEntry) -> &str {
    match entry.query.char_indices().nth(MAP_QUERY_EMBEDDED_CHARS) {
        Some((end, _)) => &entry.query[..end],
        None => &entry.query,
    }
}

/// The Map entries' vectors (ids are positions in `entries`): each entry is found by its query.
/// Queries the cache holds cost nothing; the others are embedded, this clone's first, until
/// `budget` is spent. Returns the index and how many entries are left to embed.
fn map_vectors(loaded: &Loaded, entries: &[Stored], budget: Duration) -> Result<(VectorIndex, usize), Error> {
    let started = std::time::Instant::now();
    let dim = loaded.embedder.dimension;
    let mut index = VectorIndex::new(dim as u32)?;
    let mut cache = loaded.cache.lock().unwrap_or_else(|p| p.into_inner());
    let keys: Vec<_> = entries.iter().map(|e| super::cache::key_of(map_text(&e.entry))).collect();
    let missing: Vec<usize> = (0..entries.len()).filter(|&i| cache.get(&keys[i]).is_none()).collect();
    let mut pending = missing.len();
    // Entries come this clone's first: keep that order across batches, and sort each batch's
    // texts by length so they are padded less.
    for batch in missing.chunks(MAP_QUERIES_PER_TURN) {
        if started.elapsed() >= budget {
            break;
        }
        let mut batch = batch.to_vec();
        batch.sort_by_key(|&i| map_text(&entries[i].entry).len());
        let texts: Vec<&str> = batch.iter().map(|&i| map_text(&entries[i].entry)).collect();
        let vectors = loaded.embedder.embed_now(&texts)?;
        for (&i, v) in batch.iter().zip(&vectors) {
            cache.insert(keys[i], v);
        }
        pending -= batch.len();
    }
    if pending < missing.len()
        && let Err(e) = cache.save()
    {
        tracing::warn!("could not save the embedding cache: {e}");
    }
    let mut ids = Vec::with_capacity(entries.len());
    let mut flat = Vec::with_capacity(entries.len() * dim);
    for (i, key) in keys.iter().enumerate() {
        if let Some(v) = cache.get(key) {
            ids.push(i as u64);
            flat.extend_from_slice(v);
        }
    }
    index.add(&ids, &flat)?;
    Ok((index, pending))
}

/// Identifies a model by its files' sizes, the head of its weights and its prefixes (cheap, and
/// changes when the model does).
fn model_fingerprint(dir: &Path) -> [u8; 32] {
    let mut hasher = blake3::Hasher::new();
    for name in ["model.onnx", "tokenizer.json", "config.json"] {
        let path = dir.join(name);
        let size = std::fs::metadata(&path).map_or(0, |m| m.len());
        hasher.update(name.as_bytes());
        hasher.update(&size.to_le_bytes());
    }
    // The prefixes change every vector the model gives.
    if let Ok(prefixes) = std::fs::read(dir.join(super::embed::PREFIXES_FILE)) {
        hasher.update(&prefixes);
    }
    if let Ok(mut f) = std::fs::File::open(dir.join("model.onnx")) {
        use std::io::Read;
        let mut head = vec![0u8; 1 << 20];
        if let Ok(n) = f.read(&mut head) {
            hasher.update(&head[..n]);
        }
    }
    *hasher.finalize().as_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_model_given_prefixes_is_another_model() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("model.onnx"), b"weights").unwrap();
        let plain = model_fingerprint(dir.path());
        let path = dir.path().join(super::super::embed::PREFIXES_FILE);
        std::fs::write(&path, r#"{"query": "search_query: "}"#).unwrap();
        let prefixed = model_fingerprint(dir.path());
        std::fs::write(&path, r#"{"query": "query: "}"#).unwrap();
        assert_ne!(plain, prefixed);
        assert_ne!(prefixed, model_fingerprint(dir.path()));
    }
}
