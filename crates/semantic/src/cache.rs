//! The embedding cache: vectors keyed by the blake3 of the text that was embedded, so an
//! unchanged chunk is never embedded twice, not even by `index --rebuild`.
//!
//! On disk (`.code-intel/forest/embeddings.bin`): a header (magic, model fingerprint,
//! dimension), then appended records of a 32-byte key and `dim` little-endian floats. A torn
//! last record is ignored; a header from another model or dimension empties the cache.

use std::collections::HashMap;
use std::io::{BufWriter, Read, Write};
use std::path::{Path, PathBuf};

const MAGIC: &[u8; 8] = b"CIEMB01\0";
const HEADER_LEN: usize = 8 + 32 + 4;

pub(crate) type Key = [u8; 32];

pub(crate) fn key_of(text: &str) -> Key {
    *blake3::hash(text.as_bytes()).as_bytes()
}

pub struct EmbeddingCache {
    path: PathBuf,
    model: [u8; 32],
    dim: usize,
    slots: HashMap<Key, usize>,
    vectors: Vec<f32>,
    /// Records held in memory but not yet appended to the file (slot numbers).
    unsaved: Vec<(Key, usize)>,
    /// Records in the file.
    on_disk: usize,
}

impl EmbeddingCache {
    /// Opens the cache at `path` for `model` (a fingerprint) with `dim` floats per vector.
    pub fn open(path: &Path, model: [u8; 32], dim: usize) -> EmbeddingCache {
        let mut cache = EmbeddingCache {
            path: path.to_path_buf(),
            model,
            dim,
            slots: HashMap::new(),
            vectors: Vec::new(),
            unsaved: Vec::new(),
            on_disk: 0,
        };
        if let Ok(bytes) = read_all(path) {
            cache.load(&bytes);
        }
        cache
    }

