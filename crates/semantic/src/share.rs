//! A Forest that travels: the vectors this clone embedded, as git objects under
//! `refs/code-intel/forest`, so a teammate's clone embeds only what differs.
//!
//! The ref points at a commit (no parents: the ref holds the latest vectors only, so it stays
//! small) whose tree is
//!
//! ```text
//! FOREST          JSON: format, model name, model fingerprint, dimension, vector count
//! vectors/00..ff  256 shards by the key's first byte, each sorted by key:
//!                 magic, dimension, then records of key (blake3 of the embedded text, 32 bytes),
//!                 scale (f32) and `dimension` int8 values (the vector is scale × value)
//! ```
//!
//! A shard whose vectors did not change is the same blob, so git stores and sends it once.
//!
//! Reading ([`SharedVectors`]) is on demand: a sync asks for the key of each chunk its own cache
//! does not hold, in every remote's staged Forest
//! (`refs/code-intel-remotes/<remote>/code-intel/forest`; never this clone's own ref, which is
//! only what it publishes), and gets a vector only from a record that passes the checks: another model's vectors (fingerprint, dimension) are never read; a shard over its
//! size limit or of the wrong kind is refused from its header; a record whose scale is not
//! finite and within what a unit vector quantizes to, whose vector is not of unit length, or
//! that is the same in every direction, is refused. What a sync takes from a shared Forest is
//! marked in the Forest with the commit it came from ([`crate::forest::SharedOrigin`]), spot-
//! checked against the model, and never written to this clone's own embedding cache, so
//! `index --rebuild` recomputes all of it.
//!
//! Writing ([`export`]) merges: this clone's own vectors, plus every record of the staged Forests
//! that passes the same checks, so an export does not drop a teammate's vectors (up to a size
//! limit, this clone's own first). Nothing here touches the network: `git code-intel share` and `forest push|fetch`
//! run `git push|fetch` for the transport (gix has no push), and only when the user asks.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::sync::Arc;

use gix::ObjectId;
use gix::objs::tree::{Entry, EntryKind};
use gix::refs::Target;
use serde::{Deserialize, Serialize};

use super::cache::Key;
use crate::forest::SharedOrigin;
use crate::loaded::Loaded;
use code_intel_gitstate::refs::{apply, expecting, update, write_commit};
use code_intel_gitstate::shared;
use code_intel_gitstate::untrusted;

pub const FOREST_REF: &str = shared::FOREST.local;
const SHARD_MAGIC: &[u8; 8] = b"GCIFV001";
const FORMAT: u32 = 1;
const MAX_MANIFEST_BYTES: u64 = 4 * 1024;
const MAX_ROOT_TREE_BYTES: u64 = 4 * 1024;
/// 256 entries of about 30 bytes.
const MAX_SHARDS_TREE_BYTES: u64 = 16 * 1024;
/// A shard larger than this (about 80,000 vectors of 384 dimensions) is not read.
pub const MAX_SHARD_BYTES: u64 = 32 << 20;
/// A shared Forest whose shards add up to more than this (about 600,000 vectors) is not used.
pub const MAX_SOURCE_BYTES: u64 = 256 << 20;
/// What a note about another model's Forest ends with (and what tells that refusal apart).
pub const OTHER_MODEL: &str = "its vectors are not used, everything is embedded here";
/// Shards held in memory during one sync, in bytes; past it they are read again as needed.
const SHARD_MEMORY: usize = 128 << 20;
/// Notes kept about refused records (the count is always given).
const MAX_NOTES: usize = 20;

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
struct Manifest {
    format: u32,
    model: String,
    /// Hex of the model's fingerprint: what the local cache is keyed by.
    fingerprint: String,
    dimension: usize,
    vectors: usize,
}

