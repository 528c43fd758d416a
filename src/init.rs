//! `git code-intel init [--force]`: writes the project files from `templates/`.
//!
//! Owned files (prompts, contract, skill) are written when absent and refreshed when they still
//! hold exactly what init wrote last time (`.code-intel/.init-manifest.json` keeps their blake3
//! fingerprints); a file the user has edited, or one init did not write, is kept unless
//! `--force`. Shared files (`.mcp.json`, `.claude/settings.json`, `.gitignore`, `AGENTS.md`,
//! `.codex/config.toml`, `.codex/hooks.json`) are merged: our entries are added, nothing of the
//! user's is removed. Running init twice changes nothing.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use code_intel_session::session::procedures::DEFAULTS as PROCEDURE_DEFAULTS;
use serde_json::{Value, json};

const MANIFEST: &str = ".code-intel/.init-manifest.json";

/// The agent's procedures, one source for every client: `/code` and `/outcome` for Claude
/// Code (commands), `$code` and `$outcome` for Codex (skills in `.agents/skills/`, where Codex
/// looks for a repository's skills). Only the header and how the user's words arrive differ.
pub const PROCEDURES: &[Procedure] = &[
    Procedure {
        name: "code",
        description: "Understand the codebase before changing it, with git-code-intel leading phase by phase",
        argument_hint: "[flags] <request>",
        body: include_str!("../templates/init/procedures/code.md"),
    },
    Procedure {
        name: "outcome",
        description: "Record how the last git-code-intel session turned out (success teaches the Map)",
        argument_hint: "success|failure|partial [note]",
        body: include_str!("../templates/init/procedures/outcome.md"),
    },
];

pub struct Procedure {
    pub name: &'static str,
    pub description: &'static str,
    pub argument_hint: &'static str,
    pub body: &'static str,
}

/// The agents a procedure is written for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Client {
    ClaudeCode,
    Codex,
}

impl Procedure {
    /// Where `client` looks for it, relative to the repository root.
    pub fn path(&self, client: Client) -> String {
        match client {
            Client::ClaudeCode => format!(".claude/commands/{}.md", self.name),
            Client::Codex => format!(".agents/skills/{}/SKILL.md", self.name),
        }
    }

    /// The file for `client`: its header, then the shared body with the client's words.
    pub fn render(&self, client: Client) -> String {
        let (header, invoke, arguments) = match client {
            Client::ClaudeCode => (
                format!("---\ndescription: {}\nargument-hint: \"{}\"\n---\n\n", self.description, self.argument_hint),
                "/",
                "`$ARGUMENTS`".to_owned(),
            ),
            Client::Codex => (
                format!(
                    "---\nname: {}\ndescription: {}. Use when the user types ${} or asks for it.\n---\n\n",
                    self.name, self.description, self.name
                ),
                "$",
                format!("the user's message after `${}`", self.name),
            ),
        };
        let body = self
            .body
            .replace("{{code}}", &format!("{invoke}code"))
            .replace("{{outcome}}", &format!("{invoke}outcome"))
            .replace("{{arguments}}", &arguments);
        format!("{header}{body}")
    }
}

/// Where each client finds the procedures, for the user.
pub fn where_procedures_are() -> String {
    let list = |client: Client, sigil: &str| {
        PROCEDURES.iter().map(|p| format!("{sigil}{} ({})", p.name, p.path(client))).collect::<Vec<_>>().join(", ")
    };
    format!(
        "Claude Code: {}. Codex: {} (type $ or /skills to use them). Restart the agent to load them.",
        list(Client::ClaudeCode, "/"),
        list(Client::Codex, "$")
    )
}

/// (path, content) of every file init owns.
fn owned_files() -> Vec<(String, String)> {
    let mut files: Vec<(String, String)> =
        STATIC_FILES.iter().chain(PROCEDURE_DEFAULTS).map(|(p, c)| ((*p).to_owned(), (*c).to_owned())).collect();
    for p in PROCEDURES {
        for client in [Client::ClaudeCode, Client::Codex] {
            files.push((p.path(client), p.render(client)));
        }
    }
    files
}

