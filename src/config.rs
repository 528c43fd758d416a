//! `.code-intel/config.json`: the project's settings (see the seeds' Configuration section).

use std::path::Path;

use serde::{Deserialize, Serialize};

pub const CONFIG_PATH: &str = ".code-intel/config.json";

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
    pub sync_on_start: bool,
    /// Files over this many bytes are skipped by the walk, with a note in the output.
    pub max_file_size: u64,
    /// What the pre-commit hook and review_changes flag as garbage.
    pub garbage: crate::garbage::GarbageRules,
    /// Shell commands the PreToolUse hook lets run outside READY besides the built-in
    /// read-only ones: a name (`make`) or a name and its first operand (`cargo metadata`).
    pub read_only_commands: Vec<String>,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            version: "1.0".into(),
            embedding_model: "all-MiniLM-L6-v2".into(),
            source_dirs: Vec::new(),
            exclude_patterns: vec!["**/node_modules/**".into(), "**/__pycache__/**".into()],
            chunk_strategy: "ast".into(),
            chunk_max_tokens: 512,
            sync_ttl_hours: 1.0,
            sync_on_start: true,
            max_file_size: DEFAULT_MAX_FILE_SIZE,
            garbage: crate::garbage::GarbageRules::default(),
            read_only_commands: Vec::new(),
        }
    }
}

impl Config {
    /// Reads the project's config; a missing file gives the defaults, a broken one gives the
    /// defaults and a warning naming the problem.
    pub fn load(repo_root: &Path) -> (Config, Option<String>) {
        let path = repo_root.join(CONFIG_PATH);
        match std::fs::read_to_string(&path) {
            Ok(text) => match serde_json::from_str::<Config>(&text) {
                Ok(config) => (config, None),
                Err(e) => (Config::default(), Some(format!("{}: {e}; using defaults", path.display()))),
            },
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => (Config::default(), None),
            Err(e) => (Config::default(), Some(format!("{}: {e}; using defaults", path.display()))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
