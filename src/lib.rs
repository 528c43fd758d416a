//! git-code-intel's binary crate: everything that speaks to the outside (the MCP server, the
//! CLI, the git hooks, `init`) and the adapters that join the layers below into a session:
//! the session store in `refs/code-intel/*`, task branches, the tools and their answers.
//!
//! The layers it builds on, each its own crate: `code_intel_workflow` (the pure engine and the
//! contract), `code_intel_gitstate` (git plumbing), `code_intel_codebase` (files, syntax, the
//! symbol index) and `code_intel_semantic` (Forest and Map). See `docs/ARCHITECTURE.md`.

pub mod branches;
pub mod cli;
pub mod context;
pub mod doctor;
pub mod error;
pub mod hooks;
pub mod init;
pub mod manual;
pub mod mcp;
pub mod patch;
pub mod session;
pub mod share;
pub mod shell_guard;
pub mod tools;
pub mod workspace;

pub use error::Error;
