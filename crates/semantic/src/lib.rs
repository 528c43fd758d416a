//! Semantic search over two layers (the seeds' Forest/Map):
//!
//! - `chunk`: the Forest's AST chunks; [`embed`]: vectors from a local model through fastembed;
//!   `cache`: vectors by blake3 of the embedded text; `vectors`: faiss `IDMap,Flat`;
//!   `lexical`: BM25; [`forest`]: chunks + vectors + BM25, persisted; [`sync`]: incremental sync.
//! - [`map`]: learned success patterns in `refs/code-intel/map`; `learning`: what a successful
//!   session teaches it.
//! - [`service`]: one repository's semantic state (lazy model, background sync, Map index);
//!   `loaded`: the model once loaded, with the Forest and the cache keyed by it.
//! - [`share`]: the embedding cache shared through `refs/code-intel/forest`.
//! - [`Error`]: the one error type.
//!
//! It may use the workflow, gitstate and codebase crates; it must not know MCP, clap, sessions
//! or the binary crate's tools.

// What this crate exports is its contract with the layers above: nothing public by accident.
#![warn(unreachable_pub)]

mod cache;
mod chunk;
pub mod embed;
mod error;
pub mod forest;
mod learning;
mod lexical;
mod loaded;
pub mod map;
pub mod service;
pub mod share;
pub mod sync;
mod vectors;

// The chosen list: what the private modules offer the layers above.
pub use chunk::{Chunk, chunk_file};
pub use error::Error;
pub use learning::{SessionFacts, entry_for, evidence_of};
pub use lexical::{Bm25, terms};
pub use vectors::quiet_blas_threads;
