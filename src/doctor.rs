//! `git code-intel doctor`: is each client set up to use git-code-intel in this repository?
//!
//! For Claude Code and Codex it checks what `init` writes (the MCP entry, the hooks, the
//! procedures), that the command those name runs this version, and the one-time step only the
//! user can take where it can be seen from here: Claude Code's approval of the project's MCP
//! server (its settings files and `~/.claude.json`), Codex's trust of the project
//! (`$CODEX_HOME/config.toml`). Each finding says how to fix it.

use std::path::{Path, PathBuf};

use serde::Serialize;
use serde_json::Value;

use crate::init::{self, CLAUDE_HOOKS, CODEX_HOOKS, Client, HookEntry, PROCEDURES};

/// The MCP server's name in both clients' configuration.
const SERVER: &str = "code-intel";
/// The program every entry and hook runs.
const PROGRAM: &str = "git-code-intel";

#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    Ok,
    /// Missing or wrong: the client will not work until it is fixed.
    Missing,
    /// Only the user can do it, and it could not be seen done (it may be: the check cannot see
    /// everywhere a client keeps it).
    Todo,
}

#[derive(Debug, Clone, Serialize)]
pub struct Check {
    pub client: &'static str,
    pub what: String,
    pub status: Status,
    /// How to fix it; empty when ok.
    pub fix: String,
}

/// Every check, in the order a user would fix them.
pub fn checks(root: &Path) -> Vec<Check> {
    let mut out = vec![program_on_path(), kernel_sandbox(), verify_commands(root)];
    out.extend(claude_code(root));
    out.extend(codex(root));
    out.extend(sharing(root));
    out
}

/// Refspecs an earlier `init --share` set: a fetch that writes a remote's refs straight over
/// this clone's (sessions included) and a push of everything. Reported only when present.
fn sharing(root: &Path) -> Option<Check> {
    let legacy = init::legacy_share_refspecs(root);
    (!legacy.is_empty()).then(|| {
        check(
            "both",
            format!("the shared refs' refspecs ({} set by an earlier `init --share`)", legacy.join("; ")),
            false,
            "run `git code-intel init --share`: it replaces them with refspecs that stage a remote's shared refs for checking instead of writing over this clone's",
        )
    })
}

fn check(client: &'static str, what: impl Into<String>, ok: bool, fix: impl Into<String>) -> Check {
    Check {
        client,
        what: what.into(),
        status: if ok { Status::Ok } else { Status::Missing },
        fix: if ok { String::new() } else { fix.into() },
    }
}

fn todo(client: &'static str, what: impl Into<String>, seen: bool, fix: impl Into<String>) -> Check {
    let mut c = check(client, what, seen, fix);
    if !seen {
        c.status = Status::Todo;
    }
    c
}

/// The hooks and MCP entries run `git-code-intel` from PATH: it must be there, and be us.
fn program_on_path() -> Check {
    let found = which(PROGRAM);
    let version = found.as_ref().and_then(|p| {
        let out = std::process::Command::new(p).arg("--version").output().ok()?;
        Some(String::from_utf8_lossy(&out.stdout).trim().to_owned())
    });
    let ours = format!("{PROGRAM} {}", env!("CARGO_PKG_VERSION"));
    match (&found, &version) {
        (Some(path), Some(v)) if *v == ours => {
            check("both", format!("`{PROGRAM}` on PATH ({})", path.display()), true, "")
        }
        (Some(path), v) => check(
            "both",
            format!("`{PROGRAM}` on PATH is {} ({}), not {ours}", v.as_deref().unwrap_or("unknown"), path.display()),
            false,
            "install this version (`cargo install --locked --path .` in the git-code-intel checkout): the hooks run the one on PATH",
        ),
        (None, _) => check(
            "both",
            format!("`{PROGRAM}` on PATH"),
            false,
            "install it (`cargo install --locked --path .` in the git-code-intel checkout) into a directory on PATH: the MCP entries and hooks run it by name",
        ),
    }
}

/// Whether the kernel confines the agent's shell here (docs/SECURITY.md): where it cannot, the
/// hooks' judgement of a command's text is all there is, and that is advisory.
fn kernel_sandbox() -> Check {
    let support = code_intel_sandbox::support();
    let runner = match crate::hooks::runner_program() {
        Some((program, "")) => format!("run by {program}"),
        _ => format!(
            "run by `git-code-intel sandbox`: {} is not installed beside git-code-intel (the same `cargo install` puts it there), so each shell command starts about 4 ms slower",
            crate::hooks::RUNNER
        ),
    };
    todo(
        "both",
        format!("a kernel sandbox for the agent's shell commands: {}; {runner}", support.describe()),
        support.is_kernel(),
        "none here, so the hooks judge shell commands from their text, which is advisory: a command can write what the phase forbids. Linux 5.13 or later with Landlock enabled (`lsm=` holding landlock), or macOS, enforces it",
    )
}

