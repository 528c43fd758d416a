//! `git code-intel sandbox -- COMMAND`, the runner's edge: what a phase allows and the running
//! itself are `code_intel_session::confine`; here, the refusal when nothing may run, and the one
//! line after a confined command that failed, both from the contract.

use std::path::Path;

use code_intel_session::confine::{self, Outcome};
use code_intel_session::workspace::load_contract;
use code_intel_workflow::contract::Contract;
use code_intel_workflow::contract::catalogue as msg;
use code_intel_workflow::engine::phase::Phase;

/// The exit code of a command that was not run (as a shell says of one it cannot execute).
pub const NOT_RUN: i32 = 126;

/// Runs `command` in the sandbox of the session active in the work tree holding `start`, for at
/// most `limit` when one is given (then it ends with `code_intel_sandbox::TIMED_OUT`).
/// Returns the command's exit code, or [`NOT_RUN`].
pub fn run(start: &Path, shell: &Path, command: &str, limit: Option<std::time::Duration>) -> i32 {
    let root = match code_intel_codebase::repo::Repo::discover(start) {
        Ok(repo) => repo.root().to_owned(),
        Err(e) => {
            let why = format!("{} is not in a git work tree ({e})", start.display());
            eprintln!("{}", contract(start).message(&msg::SANDBOX_REFUSED, &[("why", &why)]));
            return NOT_RUN;
        }
    };
    match confine::run(&root, shell, command, limit) {
        Ok(Outcome { code, phase: Some(phase) }) if code != 0 => {
            let note = match phase {
                Phase::Ready => contract(&root).message(&msg::SANDBOX_NOTE_READY, &[]),
                other => contract(&root).message(&msg::SANDBOX_NOTE, &[("phase", other.name())]),
            };
            eprintln!("{note}");
            code
        }
        Ok(outcome) => outcome.code,
        Err(e) => {
            eprintln!("{}", contract(&root).message(&msg::SANDBOX_REFUSED, &[("why", &e.to_string())]));
            NOT_RUN
        }
    }
}

/// The contract in effect at `root` (the defaults with the project's overrides), read without
/// opening a workspace: the runner links nothing of the indexes.
fn contract(root: &Path) -> Contract {
    load_contract(root).0
}