/// The files init owns besides the procedure files (whose defaults the session crate keeps, as it
/// sends them to a repository that never ran init: [`PROCEDURE_DEFAULTS`]).
const STATIC_FILES: &[(&str, &str)] = &[
    (".code-intel/config.json", include_str!("../templates/init/config.json")),
    (".code-intel/context.yml", include_str!("../templates/init/context.yml")),
    (".code-intel/phase_contract.yml", include_str!("../templates/init/phase_contract.yml")),
];

const PRE_COMMIT_HOOK: &str = include_str!("../hooks/pre-commit");
const HOOK_MARKER: &str = "git-code-intel pre-commit hook";
const CHAINED_HOOK: &str = "pre-commit.before-code-intel";

const AGENTS_SECTION: &str = include_str!("../templates/init/agents_section.md");
const CODEX_SNIPPET: &str = include_str!("../templates/init/codex.toml");
const AGENTS_BEGIN: &str = "<!-- git-code-intel:begin -->";
const AGENTS_END: &str = "<!-- git-code-intel:end -->";
const GITIGNORE_ENTRIES: &[&str] = &[".code-intel/index/", ".code-intel/forest/", ".code-intel/.init-manifest.json"];

/// What happened to one file.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Action {
    Created,
    Updated,
    Merged,
    Unchanged,
    /// Kept because the user edited it (or init did not write it); `--force` replaces it.
    KeptEdited,
    /// Not written: writing it would lose something of the user's. The note says what to do;
    /// init does the rest and exits with an error.
    Refused,
}

