//! The Forest: every chunk of the repository's source, with its vector in faiss and its terms
//! in BM25, persisted under `.code-intel/forest/` (git-ignored, derived, rebuilt when in doubt).
//!
//! Files: `manifest.bin` (files with their blake3 fingerprints, chunks, next id; checksummed)
//! and `vectors.faiss`. On load the two must agree (same chunk ids, same model, same
//! dimension); anything else is discarded and rebuilt from the embedding cache.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use foldhash::HashMap as FoldHashMap;
use serde::{Deserialize, Serialize};

use super::cache::{self, Key};
use super::chunk::Chunk;
use super::lexical::{Bm25, identifier_words};
use super::vectors::VectorIndex;
use crate::Error;

pub const FOREST_DIR: &str = ".code-intel/forest";
const MANIFEST: &str = "manifest.bin";
const VECTORS: &str = "vectors.faiss";
/// 002: chunks say which shared Forest their vector came from; the Forest remembers the shared
/// Forests it used and the ones found poisoned.
const MAGIC: &[u8; 8] = b"CIFOR002";

pub fn forest_dir(root: &Path) -> PathBuf {
    root.join(FOREST_DIR)
}

/// One file as the Forest last saw it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct FileEntry {
    pub size: u64,
    pub mtime_ns: i64,
    pub hash: [u8; 32],
    /// The faiss ids of its chunks.
    pub chunks: Vec<u64>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct StoredChunk {
    pub chunk: Chunk,
    /// blake3 of the embedded text: the embedding cache's key.
    pub key: Key,
    /// Where the vector came from when it was not embedded here: a shared Forest.
    pub shared: Option<SharedOrigin>,
}

/// A vector taken from a shared Forest: the commit it was read from, and a fingerprint of the
/// record, so a later sync can tell whether the shared Forests in use still hold that vector.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct SharedOrigin {
    pub tip: [u8; 20],
    pub record: [u8; 8],
}

/// Which text a chunk is embedded as ([`embedding_text`]): part of the Forest's fingerprint, so
/// a Forest embedded another way is rebuilt, never mixed.
pub const EMBEDDING_TEXT_VERSION: u32 = 2;

/// The text a chunk is embedded as: its symbol path and file as words, its header (file, symbol
/// path, signature), then its code as the words of its identifiers. On the retrieval benchmark
/// this reads better to a sentence model than the code itself (docs/SEMANTIC.md):
/// `JSONEncoder.encode` in `json/encoder.py` starts `json encoder encode (json encoder)`.
pub fn embedding_text(chunk: &Chunk) -> String {
    format!("{}\n{}\n{}", name_words(chunk), chunk.header, identifier_words(&chunk.text))
}

/// The chunk's symbol path and the last two segments of its path, as words.
fn name_words(chunk: &Chunk) -> String {
    let mut segments: Vec<&str> = chunk.file.rsplit('/').take(2).collect();
    segments.reverse();
    let place = segments.join(" ");
    let place = place.rsplit_once('.').map_or(place.as_str(), |(stem, _)| stem);
    format!("{} ({})", identifier_words(&chunk.symbol), identifier_words(place))
}

/// Why [`Forest::load`] found nothing to use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Discarded {
    /// No Forest was saved.
    Absent,
    /// The saved Forest was made with another model, chunking or embedding text.
    OtherModel,
    /// The saved Forest is damaged (a torn write, vectors and manifest disagree).
    Unreadable,
}

#[derive(Serialize, Deserialize)]
struct Manifest {
    model: [u8; 32],
    dim: u32,
    next_id: u64,
    synced_at: i64,
    files: BTreeMap<String, FileEntry>,
    chunks: Vec<(u64, StoredChunk)>,
    shared_tips: Vec<[u8; 20]>,
    distrusted: Vec<[u8; 20]>,
}

pub struct Forest {
    pub model: [u8; 32],
    pub files: BTreeMap<String, FileEntry>,
    chunks: FoldHashMap<u64, StoredChunk>,
    by_chunk_id: FoldHashMap<String, u64>,
    vectors: VectorIndex,
    lexical: Bm25,
    next_id: u64,
    /// Unix seconds of the last completed sync (0: never).
    pub synced_at: i64,
    /// The shared Forests (commits) the last sync read vectors from.
    pub shared_tips: Vec<[u8; 20]>,
    /// Shared Forests whose vectors did not match the model's: never read again.
    pub distrusted: Vec<[u8; 20]>,
}

/// One ranked chunk.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct ForestHit {
    pub chunk_id: String,
    pub file: String,
    pub start_line: u32,
    pub end_line: u32,
    pub symbol: String,
    pub kind: String,
    /// The fused score: the cosine and the BM25 score, each scaled to 0..1 over this query's
    /// hits, then weighted (or reciprocal rank fusion, when the project's `search_fusion` says
    /// `rrf`). Higher is better; compare it only within one answer.
    pub score: f32,
    /// Cosine similarity of the query and the chunk, when the dense ranking found it.
    pub dense_score: Option<f32>,
    /// BM25 score, when the lexical ranking found it.
    pub lexical_score: Option<f32>,
    pub snippet: String,
}

