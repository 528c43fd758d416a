//! Semantic search (in progress, issue 5). So far: [`chunk`], the Forest's AST chunks, and
//! [`embed`], embeddings from a local model through fastembed with ONNX Runtime loaded at run
//! time. The faiss index, sync, `semantic_search` and the Map are not built yet.

pub mod chunk;
pub mod embed;
