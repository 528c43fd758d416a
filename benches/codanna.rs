//! One-shot symbol lookup against codanna 0.16 (issue 13), when a codanna binary is at hand:
//! `CODANNA=<path>` or `codanna` on `PATH`. Semantic search is turned off in its settings, as
//! the issue asks. Building it is not part of the bench (see docs/PERFORMANCE.md for the
//! recipe). codanna did not finish indexing the whole corpus in 29 minutes in the issue, so
//! both tools run on a subset like the issue's: the corpus's first crates, in name order, up to
//! about 900 Rust files, as one git repository.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use super::{geomean, git, ms};

const NAMES: &[&str] =
    &["Parser", "Error", "ArgMatches", "Command", "Value", "Builder", "from_str", "Span", "new", "fmt"];
const RUNS: usize = 7;

fn codanna() -> Option<PathBuf> {
    if let Some(path) = std::env::var_os("CODANNA") {
        return Some(PathBuf::from(path));
    }
    let found = Command::new("codanna").arg("--version").stdout(Stdio::null()).stderr(Stdio::null()).status();
    found.is_ok_and(|s| s.success()).then(|| PathBuf::from("codanna"))
}

fn rust_files(dir: &Path) -> usize {
    let mut n = 0;
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let p = e.path();
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                stack.push(p);
            } else if p.extension().is_some_and(|x| x == "rs") {
                n += 1;
            }
        }
    }
    n
}

fn timed(cmd: &mut Command) -> Duration {
    let t = Instant::now();
    let _ = cmd.stdout(Stdio::null()).stderr(Stdio::null()).status();
    t.elapsed()
}

fn median(mut f: impl FnMut() -> Duration) -> Duration {
    let mut runs: Vec<Duration> = (0..RUNS).map(|_| f()).collect();
    runs.sort();
    runs[RUNS / 2]
}

pub fn run(bin: &Path, corpus: &Path) {
    println!("\n## one-shot symbol lookup vs codanna 0.16 (subset of the corpus, median of {RUNS})");
    let Some(codanna) = codanna() else {
        println!("skipped: no codanna binary (set CODANNA=<path> or put codanna on PATH)");
        return;
    };
    let subset = std::env::temp_dir().join("code-intel-bench-codanna");
    let _ = std::fs::remove_dir_all(&subset);
    std::fs::create_dir_all(&subset).unwrap();
    let mut crates: Vec<PathBuf> = std::fs::read_dir(corpus)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.is_dir() && !p.file_name().is_some_and(|n| n.to_string_lossy().starts_with('.')))
        .collect();
    crates.sort();
    let mut files = 0;
    for c in crates {
        let n = rust_files(&c);
        if files + n > 910 {
            continue;
        }
        let copied = Command::new("cp").arg("-a").arg(&c).arg(&subset).status();
        assert!(copied.is_ok_and(|s| s.success()), "copying {}", c.display());
        files += n;
        if files >= 880 {
            break;
        }
    }
    git(&subset, &["init", "-q", "-b", "main"]);
    git(&subset, &["add", "-A"]);
    git(&subset, &["commit", "-q", "-m", "subset"]);

    let _ =
        Command::new(&codanna).arg("init").current_dir(&subset).stdout(Stdio::null()).stderr(Stdio::null()).status();
    let settings = subset.join(".codanna/settings.toml");
    let Ok(text) = std::fs::read_to_string(&settings) else {
        println!("skipped: `codanna init` wrote no {}", settings.display());
        return;
    };
    // Semantic search off: the first `enabled` after its section header.
    let mut in_semantic = false;
    let edited: Vec<String> = text
        .lines()
        .map(|l| {
            if l.trim_start().starts_with('[') {
                in_semantic = l.trim() == "[semantic_search]";
            }
            if in_semantic && l.trim() == "enabled = true" {
                in_semantic = false;
                return "enabled = false".to_owned();
            }
            l.to_owned()
        })
        .collect();
    std::fs::write(&settings, edited.join("\n") + "\n").unwrap();

    let theirs_index = timed(Command::new(&codanna).args(["index", "."]).current_dir(&subset));
    let ours_index =
        timed(Command::new(bin).arg("--repo").arg(&subset).args(["index", "--symbols-only"]).current_dir(&subset));
    println!(
        "{files} Rust files: index ours {:.2} s, codanna {:.2} s",
        ours_index.as_secs_f64(),
        theirs_index.as_secs_f64()
    );
    println!("| name | ours | codanna | ratio |\n|---|---|---|---|");
    let mut ratios = Vec::new();
    for name in NAMES {
        let ours =
            median(|| timed(Command::new(bin).arg("--repo").arg(&subset).args(["find-definitions", "--symbol", name])));
        let theirs = median(|| timed(Command::new(&codanna).args(["retrieve", "symbol", name]).current_dir(&subset)));
        let ratio = ours.as_secs_f64() / theirs.as_secs_f64();
        ratios.push(ratio);
        println!("| {name} | {:.1} ms | {:.1} ms | {ratio:.2} |", ms(ours), ms(theirs));
    }
    println!("geometric mean ours / codanna: {:.2} (target <= 1.0)", geomean(&ratios));
}