/// A fused ranking entry: fused score, dense score, lexical score.
pub type Fused = (f32, Option<f32>, Option<f32>);

impl ForestHit {
    /// `chunk` as a hit with these scores, its snippet cut from its text.
    pub fn of(c: &Chunk, (score, dense_score, lexical_score): Fused) -> ForestHit {
        ForestHit {
            chunk_id: c.id.clone(),
            file: c.file.clone(),
            start_line: c.start_line,
            end_line: c.end_line,
            symbol: c.symbol.clone(),
            kind: c.kind.clone(),
            score,
            dense_score,
            lexical_score,
            snippet: snippet(&c.text),
        }
    }
}

/// How the dense and the lexical rankings are merged into one (`search_fusion` in the config).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Fusion {
    /// Each ranking's scores scaled to 0..1 over its own top hits, for this query alone, then
    /// `dense_weight × dense + (1 − dense_weight) × lexical` (a hit missing from a ranking
    /// scores 0 there).
    Weighted { dense_weight: f32 },
    /// Reciprocal rank fusion: the sum of 1 / (60 + rank) over the rankings.
    ReciprocalRank,
}

/// The fusion the retrieval benchmark chose (docs/SEMANTIC.md).
pub const DEFAULT_FUSION: Fusion = Fusion::Weighted { dense_weight: 0.7 };

/// Reciprocal-rank fusion constant.
const RRF_K: f32 = 60.0;
const SNIPPET_LINES: usize = 12;
const SNIPPET_CHARS: usize = 800;

impl Forest {
    pub fn new(model: [u8; 32], dim: u32) -> Result<Forest, Error> {
        Ok(Forest {
            model,
            files: BTreeMap::new(),
            chunks: FoldHashMap::default(),
            by_chunk_id: FoldHashMap::default(),
            vectors: VectorIndex::new(dim)?,
            lexical: Bm25::new(true),
            next_id: 1,
            synced_at: 0,
            shared_tips: Vec::new(),
            distrusted: Vec::new(),
        })
    }

    pub fn dim(&self) -> u32 {
        self.vectors.dim()
    }

    pub fn chunk_count(&self) -> usize {
        self.chunks.len()
    }

    /// Every chunk, in no particular order.
    pub fn chunks(&self) -> impl Iterator<Item = &StoredChunk> {
        self.chunks.values()
    }

    pub fn chunk(&self, chunk_id: &str) -> Option<&StoredChunk> {
        self.by_chunk_id.get(chunk_id).and_then(|id| self.chunks.get(id))
    }

