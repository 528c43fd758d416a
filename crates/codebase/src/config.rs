//! `.code-intel/config.json`: the project's settings (see the seeds' Configuration section).

use std::path::Path;

use serde::{Deserialize, Serialize};

pub const CONFIG_PATH: &str = ".code-intel/config.json";

/// The model used when `embedding_model` is not set: all-MiniLM-L6-v2 quantized to int8 by
/// ONNX Runtime (1.76× the throughput of fp32 with the same recall; docs/PERFORMANCE.md).
pub const DEFAULT_MODEL: &str = "all-MiniLM-L6-v2-int8";

/// Files larger than this are not searched or parsed (bytes).
pub const DEFAULT_MAX_FILE_SIZE: u64 = 1024 * 1024;

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default)]
pub struct Config {
    pub version: String,
    pub embedding_model: String,
    pub source_dirs: Vec<String>,
    /// Globs (gitignore syntax) of files the tools never look at, on top of `.gitignore`.
    pub exclude_patterns: Vec<String>,
    pub chunk_strategy: String,
    pub chunk_max_tokens: u32,
    pub sync_ttl_hours: f64,
    /// How semantic_search merges the dense and the lexical rankings: `weighted` (each scaled
    /// to 0..1 per query, then `dense_weight` × dense + the rest × lexical) or `rrf`
    /// (reciprocal rank fusion).
    pub search_fusion: String,
    /// The dense ranking's share in `weighted` fusion, 0 to 1.
    pub dense_weight: f32,
    pub sync_on_start: bool,
    /// Files over this many bytes are skipped by the walk, with a note in the output.
    pub max_file_size: u64,
    /// What the pre-commit hook and review_changes flag as garbage.
    pub garbage: GarbageRules,
    /// Shell commands the PreToolUse hook lets run outside READY besides the built-in
    /// read-only ones: a name (`make`) or a name and its first operand (`cargo metadata`).
    pub read_only_commands: Vec<String>,
    /// The commands that run the project's tests, builds and linters (`python3 -m unittest`,
    /// `make check`): in the verification phases the hooks let them run, and the prompts name
    /// them. Empty: the usual runners of the ecosystems found at the root ([`crate::verify`]).
    pub verify_commands: Vec<String>,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            version: "1.0".into(),
            embedding_model: DEFAULT_MODEL.into(),
            source_dirs: Vec::new(),
            exclude_patterns: vec!["**/node_modules/**".into(), "**/__pycache__/**".into()],
            chunk_strategy: "ast".into(),
            chunk_max_tokens: 512,
            sync_ttl_hours: 1.0,
            search_fusion: "weighted".into(),
            dense_weight: 0.7,
            sync_on_start: true,
            max_file_size: DEFAULT_MAX_FILE_SIZE,
            garbage: GarbageRules::default(),
            read_only_commands: Vec::new(),
            verify_commands: Vec::new(),
        }
    }
}

/// How the Forest cuts files into chunks (`chunk_strategy`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChunkStrategy {
    /// Functions, classes and the module code between them, from the syntax tree (`ast`).
    Ast,
    /// Fixed windows of lines, whatever the language (`lines`).
    Lines,
}

impl Config {
    /// `chunk_strategy`, or None when it names no strategy (`ast` and `lines` are known;
    /// `fixed` and `window` mean `lines`).
    pub fn chunking(&self) -> Option<ChunkStrategy> {
        match self.chunk_strategy.trim().to_ascii_lowercase().as_str() {
            "" | "ast" => Some(ChunkStrategy::Ast),
            "lines" | "fixed" | "window" | "windows" => Some(ChunkStrategy::Lines),
            _ => None,
        }
    }

    /// The `source_dirs` that exist under `root`, `/`-separated without `./` or a trailing
    /// `/`. Empty means the whole repository: when none is given, when one is `.`, or when
    /// none of those given exists (a config written for another layout must not empty the
    /// index).
    pub fn source_prefixes(&self, root: &Path) -> Vec<String> {
        let mut out = Vec::new();
        for dir in &self.source_dirs {
            let d = dir.trim().replace('\\', "/");
            let d = d.trim_start_matches("./").trim_end_matches('/');
            if d.is_empty() || d == "." {
                return Vec::new();
            }
            if root.join(d).is_dir() {
                out.push(d.to_owned());
            }
        }
        out
    }

