//! The project's context, `.code-intel/context.yml`: the two layers every session gets.
//!
//! - **Layer 1, project rules** (`project_rules`): a short DO/DON'T summary of the project's
//!   own instructions (CLAUDE.md, AGENTS.md, or what `source` names), shown at every session
//!   start. The blake3 of each source is recorded when the summary is written
//!   ([`update_context`]); a source that changed since makes the rules stale, and the agent is
//!   told to write a new summary.
//! - **Layer 2, design documents** (`doc_research`, `document_search`): where DOCUMENT_RESEARCH
//!   looks; [`docs`] finds and ranks them.
//!
//! A missing file means the defaults; a file that does not parse means the defaults too, with
//! a note saying why, so a typo never stops a session.

pub mod docs;

use std::collections::BTreeMap;
use std::path::Path;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use code_intel_workflow::contract::Contract;
use code_intel_workflow::contract::catalogue as msg;

/// Where the context lives, relative to the repository root.
pub const CONTEXT_FILE: &str = ".code-intel/context.yml";

/// The rule sources looked for when `project_rules.source` names none.
pub const DEFAULT_SOURCES: &[&str] = &["CLAUDE.md", ".claude/CLAUDE.md", "AGENTS.md"];

/// The longest summary `update_context` takes: the rules are read at every session start.
pub const MAX_SUMMARY_CHARS: usize = 4000;

/// One string or a list of them, as people write YAML.
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
enum OneOrMany {
    One(String),
    Many(Vec<String>),
}

impl OneOrMany {
    fn into_vec(self) -> Vec<String> {
        match self {
            OneOrMany::One(s) => vec![s],
            OneOrMany::Many(v) => v,
        }
    }
}

#[derive(Debug, Default, Deserialize)]
struct Raw {
    project_rules: Option<RawRules>,
    doc_research: Option<RawDocResearch>,
    document_search: Option<RawDocSearch>,
}

#[derive(Debug, Default, Deserialize)]
struct RawRules {
    source: Option<OneOrMany>,
    summary: Option<String>,
    fingerprints: Option<BTreeMap<String, String>>,
}

#[derive(Debug, Default, Deserialize)]
struct RawDocResearch {
    enabled: Option<bool>,
    docs_path: Option<OneOrMany>,
    default_prompts: Option<OneOrMany>,
}

#[derive(Debug, Default, Deserialize)]
struct RawDocSearch {
    include_patterns: Option<Vec<String>>,
    exclude_patterns: Option<Vec<String>>,
}

/// `.code-intel/context.yml` as read, with the defaults filled in.
#[derive(Debug, Clone)]
pub struct ProjectContext {
    /// Named in `project_rules.source`; empty when it names none.
    pub named_sources: Vec<String>,
    pub summary: String,
    /// blake3 (hex) of each source when the summary was written.
    pub fingerprints: BTreeMap<String, String>,
    pub doc_research_enabled: bool,
    pub docs_path: Vec<String>,
    /// The procedure files for the reading, under `.code-intel/doc_research/`.
    pub default_prompts: Vec<String>,
    pub include_patterns: Vec<String>,
    pub exclude_patterns: Vec<String>,
    /// Whether the file exists.
    pub exists: bool,
    /// Why the file could not be read, when it could not.
    pub error: Option<String>,
}

