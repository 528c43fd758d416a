//! Scale (issue 13), as a new user meets it on the registry corpus:
//! - the first find_definitions on a fresh clone (no index yet), one-shot CLI and server,
//!   against `rg -n "fn\s+NAME\b"`, and whether the answer equals the full index's;
//! - the full cold index;
//! - one-shot CLI find_definitions with the index built (the index is mapped, not read);
//! - a one-shot lookup after one file changed (walk, parse one file, rewrite the index);
//! - the server's resident memory with the index in use (no embedding model loaded).

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::server::Server;
use super::{git, ms, pct};

/// Names from rare to common in the crate sources.
const NAMES: &[&str] = &["from_str_radix", "TokenStream", "poll_next", "Visitor", "with_capacity"];
const RUNS: usize = 3;
/// The symbol index alone: no model, so no Forest sync loads one.
const NO_MODEL: &[(&str, &str)] = &[("CODE_INTEL_MODEL_DIR", "/nonexistent/model")];

fn cli_find(bin: &Path, corpus: &Path, name: &str) -> (Duration, Value) {
    let t = Instant::now();
    let out = Command::new(bin)
        .arg("--repo")
        .arg(corpus)
        .args(["--json", "find-definitions", "--symbol", name])
        .stderr(Stdio::null())
        .output()
        .unwrap();
    (t.elapsed(), serde_json::from_slice(&out.stdout).unwrap_or(Value::Null))
}

fn rg_defs(corpus: &Path, name: &str) -> Duration {
    let t = Instant::now();
    let _ = Command::new("rg")
        .args(["-n", &format!(r"fn\s+{name}\b")])
        .arg(corpus)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
    t.elapsed()
}

fn median_of(n: usize, mut f: impl FnMut() -> Duration) -> Duration {
    let mut v: Vec<Duration> = (0..n).map(|_| f()).collect();
    pct(&mut v, 50)
}

fn drop_index(corpus: &Path) {
    let _ = std::fs::remove_dir_all(corpus.join(".code-intel/index"));
}

/// Spawns a server, asks `name`'s definitions once, and returns the time from spawn to the
/// answer, the answer, and the server (to keep using it).
fn server_first(bin: &Path, corpus: &Path, name: &str) -> (Duration, Value, Server) {
    let t = Instant::now();
    let mut server = Server::start(bin, corpus, NO_MODEL);
    let answer = server.call("find_definitions", json!({"symbol": name}));
    (t.elapsed(), answer, server)
}

