//! The sandbox runner's own cost: a command run through `git code-intel sandbox` (the form the
//! hooks rewrite every shell command into while a session is active) against the same command
//! run by `bash -c` directly, in the same run, on two work trees with a session active: the
//! project fixture (a handful of files) and a git repository of the corpus (thousands of files,
//! a git-ignored build directory). Target: at most 5 ms added to a command.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::json;

use super::server::Server;

pub fn run(bin: &Path, corpus: &Path) {
    println!("\n## sandbox runner vs bash -c (median of 30, `true` and `git status`)");
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
    // The floor: this binary's own start and exit, which any runner that is this binary pays.
    let start = median(30, || time(Command::new(bin).arg("--version")));
    println!("floor: `git-code-intel --version` {:.2} ms", ms(start));
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
        std::thread::sleep(Duration::from_millis(500));
        for command in ["true", "git status --short >/dev/null"] {
            // One untimed run first: the runner's first call in a work tree walks it and
            // remembers the ignored entries (.git/code-intel/ignored.json).
            time(Command::new(bin).arg("--repo").arg(root).args(["sandbox", "--", command]).current_dir(root));
            let direct = median(30, || time(Command::new("bash").arg("-c").arg(command).current_dir(root)));
            let runner = median(30, || {
                time(Command::new(bin).arg("--repo").arg(root).args(["sandbox", "--", command]).current_dir(root))
            });
            let added = runner.saturating_sub(direct);
            println!(
                "{label:<8} ({files} files) {command:<32} bash -c {:>7.2} ms  runner {:>7.2} ms  added {:>6.2} ms  ({:.1}x; target <= 5 ms added)",
                ms(direct),
                ms(runner),
                ms(added),
                ms(runner) / ms(direct).max(0.001)
            );
        }
    }
    let _ = std::fs::remove_dir_all(&work);
}

fn commit_all(root: &Path) {
    for args in [&["init", "-q", "-b", "main"][..], &["add", "-A"], &["commit", "-q", "-m", "initial"]] {
        let ok = Command::new("git")
            .args(["-c", "user.name=b", "-c", "user.email=b@x"])
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

fn median(n: usize, mut f: impl FnMut() -> Duration) -> Duration {
    let mut v: Vec<Duration> = (0..n).map(|_| f()).collect();
    v.sort();
    v[n / 2]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}