    fn load(&mut self, bytes: &[u8]) {
        if bytes.len() < HEADER_LEN || &bytes[..8] != MAGIC || bytes[8..40] != self.model {
            return;
        }
        let dim = u32::from_le_bytes([bytes[40], bytes[41], bytes[42], bytes[43]]) as usize;
        if dim != self.dim || dim == 0 {
            return;
        }
        let record = 32 + 4 * dim;
        let body = &bytes[HEADER_LEN..];
        let count = body.len() / record;
        self.vectors.reserve(count * dim);
        for r in body.chunks_exact(record) {
            let mut key = [0u8; 32];
            key.copy_from_slice(&r[..32]);
            let slot = self.vectors.len() / dim;
            self.vectors.extend(r[32..].chunks_exact(4).map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]])));
            self.slots.insert(key, slot);
        }
        self.on_disk = count;
    }

    pub fn len(&self) -> usize {
        self.slots.len()
    }

    pub fn is_empty(&self) -> bool {
        self.slots.is_empty()
    }

    pub fn get(&self, key: &Key) -> Option<&[f32]> {
        let slot = *self.slots.get(key)?;
        self.vectors.get(slot * self.dim..(slot + 1) * self.dim)
    }

    /// Every vector held, in no particular order.
    pub fn iter(&self) -> impl Iterator<Item = (&Key, &[f32])> + '_ {
        self.slots.iter().map(|(key, slot)| (key, &self.vectors[slot * self.dim..(slot + 1) * self.dim]))
    }

    pub fn insert(&mut self, key: Key, vector: &[f32]) {
        if vector.len() != self.dim || self.slots.contains_key(&key) {
            return;
        }
        let slot = self.vectors.len() / self.dim;
        self.vectors.extend_from_slice(vector);
        self.slots.insert(key, slot);
        self.unsaved.push((key, slot));
    }

    /// Appends what is new to the file (writing the whole file when there is none yet).
    pub fn save(&mut self) -> std::io::Result<()> {
        if self.unsaved.is_empty() {
            return Ok(());
        }
        if self.on_disk == 0 || !self.path.is_file() {
            self.write_full(&self.path.clone())?;
        } else {
            let file = std::fs::OpenOptions::new().append(true).open(&self.path)?;
            let mut out = BufWriter::with_capacity(1 << 20, file);
            self.write_records(&mut out, &self.unsaved)?;
            out.flush()?;
            self.on_disk += self.unsaved.len();
        }
        self.unsaved.clear();
        Ok(())
    }

    /// Writes every vector held to `path`, through a temporary file and a rename.
    fn write_full(&mut self, path: &Path) -> std::io::Result<()> {
        if let Some(dir) = path.parent() {
            code_intel_codebase::derived::ensure_ignored_dir(dir)?;
        }
        let all: Vec<(Key, usize)> = self.slots.iter().map(|(k, s)| (*k, *s)).collect();
        // What a killed writer left beside it (its temporary file can be hundreds of MB).
        if let Some(dir) = path.parent() {
            code_intel_files::remove_orphans(dir);
        }
        code_intel_files::write_atomically(path, code_intel_files::Temp::PerProcess, |file| {
            let mut out = BufWriter::with_capacity(1 << 20, file);
            self.write_header(&mut out)?;
            self.write_records(&mut out, &all)?;
            out.flush()
        })?;
        self.on_disk = all.len();
        Ok(())
    }

    /// Drops every vector whose key `keep` rejects, when that is most of the file, and rewrites
    /// the file. Keeps the cache from growing without bound as code changes.
    pub fn compact(&mut self, keep: impl Fn(&Key) -> bool) -> std::io::Result<()> {
        let live = self.slots.keys().filter(|k| keep(k)).count();
        let dead = self.slots.len() - live;
        if dead < 4096 || dead < live {
            return Ok(());
        }
        let mut slots = HashMap::with_capacity(live);
        let mut vectors = Vec::with_capacity(live * self.dim);
        for (key, slot) in &self.slots {
            if keep(key) {
                slots.insert(*key, vectors.len() / self.dim);
                vectors.extend_from_slice(&self.vectors[slot * self.dim..(slot + 1) * self.dim]);
            }
        }
        self.slots = slots;
        self.vectors = vectors;
        self.unsaved.clear();
        self.write_full(&self.path.clone())
    }

    fn write_header(&self, out: &mut impl Write) -> std::io::Result<()> {
        out.write_all(MAGIC)?;
        out.write_all(&self.model)?;
        out.write_all(&(self.dim as u32).to_le_bytes())
    }

    fn write_records(&self, out: &mut impl Write, records: &[(Key, usize)]) -> std::io::Result<()> {
        for (key, slot) in records {
            out.write_all(key)?;
            for v in &self.vectors[slot * self.dim..(slot + 1) * self.dim] {
                out.write_all(&v.to_le_bytes())?;
            }
        }
        Ok(())
    }
}

fn read_all(path: &Path) -> std::io::Result<Vec<u8>> {
    let mut bytes = Vec::new();
    std::fs::File::open(path)?.read_to_end(&mut bytes)?;
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn survives_reopen_and_ignores_a_torn_tail() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("e.bin");
        let mut c = EmbeddingCache::open(&path, [1; 32], 3);
        c.insert(key_of("a"), &[1.0, 2.0, 3.0]);
        c.save().unwrap();
        c.insert(key_of("b"), &[4.0, 5.0, 6.0]);
        c.save().unwrap();
        let c = EmbeddingCache::open(&path, [1; 32], 3);
        assert_eq!(c.get(&key_of("b")), Some(&[4.0, 5.0, 6.0][..]));
        assert_eq!(c.len(), 2);
        // A torn append: half a record.
        let mut f = std::fs::OpenOptions::new().append(true).open(&path).unwrap();
        f.write_all(&[9; 40]).unwrap();
        let c = EmbeddingCache::open(&path, [1; 32], 3);
        assert_eq!(c.len(), 2);
        // Another model: nothing is trusted.
        let c = EmbeddingCache::open(&path, [2; 32], 3);
        assert!(c.is_empty());
    }

    #[test]
    fn compaction_keeps_the_live_vectors() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("e.bin");
        let mut c = EmbeddingCache::open(&path, [1; 32], 1);
        for i in 0..5000u32 {
            c.insert(key_of(&i.to_string()), &[i as f32]);
        }
        c.save().unwrap();
        let keep = key_of("7");
        c.compact(|k| *k == keep).unwrap();
        let c = EmbeddingCache::open(&path, [1; 32], 1);
        assert_eq!(c.len(), 1);
        assert_eq!(c.get(&keep), Some(&[7.0][..]));
    }
}
