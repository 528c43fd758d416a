//! The model once loaded, and what is keyed by it: shared by the service (which loads it) and
//! the Forest sharing (which exports and imports the vectors it made).

use std::sync::atomic::AtomicBool;
use std::sync::{Mutex, RwLock};

use crate::cache::EmbeddingCache;
use crate::embed::Embedder;
use crate::forest::Forest;

/// The model, ready: the embedder and what its vectors are stored with.
pub struct Loaded {
    pub embedder: Embedder,
    /// The model directory's name (`all-minilm-l6-v2-int8`), as reports show it.
    pub model: String,
    /// The model's: what cached vectors are keyed with.
    pub fingerprint: [u8; 32],
    /// The model's and the chunking's (`chunk_strategy`, `chunk_max_tokens`): a Forest made
    /// with another is rebuilt (from the cache, so nothing unchanged is embedded again).
    pub forest_fingerprint: [u8; 32],
    pub forest: RwLock<Forest>,
    /// When the model was loaded, the Forest on disk had been made with another model or
    /// embedding text and was set aside: this process's sync reports say so.
    pub replaced_forest: AtomicBool,
    pub cache: Mutex<EmbeddingCache>,
}
