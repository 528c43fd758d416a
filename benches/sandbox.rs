//! The sandbox runner's own cost: a command run through `git-code-intel-sandbox` (the small
//! runner beside the binary, the form the hooks rewrite every shell command into while a
//! session is active) against the same command run by `bash -c` directly, in the same run, on two work trees with a session active: the
//! project fixture (a handful of files) and a git repository of the corpus (thousands of files,
//! a git-ignored build directory). Target: at most 5 ms added to a command.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::json;

use super::server::Server;

pub fn run(bin: &Path, corpus: &Path) {
    println!("\n## sandbox runner vs bash -c (median of 50, interleaved: `true`, `git status`, a `chmod`)");
    let work = std::env::temp_dir().join("code-intel-bench-sandbox");
    let _ = std::fs::remove_dir_all(&work);
    std::fs::create_dir_all(&work).unwrap();
    let small = work.join("small");
    std::fs::create_dir_all(&small).unwrap();
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/project");
    assert!(Command::new("cp").arg("-r").arg(fixture.join(".")).arg(&small).status().unwrap().success());
    commit_all(&small);
    let mut repos = vec![("fixture", small)];
    if corpus.is_dir() {
        let large = work.join("large");
        assert!(Command::new("cp").arg("-r").arg(corpus).arg(&large).status().unwrap().success());
        std::fs::write(large.join(".gitignore"), "target/\n").unwrap();
        std::fs::create_dir_all(large.join("target/debug")).unwrap();
        commit_all(&large);
        repos.push(("corpus", large));
    }
    // The floor: each program's own start and exit. The hooks use the small runner when it is
    // installed beside the binary, else the binary's `sandbox` subcommand.
    let runner = bin.with_file_name("git-code-intel-sandbox");
    assert!(runner.is_file(), "build the runner too: cargo build --release --bin git-code-intel-sandbox");
    for program in [bin, runner.as_path()] {
        let start = median(30, || time(Command::new(program).arg("--version")));
        println!(
            "floor: `{} --version` {:.2} ms",
            program.file_name().unwrap_or_default().to_string_lossy(),
            ms(start)
        );
    }
    for (label, root) in &repos {
        let files = git_out(root, &["ls-files"]).lines().count();
        // The session lives in refs: the server that started it is gone before the timing, so
        // its background indexing does not share the machine with what is measured.
        let mut server = Server::start(bin, root, &[]);
        server.call(
            "start_session",
            json!({"intent": "IMPLEMENT", "query": "bench", "quick": true, "no_doc_research": true}),
        );
        drop(server);
        // The copy just made (20,000 files for the corpus) is still being written back to disk:
        // until it is, every process on the machine runs slower, the timed ones among them.
        assert!(Command::new("sync").status().is_ok_and(|s| s.success()), "sync");
        std::thread::sleep(Duration::from_millis(500));
        // The third changes a mode (of a temporary file): the runner then compares every tracked
        // file's executable bit with the index.
        for command in ["true", "git status --short >/dev/null", "f=$(mktemp) && chmod +x $f && rm $f"] {
            // One untimed run first: the runner's first call in a work tree walks it and
            // remembers the ignored entries (.git/code-intel/ignored.json).
            time(Command::new(&runner).arg("--repo").arg(root).args(["--", command]).current_dir(root));
            // Interleaved, so a busy moment of the machine weighs on all three alike.
            let (mut direct, mut small, mut subcommand) = (Vec::new(), Vec::new(), Vec::new());
            for _ in 0..RUNS {
                direct.push(time(Command::new("bash").arg("-c").arg(command).current_dir(root)));
                small.push(time(Command::new(&runner).arg("--repo").arg(root).args(["--", command]).current_dir(root)));
                subcommand.push(time(
                    Command::new(bin).arg("--repo").arg(root).args(["sandbox", "--", command]).current_dir(root),
                ));
            }
            let (direct, small, subcommand) = (middle(direct), middle(small), middle(subcommand));
            let added = small.saturating_sub(direct);
            println!(
                "{label:<8} ({files} files) {command:<32} bash -c {:>7.2} ms  runner {:>7.2} ms  added {:>6.2} ms  ({:.1}x; target <= 5 ms added)  [`git-code-intel sandbox` {:>7.2} ms]",
                ms(direct),
                ms(small),
                ms(added),
                ms(small) / ms(direct).max(0.001),
                ms(subcommand)
            );
        }
    }
    let _ = std::fs::remove_dir_all(&work);
}

fn commit_all(root: &Path) {
    for args in [&["init", "-q", "-b", "main"][..], &["add", "-A"], &["commit", "-q", "-m", "initial"]] {
        let ok = Command::new("git")
            // No automatic gc: on the corpus's 20,000 loose objects `git commit` starts a
            // `pack-objects` in the background that took 1.4 cores for the fixture's timings.
            .args(["-c", "user.name=b", "-c", "user.email=b@x", "-c", "gc.auto=0", "-c", "maintenance.auto=false"])
            .args(args)
            .current_dir(root)
            .stdout(Stdio::null())
            .status()
            .unwrap()
            .success();
        assert!(ok, "git {args:?}");
    }
}

fn git_out(root: &Path, args: &[&str]) -> String {
    String::from_utf8_lossy(&Command::new("git").args(args).current_dir(root).output().unwrap().stdout).into_owned()
}

fn time(cmd: &mut Command) -> Duration {
    let started = Instant::now();
    let status = cmd.stdout(Stdio::null()).stderr(Stdio::null()).status().unwrap();
    assert!(status.success(), "{cmd:?}");
    started.elapsed()
}

/// Runs of each form per command.
const RUNS: usize = 50;

fn median(n: usize, mut f: impl FnMut() -> Duration) -> Duration {
    middle((0..n).map(|_| f()).collect())
}

fn middle(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}
