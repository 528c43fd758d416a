//! The manual pages and shell completions, generated from the clap definition (`cli.rs`), so
//! they cannot drift from the commands.
//!
//! `git code-intel --help` makes git run `man git-code-intel`. man-db finds pages in
//! `<dir>/../share/man` for each `<dir>` of `PATH`, so `git code-intel man --install` writes
//! them beside the installed binary: `<root>/bin/git-code-intel` gets
//! `<root>/share/man/man1/git-code-intel.1` (and one page per subcommand,
//! `git-code-intel-search-text.1`, …).

use std::io::Write;
use std::path::{Path, PathBuf};

use clap::CommandFactory;

use crate::cli::Cli;

/// Where the pages go for the running binary: `<bin>/../share/man/man1`.
pub fn default_dir() -> Result<PathBuf, code_intel_session::Error> {
    let exe = std::env::current_exe()
        .map_err(|e| code_intel_session::Error::File(format!("cannot find the running binary: {e}; give --dir")))?;
    let exe = exe.canonicalize().unwrap_or(exe);
    let root = exe
        .parent()
        .and_then(Path::parent)
        .ok_or_else(|| code_intel_session::Error::File("the binary has no parent directory; give --dir".into()))?;
    Ok(root.join("share/man/man1"))
}

/// Writes every page into `dir` (created when missing); returns the main page's path.
pub fn install(dir: &Path) -> Result<PathBuf, code_intel_session::Error> {
    let failed = |e: std::io::Error| code_intel_session::Error::File(format!("{}: {e}", dir.display()));
    std::fs::create_dir_all(dir).map_err(failed)?;
    clap_mangen::generate_to(Cli::command(), dir).map_err(failed)?;
    Ok(dir.join("git-code-intel.1"))
}

/// The main page, as roff.
pub fn render(out: &mut dyn Write) -> std::io::Result<()> {
    clap_mangen::Man::new(Cli::command()).render(out)
}

/// The completion script for `shell`, for the `git-code-intel` command.
pub fn completions(shell: clap_complete::Shell, out: &mut dyn Write) {
    clap_complete::generate(shell, &mut Cli::command(), "git-code-intel", out);
}
