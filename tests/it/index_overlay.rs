//! The symbol index's overlay through the real binary: after random edits, additions and
//! removals, one-shot lookups answer exactly as an index rebuilt from nothing does, also when
//! the compaction (`git code-intel index`) is killed at a random point; and a one-shot lookup
//! whose overlay has grown starts the compaction detached and does not wait for it.

use std::path::Path;
use std::time::{Duration, Instant};

use crate::common::mcp_client::BIN;
use crate::common::{copy_dir, git, run_cli};

const NAMES: &[&str] = &["alpha", "beta", "gamma", "delta", "render", "parse", "Widget", "Store", "omega"];

fn source(rng: &mut fastrand::Rng) -> String {
    let mut out = String::from("use crate::Store;\n");
    for _ in 0..rng.usize(2..8) {
        let name = NAMES[rng.usize(..NAMES.len())];
        let calls: Vec<String> =
            (0..rng.usize(1..5)).map(|_| format!("{}()", NAMES[rng.usize(..NAMES.len())])).collect();
        out.push_str(&format!("pub fn {name}() {{\n    {};\n}}\n", calls.join(";\n    ")));
    }
    out
}

fn repo(files: usize, rng: &mut fastrand::Rng) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    git(dir.path(), &["init", "-q"]);
    for i in 0..files {
        let sub = dir.path().join(format!("src/m{}", i % 10));
        std::fs::create_dir_all(&sub).unwrap();
        std::fs::write(sub.join(format!("f{i:03}.rs")), source(rng)).unwrap();
    }
    dir
}

/// Every source file under `src/`, relative.
fn files(root: &Path) -> Vec<String> {
    let mut out = Vec::new();
    for d in std::fs::read_dir(root.join("src")).unwrap().flatten() {
        for f in std::fs::read_dir(d.path()).unwrap().flatten() {
            out.push(f.path().strip_prefix(root).unwrap().to_string_lossy().into_owned());
        }
    }
    out.sort();
    out
}

/// Some files edited, some added, some removed.
fn random_changes(root: &Path, rng: &mut fastrand::Rng, next: &mut usize) {
    let present = files(root);
    for _ in 0..rng.usize(1..12) {
        let rel = &present[rng.usize(..present.len())];
        match rng.usize(..4) {
            0 => {
                crate::common::remove_if_present(root.join(rel));
            }
            1 => {
                *next += 1;
                std::fs::write(root.join(format!("src/m{}/new{next:03}.rs", *next % 10)), source(rng)).unwrap();
            }
            _ => std::fs::write(root.join(rel), source(rng)).unwrap(),
        }
    }
}

/// The answers that matter, as JSON text: definitions and references of every name.
fn answers(root: &Path) -> Vec<String> {
    let mut out = Vec::new();
    for name in NAMES {
        for args in [
            vec!["--json", "find-definitions", "--symbol", name],
            vec!["--json", "find-references", "--symbol", name, "--limit", "500"],
        ] {
            let (code, stdout, stderr) = run_cli(root, &args, "");
            assert_eq!(code, 0, "{args:?}: {stderr}");
            let mut v: serde_json::Value = serde_json::from_str(&stdout).unwrap();
            // How the answer was reached is not part of it.
            if let Some(o) = v.as_object_mut() {
                o.remove("fast_path");
            }
            out.push(v.to_string());
        }
    }
    out
}

/// The same answers from a copy of the tree indexed from nothing.
fn rebuilt_answers(root: &Path) -> Vec<String> {
    let copy = tempfile::tempdir().unwrap();
    copy_dir(root, copy.path());
    crate::common::remove_dir_if_present(copy.path().join(".code-intel"));
    let (code, _, stderr) = run_cli(copy.path(), &["index", "--symbols-only", "--rebuild"], "");
    assert_eq!(code, 0, "{stderr}");
    answers(copy.path())
}

#[test]
fn lookups_after_random_edits_and_killed_compactions_equal_a_rebuild() {
    let mut rng = fastrand::Rng::with_seed(27);
    let dir = repo(300, &mut rng);
    let root = dir.path();
    let (code, _, stderr) = run_cli(root, &["index", "--symbols-only"], "");
    assert_eq!(code, 0, "{stderr}");
    // How long a whole compaction takes here, to kill it anywhere within.
    let started = Instant::now();
    run_cli(root, &["index", "--symbols-only"], "");
    let full = started.elapsed().max(Duration::from_millis(20));
    let mut next = 0;
    let mut killed = 0;
    for round in 0..6 {
        random_changes(root, &mut rng, &mut next);
        // A lookup refreshes into the overlay.
        run_cli(root, &["find-definitions", "--symbol", "alpha"], "");
        assert!(root.join(".code-intel/index/overlay.idx").exists(), "round {round}: the edit went to the overlay");
        // The compaction, killed at a random point of its run.
        let mut child = std::process::Command::new(BIN)
            .args(["index", "--symbols-only"])
            .current_dir(root)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(full.mul_f64(rng.f64() * 1.2));
        if child.try_wait().unwrap().is_none() {
            killed += 1;
        }
        crate::common::end(&mut child);
        random_changes(root, &mut rng, &mut next);
        assert_eq!(answers(root), rebuilt_answers(root), "round {round}");
    }
    assert!(killed > 0, "no compaction was killed midway");
    // The work tree's status is untouched by all of it.
    assert!(git(root, &["status", "--porcelain", "--ignored=no"]).lines().all(|l| !l.contains(".code-intel")));
}

#[test]
fn a_grown_overlay_is_compacted_by_a_detached_process() {
    let mut rng = fastrand::Rng::with_seed(7);
    let dir = repo(400, &mut rng);
    let root = dir.path();
    let (code, _, stderr) = run_cli(root, &["index", "--symbols-only"], "");
    assert_eq!(code, 0, "{stderr}");
    let base = std::fs::metadata(root.join(".code-intel/index/symbols.idx")).unwrap().len();
    // Past the threshold (an eighth of the base, at least 256 KB): every file rewritten, larger.
    let overlay = root.join(".code-intel/index/overlay.idx");
    let mut rounds = 0;
    loop {
        for rel in files(root) {
            let text = format!("{}{}{}", source(&mut rng), source(&mut rng), source(&mut rng));
            std::fs::write(root.join(rel), text).unwrap();
        }
        let (code, _, stderr) = run_cli(root, &["find-references", "--symbol", "alpha"], "");
        assert_eq!(code, 0, "{stderr}");
        rounds += 1;
        // Every edit lands in the overlay: gone already, or past the threshold, the lookup has
        // started the compaction.
        let size = std::fs::metadata(&overlay).map_or(0, |m| m.len());
        if size == 0 || size > (base / 8).max(256 << 10) {
            break;
        }
        assert!(rounds < 3, "the overlay ({size} bytes) never grew past its threshold (base {base} bytes)");
    }
    let deadline = Instant::now() + Duration::from_secs(60);
    while root.join(".code-intel/index/overlay.idx").exists() {
        assert!(Instant::now() < deadline, "the overlay was never compacted");
        std::thread::sleep(Duration::from_millis(50));
    }
    // The lock is a `flock` on the file, released when the detached compaction ends.
    let lock = std::fs::File::open(root.join(".code-intel/index/compact.lock")).unwrap();
    while lock.try_lock().is_err() {
        assert!(Instant::now() < deadline, "the compaction lock was never released");
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(answers(root), rebuilt_answers(root));
}
