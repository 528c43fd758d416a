//! The workflow engine: pure functions from (session, payload, facts) to (session, response).
//!
//! No I/O happens here. The adapters (the binary crate's session module, for MCP and the CLI) gather the facts
//! (which tools were served in the phase, what evidence files hold, whether semantic search is
//! available), call the engine, carry out the [`submit::Effect`] it asks for, and persist the
//! result.
//!
//! - [`phase`]: phases, steps 1–19, READY's substeps, contract keys.
//! - [`state`]: the session state and its checkpoint form.
//! - `flow`: the phase matrix (intent × flags).
//! - [`payload`]: each phase's payload as a type, and the decoding of a submitted one.
//! - [`schema`]: `expected_payload_schema` and `expected_payload`, made from those types.
//! - [`submit`]: `start_session` and `submit_phase`, with READY's plan and completions (`submit/tasks.rs`).
//! - [`response`]: what the engine answers, as types.
//! - [`evidence`]: `file:line` evidence and empty-implementation detection.
//! - [`registry`]: the tools this server serves and what each does.

pub mod cap;
mod decode;
pub mod evidence;
mod flow;
pub mod payload;
pub mod phase;
pub mod registry;
pub mod response;
pub mod schema;
pub mod state;
pub mod submit;

use crate::contract::catalogue as msg;
use crate::contract::{Contract, ContractMessage};
use phase::Phase;
use state::SessionState;

/// Why a write is allowed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WriteAllowed {
    Explored,
    NewFileInExploredDirectory,
}

/// Entries at the root of a work tree that the agent never writes, whatever the phase or the
/// explored set: git's own, the clients' settings and hooks, the MCP entry, the procedures
/// `init` writes, and code-intel's configuration and contract. The hooks refuse a file tool's
/// write there, and the shell's kernel sandbox never grants them (docs/SECURITY.md).
pub const PROTECTED: &[&str] = &[".git", ".claude", ".codex", ".code-intel", ".agents", ".mcp.json"];

/// Whether `rel` (relative to the root, `/`-separated) is or lies beneath a [`PROTECTED`]
/// entry.
pub fn is_protected(rel: &str) -> bool {
    let first = rel.trim_start_matches("./").split('/').next().unwrap_or("");
    PROTECTED.contains(&first)
}

/// `check_write_target`: writes only in READY, only to explored files, or to a new file in a
/// directory that holds an explored file; never to a [`PROTECTED`] entry. `exists` says
/// whether the file is already there.
pub fn check_write(
    contract: &Contract,
    state: &SessionState,
    rel: &str,
    exists: bool,
    allow_new_files: bool,
) -> Result<WriteAllowed, ContractMessage> {
    if is_protected(rel) {
        return Err(contract.error(&msg::WRITE_PROTECTED, &[("path", rel)]));
    }
    if state.phase() != Phase::Ready {
        let phase = state.phase().name();
        return Err(contract.error(&msg::WRITE_PHASE_BLOCKED, &[("phase", phase)]));
    }
    if state.explored_files.contains(rel) {
        return Ok(WriteAllowed::Explored);
    }
    if !exists && allow_new_files {
        let dir = parent_dir(rel);
        if state.explored_files.iter().any(|f| parent_dir(f) == dir) {
            return Ok(WriteAllowed::NewFileInExploredDirectory);
        }
    }
    Err(contract.error(&msg::WRITE_BLOCKED, &[]))
}

/// `add_explored_files`: only in READY, and only with files.
pub fn check_add_explored(contract: &Contract, state: &SessionState, files: &[String]) -> Result<(), ContractMessage> {
    if state.phase() != Phase::Ready {
        let phase = state.phase().name();
        return Err(contract.error(&msg::ADD_EXPLORED_PHASE_MISMATCH, &[("phase", phase)]));
    }
    if files.iter().all(|f| f.trim().is_empty()) {
        return Err(contract.error(&msg::ADD_EXPLORED_NO_FILES, &[]));
    }
    Ok(())
}

fn parent_dir(rel: &str) -> &str {
    rel.rsplit_once('/').map_or("", |(d, _)| d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_guards_own_configuration_is_protected_at_any_depth_below_it() {
        for p in [".git", ".git/config", ".claude/settings.json", ".codex/hooks.json", ".code-intel/config.json"] {
            assert!(is_protected(p), "{p}");
        }
        assert!(is_protected(".mcp.json"));
        assert!(is_protected("./.claude/settings.local.json"));
        for p in ["app/.claude", "src/main.rs", ".github/workflows/ci.yml", ".gitignore", "AGENTS.md"] {
            assert!(!is_protected(p), "{p}");
        }
    }
}
