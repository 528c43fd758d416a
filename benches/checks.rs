//! What a witnessed run costs beyond the project's own test time: `run_check` (the server runs
//! the verify command through the sandbox runner, reads its output and records the run in the
//! session's checkpoint) against the same command run by `bash -c`, in the same run, on the
//! project fixture with pytest. Target: the project's test time plus at most 100 ms.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::json;

use super::server::Server;

/// Runs of each form, interleaved.
const RUNS: usize = 15;

pub fn run(bin: &Path) {
    println!("\n## a witnessed run (run_check) vs bash -c (median of {RUNS}, interleaved: `python3 -m pytest`)");
    let pytest = Command::new("python3").args(["-m", "pytest", "--version"]).output();
    if !pytest.is_ok_and(|o| o.status.success()) {
        println!("skipped: pytest is not installed (scripts/test.sh installs it)");
        return;
    }
    let work = std::env::temp_dir().join("code-intel-bench-checks");
    let _ = std::fs::remove_dir_all(&work);
    std::fs::create_dir_all(&work).unwrap();
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/project");
    assert!(Command::new("cp").arg("-r").arg(fixture.join(".")).arg(&work).status().unwrap().success());
    std::fs::write(work.join("pytest.ini"), "[pytest]\npythonpath = src\naddopts = -p no:cacheprovider\n").unwrap();
    for args in [&["init", "-q", "-b", "main"][..], &["add", "-A"], &["commit", "-q", "-m", "initial"]] {
        let ok = Command::new("git")
            .args(["-c", "user.name=b", "-c", "user.email=b@x"])
            .args(args)
            .current_dir(&work)
            .stdout(Stdio::null())
            .status()
            .unwrap()
            .success();
        assert!(ok, "git {args:?}");
    }
    let mut server = Server::start(bin, &work, &[]);
    server.call(
        "start_session",
        json!({"intent": "IMPLEMENT", "query": "bench", "quick": true, "no_doc_research": true}),
    );
    let (mut direct, mut witnessed) = (Vec::new(), Vec::new());
    for _ in 0..RUNS {
        let started = Instant::now();
        let status = Command::new("bash")
            .args(["-c", "python3 -m pytest"])
            .current_dir(&work)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .unwrap();
        assert!(status.success());
        direct.push(started.elapsed());
        let started = Instant::now();
        let answer = server.call("run_check", json!({"command": "python3 -m pytest"}));
        witnessed.push(started.elapsed());
        assert_eq!(answer["exit_code"], 0, "{answer}");
        assert_eq!(answer["recorded"], true, "{answer}");
    }
    let (direct, witnessed) = (middle(direct), middle(witnessed));
    println!(
        "fixture  bash -c {:>7.1} ms  run_check {:>7.1} ms  added {:>6.1} ms  (target <= 100 ms added)",
        ms(direct),
        ms(witnessed),
        ms(witnessed.saturating_sub(direct))
    );
    drop(server);
    let _ = std::fs::remove_dir_all(&work);
}

fn middle(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}