impl ProjectContext {
    pub fn load(root: &Path) -> ProjectContext {
        let (raw, exists, error) = match read_context(root) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => (Raw::default(), false, None),
            Err(e) => (Raw::default(), true, Some(e.to_string())),
            Ok(text) if text.trim().is_empty() => (Raw::default(), true, None),
            Ok(text) => match serde_yaml::from_str::<Raw>(&text) {
                Ok(raw) => (raw, true, None),
                Err(e) => (Raw::default(), true, Some(e.to_string())),
            },
        };
        let rules = raw.project_rules.unwrap_or_default();
        let research = raw.doc_research.unwrap_or_default();
        let search = raw.document_search.unwrap_or_default();
        ProjectContext {
            named_sources: rules.source.map(OneOrMany::into_vec).unwrap_or_default(),
            summary: rules.summary.unwrap_or_default().trim_end().to_owned(),
            fingerprints: rules.fingerprints.unwrap_or_default(),
            doc_research_enabled: research.enabled.unwrap_or(true),
            docs_path: research.docs_path.map(OneOrMany::into_vec).unwrap_or_else(|| vec!["docs/".into()]),
            default_prompts: research
                .default_prompts
                .map(OneOrMany::into_vec)
                .unwrap_or_else(|| vec!["default.md".into()]),
            include_patterns: search.include_patterns.unwrap_or_else(|| vec!["**/*.md".into()]),
            exclude_patterns: search.exclude_patterns.unwrap_or_default(),
            exists,
            error,
        }
    }

    /// The rule sources: the `source` names, then every usual instruction file that exists
    /// (CLAUDE.md, .claude/CLAUDE.md, AGENTS.md): an AGENTS.md holds rules whether or not a
    /// CLAUDE.md was named. CLAUDE.md when there is none.
    pub fn sources(&self, root: &Path) -> Vec<String> {
        let mut out = self.named_sources.clone();
        for found in DEFAULT_SOURCES.iter().filter(|s| source_file(root, s).is_some()) {
            if !out.iter().any(|s| s == found) {
                out.push((*found).to_owned());
            }
        }
        if out.is_empty() { vec![DEFAULT_SOURCES[0].to_owned()] } else { out }
    }
}

/// The blake3 (hex) of a file's bytes, None when it cannot be read.
pub fn fingerprint(path: &Path) -> Option<String> {
    std::fs::read(path).ok().map(|b| blake3::hash(&b).to_hex().to_string())
}

/// Where `rel` really is, symlinks resolved, when that is inside the repository at `root` and
/// outside `.git`. None when it does not exist or leads elsewhere.
fn real_path(root: &Path, rel: &str) -> Option<std::path::PathBuf> {
    if !inside(rel) {
        return None;
    }
    let root = root.canonicalize().ok()?;
    let real = root.join(rel).canonicalize().ok()?;
    let inner = real.strip_prefix(&root).ok()?;
    (!inner.starts_with(".git")).then_some(real)
}

/// Source `rel`, when it is a regular file of the repository. A source that leads elsewhere is
/// never read: a symlinked or `..` CLAUDE.md must not leak a file from outside.
fn source_file(root: &Path, rel: &str) -> Option<std::path::PathBuf> {
    real_path(root, rel).filter(|p| p.is_file())
}

