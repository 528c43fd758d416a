//! A Forest that travels: the embedding cache as git objects under `refs/code-intel/forest`, so
//! a teammate's fresh clone embeds only what differs.
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
//! Vectors of another model are never imported (the fingerprint says whose they are).
//! Nothing here touches the network: `git code-intel forest push|fetch` runs `git push|fetch`
//! for the transport (gix has no push), and only when the user asks.

use std::collections::BTreeMap;
use std::path::Path;

use gix::ObjectId;
use gix::objs::tree::{Entry, EntryKind};
use gix::refs::Target;
use gix::refs::transaction::PreviousValue;
use serde::{Deserialize, Serialize};

use super::cache::Key;
use crate::loaded::Loaded;
use code_intel_gitstate::refs::{apply, update, write_commit};

pub const FOREST_REF: &str = "refs/code-intel/forest";
const SHARD_MAGIC: &[u8; 8] = b"GCIFV001";
const FORMAT: u32 = 1;
/// The tip last imported, so a sync imports a ref that arrived by a plain `git fetch` once.
const IMPORTED_TIP: &str = "shared.tip";

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
struct Manifest {
    format: u32,
    model: String,
    /// Hex of the model's fingerprint: what the local cache is keyed by.
    fingerprint: String,
    dimension: usize,
    vectors: usize,
}

/// What an export or an import did.
#[derive(Debug, Clone, Default, Serialize, PartialEq, Eq)]
pub struct ShareReport {
    /// The model the shared vectors belong to.
    pub model: String,
    /// Vectors in `refs/code-intel/forest` now.
    pub shared: usize,
    /// Vectors this import added to the local embedding cache.
    pub imported: usize,
    /// The commit `refs/code-intel/forest` points at.
    pub commit: Option<String>,
    pub note: Option<String>,
}

fn hex(fingerprint: &[u8; 32]) -> String {
    blake3::Hash::from_bytes(*fingerprint).to_hex().to_string()
}

