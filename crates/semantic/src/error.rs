//! The semantic crate's one error type: what can go wrong loading the model, embedding,
//! keeping the vector index, syncing the Forest or reading the Map, each with what to do.

use std::sync::Arc;

use crate::embed::SETUP_HINT;

/// Clone, because a failed model load is kept and answered again to every later caller: causes
/// are shared (`Arc`), and kept as `source()`.
#[derive(Debug, Clone, thiserror::Error)]
pub enum Error {
    #[error("ONNX Runtime is not available ({0}); {SETUP_HINT}")]
    RuntimeMissing(String),
    #[error("no embedding model at {0}; {SETUP_HINT}")]
    ModelMissing(String),
    #[error("embedding failed: {0}")]
    Embedding(String),
    #[error("faiss: {0}")]
    Faiss(#[source] Arc<faiss::error::Error>),
    /// The stored Forest was built by another model; `sync_index` with force rebuilds it.
    #[error("the vector index has dimension {found}, the model gives {expected}")]
    Dimension { expected: u32, found: u32 },
    #[error("the vector index is not an inner-product IDMap index")]
    WrongKind,
    #[error("cannot list the repository's files: {0}")]
    Walk(#[source] Arc<code_intel_codebase::Error>),
    #[error("{0}")]
    Io(#[source] Arc<std::io::Error>),
    /// What the git plumbing reported; it says what failed and keeps the cause.
    #[error("{0}")]
    GitState(#[source] Arc<code_intel_gitstate::Error>),
    /// A gix operation failed; the cause is the error's source.
    #[error("{0}")]
    Gix(#[source] Arc<dyn std::error::Error + Send + Sync + 'static>),
    /// What the Map holds is not what it must be (empty, an invalid entry, a ref that kept
    /// changing), in words: there is no lower cause.
    #[error("{0}")]
    Git(String),
}

/// A gix error, kept as the cause: `.map_err(gix)`.
pub(crate) fn gix(e: impl std::error::Error + Send + Sync + 'static) -> Error {
    Error::Gix(Arc::new(e))
}

impl From<faiss::error::Error> for Error {
    fn from(e: faiss::error::Error) -> Error {
        Error::Faiss(Arc::new(e))
    }
}

impl From<std::io::Error> for Error {
    fn from(e: std::io::Error) -> Error {
        Error::Io(Arc::new(e))
    }
}

impl From<code_intel_gitstate::Error> for Error {
    fn from(e: code_intel_gitstate::Error) -> Error {
        Error::GitState(Arc::new(e))
    }
}