/// The bytes of `real` (a path [`real_path`] resolved), without following a symlink put in its
/// place since.
fn read_real(real: &Path) -> Option<Vec<u8>> {
    use std::io::Read;
    let mut options = std::fs::OpenOptions::new();
    options.read(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::custom_flags(&mut options, libc::O_NOFOLLOW);
    let mut bytes = Vec::new();
    options.open(real).ok()?.read_to_end(&mut bytes).ok()?;
    Some(bytes)
}

/// The blake3 (hex) of source `rel`, when it is a file of the repository.
fn source_fingerprint(root: &Path, rel: &str) -> Option<String> {
    read_real(&source_file(root, rel)?).map(|b| blake3::hash(&b).to_hex().to_string())
}

/// Whether `rel` names something that exists outside the repository, or in `.git`.
fn leads_outside(root: &Path, rel: &str) -> bool {
    !inside(rel) || (std::fs::symlink_metadata(root.join(rel)).is_ok() && real_path(root, rel).is_none())
}

/// A source's text, cut at [`MAX_SOURCE_CHARS`] characters with a note.
fn source_text(path: &Path) -> Option<String> {
    let text = String::from_utf8_lossy(&read_real(path)?).into_owned();
    let total = text.chars().count();
    if total <= MAX_SOURCE_CHARS {
        return Some(text);
    }
    let mut cut: String = text.chars().take(MAX_SOURCE_CHARS).collect();
    cut.push_str(&format!("\n… (cut at {MAX_SOURCE_CHARS} of {total} characters; read the file for the rest)"));
    Some(cut)
}

/// Layer 1 as `start_session` and `get_session_status` return it.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
pub struct ProjectRules {
    /// The project's DO/DON'T rules: keep to them for the whole session.
    pub summary: String,
    /// The files the summary is made from.
    pub sources: Vec<RuleSource>,
    /// A source changed since the summary was written (or it was never summarized): `note`
    /// says what to do.
    pub stale: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
pub struct RuleSource {
    pub path: String,
    pub exists: bool,
    /// It differs from the version the summary was written from.
    pub changed: bool,
    /// When it changed: its text (the first [`MAX_SOURCE_CHARS`] characters), so the rules
    /// are in front of the agent before the summary is rewritten.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub content: Option<String>,
}

/// How much of a changed source is shown.
pub const MAX_SOURCE_CHARS: usize = 8000;

/// The project rules of the repository at `root`, with whether they are stale.
pub fn project_rules(root: &Path, contract: &Contract) -> ProjectRules {
    let cx = ProjectContext::load(root);
    let sources: Vec<RuleSource> = cx
        .sources(root)
        .into_iter()
        .map(|path| {
            let real = source_file(root, &path);
            let now = real.as_deref().and_then(read_real).map(|b| blake3::hash(&b).to_hex().to_string());
            let changed = now.as_ref().is_some_and(|h| cx.fingerprints.get(&path) != Some(h));
            let content = real.filter(|_| changed).and_then(|p| source_text(&p));
            RuleSource { exists: now.is_some(), changed, path, content }
        })
        .collect();
    let changed: Vec<&str> = sources.iter().filter(|s| s.changed).map(|s| s.path.as_str()).collect();
    let stale = !changed.is_empty();
    let note = if let Some(error) = &cx.error {
        Some(contract.message(&msg::CONTEXT_UNREADABLE, &[("path", CONTEXT_FILE), ("error", &error.to_string())]))
    } else if stale {
        Some(contract.message(&msg::PROJECT_RULES_STALE, &[("files", &changed.join(", "))]))
    } else {
        None
    };
    ProjectRules { summary: cx.summary, sources, stale, note }
}

/// What `update_context` wrote.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct ContextUpdate {
    pub path: String,
    pub summary: String,
    /// Each source with the blake3 recorded for it (missing files are left out).
    pub fingerprints: BTreeMap<String, String>,
}

/// Records `summary` as the project rules, made from `sources` (default: the current
/// sources), with their fingerprints. Only the `project_rules` block of the file changes:
/// every other key and every comment outside that block stay as they are (comment lines at
/// the top of the block too). A missing file is created from `template`.
pub fn update_context(
    root: &Path,
    summary: &str,
    sources: Option<Vec<String>>,
    template: &str,
) -> Result<ContextUpdate, crate::Error> {
    let summary = summary.trim();
    if summary.is_empty() {
        return Err(crate::Error::Argument("summary", "the DO/DON'T summary is required".into()));
    }
    if summary.chars().count() > MAX_SUMMARY_CHARS {
        return Err(crate::Error::Argument(
            "summary",
            format!("at most {MAX_SUMMARY_CHARS} characters: the rules are read at every session start"),
        ));
    }
    let path = root.join(CONTEXT_FILE);
    // One read-modify-write at a time, across servers and threads (the operation lock), so two
    // updates never lose one another or share the writer's temporary file. Outside git there
    // is no lock to take (and no other session).
    let _lock = match gix::open(root) {
        Ok(repo) => Some(code_intel_gitstate::lock::acquire(&repo)?),
        Err(_) => None,
    };
    let text = match read_context(root) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => template.to_owned(),
        Err(e) => return Err(crate::Error::File(format!("{CONTEXT_FILE}: {e}"))),
    };
    let before: serde_yaml::Value = if text.trim().is_empty() {
        serde_yaml::Value::Mapping(Default::default())
    } else {
        serde_yaml::from_str(&text).map_err(|e| {
            crate::Error::File(format!("{CONTEXT_FILE} does not parse ({e}); fix it by hand, then call again"))
        })?
    };
    let cx = ProjectContext::load(root);
    let sources = match sources {
        Some(list) => {
            let list: Vec<String> =
                list.iter().map(|s| s.trim().trim_start_matches("./").to_owned()).filter(|s| !s.is_empty()).collect();
            if let Some(bad) = list.iter().find(|s| leads_outside(root, s)) {
                return Err(crate::Error::Argument("sources", format!("{bad} is not a path inside the repository")));
            }
            list
        }
        None => cx.sources(root),
    };
    let fingerprints: BTreeMap<String, String> =
        sources.iter().filter_map(|s| source_fingerprint(root, s).map(|h| (s.clone(), h))).collect();
    let block = rules_block(&sources, summary, &fingerprints);
    let updated = replace_top_level_block(&text, "project_rules", &block);
    // What was written must read back as written, and leave every other key alone.
    let after: serde_yaml::Value =
        serde_yaml::from_str(&updated).map_err(|e| crate::Error::File(format!("the update would not parse: {e}")))?;
    let same_elsewhere = match (&before, &after) {
        (serde_yaml::Value::Mapping(b), serde_yaml::Value::Mapping(a)) => {
            b.iter().filter(|(k, _)| k.as_str() != Some("project_rules")).all(|(k, v)| a.get(k) == Some(v))
        }
        _ => false,
    };
    let reread = ProjectContext::load_text(&updated);
    if !same_elsewhere || reread.as_deref() != Some(summary) {
        return Err(crate::Error::File(format!(
            "{CONTEXT_FILE} has a layout this update cannot edit safely; nothing was written"
        )));
    }
    // (The writer creates the directory, and its error names the file.)
    code_intel_gitstate::write_atomically(&path, updated.as_bytes()).map_err(crate::Error::Write)?;
    Ok(ContextUpdate { path: CONTEXT_FILE.to_owned(), summary: summary.to_owned(), fingerprints })
}