/// What an export did.
#[derive(Debug, Clone, Default, Serialize, PartialEq, Eq)]
pub struct ShareReport {
    /// The model the shared vectors belong to.
    pub model: String,
    /// Vectors in `refs/code-intel/forest` now.
    pub shared: usize,
    /// Of those, vectors this clone embedded itself.
    pub own: usize,
    /// Of those, vectors kept from the shared Forests it could see (this ref's last export and
    /// the remotes' staged ones).
    pub kept_from_shared: usize,
    /// Records of those Forests that failed the checks and were left out.
    pub refused: usize,
    /// Vectors left out because the export reached its size limit (this clone's own come
    /// first).
    pub left_out: usize,
    /// The commit `refs/code-intel/forest` points at.
    pub commit: Option<String>,
    pub notes: Vec<String>,
}

fn hex(fingerprint: &[u8; 32]) -> String {
    blake3::Hash::from_bytes(*fingerprint).to_hex().to_string()
}

/// int8 with one scale per vector: about a quarter of the f32 size; cosine moves by well under
/// 0.01 on the model's unit vectors.
fn quantize(v: &[f32], out: &mut Vec<u8>) {
    let max = v.iter().fold(0f32, |m, x| m.max(x.abs()));
    let scale = if max > 0.0 { max / 127.0 } else { 1.0 };
    out.extend_from_slice(&scale.to_le_bytes());
    out.extend(v.iter().map(|x| ((x / scale).round().clamp(-127.0, 127.0) as i8) as u8));
}

fn dequantize(scale: f32, q: &[u8]) -> Vec<f32> {
    let mut v: Vec<f32> = q.iter().map(|b| f32::from(*b as i8) * scale).collect();
    let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
    if norm > 0.0 {
        v.iter_mut().for_each(|x| *x /= norm);
    }
    v
}

/// Whether a record (scale and int8 values, `q.len()` dimensions) is one this crate could have
/// written from a model's unit vector: a finite scale between what a vector spread evenly over
/// every dimension and one pointing along a single axis quantize to, a dequantized length
/// close to 1, and not the same value in every dimension (no embedding is). Says why not.
pub fn check_record(scale: f32, q: &[u8]) -> Result<(), &'static str> {
    let dim = q.len() as f32;
    if !scale.is_finite() || scale <= 0.0 {
        return Err("its scale is not a positive number");
    }
    let (low, high) = (0.95 / (127.0 * dim.sqrt()), 1.05 / 127.0);
    if !(low..=high).contains(&scale) {
        return Err("its scale is not one a unit vector quantizes to");
    }
    let values: Vec<f32> = q.iter().map(|b| f32::from(*b as i8)).collect();
    let norm = values.iter().map(|x| x * x).sum::<f32>().sqrt() * scale;
    if !(0.9..=1.1).contains(&norm) {
        return Err("it is not a unit vector");
    }
    let along_ones = values.iter().sum::<f32>().abs() / (dim.sqrt() * norm / scale);
    if along_ones > 0.9 {
        return Err("it points the same way in every dimension");
    }
    Ok(())
}

/// The first 8 bytes of blake3 of a record's scale and values: what tells later whether a
/// shared Forest still holds the vector a chunk was given.
fn record_fingerprint(record: &[u8]) -> [u8; 8] {
    let mut out = [0u8; 8];
    out.copy_from_slice(&blake3::hash(record).as_bytes()[..8]);
    out
}

/// One shared Forest, checked against the model: its commit and its shards' blobs.
struct Source {
    /// The ref it was read from, for notes.
    name: String,
    tip: ObjectId,
    shards: Vec<Option<ObjectId>>,
}

/// A shard read into memory: its bytes and where each key's record starts.
struct Shard {
    data: Vec<u8>,
    index: HashMap<Key, usize>,
}

/// The vectors of the shared Forests this clone can see, read on demand and checked.
pub struct SharedVectors {
    /// None when there is nothing to read.
    repo: Option<gix::Repository>,
    dim: usize,
    sources: Vec<Source>,
    shards: HashMap<(ObjectId, u8), Option<Arc<Shard>>>,
    held: usize,
    /// Why sources, shards and records were refused (the first few).
    pub notes: Vec<String>,
    /// Records refused.
    pub refused: usize,
}

/// A vector found in a shared Forest.
pub struct Found {
    pub vector: Vec<f32>,
    pub origin: SharedOrigin,
}

