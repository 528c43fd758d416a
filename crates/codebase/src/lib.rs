//! The codebase as the tools see it: the project's [`config`], the repository root and its path
//! rules ([`repo`]), the gitignore-aware [`walk`], the file watcher ([`TreeWatcher`]), the languages
//! ([`lang`]) and their syntax trees ([`syntax`]), the persistent symbol [`index`] and the
//! [`derived`]-file format it is written in, the [`garbage`] checks of the pre-commit hook, and
//! the commands that [`verify`] a change.
//!
//! It may use the pure workflow crate and the atomic writer (`code-intel-files`), nothing else of
//! this workspace: no refs, no sessions, no embeddings, no MCP.

// What this crate exports is its contract with the layers above: nothing public by accident.
#![warn(unreachable_pub)]

pub mod config;
pub mod derived;
pub mod garbage;
pub mod index;
pub mod lang;
pub mod repo;
pub mod syntax;
pub mod test_summary;
pub mod verify;
pub mod walk;
mod watch;

// The chosen list: what the private modules offer the layers above.
pub use watch::TreeWatcher;

/// What can fail in this crate besides I/O (which stays `std::io::Error`, with the path in the
/// message). A path a caller may not use is not an error of the crate but an answer:
/// [`repo::PathError`] says why, and the adapters turn it into the contract's message.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// `file_type` names no ripgrep file type.
    #[error(
        "unknown file type '{0}' (use a ripgrep type name: rust, py, js, ts, go, java, c, cpp, cs, ruby, php, md, …)"
    )]
    UnknownFileType(String),
}