impl ProjectContext {
    /// The summary in `text`, if it parses.
    fn load_text(text: &str) -> Option<String> {
        let raw: Raw = serde_yaml::from_str(text).ok()?;
        Some(raw.project_rules?.summary?.trim_end().to_owned())
    }
}

/// The text of `.code-intel/context.yml`, read only when it is a file of the repository: a
/// context file that is a link to somewhere else is an error, not a source of rules.
fn read_context(root: &Path) -> std::io::Result<String> {
    if std::fs::symlink_metadata(root.join(CONTEXT_FILE)).is_err() {
        return Err(std::io::Error::new(std::io::ErrorKind::NotFound, "no context file"));
    }
    let bytes = source_file(root, CONTEXT_FILE)
        .and_then(|p| read_real(&p))
        .ok_or_else(|| std::io::Error::other("it is not a file of the repository (a link to somewhere else?)"))?;
    String::from_utf8(bytes).map_err(|e| std::io::Error::other(e.to_string()))
}

/// A relative path that stays inside the repository.
fn inside(path: &str) -> bool {
    let p = Path::new(path);
    !p.is_absolute() && p.components().all(|c| matches!(c, std::path::Component::Normal(_)))
}

/// The `project_rules:` block, in the layout `init` writes.
fn rules_block(sources: &[String], summary: &str, fingerprints: &BTreeMap<String, String>) -> String {
    let quote = |s: &str| serde_json::Value::String(s.to_owned()).to_string();
    let mut out = String::from("project_rules:\n  source:\n");
    for s in sources {
        out.push_str(&format!("    - {}\n", quote(s)));
    }
    // A literal block reads best; a summary it cannot hold (leading blanks, tabs, control
    // characters) is written as a quoted string instead.
    let literal_ok = !summary.starts_with([' ', '\t'])
        && summary.chars().all(|c| c == '\n' || !c.is_control())
        && !summary.lines().any(|l| l.starts_with('\t'));
    if literal_ok {
        out.push_str("  summary: |\n");
        for line in summary.lines() {
            if line.trim().is_empty() {
                out.push('\n');
            } else {
                out.push_str(&format!("    {}\n", line.trim_end()));
            }
        }
    } else {
        out.push_str(&format!("  summary: {}\n", quote(summary)));
    }
    out.push_str(
        "  # blake3 of each source when the summary was written (update_context); a change makes the rules stale.\n",
    );
    if fingerprints.is_empty() {
        out.push_str("  fingerprints: {}\n");
    } else {
        out.push_str("  fingerprints:\n");
        for (k, v) in fingerprints {
            out.push_str(&format!("    {}: {}\n", quote(k), quote(v)));
        }
    }
    out
}

