//! Vectors in faiss: an `IDMap,Flat` inner-product index over unit-length vectors, so scores
//! are exact cosine similarities and `remove_ids` really removes.
//!
//! OpenMP: a single query is scanned on the calling thread (one OpenMP thread). On a busy
//! 2-core machine a team of OpenMP threads only adds latency spikes to a 384-float scan.

use std::path::Path;

use crate::Error;
use faiss::FlatIndex;
use faiss::selector::IdSelector;
use faiss::{ConcurrentIndex, IdMap, Idx, Index, MetricType};

unsafe extern "C" {
    fn omp_set_num_threads(n: std::ffi::c_int);
}

/// Sets the OpenMP thread count for faiss calls made from the current thread.
pub(crate) fn set_openmp_threads(n: usize) {
    // SAFETY: omp_set_num_threads only sets the calling thread's OpenMP control variable.
    unsafe { omp_set_num_threads(n.clamp(1, 64) as std::ffi::c_int) }
}

/// Stops OpenBLAS's thread pool, when the BLAS that faiss links is OpenBLAS.
///
/// OpenBLAS starts one worker per core when it is loaded, and the workers spin for about 0.1 s
/// waiting for work. A one-shot command that searches for 150 ms on 2 cores lost a third of its
/// speed to them. Single-query flat search never calls BLAS (faiss uses it from 20 queries at
/// once), so the pool only costs: set one thread, then shut the workers down. Looked up at run
/// time, so any other BLAS is left alone.
#[cfg(unix)]
pub fn quiet_blas_threads() {
    // SAFETY: dlsym with RTLD_DEFAULT only looks symbols up. The two OpenBLAS functions, when
    // present, have these C signatures; they run before any BLAS work exists (the start of
    // main), which is what blas_thread_shutdown_ (OpenBLAS's own fork handler) requires.
    unsafe {
        let set = libc::dlsym(libc::RTLD_DEFAULT, c"openblas_set_num_threads".as_ptr());
        if !set.is_null() {
            let set: extern "C" fn(std::ffi::c_int) = std::mem::transmute(set);
            set(1);
        }
        let shutdown = libc::dlsym(libc::RTLD_DEFAULT, c"blas_thread_shutdown_".as_ptr());
        if !shutdown.is_null() {
            let shutdown: extern "C" fn() -> std::ffi::c_int = std::mem::transmute(shutdown);
            shutdown();
        }
    }
}

#[cfg(not(unix))]
pub fn quiet_blas_threads() {}

pub(crate) struct VectorIndex {
    index: IdMap<FlatIndex>,
    dim: u32,
}

impl VectorIndex {
    pub(crate) fn new(dim: u32) -> Result<VectorIndex, Error> {
        // The `IDMap,Flat` of the index factory, built directly so the type says it is flat.
        let index = IdMap::new(FlatIndex::new_ip(dim)?)?;
        Ok(VectorIndex { index, dim })
    }

    /// Reads an index written by [`VectorIndex::write`]; anything else (a torn file, another
    /// dimension, another index type) is an error, so the caller rebuilds.
    pub(crate) fn read(path: &Path, dim: u32) -> Result<VectorIndex, Error> {
        let path = path.to_string_lossy().into_owned();
        let index = faiss::read_index(path)?;
        if index.metric_type() != MetricType::InnerProduct {
            return Err(Error::WrongKind);
        }
        let index =
            index.into_id_map().and_then(|m| m.try_cast_inner_index::<FlatIndex>()).map_err(|_| Error::WrongKind)?;
        if index.d() != dim {
            return Err(Error::Dimension { expected: dim, found: index.d() });
        }
        Ok(VectorIndex { index, dim })
    }

    /// Writes the index to `path` through a temporary file and a rename, so a reader never sees
    /// half an index.
    pub(crate) fn write(&self, path: &Path) -> Result<(), Error> {
        // faiss writes by path: the temporary file is named as every derived writer names it.
        let tmp = code_intel_files::Temp::PerProcess.beside(path);
        // What a killed writer left beside it (its temporary file can be hundreds of MB).
        if let Some(dir) = path.parent() {
            code_intel_files::remove_orphans(dir);
        }
        if let Err(e) = faiss::write_index(&self.index, tmp.to_string_lossy()) {
            code_intel_files::discard(&tmp);
            return Err(e.into());
        }
        std::fs::rename(&tmp, path).map_err(|e| {
            code_intel_files::discard(&tmp);
            code_intel_files::with_path(e, "cannot put in place", path)
        })?;
        Ok(())
    }