impl SharedVectors {
    /// The shared Forests of this model: every remote's staged one, except the commits in
    /// `exclude` (found poisoned before). One that is another model's, unreadable or over its
    /// limits is left out with a note. This clone's own `refs/code-intel/forest` is not read: it
    /// is what this clone publishes (its own vectors and the records it took from these), so
    /// reading it back would keep a record a remote has since dropped or corrected.
    pub fn open(root: &Path, model: &[u8; 32], dim: usize, exclude: &[[u8; 20]]) -> SharedVectors {
        let mut out = SharedVectors::none(dim);
        let Ok(repo) = gix::open(root) else { return out };
        let mut refs: Vec<(String, ObjectId)> = Vec::new();
        if let Ok(staged) = shared::FOREST.tracking_tips(&repo) {
            refs.extend(staged.into_iter().map(|(remote, tip)| (shared::FOREST.tracking(&remote), tip)));
        }
        let fingerprint = hex(model);
        for (name, tip) in refs {
            if exclude.contains(&oid_bytes(tip)) || out.sources.iter().any(|s| s.tip == tip) {
                continue;
            }
            match open_source(&repo, &name, tip, &fingerprint, dim) {
                Ok(source) => out.sources.push(source),
                Err(note) => out.note(note),
            }
        }
        out.repo = Some(repo);
        out
    }

    /// No shared Forest at all (a rebuild, which recomputes everything it cannot verify).
    pub fn none(dim: usize) -> SharedVectors {
        SharedVectors {
            repo: None,
            dim,
            sources: Vec::new(),
            shards: HashMap::new(),
            held: 0,
            notes: Vec::new(),
            refused: 0,
        }
    }

    /// The commits of the shared Forests in use.
    pub fn tips(&self) -> Vec<[u8; 20]> {
        self.sources.iter().map(|s| oid_bytes(s.tip)).collect()
    }

    pub fn is_empty(&self) -> bool {
        self.sources.is_empty()
    }

    /// Stops using the shared Forest at `tip` (it was found poisoned).
    pub fn drop_source(&mut self, tip: [u8; 20]) {
        self.sources.retain(|s| oid_bytes(s.tip) != tip);
    }

    fn note(&mut self, note: String) {
        tracing::warn!("shared Forest: {note}");
        if self.notes.len() < MAX_NOTES {
            self.notes.push(note);
        }
    }

    /// The vector for `key` from the first shared Forest that holds a record for it that
    /// passes the checks.
    pub fn lookup(&mut self, key: &Key) -> Option<Found> {
        for i in 0..self.sources.len() {
            let (tip, name) = (self.sources[i].tip, self.sources[i].name.clone());
            let Some(shard) = self.shard(i, key[0]) else { continue };
            let Some(&at) = shard.index.get(key) else { continue };
            let record = &shard.data[at + 32..at + 36 + self.dim];
            let scale = f32::from_le_bytes([record[0], record[1], record[2], record[3]]);
            match check_record(scale, &record[4..]) {
                Ok(()) => {
                    return Some(Found {
                        vector: dequantize(scale, &record[4..]),
                        origin: SharedOrigin { tip: oid_bytes(tip), record: record_fingerprint(record) },
                    });
                }
                Err(why) => {
                    self.refused += 1;
                    let key_hex = blake3::Hash::from_bytes(*key).to_hex();
                    self.note(format!("{name}: the vector of {} was refused: {why}", &key_hex[..16]));
                }
            }
        }
        None
    }

    /// Shard `first` of source `i`, read and indexed on first use (None: it has none, or it
    /// was refused).
    fn shard(&mut self, i: usize, first: u8) -> Option<Arc<Shard>> {
        let source = &self.sources[i];
        let (tip, blob) = (source.tip, source.shards[usize::from(first)]?);
        if let Some(cached) = self.shards.get(&(tip, first)) {
            return cached.clone();
        }
        let name = source.name.clone();
        let repo = self.repo.as_ref()?;
        let shard = match read_shard(repo, blob, first, self.dim) {
            Ok((shard, bad)) => {
                if bad > 0 {
                    self.refused += bad;
                    self.note(format!("{name}: shard {first:02x}: {bad} records are not in the shard of their key"));
                }
                Some(Arc::new(shard))
            }
            Err(note) => {
                self.note(format!("{name}: shard {first:02x}: {note}"));
                None
            }
        };
        let size = shard.as_ref().map_or(0, |s| s.data.len());
        if self.held + size > SHARD_MEMORY {
            self.shards.clear();
            self.held = 0;
        }
        self.held += size;
        self.shards.insert((tip, first), shard.clone());
        shard
    }
}