/// `text` with the top-level `key:` block replaced by `block` (appended when there is none).
/// The block runs to the next line that starts a top-level key; comment lines right below
/// `key:` are kept, and comments and blank lines just before the next key belong to it.
fn replace_top_level_block(text: &str, key: &str, block: &str) -> String {
    let lines: Vec<&str> = text.split_inclusive('\n').collect();
    let starts_key = |l: &str| {
        let l = l.trim_end_matches(['\n', '\r']);
        !l.is_empty() && !l.starts_with([' ', '\t', '#', '-']) && l.contains(':')
    };
    let is_this_key = |l: &str| {
        l.strip_prefix(key).is_some_and(|rest| rest.trim_start().starts_with(':'))
            && l.trim_end_matches(['\n', '\r']).len() > key.len()
    };
    let Some(start) = lines.iter().position(|l| starts_key(l) && is_this_key(l)) else {
        let mut out = text.to_owned();
        if !out.is_empty() && !out.ends_with('\n') {
            out.push('\n');
        }
        out.push_str(block);
        return out;
    };
    let mut end = lines[start + 1..].iter().position(|l| starts_key(l)).map_or(lines.len(), |i| start + 1 + i);
    // Comments and blanks just before the next key describe that key.
    while end > start + 1 && {
        let t = lines[end - 1].trim();
        t.is_empty() || (t.starts_with('#') && !lines[end - 1].starts_with([' ', '\t']))
    } {
        end -= 1;
    }
    let kept_comments: Vec<&str> =
        lines[start + 1..end].iter().take_while(|l| l.trim().starts_with('#')).copied().collect();
    let mut out: String = lines[..start].concat();
    let mut block_lines = block.split_inclusive('\n');
    if let Some(header) = block_lines.next() {
        out.push_str(header);
    }
    for c in kept_comments {
        out.push_str(c);
    }
    for l in block_lines {
        out.push_str(l);
    }
    out.push_str(&lines[end..].concat());
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const TEMPLATE: &str = include_str!("../../../../templates/init/context.yml");

    fn repo() -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join(".code-intel")).unwrap();
        dir
    }

    /// AGENTS.md is a rules source whenever it exists: with the template as init writes it, and
    /// with an older template that named CLAUDE.md alone.
    #[test]
    fn agents_md_is_a_rules_source_beside_a_named_claude_md() {
        let dir = repo();
        let root = dir.path();
        std::fs::write(root.join("AGENTS.md"), "Run the tests before committing.\n").unwrap();
        std::fs::write(root.join(CONTEXT_FILE), TEMPLATE).unwrap();
        assert_eq!(ProjectContext::load(root).sources(root), vec!["AGENTS.md"]);
        let old = TEMPLATE.replacen("project_rules:\n", "project_rules:\n  source: \"CLAUDE.md\"\n", 1);
        std::fs::write(root.join(CONTEXT_FILE), old).unwrap();
        assert_eq!(ProjectContext::load(root).sources(root), vec!["CLAUDE.md", "AGENTS.md"]);
        let rules = project_rules(root, &Contract::builtin());
        let agents = rules.sources.iter().find(|s| s.path == "AGENTS.md").expect("AGENTS.md listed");
        assert!(agents.exists && agents.changed && rules.stale, "{rules:?}");
    }

    #[test]
    fn an_update_changes_only_the_rules_block_and_keeps_comments() {
        let dir = repo();
        let root = dir.path();
        let text = format!("# my own comment at the top\n{TEMPLATE}\n# a trailing comment\nextra_key: 7\n");
        std::fs::write(root.join(CONTEXT_FILE), &text).unwrap();
        std::fs::write(root.join("CLAUDE.md"), "Use tabs.\n").unwrap();
        let up = update_context(root, "DO:\n- use tabs\nDON'T:\n- use spaces", None, TEMPLATE).unwrap();
        assert_eq!(up.fingerprints.len(), 1);
        let after = std::fs::read_to_string(root.join(CONTEXT_FILE)).unwrap();
        assert!(after.starts_with("# my own comment at the top\n# git-code-intel project context."), "{after}");
        assert!(after.contains("# a trailing comment\nextra_key: 7\n"), "{after}");
        assert!(after.contains("doc_research:\n  enabled: true"), "{after}");
        let cx = ProjectContext::load(root);
        assert_eq!(cx.summary, "DO:\n- use tabs\nDON'T:\n- use spaces");
        assert_eq!(cx.named_sources, vec!["CLAUDE.md"]);
        assert_eq!(cx.fingerprints.get("CLAUDE.md"), fingerprint(&root.join("CLAUDE.md")).as_ref());
        // A second update rewrites the same block, not a second one.
        update_context(root, "DO:\n- keep it short", None, TEMPLATE).unwrap();
        let again = std::fs::read_to_string(root.join(CONTEXT_FILE)).unwrap();
        assert_eq!(again.matches("\nproject_rules:").count(), 1, "{again}");
        assert!(again.contains("extra_key: 7"));
    }

    #[test]
    fn rules_go_stale_when_a_source_changes_and_fresh_after_an_update() {
        let dir = repo();
        let root = dir.path();
        let contract = Contract::builtin();
        std::fs::write(root.join(CONTEXT_FILE), TEMPLATE).unwrap();
        // Never summarized from CLAUDE.md: stale once it exists.
        assert!(!project_rules(root, &contract).stale, "no source file, nothing to summarize");
        std::fs::write(root.join("CLAUDE.md"), "Rule one.\n").unwrap();
        let rules = project_rules(root, &contract);
        assert!(rules.stale && rules.note.as_deref().is_some_and(|n| n.contains("update_context")), "{rules:?}");
        update_context(root, "DO:\n- rule one", None, TEMPLATE).unwrap();
        let rules = project_rules(root, &contract);
        assert!(!rules.stale && rules.note.is_none(), "{rules:?}");
        assert_eq!(rules.summary, "DO:\n- rule one");
        std::fs::write(root.join("CLAUDE.md"), "Rule one.\nRule two.\n").unwrap();
        let rules = project_rules(root, &contract);
        assert!(rules.stale && rules.sources[0].changed);
    }

    #[test]
    fn odd_summaries_round_trip_and_bad_arguments_write_nothing() {
        let dir = repo();
        let root = dir.path();
        for summary in ["  indented first line\nDO: x", "DO:\t- tab\nDON'T: \"quotes\" and: colons # not a comment"] {
            update_context(root, summary, Some(vec!["CLAUDE.md".into()]), TEMPLATE).unwrap();
            assert_eq!(ProjectContext::load(root).summary, summary.trim());
        }
        let before = std::fs::read_to_string(root.join(CONTEXT_FILE)).unwrap();
        assert!(matches!(update_context(root, "  ", None, TEMPLATE), Err(crate::Error::Argument("summary", _))));
        let long = "x".repeat(MAX_SUMMARY_CHARS + 1);
        assert!(matches!(update_context(root, &long, None, TEMPLATE), Err(crate::Error::Argument("summary", _))));
        let out = Some(vec!["../outside.md".into()]);
        assert!(matches!(update_context(root, "DO: x", out, TEMPLATE), Err(crate::Error::Argument("sources", _))));
        std::fs::write(root.join(CONTEXT_FILE), "project_rules: [unclosed\n").unwrap();
        assert!(matches!(update_context(root, "DO: x", None, TEMPLATE), Err(crate::Error::File(_))));
        assert_eq!(std::fs::read_to_string(root.join(CONTEXT_FILE)).unwrap(), "project_rules: [unclosed\n");
        std::fs::write(root.join(CONTEXT_FILE), &before).unwrap();
    }

    #[cfg(unix)]
    #[test]
    fn sources_that_lead_outside_are_never_read() {
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("secret.md"), "OUTSIDE-SECRET").unwrap();
        let dir = repo();
        let root = dir.path();
        std::os::unix::fs::symlink(outside.path().join("secret.md"), root.join("CLAUDE.md")).unwrap();
        std::fs::create_dir_all(root.join(".git")).unwrap();
        std::fs::write(root.join(".git/config"), "[remote] url = secret").unwrap();
        let named = "project_rules:\n  source: [\"CLAUDE.md\", \"../x.md\", \".git/config\"]\n";
        std::fs::write(root.join(CONTEXT_FILE), named).unwrap();
        let rules = project_rules(root, &Contract::builtin());
        assert!(!format!("{rules:?}").contains("SECRET") && !format!("{rules:?}").contains("remote"), "{rules:?}");
        assert!(rules.sources.iter().all(|s| !s.exists && !s.changed), "{rules:?}");
        for bad in ["CLAUDE.md", ".git/config", "../x.md"] {
            let r = update_context(root, "DO: x", Some(vec![bad.into()]), TEMPLATE);
            assert!(matches!(r, Err(crate::Error::Argument("sources", _))), "{bad}: {r:?}");
        }
        // A context file that links outside is not read either.
        std::fs::remove_file(root.join(CONTEXT_FILE)).unwrap();
        std::fs::write(outside.path().join("ctx.yml"), "project_rules:\n  summary: OUTSIDE-SECRET\n").unwrap();
        std::os::unix::fs::symlink(outside.path().join("ctx.yml"), root.join(CONTEXT_FILE)).unwrap();
        let rules = project_rules(root, &Contract::builtin());
        assert!(!rules.summary.contains("SECRET") && rules.note.is_some(), "{rules:?}");
        // update_context does not write through it, and says why.
        let r = update_context(root, "DO: x", None, TEMPLATE);
        assert!(matches!(&r, Err(crate::Error::File(why)) if why.contains("not a file of the repository")), "{r:?}");
    }

    #[test]
    fn an_unreadable_file_gives_the_defaults_and_a_note() {
        let dir = repo();
        let root = dir.path();
        std::fs::write(root.join(CONTEXT_FILE), "doc_research: [\n").unwrap();
        let cx = ProjectContext::load(root);
        assert!(cx.error.is_some() && cx.doc_research_enabled && cx.docs_path == vec!["docs/"]);
        let rules = project_rules(root, &Contract::builtin());
        assert!(rules.note.as_deref().is_some_and(|n| n.contains(CONTEXT_FILE)), "{rules:?}");
    }

    /// Updates at once (threads here, servers in life) are taken one at a time: each is
    /// written whole, none fails on another's temporary file, and nothing is left beside it.
    #[test]
    fn updates_at_once_are_taken_one_at_a_time() {
        let dir = repo();
        let root = dir.path();
        gix::init(root).unwrap();
        let summaries: Vec<String> = (0..8).map(|i| format!("DO:\n- rule number {i}")).collect();
        std::thread::scope(|scope| {
            for summary in &summaries {
                scope.spawn(move || update_context(root, summary, None, TEMPLATE).unwrap());
            }
        });
        let written = ProjectContext::load(root).summary;
        assert!(summaries.contains(&written), "{written:?}");
        let left: Vec<_> = std::fs::read_dir(root.join(".code-intel"))
            .unwrap()
            .filter_map(Result::ok)
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| n != "context.yml")
            .collect();
        assert!(left.is_empty(), "{left:?}");
    }

    /// A context file that cannot be written: the error names it and keeps the I/O error as its
    /// source, and nothing is left behind.
    #[test]
    fn a_context_file_that_cannot_be_written_says_which_and_keeps_the_cause() {
        let dir = repo();
        let root = dir.path();
        // A directory where the writer's temporary file goes.
        std::fs::create_dir_all(root.join(".code-intel/.context.yml.code-intel-tmp/in-the-way")).unwrap();
        let r = update_context(root, "DO:\n- keep it short", None, TEMPLATE);
        let Err(crate::Error::Write(e)) = &r else { panic!("{r:?}") };
        assert!(e.to_string().contains("context.yml"), "{e}");
        assert!(std::error::Error::source(e).is_some(), "{e:?}");
        assert!(!root.join(CONTEXT_FILE).exists());
    }
}