fn git_error(e: impl std::fmt::Display) -> String {
    e.to_string()
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

/// Shared vectors by key: (scale, int8 values).
type Shared = BTreeMap<Key, (f32, Vec<u8>)>;

/// The shared vectors at `commit`: its manifest and (key -> scale, int8 bytes).
fn read(repo: &gix::Repository, commit: ObjectId) -> Result<(Manifest, Shared), String> {
    let tree = repo.find_commit(commit).map_err(git_error)?.tree().map_err(git_error)?;
    let manifest_blob = tree
        .find_entry("FOREST")
        .ok_or("refs/code-intel/forest has no FOREST manifest")?
        .object()
        .map_err(git_error)?;
    let manifest: Manifest = serde_json::from_slice(&manifest_blob.data).map_err(git_error)?;
    let mut vectors = BTreeMap::new();
    let Some(shards) = tree.find_entry("vectors") else { return Ok((manifest, vectors)) };
    let shards = shards.object().map_err(git_error)?.into_tree();
    let record = 32 + 4 + manifest.dimension;
    for entry in shards.iter() {
        let entry = entry.map_err(git_error)?;
        let blob = repo.find_object(entry.oid()).map_err(git_error)?;
        let data = &blob.data;
        if data.len() < 12 || &data[..8] != SHARD_MAGIC {
            return Err(format!("shard {} is not a vector shard", entry.filename()));
        }
        let dim = u32::from_le_bytes([data[8], data[9], data[10], data[11]]) as usize;
        if dim != manifest.dimension || (data.len() - 12) % record != 0 {
            return Err(format!("shard {} does not match its manifest", entry.filename()));
        }
        for r in data[12..].chunks_exact(record) {
            let mut key = [0u8; 32];
            key.copy_from_slice(&r[..32]);
            let scale = f32::from_le_bytes([r[32], r[33], r[34], r[35]]);
            vectors.insert(key, (scale, r[36..].to_vec()));
        }
    }
    Ok((manifest, vectors))
}

/// Writes the local embedding cache (merged with what the ref already shares for the same
/// model) to `refs/code-intel/forest`, by compare-and-swap.
pub fn export(root: &Path, loaded: &Loaded) -> Result<ShareReport, String> {
    let repo = gix::open(root).map_err(git_error)?;
    let fingerprint = hex(&loaded.fingerprint);
    let dim = loaded.embedder.dimension;
    let tip = code_intel_gitstate::log::tip(&repo, FOREST_REF).map_err(git_error)?;
    let mut records: Shared = BTreeMap::new();
    let mut note = None;
    if let Some(tip) = tip {
        match read(&repo, tip) {
            Ok((manifest, shared)) if manifest.fingerprint == fingerprint => records = shared,
            Ok((manifest, _)) => {
                note = Some(format!(
                    "refs/code-intel/forest held vectors of another model ({}); they are replaced by this model's",
                    manifest.model
                ))
            }
            Err(e) => note = Some(format!("refs/code-intel/forest was unreadable ({e}); it is rewritten")),
        }
    }
    {
        let cache = loaded.cache.lock().unwrap_or_else(|p| p.into_inner());
        let mut buf = Vec::with_capacity(4 + dim);
        for (key, vector) in cache.iter() {
            buf.clear();
            quantize(vector, &mut buf);
            let scale = f32::from_le_bytes([buf[0], buf[1], buf[2], buf[3]]);
            records.insert(*key, (scale, buf[4..].to_vec()));
        }
    }
    let mut shards: BTreeMap<u8, Vec<u8>> = BTreeMap::new();
    for (key, (scale, q)) in &records {
        let shard = shards.entry(key[0]).or_insert_with(|| {
            let mut s = SHARD_MAGIC.to_vec();
            s.extend_from_slice(&(dim as u32).to_le_bytes());
            s
        });
        shard.extend_from_slice(key);
        shard.extend_from_slice(&scale.to_le_bytes());
        shard.extend_from_slice(q);
    }
    let mut entries = Vec::with_capacity(shards.len());
    for (first, bytes) in &shards {
        let oid = repo.write_blob(bytes).map_err(git_error)?.detach();
        entries.push(Entry { mode: EntryKind::Blob.into(), filename: format!("{first:02x}").into(), oid });
    }
    let vectors_tree = repo.write_object(&gix::objs::Tree { entries }).map_err(git_error)?.detach();
    let manifest =
        Manifest { format: FORMAT, model: loaded.model.clone(), fingerprint, dimension: dim, vectors: records.len() };
    let manifest_blob =
        repo.write_blob(serde_json::to_vec_pretty(&manifest).map_err(git_error)?).map_err(git_error)?.detach();
    let root_tree = gix::objs::Tree {
        entries: vec![
            Entry { mode: EntryKind::Blob.into(), filename: "FOREST".into(), oid: manifest_blob },
            Entry { mode: EntryKind::Tree.into(), filename: "vectors".into(), oid: vectors_tree },
        ],
    };
    let tree = repo.write_object(&root_tree).map_err(git_error)?.detach();
    let same_tree =
        tip.is_some_and(|t| repo.find_commit(t).ok().and_then(|c| c.tree_id().ok()).is_some_and(|id| id == tree));
    let commit = match tip {
        Some(t) if same_tree => t,
        _ => {
            let message = format!("forest: {} vectors of {}", records.len(), loaded.model);
            let commit = write_commit(&repo, tree, None, &message).map_err(git_error)?;
            let expected = match tip {
                Some(t) => PreviousValue::MustExistAndMatch(Target::Object(t)),
                None => PreviousValue::MustNotExist,
            };
            apply(&repo, vec![update(FOREST_REF, expected, Target::Object(commit), &message).map_err(git_error)?])
                .map_err(git_error)?;
            commit
        }
    };
    remember_imported(root, commit);
    Ok(ShareReport {
        model: loaded.model.clone(),
        shared: records.len(),
        imported: 0,
        commit: Some(commit.to_string()),
        note,
    })
}

/// Adds the vectors `refs/code-intel/forest` shares to the local embedding cache, when they are
/// this model's; another model's are ignored, with a note saying so.
pub fn import(root: &Path, loaded: &Loaded) -> Result<ShareReport, String> {
    let repo = gix::open(root).map_err(git_error)?;
    let Some(tip) = code_intel_gitstate::log::tip(&repo, FOREST_REF).map_err(git_error)? else {
        return Ok(ShareReport {
            model: loaded.model.clone(),
            note: Some(
                "there is no shared Forest (refs/code-intel/forest); `git code-intel forest fetch` gets one".into(),
            ),
            ..ShareReport::default()
        });
    };
    let (manifest, shared) = read(&repo, tip)?;
    let mut report = ShareReport {
        model: manifest.model.clone(),
        shared: shared.len(),
        commit: Some(tip.to_string()),
        ..ShareReport::default()
    };
    if manifest.fingerprint != hex(&loaded.fingerprint) || manifest.dimension != loaded.embedder.dimension {
        report.note = Some(format!(
            "the shared Forest holds vectors of another model ({}, not {}): ignored; everything is embedded locally",
            manifest.model, loaded.model
        ));
        remember_imported(root, tip);
        return Ok(report);
    }
    let mut cache = loaded.cache.lock().unwrap_or_else(|p| p.into_inner());
    let before = cache.len();
    for (key, (scale, q)) in &shared {
        if cache.get(key).is_none() {
            cache.insert(*key, &dequantize(*scale, q));
        }
    }
    report.imported = cache.len() - before;
    cache.save().map_err(git_error)?;
    drop(cache);
    remember_imported(root, tip);
    Ok(report)
}

/// Imports `refs/code-intel/forest` when its tip is not the one last imported or exported here
/// (it arrived with a plain `git fetch` of shared refs). Cheap otherwise: one ref read.
pub fn import_if_new(root: &Path, loaded: &Loaded) {
    let Ok(repo) = gix::open(root) else { return };
    let Ok(Some(tip)) = code_intel_gitstate::log::tip(&repo, FOREST_REF) else { return };
    let seen = std::fs::read_to_string(super::forest::forest_dir(root).join(IMPORTED_TIP)).unwrap_or_default();
    if ObjectId::from_hex(seen.trim().as_bytes()).is_ok_and(|seen| seen == tip) {
        return;
    }
    match import(root, loaded) {
        Ok(r) => tracing::info!(
            "shared Forest: {} vectors imported{}",
            r.imported,
            r.note.map(|n| format!(" ({n})")).unwrap_or_default()
        ),
        Err(e) => tracing::warn!("shared Forest not imported: {e}"),
    }
}

fn remember_imported(root: &Path, tip: ObjectId) {
    let dir = super::forest::forest_dir(root);
    if code_intel_codebase::derived::ensure_ignored_dir(&dir).is_ok() {
        let _ = std::fs::write(dir.join(IMPORTED_TIP), tip.to_string());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantized_vectors_keep_their_direction() {
        let v: Vec<f32> = (0..384).map(|i| ((i * 37 % 101) as f32 - 50.0) / 300.0).collect();
        let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
        let v: Vec<f32> = v.iter().map(|x| x / norm).collect();
        let mut buf = Vec::new();
        quantize(&v, &mut buf);
        assert_eq!(buf.len(), 4 + 384);
        let back = dequantize(f32::from_le_bytes([buf[0], buf[1], buf[2], buf[3]]), &buf[4..]);
        let cosine: f32 = v.iter().zip(&back).map(|(a, b)| a * b).sum();
        assert!(cosine > 0.999, "{cosine}");
    }
}
