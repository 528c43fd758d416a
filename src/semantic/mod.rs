//! Semantic search (in progress, issue 5). So far: [`embed`], embeddings from a local model
//! through fastembed with ONNX Runtime loaded at run time.

pub mod embed;