/// What the verification phases tell the agent to run: the commands the project declares, or
/// those derived from its files, each with why; the derived ones not installed here are named.
pub fn verify_commands(root: &Path) -> Check {
    use code_intel_codebase::verify::{self, Source};
    let (config, _) = code_intel_codebase::config::Config::load(root);
    let found = verify::commands(root, &config.verify_commands);
    let quoted = |c: &str| format!("`{c}`");
    if found.source == Source::Declared {
        let list: Vec<String> = found.commands.iter().map(|c| quoted(c)).collect();
        return check(
            "both",
            format!("the verify commands, declared in .code-intel/config.json: {}", list.join(", ")),
            true,
            "",
        );
    }
    let offered: Vec<String> = found
        .derived
        .iter()
        .filter(|d| d.installed)
        .map(|d| format!("{} ({})", quoted(&d.command), d.because))
        .collect();
    let missing: Vec<String> = found
        .derived
        .iter()
        .filter(|d| !d.installed)
        .map(|d| format!("{} ({})", quoted(&d.command), d.because))
        .collect();
    let mut what = if offered.is_empty() {
        "the verify commands: none derived from the project's files".to_owned()
    } else {
        format!("the verify commands, derived from the project's files: {}", offered.join("; "))
    };
    if !missing.is_empty() {
        what.push_str(&format!("; not installed here, so not offered: {}", missing.join("; ")));
    }
    todo(
        "both",
        what,
        !offered.is_empty(),
        "nothing installed here runs the project's checks: install what the project uses, or declare the commands in .code-intel/config.json (`verify_commands`), so the verification phases name them",
    )
}

fn which(program: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path).map(|d| d.join(program)).find(|p| p.is_file())
}

fn read_json(path: &Path) -> Option<Value> {
    serde_json::from_str(&std::fs::read_to_string(path).ok()?).ok()
}

/// Whether `doc.hooks` holds every one of `entries`.
fn has_hooks(doc: Option<&Value>, entries: &[HookEntry]) -> bool {
    let Some(hooks) = doc.and_then(|d| d.get("hooks")) else { return false };
    entries.iter().all(|(event, matcher, command)| {
        hooks[*event].as_array().is_some_and(|groups| {
            groups.iter().any(|g| {
                let ours =
                    g["hooks"].as_array().is_some_and(|hs| hs.iter().any(|h| h["command"].as_str() == Some(command)));
                // A matcher an earlier version wrote may lack a tool added since (Read).
                let sees_all = match (matcher, g["matcher"].as_str()) {
                    (Some(wanted), Some(have)) => init::missing_tools(have, wanted).is_empty(),
                    _ => true,
                };
                ours && sees_all
            })
        })
    })
}

fn procedures(root: &Path, client: Client, name: &'static str) -> Check {
    let missing: Vec<String> = PROCEDURES.iter().map(|p| p.path(client)).filter(|p| !root.join(p).is_file()).collect();
    let sigil = if client == Client::Codex { "$" } else { "/" };
    check(
        name,
        format!("the {sigil}code and {sigil}outcome procedures"),
        missing.is_empty(),
        format!("missing {}: run `git code-intel init`", missing.join(", ")),
    )
}

fn claude_code(root: &Path) -> Vec<Check> {
    const NAME: &str = "claude-code";
    let mcp = read_json(&root.join(".mcp.json"));
    let entry = mcp.as_ref().and_then(|m| m["mcpServers"].get(SERVER)).cloned();
    let runs_us = entry.as_ref().is_some_and(|e| e["command"].as_str() == Some(PROGRAM));
    let settings = read_json(&root.join(init::CLAUDE_SETTINGS));
    let mut out = vec![
        check(NAME, "MCP server `code-intel` in .mcp.json", runs_us, "run `git code-intel init`"),
        check(
            NAME,
            "PreToolUse and SessionStart hooks in .claude/settings.json",
            has_hooks(settings.as_ref(), CLAUDE_HOOKS),
            "run `git code-intel init`",
        ),
        procedures(root, Client::ClaudeCode, NAME),
    ];
    out.push(todo(
        NAME,
        "the project's MCP server approved",
        claude_approved(root),
        "approve the project's MCP server `code-intel` when Claude Code asks on its first start in this repository (or add \"enabledMcpjsonServers\": [\"code-intel\"] to .claude/settings.local.json), then restart it",
    ));
    out
}

