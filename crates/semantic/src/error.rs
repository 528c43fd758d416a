//! The semantic crate's one error type: what can go wrong loading the model, embedding,
//! keeping the vector index, syncing the Forest or reading the Map, each with what to do.

use crate::embed::SETUP_HINT;

/// Clone, because a failed model load is kept and answered again to every later caller.
#[derive(Debug, Clone, thiserror::Error)]
pub enum Error {
    #[error("ONNX Runtime is not available ({0}); {SETUP_HINT}")]
    RuntimeMissing(String),
    #[error("no embedding model at {0}; {SETUP_HINT}")]
    ModelMissing(String),
    #[error("embedding failed: {0}")]
    Embedding(String),
    #[error("faiss: {0}")]
    Faiss(String),
    /// The stored Forest was built by another model; `sync_index` with force rebuilds it.
    #[error("the vector index has dimension {found}, the model gives {expected}")]
    Dimension { expected: u32, found: u32 },
    #[error("the vector index is not an inner-product IDMap index")]
    WrongKind,
    #[error("cannot list the repository's files: {0}")]
    Walk(String),
    #[error("{0}")]
    Io(String),
    #[error("{0}")]
    Git(String),
}

impl From<faiss::error::Error> for Error {
    fn from(e: faiss::error::Error) -> Error {
        Error::Faiss(e.to_string())
    }
}

impl From<std::io::Error> for Error {
    fn from(e: std::io::Error) -> Error {
        Error::Io(e.to_string())
    }
}

impl From<code_intel_gitstate::Error> for Error {
    fn from(e: code_intel_gitstate::Error) -> Error {
        Error::Git(e.to_string())
    }
}