    /// Whether `rel` is inside one of `prefixes` (everything is, when there are none).
    pub fn in_source_dirs(prefixes: &[String], rel: &str) -> bool {
        prefixes.is_empty()
            || prefixes.iter().any(|p| rel.strip_prefix(p.as_str()).is_some_and(|rest| rest.starts_with('/')))
    }

    /// Reads the project's config; a missing file gives the defaults, a broken one gives the
    /// defaults and a warning naming the problem.
    pub fn load(repo_root: &Path) -> (Config, Option<String>) {
        let path = repo_root.join(CONFIG_PATH);
        match std::fs::read_to_string(&path) {
            Ok(text) => match serde_json::from_str::<Config>(&text) {
                Ok(config) if config.chunking().is_none() => {
                    let why = format!(
                        "{}: chunk_strategy {:?} is neither \"ast\" nor \"lines\"; using \"ast\"",
                        path.display(),
                        config.chunk_strategy
                    );
                    (config, Some(why))
                }
                Ok(config) => (config, None),
                Err(e) => (Config::default(), Some(format!("{}: {e}; using defaults", path.display()))),
            },
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => (Config::default(), None),
            Err(e) => (Config::default(), Some(format!("{}: {e}; using defaults", path.display()))),
        }
    }
}

/// Which garbage checks run ([`crate::garbage`]), from `.code-intel/config.json` (`garbage`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct GarbageRules {
    pub debug_statements: bool,
    pub temp_files: bool,
    pub conflict_markers: bool,
    pub todo_stubs: bool,
    pub large_binaries: bool,
    pub secrets: bool,
    /// Binary files above this many bytes are flagged.
    pub max_binary_bytes: u64,
}

impl Default for GarbageRules {
    fn default() -> Self {
        GarbageRules {
            debug_statements: true,
            temp_files: true,
            conflict_markers: true,
            todo_stubs: true,
            large_binaries: true,
            secrets: true,
            max_binary_bytes: 1024 * 1024,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn source_dirs_that_exist_limit_the_index_and_none_means_everything() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("src/a")).unwrap();
        let mut c = Config { source_dirs: vec!["./src/".into(), "lib".into()], ..Config::default() };
        let p = c.source_prefixes(dir.path());
        assert_eq!(p, vec!["src"]);
        assert!(Config::in_source_dirs(&p, "src/a/b.rs") && !Config::in_source_dirs(&p, "srcx/b.rs"));
        assert!(!Config::in_source_dirs(&p, "tests/t.rs"));
        c.source_dirs = vec!["lib".into()];
        assert!(c.source_prefixes(dir.path()).is_empty(), "none exists: everything");
        c.source_dirs = vec!["src".into(), ".".into()];
        assert!(c.source_prefixes(dir.path()).is_empty(), "`.` is everything");
        assert_eq!(
            Config { chunk_strategy: "Lines".into(), ..Config::default() }.chunking(),
            Some(ChunkStrategy::Lines)
        );
        assert_eq!(Config { chunk_strategy: "tokens".into(), ..Config::default() }.chunking(), None);
    }

    #[test]
    fn partial_config_keeps_defaults() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join(".code-intel")).unwrap();
        std::fs::write(dir.path().join(CONFIG_PATH), r#"{"exclude_patterns": ["vendor/**"]}"#).unwrap();
        let (c, w) = Config::load(dir.path());
        assert!(w.is_none());
        assert_eq!(c.exclude_patterns, vec!["vendor/**"]);
        assert_eq!(c.max_file_size, DEFAULT_MAX_FILE_SIZE);
    }

    #[test]
    fn broken_config_warns() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join(".code-intel")).unwrap();
        std::fs::write(dir.path().join(CONFIG_PATH), "{nope").unwrap();
        let (c, w) = Config::load(dir.path());
        assert!(w.is_some());
        assert_eq!(c.chunk_max_tokens, 512);
    }
}