pub fn run(bin: &Path, corpus: &Path) {
    println!("\n## scale: the first find_definitions on a fresh clone (no index), median of {RUNS}");
    println!(
        "| name | definitions | source files parsed | CLI | server (spawn to answer) | rg | CLI / rg | server / rg |"
    );
    println!("|---|---|---|---|---|---|---|---|");
    let mut fast_answers = Vec::new();
    let mut cli_ratios = Vec::new();
    for name in NAMES {
        let _ = rg_defs(corpus, name); // page cache
        let rg = median_of(RUNS, || rg_defs(corpus, name));
        let mut answer = Value::Null;
        let cli = median_of(RUNS, || {
            drop_index(corpus);
            let (d, a) = cli_find(bin, corpus, name);
            answer = a;
            d
        });
        let server = median_of(RUNS, || {
            drop_index(corpus);
            let (d, _, server) = server_first(bin, corpus, name);
            drop(server);
            d
        });
        let parsed = format!(
            "{} of {}",
            answer["fast_path"]["parsed_files"].as_u64().unwrap_or(0),
            answer["fast_path"]["source_files"].as_u64().unwrap_or(0)
        );
        println!(
            "| {name} | {} | {parsed} | {:.0} ms | {:.0} ms | {:.0} ms | {:.2} | {:.2} |",
            answer["total"],
            ms(cli),
            ms(server),
            ms(rg),
            cli.as_secs_f64() / rg.as_secs_f64(),
            server.as_secs_f64() / rg.as_secs_f64()
        );
        cli_ratios.push(cli.as_secs_f64() / rg.as_secs_f64());
        fast_answers.push(answer);
    }
    println!("geometric mean CLI / rg: {:.2} (target <= 3)", super::geomean(&cli_ratios));

    println!("\n## scale: the full cold index (CLI `index --symbols-only`)");
    drop_index(corpus);
    let t = Instant::now();
    let out = Command::new(bin)
        .arg("--repo")
        .arg(corpus)
        .args(["--json", "index", "--symbols-only"])
        .stderr(Stdio::null())
        .output();
    let cold = t.elapsed();
    let stats: Value = out.ok().and_then(|o| serde_json::from_slice(&o.stdout).ok()).unwrap_or_default();
    let size = std::fs::metadata(corpus.join(".code-intel/index/symbols.idx")).map_or(0, |m| m.len());
    println!(
        "{:.2} s: {} files, {} symbols; symbols.idx {:.1} MB",
        cold.as_secs_f64(),
        stats["files"],
        stats["symbols"],
        size as f64 / 1e6
    );

    println!("\n## scale: one-shot CLI find_definitions with the index built, median of {RUNS}");
    println!("| name | CLI | same answer as the fast path |");
    println!("|---|---|---|");
    // One call first: the index was stamped just after being built, so the first lookup may
    // walk once (directories changed within a second of a walk are not trusted).
    std::thread::sleep(Duration::from_millis(1100));
    let _ = cli_find(bin, corpus, "warm");
    let mut times = Vec::new();
    for (name, fast) in NAMES.iter().zip(&fast_answers) {
        let mut answer = Value::Null;
        let d = median_of(RUNS, || {
            let (d, a) = cli_find(bin, corpus, name);
            answer = a;
            d
        });
        times.push(d);
        let strip = |v: &Value| {
            let mut v = v.clone();
            if let Some(o) = v.as_object_mut() {
                o.remove("fast_path");
            }
            v
        };
        println!("| {name} | {:.1} ms | {} |", ms(d), strip(fast) == strip(&answer));
    }
    println!("p50 {:.1} ms (target <= 50 ms)", ms(pct(&mut times, 50)));

    println!("\n## scale: a one-shot lookup after one file changed (walk, parse it, rewrite the index)");
    let target = first_rust_file(corpus);
    let original = std::fs::read(&target).unwrap();
    let mut after_edit = Vec::new();
    for i in 0..RUNS {
        let mut edited = original.clone();
        edited.extend_from_slice(format!("\npub fn bench_edit_{i}() {{}}\n").as_bytes());
        std::fs::write(&target, &edited).unwrap();
        let (d, a) = cli_find(bin, corpus, &format!("bench_edit_{i}"));
        assert_eq!(a["total"], 1, "{a}");
        after_edit.push(d);
    }
    std::fs::write(&target, &original).unwrap();
    println!("p50 {:.0} ms", ms(pct(&mut after_edit, 50)));

    println!("\n## scale: server resident memory with the index in use (model not loaded)");
    let _ = cli_find(bin, corpus, "warm");
    let mut server = Server::start(bin, corpus, NO_MODEL);
    for name in NAMES {
        server.call("find_definitions", json!({"symbol": name}));
        server.call("find_references", json!({"symbol": name}));
    }
    let status = std::fs::read_to_string(format!("/proc/{}/status", server.pid())).unwrap_or_default();
    let field = |key: &str| {
        status
            .lines()
            .find(|l| l.starts_with(key))
            .and_then(|l| l.split_whitespace().nth(1)?.parse::<f64>().ok())
            .map_or(0.0, |kb| kb / 1024.0)
    };
    println!(
        "VmRSS {:.0} MB (of which mapped index and other file pages {:.0} MB), peak {:.0} MB (target <= 100 MB)",
        field("VmRSS:"),
        field("RssFile:"),
        field("VmHWM:")
    );
}

