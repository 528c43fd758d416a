//! The sandbox runner as a program of its own:
//! `git-code-intel-sandbox --repo ROOT [--shell PROGRAM] -- COMMAND`, what the PreToolUse hooks
//! rewrite every shell command into while a session is active. It does what
//! `git code-intel sandbox` does (`git_code_intel::sandbox`), in a program that links none of
//! the server's indexes, models or native libraries, so it starts in a fraction of the time:
//! it runs once per shell command of the agent (docs/PERFORMANCE.md).

// The usage line and the version go to the terminal of whoever ran it.
#![allow(clippy::print_stdout)]

use std::path::PathBuf;
use std::process::ExitCode;

/// A usage error, as the shell reports one.
const USAGE: u8 = 2;

fn main() -> ExitCode {
    git_code_intel::cli::init_logging();
    let usage = "usage: git-code-intel-sandbox [--repo ROOT] [--shell PROGRAM] [--timeout SECONDS] -- COMMAND";
    let mut args = std::env::args_os().skip(1);
    let (mut repo, mut shell, mut command, mut limit) = (None, PathBuf::from("bash"), None, None);
    while let Some(arg) = args.next() {
        match arg.to_str() {
            Some("--repo") => repo = args.next().map(PathBuf::from),
            Some("--shell") => shell = args.next().map(PathBuf::from).unwrap_or(shell),
            Some("--timeout") => match args.next().and_then(|s| s.to_str()?.parse::<u64>().ok()) {
                Some(seconds) => limit = Some(std::time::Duration::from_secs(seconds)),
                None => {
                    eprintln!("git-code-intel-sandbox: --timeout takes a whole number of seconds\n{usage}");
                    return ExitCode::from(USAGE);
                }
            },
            Some("--version") => {
                println!("git-code-intel-sandbox {}", env!("CARGO_PKG_VERSION"));
                return ExitCode::SUCCESS;
            }
            Some("-h" | "--help") => {
                println!(
                    "{usage}\nRuns COMMAND with SHELL -c in the kernel sandbox of the phase of the session active in ROOT's work tree (docs/SECURITY.md)."
                );
                return ExitCode::SUCCESS;
            }
            Some("--") => {
                command = args.next();
                break;
            }
            _ => {
                eprintln!("git-code-intel-sandbox: unexpected argument {arg:?}\n{usage}");
                return ExitCode::from(USAGE);
            }
        }
    }
    let command = match (command.map(|c| c.into_string()), args.next()) {
        (Some(Ok(command)), None) => command,
        (Some(Err(raw)), _) => {
            eprintln!("git-code-intel-sandbox: the command is not valid UTF-8: {raw:?}");
            return ExitCode::from(USAGE);
        }
        (_, extra) => {
            let why = if extra.is_some() { "more than one argument after --" } else { "no command after --" };
            eprintln!("git-code-intel-sandbox: {why} (the command line is one argument)\n{usage}");
            return ExitCode::from(USAGE);
        }
    };
    let start = match repo.map(Ok).unwrap_or_else(std::env::current_dir) {
        Ok(start) => start,
        Err(e) => {
            eprintln!("git-code-intel-sandbox: cannot read the current directory: {e}");
            return ExitCode::from(USAGE);
        }
    };
    let code = git_code_intel::sandbox::run(&start, &shell, &command, limit);
    ExitCode::from(code.clamp(0, 255) as u8)
}
