//! A session of git-code-intel: the adapters that join the layers below into what the agent
//! works with. The session store in `refs/code-intel/*` and the engine's effects ([`session`]),
//! the code tools and their answers ([`tools`]), task branches: commit, review, merge and the
//! commit gate ([`branches`]), the project's context and documents ([`context`]), the opened
//! repository with its contract and configuration ([`workspace`]), the shared refs' push and
//! fetch ([`share`]), and what the hooks judge: patches ([`patch`]) and shell commands
//! ([`shell_guard`]).
//!
//! The binary crate above it is the thin edge: the MCP server, the CLI, the hooks, `init` and
//! the manual. See `docs/ARCHITECTURE.md`.

// What this crate exports is its contract with the layers above: nothing public by accident.
#![warn(unreachable_pub)]

pub mod branches;
pub mod confine;
pub mod context;
mod error;
pub mod hook_log;
pub mod patch;
pub mod report;
pub mod session;
pub mod share;
pub mod shell_guard;
pub mod tools;
pub mod workspace;

pub use error::Error;