#[derive(Debug, Clone, serde::Serialize)]
pub struct FileReport {
    pub path: String,
    pub action: Action,
    /// What the user should know about the change, when there is something.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

pub fn init(root: &Path, force: bool, share: bool) -> std::io::Result<Vec<FileReport>> {
    // What init wrote before. Unreadable: an error; not JSON: as if init had written nothing,
    // so every file that differs from ours is kept as the user's.
    let mut manifest: BTreeMap<String, String> = match read_bytes(root, MANIFEST)? {
        Some(bytes) => serde_json::from_slice(&bytes).unwrap_or_else(|e| {
            tracing::warn!("{MANIFEST} is not what init writes ({e}); every file that differs from ours is kept");
            BTreeMap::new()
        }),
        None => BTreeMap::new(),
    };
    let mut report = Vec::new();
    for (rel, content) in owned_files() {
        let rel = rel.as_str();
        let path = root.join(rel);
        let fingerprint = blake3::hash(content.as_bytes()).to_hex().to_string();
        let action = match read_bytes(root, rel)? {
            None => {
                write(&path, content.as_bytes())?;
                Action::Created
            }
            Some(existing) if existing == content.as_bytes() => Action::Unchanged,
            Some(existing) => {
                let ours = manifest.get(rel).is_some_and(|h| *h == blake3::hash(&existing).to_hex().to_string());
                if ours || force {
                    write(&path, content.as_bytes())?;
                    Action::Updated
                } else {
                    Action::KeptEdited
                }
            }
        };
        if action != Action::KeptEdited {
            manifest.insert(rel.to_owned(), fingerprint);
        }
        report.push(FileReport { path: rel.to_owned(), action, note: None });
    }
    report.push(merge_json(root, ".mcp.json", mcp_entry)?);
    report.push(merge_json(root, CLAUDE_SETTINGS, |doc| add_hooks(doc, CLAUDE_HOOKS))?);
    report.push(merge_json(root, CODEX_HOOKS_FILE, |doc| add_hooks(doc, CODEX_HOOKS))?);
    report.push(merge_text(root, ".gitignore", |text| {
        let missing: Vec<&str> =
            GITIGNORE_ENTRIES.iter().copied().filter(|e| !text.lines().any(|l| l.trim() == *e)).collect();
        if missing.is_empty() {
            return None;
        }
        let mut out = text.to_owned();
        if !out.is_empty() && !out.ends_with('\n') {
            out.push('\n');
        }
        out.push_str("# git-code-intel derived data\n");
        for e in missing {
            out.push_str(e);
            out.push('\n');
        }
        Some(out)
    })?);
    report.push(merge_text(root, "AGENTS.md", |text| {
        if let (Some(a), Some(b)) = (text.find(AGENTS_BEGIN), text.find(AGENTS_END)) {
            let current = &text[a..b + AGENTS_END.len()];
            if current.trim() == AGENTS_SECTION.trim() || !force {
                return None;
            }
            return Some(format!("{}{}{}", &text[..a], AGENTS_SECTION.trim(), &text[b + AGENTS_END.len()..]));
        }
        Some(format!("{text}{}{AGENTS_SECTION}", separator(text)))
    })?);
    report.push(merge_text(root, ".codex/config.toml", |text| {
        if text.lines().any(|l| l.trim() == "[mcp_servers.code-intel]") {
            return None;
        }
        Some(format!("{text}{}{CODEX_SNIPPET}", separator(text)))
    })?);
    report.push(install_pre_commit(root)?);
    if share {
        report.push(share_refs(root)?);
    }
    let manifest_text = serde_json::to_vec_pretty(&manifest).map_err(std::io::Error::other)?;
    if read_bytes(root, MANIFEST)?.as_deref() != Some(manifest_text.as_slice()) {
        write(&root.join(MANIFEST), &manifest_text)?;
    }
    Ok(report)
}

/// `.git/hooks/pre-commit`: ours, with any hook that was there kept and run first.
fn install_pre_commit(root: &Path) -> std::io::Result<FileReport> {
    let report = |action| FileReport { path: ".git/hooks/pre-commit".into(), action, note: None };
    let Ok(repo) = gix::open(root) else { return Ok(report(Action::Unchanged)) };
    // Where git runs hooks from (the common git directory, whichever work tree init runs in).
    let dir = code_intel_session::branches::gate::hooks_dir(&repo, root);
    let hook = dir.join("pre-commit");
    // Any hook that is not ours, a script or a program, is kept and run first.
    let existing = read_bytes(&dir, "pre-commit")?;
    if existing.as_deref() == Some(PRE_COMMIT_HOOK.as_bytes()) {
        return Ok(report(Action::Unchanged));
    }
    let ours = |bytes: &[u8]| bytes.windows(HOOK_MARKER.len()).any(|w| w == HOOK_MARKER.as_bytes());
    let action = match &existing {
        Some(bytes) if ours(bytes) => Action::Updated,
        Some(_) => {
            let chained = dir.join(CHAINED_HOOK);
            if chained.exists() {
                // Reported, not an error: the rest of init (`--share` too) still runs.
                return Ok(FileReport {
                    path: ".git/hooks/pre-commit".into(),
                    action: Action::Refused,
                    note: Some(format!(
                        "{} is not git-code-intel's hook, and {} (the hook init kept before) exists too: \
                         init would lose one of them; merge them by hand, then run init again",
                        hook.display(),
                        chained.display()
                    )),
                });
            }
            std::fs::rename(&hook, &chained).map_err(|e| {
                std::io::Error::new(e.kind(), format!("cannot move {} to {}: {e}", hook.display(), chained.display()))
            })?;
            Action::Merged
        }
        None => Action::Created,
    };
    // Executable before it is renamed into place: a kill between the two would otherwise leave
    // a hook git skips, which the next init would find unchanged.
    write_with(&hook, PRE_COMMIT_HOOK.as_bytes(), Some(0o755))?;
    Ok(report(action))
}

/// `--share`: the remote's fetch refspecs stage its shared refs (the Map, the session history,
/// the OutcomeLog, the Forest, the notes) under `refs/code-intel-remotes/<remote>/`, where this
/// clone checks and merges them; sessions never travel. No push refspec is set, so a plain
/// `git push` keeps pushing what it pushed before (`git code-intel share push` publishes the
/// shared refs). The refspecs earlier versions set (`refs/code-intel/*` straight onto this
/// clone's refs, both ways) are removed; a `push = HEAD` beside them is kept (it may be the
/// user's) and named in the report.
fn share_refs(root: &Path) -> std::io::Result<FileReport> {
    let report = |action, note| FileReport { path: ".git/config".into(), action, note };
    let repo = gix::open(root).map_err(std::io::Error::other)?;
    let names: Vec<String> = repo.remote_names().iter().map(|n| n.to_string()).collect();
    let Some(remote) = names.iter().find(|n| *n == "origin").or(names.first()).cloned() else {
        return Err(std::io::Error::other("--share needs a remote; add one with `git remote add origin <url>`"));
    };
    if !code_intel_gitstate::shared::valid_remote_name(&remote) {
        return Err(std::io::Error::other(format!(
            "--share cannot use the remote '{remote}': its name must be letters, digits, '.', '_' and '-'"
        )));
    }
    // git's own `git config` edits every section of the remote (a config may hold the same
    // section twice), and only the values named.
    let key = |what: &str| format!("remote.{remote}.{what}");
    let fetch = config_values(root, &key("fetch"))?;
    let push = config_values(root, &key("push"))?;
    let mut changed = false;
    for (what, legacy, present) in [("fetch", &LEGACY_FETCH, &fetch), ("push", &LEGACY_PUSH, &push)] {
        for value in legacy.iter().filter(|l| present.iter().any(|p| p == *l)) {
            git_config(root, &["--unset-all", &key(what), &regex_exactly(value)])?;
            changed = true;
        }
    }
    for spec in code_intel_gitstate::shared::fetch_refspecs(&remote) {
        if !fetch.contains(&spec) {
            git_config(root, &["--add", &key("fetch"), &spec])?;
            changed = true;
        }
    }
    // `push = HEAD` came with the legacy push refspecs, unless the user set it: it is theirs to
    // remove.
    let had_legacy_push = push.iter().any(|p| LEGACY_PUSH.contains(&p.as_str()));
    let note = (had_legacy_push && push.iter().any(|p| p == "HEAD")).then(|| {
        format!(
            "{} = HEAD is kept: an earlier `init --share` set it (unless you did), and it makes a plain `git push` push the checked-out branch, a task branch too; `git config --unset {} HEAD` removes it",
            key("push"),
            key("push")
        )
    });
    Ok(report(if changed { Action::Merged } else { Action::Unchanged }, note))
}

/// A `git config` value pattern that matches exactly `value` (git's `--fixed-value` needs 2.30).
fn regex_exactly(value: &str) -> String {
    let mut out = String::from("^");
    for c in value.chars() {
        if "\\^$.|?*+()[]{}".contains(c) {
            out.push('\\');
        }
        out.push(c);
    }
    out.push('$');
    out
}

/// Every value of `key` in the repository's configuration.
fn config_values(root: &Path, key: &str) -> std::io::Result<Vec<String>> {
    let out = std::process::Command::new("git").args(["config", "--get-all", key]).current_dir(root).output()?;
    // Exit 1: the key is not set.
    Ok(String::from_utf8_lossy(&out.stdout).lines().map(str::to_owned).collect())
}

/// Runs `git config <args>` on the repository's own configuration.
fn git_config(root: &Path, args: &[&str]) -> std::io::Result<()> {
    let out = std::process::Command::new("git").arg("config").args(args).current_dir(root).output()?;
    if out.status.success() {
        Ok(())
    } else {
        Err(std::io::Error::other(format!(
            "`git config {}` failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        )))
    }
}

/// The refspecs `init --share` set before shared refs were staged: a fetch that overwrote this
/// clone's refs (sessions included) with the remote's, and pushes of every ref.
const LEGACY_FETCH: [&str; 2] =
    ["+refs/code-intel/*:refs/code-intel/*", "+refs/notes/code-intel*:refs/notes/code-intel*"];
const LEGACY_PUSH: [&str; 2] = ["refs/code-intel/*:refs/code-intel/*", "refs/notes/code-intel*:refs/notes/code-intel*"];

/// Whether `remote`'s configuration still has refspecs an earlier `init --share` set (for
/// `doctor`).
pub fn legacy_share_refspecs(root: &Path) -> Vec<String> {
    let Ok(repo) = gix::open(root) else { return Vec::new() };
    let config = repo.config_snapshot();
    let mut out = Vec::new();
    for remote in repo.remote_names() {
        for (key, legacy) in [("fetch", &LEGACY_FETCH[..]), ("push", &LEGACY_PUSH[..])] {
            let name = format!("remote.{remote}.{key}");
            for value in config.strings(name.as_str()).unwrap_or_default() {
                if legacy.contains(&value.to_string().as_str()) {
                    out.push(format!("{name} = {value}"));
                }
            }
        }
    }
    out
}

fn mcp_entry(doc: &mut Value) -> bool {
    let servers = ensure_object(doc, "mcpServers");
    if servers.contains_key("code-intel") {
        return false;
    }
    servers.insert("code-intel".into(), json!({"command": "git-code-intel", "args": ["serve"]}));
    true
}

/// Claude Code's project settings, where its hooks are.
pub const CLAUDE_SETTINGS: &str = ".claude/settings.json";
/// Codex's project hooks, beside the project's `.codex/config.toml` (read only when the user
/// trusts the project).
pub const CODEX_HOOKS_FILE: &str = ".codex/hooks.json";

/// One hook: the event, the tools it matches (None: every occurrence), the command.
pub type HookEntry = (&'static str, Option<&'static str>, &'static str);

/// Claude Code: the file-writing tools and Bash are judged, and Read is seen (a file it opens
/// counts as explored); SessionStart re-injects the phase (at startup, resume, `/clear` and
/// compaction).
pub const CLAUDE_HOOKS: &[HookEntry] = &[
    ("PreToolUse", Some("Edit|Write|MultiEdit|NotebookEdit|Bash|Read"), "git-code-intel hook claude-pre-tool-use"),
    ("SessionStart", None, "git-code-intel hook claude-session-start"),
];

/// Codex: its shell tool (which its hooks call `Bash`) and apply_patch are judged.
pub const CODEX_HOOKS: &[HookEntry] = &[
    ("PreToolUse", Some("Bash|apply_patch"), "git-code-intel hook codex-pre-tool-use"),
    ("SessionStart", None, "git-code-intel hook codex-session-start"),
];

fn add_hooks(doc: &mut Value, entries: &[HookEntry]) -> bool {
    let hooks = ensure_object(doc, "hooks");
    let mut changed = false;
    for &(event, matcher, command) in entries {
        let list = hooks.entry(event).or_insert_with(|| json!([]));
        let Some(list) = list.as_array_mut() else { continue };
        let ours = |group: &Value| {
            group["hooks"].as_array().is_some_and(|hs| hs.iter().any(|h| h["command"].as_str() == Some(command)))
        };
        let present = list.iter().any(ours);
        // A group an earlier version wrote keeps its tools and gains the ones added since
        // (Read, for one); a group without a matcher already sees every tool.
        if let Some(m) = matcher
            && let Some(group) = list.iter_mut().find(|g| ours(g))
            && let Some(old) = group["matcher"].as_str().map(str::to_owned)
        {
            let missing = missing_tools(&old, m);
            if !missing.is_empty() {
                group["matcher"] = json!(format!("{old}|{}", missing.join("|")));
                changed = true;
            }
        }
        if !present {
            let mut group = json!({"hooks": [{"type": "command", "command": command}]});
            if let Some(m) = matcher {
                group["matcher"] = json!(m);
            }
            list.push(group);
            changed = true;
        }
    }
    changed
}

/// The tools of the matcher `wanted` (`A|B|C`) that the matcher `have` does not name.
pub fn missing_tools<'a>(have: &str, wanted: &'a str) -> Vec<&'a str> {
    let have: Vec<&str> = have.split('|').map(str::trim).collect();
    wanted.split('|').filter(|t| !have.contains(t)).collect()
}

fn ensure_object<'a>(doc: &'a mut Value, key: &str) -> &'a mut serde_json::Map<String, Value> {
    if !doc.is_object() {
        *doc = json!({});
    }
    let map = doc.as_object_mut().expect("just made an object");
    let entry = map.entry(key).or_insert_with(|| json!({}));
    if !entry.is_object() {
        *entry = json!({});
    }
    entry.as_object_mut().expect("just made an object")
}

fn merge_json(root: &Path, rel: &str, add: impl FnOnce(&mut Value) -> bool) -> std::io::Result<FileReport> {
    let path = root.join(rel);
    let existing = read_text(root, rel)?;
    let mut doc = match &existing {
        Some(text) if !text.trim().is_empty() => serde_json::from_str::<Value>(text).map_err(|e| {
            std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                format!("{rel} is not valid JSON ({e}); fix it or remove it"),
            )
        })?,
        _ => json!({}),
    };
    if !add(&mut doc) {
        return Ok(FileReport { path: rel.to_owned(), action: Action::Unchanged, note: None });
    }
    let mut text = serde_json::to_string_pretty(&doc).map_err(std::io::Error::other)?;
    text.push('\n');
    let (target, mode) = merge_target(&path)?;
    write_with(&target, text.as_bytes(), mode)?;
    let action = if existing.is_some() { Action::Merged } else { Action::Created };
    Ok(FileReport { path: rel.to_owned(), action, note: None })
}