fn oid_bytes(id: ObjectId) -> [u8; 20] {
    let mut out = [0u8; 20];
    let bytes = id.as_bytes();
    let n = bytes.len().min(20);
    out[..n].copy_from_slice(&bytes[..n]);
    out
}

/// The shared Forest at `tip`, when it is this model's and within its limits.
fn open_source(
    repo: &gix::Repository,
    name: &str,
    tip: ObjectId,
    fingerprint: &str,
    dim: usize,
) -> Result<Source, String> {
    let root = untrusted::commit(repo, tip)
        .and_then(|c| untrusted::tree(repo, c.tree, MAX_ROOT_TREE_BYTES))
        .map_err(|e| format!("{name}: {e}"))?;
    let manifest_entry = root
        .iter()
        .find(|e| e.name == "FOREST" && e.is_blob())
        .ok_or_else(|| format!("{name} has no FOREST manifest"))?;
    let manifest_bytes =
        untrusted::blob(repo, manifest_entry.oid, MAX_MANIFEST_BYTES).map_err(|e| format!("{name}: FOREST: {e}"))?;
    // serde's message would quote the offending text whole: say only where.
    let manifest: Manifest = serde_json::from_slice(&manifest_bytes).map_err(|e| {
        format!(
            "{name}: FOREST is not a manifest ({:?} error at line {}, column {})",
            e.classify(),
            e.line(),
            e.column()
        )
    })?;
    if manifest.format != FORMAT {
        return Err(format!("{name} is in format {}, not {FORMAT}", manifest.format));
    }
    if manifest.fingerprint != fingerprint || manifest.dimension != dim {
        return Err(format!(
            "{name} holds vectors of another model ({}); {OTHER_MODEL}",
            untrusted::quote(&manifest.model, untrusted::QUOTED_CHARS)
        ));
    }
    let mut shards = vec![None; 256];
    let Some(vectors) = root.iter().find(|e| e.name == "vectors") else {
        return Ok(Source { name: name.into(), tip, shards });
    };
    if vectors.kind != EntryKind::Tree {
        return Err(format!("{name}: vectors is not a directory"));
    }
    let entries =
        untrusted::tree(repo, vectors.oid, MAX_SHARDS_TREE_BYTES).map_err(|e| format!("{name}: vectors: {e}"))?;
    let mut total = 0u64;
    for entry in entries {
        let first =
            std::str::from_utf8(&entry.name).ok().filter(|n| n.len() == 2).and_then(|n| u8::from_str_radix(n, 16).ok());
        let (Some(first), true) = (first, entry.is_blob()) else {
            return Err(format!(
                "{name}: vectors/{} is not a shard",
                untrusted::quote_bytes(&entry.name, untrusted::QUOTED_CHARS)
            ));
        };
        let size = match repo.try_find_header(entry.oid) {
            Ok(Some(h)) if h.kind() == gix::object::Kind::Blob => h.size(),
            _ => return Err(format!("{name}: vectors/{first:02x} is missing or not a file")),
        };
        total += size;
        shards[usize::from(first)] = Some(entry.oid);
    }
    if total > MAX_SOURCE_BYTES {
        return Err(format!("{name} holds {total} bytes of vectors, over the limit of {MAX_SOURCE_BYTES}; not used"));
    }
    Ok(Source { name: name.into(), tip, shards })
}