/// A teammate's fresh clone that fetched the shared Forest, against embedding from scratch:
/// both through the CLI, on the sources of `regex-syntax` and `similar` (about 2,900 chunks).
pub fn shared_forest(bin: &Path, corpus: &Path) {
    println!("\n## scale: a fresh clone with the shared Forest, against embedding from scratch");
    let work = std::env::temp_dir().join("code-intel-bench-share");
    let _ = std::fs::remove_dir_all(&work);
    let (origin, remote, clone) = (work.join("origin"), work.join("remote.git"), work.join("clone"));
    std::fs::create_dir_all(&origin).unwrap();
    let source = super::newest_crate(corpus, "regex-syntax");
    let _ = Command::new("cp").arg("-a").arg(source.join("src")).arg(origin.join("src")).status();
    // And a second crate, for well over 2,000 chunks.
    let similar = super::newest_crate(corpus, "similar");
    let _ = Command::new("cp").arg("-a").arg(similar.join("src")).arg(origin.join("similar")).status();
    git(&origin, &["init", "-q", "-b", "main"]);
    git(&origin, &["add", "-A"]);
    git(&origin, &["commit", "-q", "-m", "sources"]);
    std::fs::create_dir_all(&remote).unwrap();
    git(&remote, &["init", "-q", "--bare"]);
    git(&origin, &["remote", "add", "origin", remote.to_str().unwrap()]);
    git(&origin, &["push", "-q", "origin", "main"]);
    let cli = |dir: &Path, args: &[&str]| -> (Duration, Value) {
        let t = Instant::now();
        let out = Command::new(bin).arg("--json").args(args).current_dir(dir).stderr(Stdio::null()).output().unwrap();
        (t.elapsed(), serde_json::from_slice(&out.stdout).unwrap_or(Value::Null))
    };
    let (scratch, index) = cli(&origin, &["index"]);
    let (push, pushed) = cli(&origin, &["forest", "push"]);
    git(&work, &["clone", "-q", "-b", "main", remote.to_str().unwrap(), clone.to_str().unwrap()]);
    // `forest fetch` stages the remote's Forest and syncs from it; `index` then finds nothing
    // left to do.
    let (fetch, fetched) = cli(&clone, &["forest", "fetch"]);
    let (sync, synced) = cli(&clone, &["index"]);
    let shared = fetch + sync;
    let ref_size: u64 = {
        let out = Command::new("git").args(["count-objects", "-v"]).current_dir(&remote).output().unwrap();
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter_map(|l| l.strip_prefix("size-pack: ").or_else(|| l.strip_prefix("size: ")))
            .filter_map(|v| v.trim().parse::<u64>().ok())
            .sum()
    };
    println!(
        "from scratch: {:.1} s ({} chunks embedded)   push: {:.1} s ({} vectors)   clone: forest fetch {:.1} s ({} chunks: {} from the shared Forest, {} embedded to spot-check them, {} refused) + index {:.1} s ({} embedded) = {:.1} s   ratio {:.3} (target <= 0.10); remote holds {} KB in all",
        scratch.as_secs_f64(),
        index["forest"]["embedded"],
        push.as_secs_f64(),
        pushed["forest"]["shared"],
        fetch.as_secs_f64(),
        fetched["chunks"],
        fetched["shared_used"],
        fetched["shared_checked"],
        fetched["shared_refused"],
        sync.as_secs_f64(),
        synced["forest"]["embedded"],
        shared.as_secs_f64(),
        shared.as_secs_f64() / scratch.as_secs_f64(),
        ref_size
    );
    let _ = std::fs::remove_dir_all(&work);
}

fn first_rust_file(corpus: &Path) -> std::path::PathBuf {
    let mut dirs: Vec<_> = std::fs::read_dir(corpus).unwrap().filter_map(Result::ok).map(|e| e.path()).collect();
    dirs.sort();
    for d in dirs {
        let lib = d.join("src/lib.rs");
        if lib.is_file() {
            return lib;
        }
    }
    panic!("no crate with src/lib.rs in {}", corpus.display());
}
