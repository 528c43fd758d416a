//! git-code-intel's binary crate: the thin edge that speaks to the outside: the MCP server
//! ([`mcp`]), the CLI ([`cli`]), the Claude Code, Codex and git hooks ([`hooks`]), `init` and
//! `doctor`, and the manual. What a session is and does lives in `code_intel_session`.
//!
//! The layers it builds on, each its own crate: `code_intel_session` (the session, tools,
//! task branches, context), `code_intel_workflow` (the pure engine and the contract),
//! `code_intel_gitstate` (git plumbing), `code_intel_codebase` (files, syntax, the symbol index)
//! and `code_intel_semantic` (Forest and Map). See `docs/ARCHITECTURE.md`.

pub mod cli;
pub mod doctor;
pub mod hooks;
pub mod init;
pub mod manual;
pub mod mcp;
pub mod sandbox;