fn merge_text(root: &Path, rel: &str, change: impl FnOnce(&str) -> Option<String>) -> std::io::Result<FileReport> {
    let path = root.join(rel);
    let existing = read_text(root, rel)?;
    match change(existing.as_deref().unwrap_or("")) {
        None => Ok(FileReport { path: rel.to_owned(), action: Action::Unchanged, note: None }),
        Some(text) => {
            let (target, mode) = merge_target(&path)?;
            write_with(&target, text.as_bytes(), mode)?;
            let action = if existing.is_some() { Action::Merged } else { Action::Created };
            Ok(FileReport { path: rel.to_owned(), action, note: None })
        }
    }
}

/// Where a merge writes `path`: through a symbolic link to the file it names (the link stays a
/// link), keeping the mode the file has.
fn merge_target(path: &Path) -> std::io::Result<(PathBuf, Option<u32>)> {
    let target = match std::fs::symlink_metadata(path) {
        Ok(meta) if meta.file_type().is_symlink() => std::fs::canonicalize(path).map_err(|e| {
            std::io::Error::new(
                e.kind(),
                format!("{} is a symbolic link that does not resolve ({e}); fix it or remove it", path.display()),
            )
        })?,
        _ => path.to_owned(),
    };
    #[cfg(unix)]
    let mode = std::fs::metadata(&target).ok().map(|meta| {
        use std::os::unix::fs::PermissionsExt;
        meta.permissions().mode() & 0o7777
    });
    #[cfg(not(unix))]
    let mode = None;
    Ok((target, mode))
}