    pub(crate) fn dim(&self) -> u32 {
        self.dim
    }

    pub(crate) fn len(&self) -> usize {
        self.index.ntotal() as usize
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The ids held, in insertion order.
    pub(crate) fn ids(&self) -> Vec<u64> {
        // faiss-rs builds the id slice from faiss's pointer, which is null while the index is
        // empty: a slice from a null pointer is undefined behaviour (debug builds abort).
        if self.is_empty() {
            return Vec::new();
        }
        self.index.id_map().iter().filter_map(|i| i.get()).collect()
    }

    /// Adds `vectors` (concatenated, `dim` floats each) under `ids`.
    pub(crate) fn add(&mut self, ids: &[u64], vectors: &[f32]) -> Result<(), Error> {
        if ids.is_empty() {
            return Ok(());
        }
        let ids: Vec<Idx> = ids.iter().map(|&i| Idx::new(i)).collect();
        self.index.add_with_ids(vectors, &ids)?;
        Ok(())
    }

    pub(crate) fn remove(&mut self, ids: &[u64]) -> Result<usize, Error> {
        if ids.is_empty() {
            return Ok(0);
        }
        let ids: Vec<Idx> = ids.iter().map(|&i| Idx::new(i)).collect();
        let selector = IdSelector::batch(&ids)?;
        Ok(self.index.remove_ids(&selector)?)
    }

    /// The `k` nearest ids to `query` with their inner products, best first.
    pub(crate) fn search(&self, query: &[f32], k: usize) -> Result<Vec<(u64, f32)>, Error> {
        if self.is_empty() || k == 0 {
            return Ok(Vec::new());
        }
        if query.len() != self.dim as usize {
            return Err(Error::Dimension { expected: self.dim, found: query.len() as u32 });
        }
        set_openmp_threads(1);
        let k = k.min(self.len());
        let result = ConcurrentIndex::search(&self.index, query, k)?;
        Ok(result.labels.iter().zip(&result.distances).filter_map(|(l, d)| l.get().map(|id| (id, *d))).collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn unit(v: [f32; 3]) -> Vec<f32> {
        let n = v.iter().map(|x| x * x).sum::<f32>().sqrt();
        v.iter().map(|x| x / n).collect()
    }

    #[test]
    fn add_search_remove_and_round_trip_through_a_file() {
        let mut index = VectorIndex::new(3).unwrap();
        let vectors: Vec<f32> = [unit([1.0, 0.0, 0.0]), unit([0.0, 1.0, 0.0]), unit([1.0, 1.0, 0.0])].concat();
        index.add(&[10, 20, 30], &vectors).unwrap();
        let hits = index.search(&unit([1.0, 0.1, 0.0]), 2).unwrap();
        assert_eq!(hits[0].0, 10);
        assert!((hits[0].1 - 0.995).abs() < 0.01, "{hits:?}");
        assert_eq!(index.remove(&[10]).unwrap(), 1);
        assert_eq!(index.search(&unit([1.0, 0.1, 0.0]), 1).unwrap()[0].0, 30);

        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("v.faiss");
        index.write(&path).unwrap();
        let back = VectorIndex::read(&path, 3).unwrap();
        assert_eq!(back.ids(), vec![20, 30]);
        assert!(matches!(VectorIndex::read(&path, 4), Err(Error::Dimension { .. })));
        std::fs::write(&path, b"not an index").unwrap();
        assert!(VectorIndex::read(&path, 3).is_err());
    }

    /// A sync stopped before its first slice saves an empty Forest; reading it back must work
    /// (faiss-rs hands out its empty id map through a null pointer).
    #[test]
    fn an_empty_index_round_trips() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("v.faiss");
        VectorIndex::new(3).unwrap().write(&path).unwrap();
        let back = VectorIndex::read(&path, 3).unwrap();
        assert!(back.is_empty());
        assert_eq!(back.ids(), Vec::<u64>::new());
    }
}