/// A shard blob, size-checked from its header, with its records indexed by key; returns how
/// many records were not in the shard of their key (left out).
fn read_shard(repo: &gix::Repository, blob: ObjectId, first: u8, dim: usize) -> Result<(Shard, usize), String> {
    let data = untrusted::blob(repo, blob, MAX_SHARD_BYTES).map_err(|e| e.to_string())?;
    if data.len() < 12 || &data[..8] != SHARD_MAGIC {
        return Err("not a vector shard".into());
    }
    let shard_dim = u32::from_le_bytes([data[8], data[9], data[10], data[11]]) as usize;
    let record = 32 + 4 + dim;
    if shard_dim != dim || (data.len() - 12) % record != 0 {
        return Err("its dimension or length does not match the manifest".into());
    }
    let mut index = HashMap::with_capacity((data.len() - 12) / record);
    let mut misplaced = 0;
    for at in (12..data.len()).step_by(record) {
        if data[at] != first {
            misplaced += 1;
            continue;
        }
        let mut key = [0u8; 32];
        key.copy_from_slice(&data[at..at + 32]);
        index.entry(key).or_insert(at);
    }
    Ok((Shard { data, index }, misplaced))
}

/// Writes this clone's own vectors (its embedding cache), merged with every record of the
/// shared Forests it can see (`refs/code-intel/forest` and the remotes' staged ones, except
/// those found poisoned) that passes the checks, to `refs/code-intel/forest`, by
/// compare-and-swap. Where both hold a key,
/// this clone's vector wins: it was embedded here. A shard over [`MAX_SHARD_BYTES`] keeps this
/// clone's vectors first.
pub fn export(root: &Path, loaded: &Loaded) -> Result<ShareReport, crate::Error> {
    let repo = gix::open(root).map_err(crate::error::gix)?;
    let dim = loaded.embedder.dimension;
    let record_len = 32 + 4 + dim;
    // A shared Forest found poisoned is not passed on.
    let distrusted = loaded.forest.read().unwrap_or_else(|p| p.into_inner()).distrusted.clone();
    let mut shared = SharedVectors::open(root, &loaded.fingerprint, dim, &distrusted);
    let mut report = ShareReport { model: loaded.model.clone(), ..ShareReport::default() };
    // This clone's vectors, by shard.
    let mut own: Vec<Vec<(Key, Vec<u8>)>> = vec![Vec::new(); 256];
    {
        let cache = loaded.cache.lock().unwrap_or_else(|p| p.into_inner());
        let mut buf = Vec::with_capacity(4 + dim);
        for (key, vector) in cache.iter() {
            buf.clear();
            quantize(vector, &mut buf);
            own[usize::from(key[0])].push((*key, buf.clone()));
        }
    }
    // This clone's own vectors fill the budget first (a whole Forest within what a reader takes
    // in, `MAX_SOURCE_BYTES`, with room to spare), then the teammates'.
    let budget = (MAX_SOURCE_BYTES as usize) / 10 * 9;
    let own_total: usize = own.iter().map(|s| 12 + s.len() * record_len).sum();
    let mut own_budget = budget;
    let mut spare = budget.saturating_sub(own_total);
    let mut entries = Vec::new();
    for first in 0..=255u8 {
        let mut records: BTreeMap<Key, Vec<u8>> = BTreeMap::new();
        let mut bytes = 12usize;
        for (key, record) in own[usize::from(first)].drain(..) {
            // This clone's own vectors too stop at the limits: a Forest over them is one every
            // reader refuses whole.
            if bytes + record_len > MAX_SHARD_BYTES as usize || own_budget < record_len {
                report.left_out += 1;
                continue;
            }
            own_budget -= record_len;
            bytes += record_len;
            report.own += 1;
            records.insert(key, record);
        }
        for i in 0..shared.sources.len() {
            let Some(shard) = shared.shard(i, first) else { continue };
            for (key, &at) in &shard.index {
                if records.contains_key(key) {
                    continue;
                }
                if bytes + record_len > MAX_SHARD_BYTES as usize || spare < record_len {
                    report.left_out += 1;
                    continue;
                }
                spare -= record_len;
                let record = &shard.data[at + 32..at + record_len];
                let scale = f32::from_le_bytes([record[0], record[1], record[2], record[3]]);
                if check_record(scale, &record[4..]).is_err() {
                    report.refused += 1;
                    continue;
                }
                bytes += record_len;
                report.kept_from_shared += 1;
                records.insert(*key, record.to_vec());
            }
        }
        if records.is_empty() {
            continue;
        }
        let mut blob = Vec::with_capacity(bytes);
        blob.extend_from_slice(SHARD_MAGIC);
        blob.extend_from_slice(&(dim as u32).to_le_bytes());
        for (key, record) in &records {
            blob.extend_from_slice(key);
            blob.extend_from_slice(record);
        }
        report.shared += records.len();
        let oid = repo.write_blob(&blob).map_err(crate::error::gix)?.detach();
        entries.push(Entry { mode: EntryKind::Blob.into(), filename: format!("{first:02x}").into(), oid });
    }
    report.notes = std::mem::take(&mut shared.notes);
    let vectors_tree = repo.write_object(&gix::objs::Tree { entries }).map_err(crate::error::gix)?.detach();
    let manifest = Manifest {
        format: FORMAT,
        model: loaded.model.clone(),
        fingerprint: hex(&loaded.fingerprint),
        dimension: dim,
        vectors: report.shared,
    };
    let manifest_blob = repo
        .write_blob(serde_json::to_vec_pretty(&manifest).map_err(crate::error::gix)?)
        .map_err(crate::error::gix)?
        .detach();
    let root_tree = gix::objs::Tree {
        entries: vec![
            Entry { mode: EntryKind::Blob.into(), filename: "FOREST".into(), oid: manifest_blob },
            Entry { mode: EntryKind::Tree.into(), filename: "vectors".into(), oid: vectors_tree },
        ],
    };
    let tree = repo.write_object(&root_tree).map_err(crate::error::gix)?.detach();
    let tip = code_intel_gitstate::log::tip(&repo, FOREST_REF)?;
    let same_tree =
        tip.is_some_and(|t| repo.find_commit(t).ok().and_then(|c| c.tree_id().ok()).is_some_and(|id| id == tree));
    let commit = match tip {
        Some(t) if same_tree => t,
        _ => {
            let message = format!("forest: {} vectors of {}", report.shared, loaded.model);
            let commit = write_commit(&repo, tree, None, &message)?;
            let expected = expecting(tip);
            apply(&repo, vec![update(FOREST_REF, expected, Target::Object(commit), &message)?])?;
            commit
        }
    };
    report.commit = Some(commit.to_string());
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn unit(seed: usize) -> Vec<f32> {
        let v: Vec<f32> = (0..384).map(|i| (((i + seed) * 37 % 101) as f32 - 50.0) / 300.0).collect();
        let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
        v.iter().map(|x| x / norm).collect()
    }

    #[test]
    fn quantized_vectors_keep_their_direction_and_pass_the_checks() {
        let v = unit(0);
        let mut buf = Vec::new();
        quantize(&v, &mut buf);
        assert_eq!(buf.len(), 4 + 384);
        let scale = f32::from_le_bytes([buf[0], buf[1], buf[2], buf[3]]);
        assert_eq!(check_record(scale, &buf[4..]), Ok(()));
        let back = dequantize(scale, &buf[4..]);
        let cosine: f32 = v.iter().zip(&back).map(|(a, b)| a * b).sum();
        assert!(cosine > 0.999, "{cosine}");
    }

    #[test]
    fn poisoned_records_are_refused() {
        let mut good = Vec::new();
        quantize(&unit(3), &mut good);
        let scale = f32::from_le_bytes([good[0], good[1], good[2], good[3]]);
        let q = &good[4..];
        for bad in [f32::NAN, f32::INFINITY, 0.0, -scale, scale * 100.0, scale / 100.0] {
            assert!(check_record(bad, q).is_err(), "{bad}");
        }
        // Every dimension the same: a unit vector, but no embedding.
        let uniform = vec![127u8; 384];
        let uniform_scale = 1.0 / (127.0 * 384f32.sqrt());
        assert_eq!(check_record(uniform_scale, &uniform), Err("it points the same way in every dimension"));
        // All zero.
        assert!(check_record(scale, &[0u8; 384]).is_err());
    }
}