/// What goes between existing text and an appended block: nothing, or enough newlines for one
/// blank line.
fn separator(text: &str) -> &'static str {
    if text.is_empty() || text.ends_with("\n\n") {
        ""
    } else if text.ends_with('\n') {
        "\n"
    } else {
        "\n\n"
    }
}

/// The bytes of `rel` under `dir`, or None when there is no such file. Any other failure is an
/// error naming the file: init never replaces what it could not read.
fn read_bytes(dir: &Path, rel: &str) -> std::io::Result<Option<Vec<u8>>> {
    let path = dir.join(rel);
    match std::fs::read(&path) {
        Ok(bytes) => Ok(Some(bytes)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(std::io::Error::new(
            e.kind(),
            format!(
                "cannot read {} ({e}); init leaves it alone: fix or remove it, then run init again",
                path.display()
            ),
        )),
    }
}

/// Like [`read_bytes`], for a file init merges text into: one that is not UTF-8 is an error too.
fn read_text(root: &Path, rel: &str) -> std::io::Result<Option<String>> {
    read_bytes(root, rel)?
        .map(|bytes| {
            String::from_utf8(bytes).map_err(|_| {
                std::io::Error::new(
                    std::io::ErrorKind::InvalidData,
                    format!("{rel} is not UTF-8 text; init does not merge into it: fix it or remove it"),
                )
            })
        })
        .transpose()
}

/// Writes through a temporary file and a rename (the one atomic writer of derived and owned
/// files), so a killed process leaves the old file or the new one, never half of it.
fn write(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    write_with(path, bytes, None)
}

/// [`write()`], the file given `mode` (unix permissions) before it is put in place. (The writer's
/// error already names the path.)
fn write_with(path: &Path, bytes: &[u8], mode: Option<u32>) -> std::io::Result<()> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)
            .map_err(|e| std::io::Error::new(e.kind(), format!("cannot create {}: {e}", dir.display())))?;
    }
    code_intel_codebase::derived::write_atomically(path, |file| {
        std::io::Write::write_all(file, bytes)?;
        #[cfg(unix)]
        if let Some(mode) = mode {
            use std::os::unix::fs::PermissionsExt;
            file.set_permissions(std::fs::Permissions::from_mode(mode))?;
        }
        #[cfg(not(unix))]
        let _ = mode;
        Ok(())
    })
}