    pub fn holds_key(&self) -> impl Fn(&Key) -> bool + '_ {
        let keys: std::collections::HashSet<Key> = self.chunks.values().map(|c| c.key).collect();
        move |k| keys.contains(k)
    }

    /// The chunks whose vectors came from a shared Forest: (file, key, origin).
    pub fn shared_chunks(&self) -> Vec<(String, Key, SharedOrigin)> {
        self.chunks.values().filter_map(|c| c.shared.map(|o| (c.chunk.file.clone(), c.key, o))).collect()
    }

    /// Marks the chunks of `rel` whose vectors came from `from` as coming from `to` instead
    /// (the same record, found in a newer shared Forest).
    pub fn retag_shared(&mut self, rel: &str, key: &Key, from: SharedOrigin, to: SharedOrigin) {
        let Some(entry) = self.files.get(rel) else { return };
        for id in &entry.chunks {
            if let Some(c) = self.chunks.get_mut(id)
                && c.key == *key
                && c.shared == Some(from)
            {
                c.shared = Some(to);
            }
        }
    }

    /// Makes the next sync read, chunk and resolve `rel` again (its vectors are in doubt).
    pub fn forget_file(&mut self, rel: &str) {
        if let Some(entry) = self.files.get_mut(rel) {
            entry.size = u64::MAX;
            entry.hash = [0; 32];
        }
    }

    /// Removes `rel` and its chunks.
    pub fn remove_file(&mut self, rel: &str) -> Result<usize, Error> {
        let Some(entry) = self.files.remove(rel) else { return Ok(0) };
        self.drop_chunks(&entry.chunks)
    }

    fn drop_chunks(&mut self, ids: &[u64]) -> Result<usize, Error> {
        self.vectors.remove(ids)?;
        for id in ids {
            if let Some(c) = self.chunks.remove(id) {
                self.by_chunk_id.remove(&c.chunk.id);
            }
            self.lexical.remove(*id);
        }
        Ok(ids.len())
    }

    /// Replaces the chunks of `rel` with `chunks` and their `vectors` (one per chunk).
    pub fn put_file(
        &mut self,
        rel: &str,
        stat: (u64, i64, [u8; 32]),
        chunks: Vec<StoredChunk>,
        vectors: &[f32],
    ) -> Result<(usize, usize), Error> {
        let removed = match self.files.remove(rel) {
            Some(old) => self.drop_chunks(&old.chunks)?,
            None => 0,
        };
        let ids: Vec<u64> = (0..chunks.len() as u64).map(|i| self.next_id + i).collect();
        self.next_id += chunks.len() as u64;
        self.vectors.add(&ids, vectors)?;
        for (id, c) in ids.iter().zip(chunks) {
            self.lexical.add(*id, &c.chunk.symbol, &c.chunk.text);
            self.by_chunk_id.insert(c.chunk.id.clone(), *id);
            self.chunks.insert(*id, c);
        }
        let added = ids.len();
        self.files.insert(rel.to_owned(), FileEntry { size: stat.0, mtime_ns: stat.1, hash: stat.2, chunks: ids });
        Ok((removed, added))
    }

    /// Hybrid search: the dense ranking (faiss) and the lexical ranking (BM25 with symbol
    /// names), each read `max(5n, 50)` deep, merged by `fusion`. `query_vector` is the
    /// embedded query.
    pub fn search(&self, query_vector: &[f32], query: &str, n: usize, fusion: Fusion) -> Result<Vec<ForestHit>, Error> {
        let depth = (n * 5).max(50);
        let dense = self.vectors.search(query_vector, depth)?;
        let lexical = self.lexical.search(query, depth);
        Ok(match fusion {
            Fusion::ReciprocalRank => self.fuse(&dense, &lexical, n),
            Fusion::Weighted { dense_weight } => self.fuse_weighted(&dense, &lexical, dense_weight, n),
        })
    }

    /// Dense ranking only (for measuring retrieval quality).
    pub fn search_dense(&self, query_vector: &[f32], n: usize) -> Result<Vec<ForestHit>, Error> {
        let dense = self.vectors.search(query_vector, n)?;
        Ok(self.fuse(&dense, &[], n))
    }

    /// Lexical ranking only (for measuring retrieval quality).
    pub fn search_lexical(&self, query: &str, n: usize) -> Vec<ForestHit> {
        let lexical = self.lexical.search(query, n);
        self.fuse(&[], &lexical, n)
    }

    fn fuse(&self, dense: &[(u64, f32)], lexical: &[(u64, f32)], n: usize) -> Vec<ForestHit> {
        let mut fused: FoldHashMap<u64, Fused> = FoldHashMap::default();
        for (rank, (id, s)) in dense.iter().enumerate() {
            let e = fused.entry(*id).or_default();
            e.0 += 1.0 / (RRF_K + rank as f32 + 1.0);
            e.1 = Some(*s);
        }
        for (rank, (id, s)) in lexical.iter().enumerate() {
            let e = fused.entry(*id).or_default();
            e.0 += 1.0 / (RRF_K + rank as f32 + 1.0);
            e.2 = Some(*s);
        }
        self.ranked(fused, n)
    }

    /// [`Fusion::Weighted`]: min-max scaling of each ranking over its own hits, then a
    /// weighted sum.
    fn fuse_weighted(
        &self,
        dense: &[(u64, f32)],
        lexical: &[(u64, f32)],
        dense_weight: f32,
        n: usize,
    ) -> Vec<ForestHit> {
        let dense_weight = dense_weight.clamp(0.0, 1.0);
        let scaled = |list: &[(u64, f32)]| -> Vec<(u64, f32, f32)> {
            let (low, high) = list.iter().fold((f32::MAX, f32::MIN), |(lo, hi), (_, s)| (lo.min(*s), hi.max(*s)));
            let span = high - low;
            // One hit, or all equal: each counts fully.
            list.iter().map(|(id, s)| (*id, *s, if span > 1e-6 { (s - low) / span } else { 1.0 })).collect()
        };
        let mut fused: FoldHashMap<u64, Fused> = FoldHashMap::default();
        for (id, s, unit) in scaled(dense) {
            let e = fused.entry(id).or_default();
            e.0 += dense_weight * unit;
            e.1 = Some(s);
        }
        for (id, s, unit) in scaled(lexical) {
            let e = fused.entry(id).or_default();
            e.0 += (1.0 - dense_weight) * unit;
            e.2 = Some(s);
        }
        self.ranked(fused, n)
    }

    /// The `n` best of `fused` as hits, best first (ties: the higher cosine, then the id).
    fn ranked(&self, fused: FoldHashMap<u64, Fused>, n: usize) -> Vec<ForestHit> {
        let mut ranked: Vec<(u64, Fused)> = fused.into_iter().collect();
        ranked.sort_by(|a, b| {
            b.1.0
                .total_cmp(&a.1.0)
                .then_with(|| b.1.1.unwrap_or(-1.0).total_cmp(&a.1.1.unwrap_or(-1.0)))
                .then(a.0.cmp(&b.0))
        });
        ranked
            .into_iter()
            .filter_map(|(id, scores)| Some(ForestHit::of(&self.chunks.get(&id)?.chunk, scores)))
            .take(n)
            .collect()
    }

    /// Loads the Forest saved under `root`, or None when there is none, or it does not match
    /// `model`/`dim`, or the manifest and the vectors disagree.
    pub fn load(root: &Path, model: [u8; 32], dim: u32) -> Result<Forest, Discarded> {
        let dir = forest_dir(root);
        let Ok(bytes) = std::fs::read(dir.join(MANIFEST)) else { return Err(Discarded::Absent) };
        let Some(manifest) = code_intel_codebase::derived::decode::<Manifest>(&bytes, MAGIC) else {
            tracing::warn!("{}: unreadable; rebuilding", dir.display());
            return Err(Discarded::Unreadable);
        };
        if manifest.model != model || manifest.dim != dim {
            tracing::warn!("{}: made with another model or embedding text; rebuilding", dir.display());
            return Err(Discarded::OtherModel);
        }
        let vectors = match VectorIndex::read(&dir.join(VECTORS), dim) {
            Ok(v) => v,
            Err(e) => {
                tracing::warn!("{}: {e}; rebuilding", dir.join(VECTORS).display());
                return Err(Discarded::Unreadable);
            }
        };
        let mut held = vectors.ids();
        held.sort_unstable();
        let mut expected: Vec<u64> = manifest.chunks.iter().map(|(id, _)| *id).collect();
        expected.sort_unstable();
        if held != expected {
            tracing::warn!("{}: vectors and manifest disagree; rebuilding", dir.display());
            return Err(Discarded::Unreadable);
        }
        let mut lexical = Bm25::new(true);
        let mut chunks = FoldHashMap::default();
        let mut by_chunk_id = FoldHashMap::default();
        for (id, c) in manifest.chunks {
            lexical.add(id, &c.chunk.symbol, &c.chunk.text);
            by_chunk_id.insert(c.chunk.id.clone(), id);
            chunks.insert(id, c);
        }
        Ok(Forest {
            model,
            files: manifest.files,
            chunks,
            by_chunk_id,
            vectors,
            lexical,
            next_id: manifest.next_id,
            synced_at: manifest.synced_at,
            shared_tips: manifest.shared_tips,
            distrusted: manifest.distrusted,
        })
    }

    /// Saves the vectors, then the manifest (each through a temporary file and a rename). A
    /// crash between the two leaves files that disagree, which `load` detects.
    pub fn save(&self, root: &Path) -> std::io::Result<()> {
        let dir = forest_dir(root);
        code_intel_codebase::derived::ensure_ignored_dir(&dir)?;
        self.vectors.write(&dir.join(VECTORS)).map_err(std::io::Error::other)?;
        let mut chunks: Vec<(u64, &StoredChunk)> = self.chunks.iter().map(|(id, c)| (*id, c)).collect();
        chunks.sort_unstable_by_key(|(id, _)| *id);
        let manifest = ManifestRef {
            model: self.model,
            dim: self.dim(),
            next_id: self.next_id,
            synced_at: self.synced_at,
            files: &self.files,
            chunks,
            shared_tips: &self.shared_tips,
            distrusted: &self.distrusted,
        };
        code_intel_codebase::derived::write(&dir.join(MANIFEST), MAGIC, &manifest)
    }
}

/// The manifest as written, borrowing the Forest (same layout as [`Manifest`]).
#[derive(Serialize)]
struct ManifestRef<'a> {
    model: [u8; 32],
    dim: u32,
    next_id: u64,
    synced_at: i64,
    files: &'a BTreeMap<String, FileEntry>,
    chunks: Vec<(u64, &'a StoredChunk)>,
    shared_tips: &'a [[u8; 20]],
    distrusted: &'a [[u8; 20]],
}

fn snippet(text: &str) -> String {
    let mut out: String = text.lines().take(SNIPPET_LINES).collect::<Vec<_>>().join("\n");
    if out.len() > SNIPPET_CHARS {
        let mut cut = SNIPPET_CHARS;
        while !out.is_char_boundary(cut) {
            cut -= 1;
        }
        out.truncate(cut);
        out.push('…');
    } else if text.lines().count() > SNIPPET_LINES {
        out.push_str("\n…");
    }
    out
}

/// The key a chunk's vector is cached under.
pub fn key_of(chunk: &Chunk) -> Key {
    cache::key_of(&embedding_text(chunk))
}