/// Claude Code keeps the approval in the project's settings files or in its own
/// `~/.claude.json` (per project path).
fn claude_approved(root: &Path) -> bool {
    let approves = |doc: &Value| {
        doc["enableAllProjectMcpServers"] == Value::Bool(true)
            || doc["enabledMcpjsonServers"].as_array().is_some_and(|a| a.iter().any(|s| s == SERVER))
    };
    let local = [init::CLAUDE_SETTINGS, ".claude/settings.local.json"]
        .iter()
        .filter_map(|f| read_json(&root.join(f)))
        .any(|d| approves(&d));
    if local {
        return true;
    }
    let config_dir = std::env::var_os("CLAUDE_CONFIG_DIR").map(PathBuf::from);
    let home = std::env::var_os("HOME").map(PathBuf::from);
    let global =
        config_dir.clone().map(|d| d.join(".claude.json")).into_iter().chain(home.map(|h| h.join(".claude.json")));
    let canonical = root.canonicalize().unwrap_or_else(|_| root.to_path_buf());
    global.filter_map(|f| read_json(&f)).any(|doc| {
        doc["projects"]
            .as_object()
            .is_some_and(|projects| projects.iter().any(|(path, p)| Path::new(path) == canonical && approves(p)))
    })
}

fn codex(root: &Path) -> Vec<Check> {
    const NAME: &str = "codex";
    let config = std::fs::read_to_string(root.join(".codex/config.toml")).unwrap_or_default();
    let entry = config.parse::<toml::Table>().ok().and_then(|t| t.get("mcp_servers")?.get(SERVER).cloned());
    let runs_us = entry.as_ref().and_then(|e| e.get("command")?.as_str().map(|c| c == PROGRAM)).unwrap_or(false);
    let hooks = read_json(&root.join(init::CODEX_HOOKS_FILE));
    vec![
        check(NAME, "MCP server `code-intel` in .codex/config.toml", runs_us, "run `git code-intel init`"),
        check(
            NAME,
            "PreToolUse and SessionStart hooks in .codex/hooks.json",
            has_hooks(hooks.as_ref(), CODEX_HOOKS),
            "run `git code-intel init`",
        ),
        procedures(root, Client::Codex, NAME),
        todo(
            NAME,
            "the project trusted",
            codex_trusted(root),
            format!(
                "trust this project when Codex asks on its first start here (it reads the project's .codex/, the MCP entry and the hooks, only in a trusted project), or add [projects.\"{}\"] trust_level = \"trusted\" to {}",
                root.display(),
                codex_home().join("config.toml").display()
            ),
        ),
        todo(
            NAME,
            "the project's hooks reviewed and trusted",
            codex_hooks_trusted(root),
            "then open Codex here and trust the git-code-intel hooks in `/hooks` (Codex runs a project's hooks only once they are reviewed; until then its shell commands and apply_patch are not checked)",
        ),
    ]
}

fn codex_home() -> PathBuf {
    std::env::var_os("CODEX_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".codex")))
        .unwrap_or_else(|| PathBuf::from(".codex"))
}

fn codex_user_config() -> Option<toml::Table> {
    std::fs::read_to_string(codex_home().join("config.toml")).ok()?.parse::<toml::Table>().ok()
}

/// Codex records a reviewed hook as `[hooks.state."<hooks.json>:<event>:<group>:<handler>"]`
/// with a `trusted_hash`; both of ours must have one.
fn codex_hooks_trusted(root: &Path) -> bool {
    let Some(config) = codex_user_config() else { return false };
    let Some(state) = config.get("hooks").and_then(|h| h.get("state")).and_then(|s| s.as_table()) else {
        return false;
    };
    let file = root.canonicalize().unwrap_or_else(|_| root.to_path_buf()).join(init::CODEX_HOOKS_FILE);
    let prefix = file.display().to_string();
    ["pre_tool_use", "session_start"].iter().all(|event| {
        state
            .iter()
            .any(|(key, entry)| key.starts_with(&format!("{prefix}:{event}:")) && entry.get("trusted_hash").is_some())
    })
}

/// `[projects."<dir>"] trust_level = "trusted"` for the repository or a directory above it.
fn codex_trusted(root: &Path) -> bool {
    let Some(config) = codex_user_config() else { return false };
    let Some(projects) = config.get("projects").and_then(|p| p.as_table()) else { return false };
    let canonical = root.canonicalize().unwrap_or_else(|_| root.to_path_buf());
    projects.iter().any(|(dir, settings)| {
        canonical.starts_with(Path::new(dir)) && settings.get("trust_level").and_then(|t| t.as_str()) == Some("trusted")
    })
}

/// What `init` ends with: the steps per client only the user can take (and a missing
/// `git-code-intel` on PATH, which init cannot fix either).
pub fn first_run_steps(root: &Path) -> Vec<String> {
    checks(root)
        .into_iter()
        .filter(|c| c.status != Status::Ok)
        .map(|c| format!("{}: {}", client_title(c.client), c.fix))
        .collect()
}

pub fn client_title(client: &str) -> &str {
    match client {
        "claude-code" => "Claude Code",
        "codex" => "Codex",
        _ => "Both clients",
    }
}
