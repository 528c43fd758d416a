//! `code-intel-bench`: measures git-code-intel against its reference tools in one run.
//!
//! Corpus: a copy of the crate sources under `$CARGO_HOME/registry/src` (run `cargo fetch` first;
//! `scripts/bench.sh` does both). Reports:
//! - search_text (CLI) vs `rg` on the same patterns, median wall time of 5 runs;
//! - a cold symbol-index build vs `ctags -R`, and symbols per second;
//! - find_definitions / find_references on the warm in-process index, p50 and p95;
//! - the first lookup on a fresh clone, one-shot lookups on the mapped index, server memory
//!   ([`scale`]);
//! - one-shot symbol lookup against codanna 0.16, when its binary is at hand ([`codanna`]);
//! - the byte count of tools/list, the part the model sees and the whole;
//! - process spawn to the MCP `initialize` reply;
//! - the semantic pipeline, incremental sync and search at 100k chunks ([`semantic`]);
//! - retrieval quality of every installed model and ranking on a CodeSearchNet-style set
//!   ([`retrieval`]);
//! - peak RSS on input built to exhaust memory ([`memory`]);
//! - what a hostile remote costs `share pull` and the first search ([`hostile`]).
//! - the index that follows edits: the cold build against ctags, lookups after edits ([`overlay`]);
//! - the session report of a session of 50 tool calls against `git show` ([`report`]);
//! - the sandbox runner's cost against `bash -c` ([`sandbox`]);
//! - a witnessed run's cost against the project's own test time ([`checks`]);
//!
//! `code-intel-bench <binary> <corpus> semantic` (or `retrieval`, `git`, `memory`, `scale`, `share`, `hostile`,
//! `lookups`, `codanna`, `tools`, `cold`, `edits`, `report`, `sandbox`, `checks`) runs only that part.
#![allow(
    clippy::let_underscore_must_use,
    reason = "a benchmark's setup and teardown (scratch files, servers it stops) may fail without changing what it measures; each figure is checked where it is taken"
)]
// A benchmark reports on stdout.
#![allow(clippy::print_stdout)]

#[path = "checks.rs"]
mod checks;
#[path = "codanna.rs"]
mod codanna;
#[path = "hostile.rs"]
mod hostile;
#[path = "memory.rs"]
mod memory;
#[path = "overlay.rs"]
mod overlay;
#[path = "report.rs"]
mod report;
#[path = "retrieval.rs"]
mod retrieval;
// Shared with the tests, which use the small set the benchmark does not.
#[path = "retrieval_eval.rs"]
#[allow(dead_code)]
mod retrieval_eval;
#[path = "sandbox.rs"]
mod sandbox;
#[path = "scale.rs"]
mod scale;
#[path = "semantic.rs"]
mod semantic;
#[path = "server.rs"]
mod server;

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use code_intel_codebase::lang::Lang;
use code_intel_codebase::{syntax, walk};
use code_intel_session::tools::definitions::{FindDefinitionsParams, find_definitions};
use code_intel_session::tools::references::{FindReferencesParams, find_references};
use code_intel_session::workspace::Workspace;

const PATTERNS: &[&str] = &["fn new", "unsafe impl", r"#\[derive\(.*Debug", "TODO|FIXME", r"pub struct [A-Z]\w+Error"];
const SYMBOLS: &[&str] = &[
    "Parser",
    "HashMap",
    "from_str",
    "serialize",
    "spawn",
    "read_to_string",
    "Error",
    "Visitor",
    "Span",
    "Ident",
    "TokenStream",
    "poll_next",
    "with_capacity",
    "Builder",
    "deserialize_any",
    "as_bytes",
    "Regex",
    "Mutex",
    "Path",
    "Formatter",
];

fn main() {
    code_intel_semantic::quiet_blas_threads();
    let args: Vec<String> = std::env::args().collect();
    if args.get(3).is_some_and(|a| a == "retrieval-one") {
        return retrieval::run_one(Path::new(&args[4]), &args[5]);
    }
    let bin = PathBuf::from(args.get(1).cloned().unwrap_or_else(|| "target/release/git-code-intel".into()));
    let corpus = PathBuf::from(args.get(2).cloned().unwrap_or_else(|| "/tmp/code-intel-bench-corpus".into()));
    assert!(bin.exists(), "binary {} missing", bin.display());
    assert!(
        corpus.is_dir()
            || args.get(3).is_some_and(|a| {
                a == "memory"
                    || a == "hostile"
                    || a == "hostile-fill"
                    || a == "report"
                    || a == "sandbox"
                    || a == "checks"
            }),
        "corpus {} missing",
        corpus.display()
    );
    let out = std::env::temp_dir().join("code-intel-bench-out");
    std::fs::create_dir_all(&out).unwrap();

    println!("corpus: {}", corpus.display());
    match args.get(3).map(String::as_str) {
        Some("semantic") => return semantic::run(&corpus),
        Some("retrieval") => return retrieval::run(Path::new(&args[0])),
        Some("git") => return git_ops(&corpus),
        Some("memory") => return memory::run(&bin),
        Some("scale") => return scale::run(&bin, &corpus),
        Some("share") => return scale::shared_forest(&bin, &corpus),
        Some("hostile") => return hostile::run(&bin),
        Some("hostile-fill") => return hostile::fill(&corpus, Path::new(&args[4])),
        Some("lookups") => return warm_lookups(&corpus),
        Some("codanna") => return codanna::run(&bin, &corpus),
        Some("cold") => return overlay::cold(&bin, &corpus),
        Some("edits") => return overlay::edits(&bin, &corpus),
        Some("tools") => return tool_list_bytes(),
        Some("report") => return report::run(&bin),
        Some("sandbox") => return sandbox::run(&bin, &corpus),
        Some("checks") => return checks::run(&bin),
        _ => {}
    }
    tool_list_bytes();

    println!("\n## search_text vs rg (median of 5, output written to a file)");
    let mut ratios = Vec::new();
    for p in PATTERNS {
        let ours = median(5, || {
            run(
                Command::new(&bin).args(["--repo"]).arg(&corpus).args([
                    "--json",
                    "search-text",
                    "--max-results",
                    "100000000",
                    "--pattern",
                    p,
                ]),
                &out.join("ours.json"),
            )
        });
        let rg = median(5, || {
            run(Command::new("rg").args(["-n", "--no-heading", "-e", p]).arg(&corpus), &out.join("rg.txt"))
        });
        let ratio = ours.as_secs_f64() / rg.as_secs_f64();
        ratios.push(ratio);
        println!("{p:<28} ours {:>7.1} ms   rg {:>7.1} ms   ratio {ratio:.2}", ms(ours), ms(rg));
    }
    println!("geometric mean ratio: {:.2} (target <= 1.0)", geomean(&ratios));

    println!("\n## cold symbol index vs ctags -R");
    let _ = std::fs::remove_dir_all(corpus.join(".code-intel"));
    let t = Instant::now();
    let output = Command::new(&bin)
        .arg("--repo")
        .arg(&corpus)
        .args(["--json", "index", "--rebuild", "--symbols-only"])
        .stderr(Stdio::null())
        .output()
        .unwrap();
    let ours = t.elapsed();
    let stats: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap_or_default();
    let symbols = stats["symbols"].as_f64().unwrap_or(0.0);
    let t = Instant::now();
    let _ = Command::new("ctags").args(["-R", "-f"]).arg(out.join("tags")).arg(&corpus).stderr(Stdio::null()).status();
    let ctags = t.elapsed();
    let tags = std::fs::read_to_string(out.join("tags"))
        .map(|s| s.lines().filter(|l| !l.starts_with("!_")).count())
        .unwrap_or(0);
    println!(
        "ours {:.2} s ({} files, {symbols} symbols, {:.0} symbols/s)   ctags {:.2} s ({tags} tags)   ratio {:.2} (target <= 1.0, >= 100k symbols/s)",
        ours.as_secs_f64(),
        stats["files"],
        symbols / ours.as_secs_f64(),
        ctags.as_secs_f64(),
        ours.as_secs_f64() / ctags.as_secs_f64()
    );
    let floor = parse_only(&corpus);
    println!(
        "floor: tree-sitter parsing alone of the same files, same threads: {:.2} s = {:.2}x ctags",
        floor.as_secs_f64(),
        floor.as_secs_f64() / ctags.as_secs_f64()
    );

    warm_lookups(&corpus);

    overlay::cold(&bin, &corpus);
    overlay::edits(&bin, &corpus);
    scale::run(&bin, &corpus);
    codanna::run(&bin, &corpus);

    git_ops(&corpus);

    println!("\n## spawn to initialize reply (median of 20)");
    let small = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut spawns: Vec<Duration> = (0..20).map(|_| spawn_to_initialize(&bin, small)).collect();
    println!("p50 {:.1} ms (target < 30 ms)", ms(pct(&mut spawns, 50)));

    semantic::run(&corpus);
    retrieval::run(Path::new(&args[0]));
    scale::shared_forest(&bin, &corpus);
    hostile::run(&bin);
    sandbox::run(&bin, &corpus);
    checks::run(&bin);

    memory::run(&bin);
}

/// What tools/list costs an agent: the model-visible part (names, descriptions, input schemas)
/// and the whole list (with annotations and output schemas), as compact JSON.
fn tool_list_bytes() {
    println!("\n## tools/list size");
    let tools = git_code_intel::mcp::served_tools();
    let visible = git_code_intel::mcp::model_visible_bytes();
    let whole = serde_json::to_vec(&tools).map_or(0, |v| v.len());
    println!(
        "{} tools: model-visible {:.1} KB (names, descriptions, input schemas; target <= 14 KB), whole list {:.1} KB",
        tools.len(),
        visible as f64 / 1024.0,
        whole as f64 / 1024.0
    );
}

/// find_definitions / find_references on the warm in-process index (the server's case).
fn warm_lookups(corpus: &Path) {
    println!("\n## warm lookups (in-process, index loaded and fresh)");
    let ws = Workspace::open(corpus, true).unwrap();
    ws.index_now(false);
    let _ = find_definitions(&ws, FindDefinitionsParams { symbol: Some("warmup".into()), ..Default::default() });
    time_lookups(&ws, "one base");
    // The same with an overlay: 100 files edited (each gains a definition), refreshed into it.
    let files = overlay::rust_files(corpus, 100);
    let originals: Vec<Vec<u8>> = files.iter().map(|f| std::fs::read(f).unwrap()).collect();
    for (f, original) in files.iter().zip(&originals) {
        let mut edited = original.clone();
        edited.extend_from_slice(b"\npub fn bench_overlay_edit() {}\n");
        std::fs::write(f, edited).unwrap();
    }
    // The watcher marks the index dirty; wait for its event, then refresh into the overlay.
    std::thread::sleep(Duration::from_millis(300));
    let found = find_definitions(
        &ws,
        FindDefinitionsParams { symbol: Some("bench_overlay_edit".into()), ..Default::default() },
    );
    println!("(overlay: {} definitions of the added name)", found.map_or(0, |f| f.total));
    time_lookups(&ws, "base + overlay of 100 files");
    for (f, original) in files.iter().zip(&originals) {
        std::fs::write(f, original).unwrap();
    }
}

/// find_definitions and find_references (the default page, and a page of 500) of every name of
/// `SYMBOLS`, five times; their p50 and p95.
fn time_lookups(ws: &Workspace, label: &str) {
    let (mut defs, mut refs, mut refs_500) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..5 {
        for s in SYMBOLS {
            let t = Instant::now();
            let _ = find_definitions(ws, FindDefinitionsParams { symbol: Some((*s).into()), ..Default::default() });
            defs.push(t.elapsed());
            let t = Instant::now();
            let _ = find_references(ws, FindReferencesParams { symbol: Some((*s).into()), ..Default::default() });
            refs.push(t.elapsed());
            let t = Instant::now();
            let p = FindReferencesParams { symbol: Some((*s).into()), limit: Some(500), ..Default::default() };
            let _ = find_references(ws, p);
            refs_500.push(t.elapsed());
        }
    }
    println!(
        "{label}: find_definitions p50 {:.2} ms p95 {:.2} ms; find_references p50 {:.2} ms p95 {:.2} ms (page of 50), p50 {:.2} ms p95 {:.2} ms (page of 500) (target p50 < 5 ms)",
        ms(pct(&mut defs, 50)),
        ms(pct(&mut defs, 95)),
        ms(pct(&mut refs, 50)),
        ms(pct(&mut refs, 95)),
        ms(pct(&mut refs_500, 50)),
        ms(pct(&mut refs_500, 95))
    );
}

/// review_changes, the PRE_COMMIT commit and the MERGE on a 20k-file repository, against the git
/// CLI doing the same on an identical clone.
fn git_ops(corpus: &Path) {
    use code_intel_session::branches;
    println!("\n## task branch operations vs git (20,000 files)");
    let work = std::env::temp_dir().join("code-intel-bench-git");
    let _ = std::fs::remove_dir_all(&work);
    std::fs::create_dir_all(&work).unwrap();
    let a = work.join("ours");
    let b = work.join("git");
    std::fs::create_dir_all(&a).unwrap();
    let mut sources: Vec<PathBuf> = Vec::new();
    let mut stack = vec![corpus.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for e in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
            let p = e.path();
            if p.file_name().is_some_and(|n| n == ".code-intel" || n == ".git") {
                continue;
            }
            match e.file_type() {
                Ok(t) if t.is_dir() => stack.push(p),
                Ok(t) if t.is_file() && e.metadata().is_ok_and(|m| m.len() < 64 * 1024) => sources.push(p),
                _ => {}
            }
        }
    }
    sources.sort();
    let mut written = 0;
    'fill: for copy in 0.. {
        for src in &sources {
            if written == 20_000 {
                break 'fill;
            }
            let rel = src.strip_prefix(corpus).unwrap();
            let dest = a.join(format!("copy{copy}")).join(rel);
            std::fs::create_dir_all(dest.parent().unwrap()).unwrap();
            std::fs::copy(src, &dest).unwrap();
            written += 1;
        }
    }
    git(&a, &["init", "-q", "-b", "main"]);
    git(&a, &["add", "-A"]);
    git(&a, &["commit", "-q", "-m", "initial"]);
    git(&work, &["clone", "-q", a.to_str().unwrap(), "git"]);
    // The same change on both: 200 files edited, 50 added, 20 deleted.
    let change = |root: &Path| {
        let mut files: Vec<PathBuf> = Vec::new();
        let mut stack = vec![root.join("copy0")];
        while let Some(dir) = stack.pop() {
            for e in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
                if e.file_type().is_ok_and(|t| t.is_dir()) {
                    stack.push(e.path());
                } else {
                    files.push(e.path());
                }
            }
        }
        files.sort();
        for f in files.iter().step_by(37).take(200) {
            let mut text = std::fs::read(f).unwrap();
            text.extend_from_slice(b"\n// changed by the benchmark\n");
            std::fs::write(f, text).unwrap();
        }
        for i in 0..50 {
            std::fs::write(root.join(format!("copy0/new_{i}.rs")), format!("pub fn new_{i}() -> u32 {{ {i} }}\n"))
                .unwrap();
        }
        for f in files.iter().skip(5).step_by(401).take(20) {
            std::fs::remove_file(f).unwrap();
        }
    };
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;

    let task = branches::create_task_branch(&a, "bench").unwrap();
    change(&a);
    let t = Instant::now();
    let review = branches::review::review(
        &a,
        task.base_commit,
        "main",
        &task.name,
        &Default::default(),
        &Default::default(),
        1 << 20,
    )
    .unwrap();
    let ours_review = t.elapsed();
    let t = Instant::now();
    branches::commit::commit_task(&a, &task.name, task.base_commit, "bench change", &[], &Default::default()).unwrap();
    let ours_commit = t.elapsed();
    let t = Instant::now();
    branches::merge::merge_task(&a, &task.name, "main", "{}").unwrap();
    let ours_merge = t.elapsed();

    git(&b, &["checkout", "-q", "-b", "task"]);
    change(&b);
    let t = Instant::now();
    git(&b, &["status", "--porcelain", "-uall"]);
    git(&b, &["diff", "main"]);
    let git_review = t.elapsed();
    let t = Instant::now();
    git(&b, &["add", "-A"]);
    git(&b, &["commit", "-q", "-m", "bench change"]);
    let git_commit = t.elapsed();
    let t = Instant::now();
    git(&b, &["checkout", "-q", "main"]);
    git(&b, &["merge", "-q", "--ff-only", "task"]);
    git(&b, &["branch", "-q", "-d", "task"]);
    let git_merge = t.elapsed();
    println!("({} changed files reviewed)", review.files.len());
    for (what, ours, theirs, reference) in [
        ("review_changes", ours_review, git_review, "git status -uall + git diff main"),
        ("commit", ours_commit, git_commit, "git add -A + git commit"),
        ("merge (fast-forward)", ours_merge, git_merge, "git checkout main + merge --ff-only + branch -d"),
    ] {
        println!(
            "{what:<22} ours {:>8.1} ms   git {:>8.1} ms   ratio {:.2} (target <= 1.5; git: {reference})",
            ms(ours),
            ms(theirs),
            ours.as_secs_f64() / theirs.as_secs_f64()
        );
    }
    let _ = std::fs::remove_dir_all(&work);
}

/// Parses every indexable file of the corpus and throws the trees away: the part of the index
/// build no extraction work can remove.
pub(crate) fn parse_only(corpus: &Path) -> Duration {
    use rayon::prelude::*;
    let ws = Workspace::open(corpus, false).unwrap();
    let walked = walk::walk(&ws.repo, &ws.config, ws.repo.root(), &walk::WalkOptions::default()).unwrap();
    let files: Vec<_> = walked.files.iter().filter_map(|f| Lang::detect(f.rel.as_ref()).map(|l| (f, l))).collect();
    let t = Instant::now();
    files.par_iter().for_each(|(f, lang)| {
        if let Ok(bytes) = std::fs::read(&f.abs) {
            drop(syntax::parse(*lang, &bytes));
        }
    });
    t.elapsed()
}

/// Like [`parse_only`], with the whole extraction (definitions, imports, identifier uses), each
/// file's result dropped at once: what the extraction costs above the parse, without the
/// index's memory.
pub(crate) fn extract_only(corpus: &Path) -> Duration {
    use rayon::prelude::*;
    let ws = Workspace::open(corpus, false).unwrap();
    let walked = walk::walk(&ws.repo, &ws.config, ws.repo.root(), &walk::WalkOptions::default()).unwrap();
    let files: Vec<_> = walked.files.iter().filter_map(|f| Lang::detect(f.rel.as_ref()).map(|l| (f, l))).collect();
    let t = Instant::now();
    files.par_iter().for_each(|(f, lang)| {
        if let Ok(bytes) = std::fs::read(&f.abs) {
            drop(syntax::extract(*lang, &bytes));
        }
    });
    t.elapsed()
}

fn run(cmd: &mut Command, out: &Path) -> Duration {
    let file = std::fs::File::create(out).unwrap();
    let t = Instant::now();
    let _ = cmd.stdout(file).stderr(Stdio::null()).status();
    t.elapsed()
}

fn spawn_to_initialize(bin: &Path, repo: &Path) -> Duration {
    let t = Instant::now();
    let mut child = Command::new(bin)
        .arg("serve")
        .current_dir(repo)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    writeln!(stdin, r#"{{"jsonrpc":"2.0","id":1,"method":"initialize","params":{{"protocolVersion":"2025-06-18","capabilities":{{}},"clientInfo":{{"name":"bench","version":"0"}}}}}}"#).unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
    let elapsed = t.elapsed();
    drop(stdin);
    let _ = child.wait();
    elapsed
}

/// Runs git quietly in `dir` (as a bench identity) and asserts it succeeded.
fn git(dir: &Path, args: &[&str]) {
    let ok = Command::new("git")
        .args(["-c", "user.name=bench", "-c", "user.email=bench@example.com"])
        .args(args)
        .current_dir(dir)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    assert!(ok, "git {args:?} in {}", dir.display());
}

/// The newest version of crate `name` in the corpus (`<name>-<version>/`).
fn newest_crate(corpus: &Path, name: &str) -> PathBuf {
    std::fs::read_dir(corpus)
        .unwrap()
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.file_name().and_then(|n| n.to_str()).is_some_and(|n| n.starts_with(&format!("{name}-"))))
        .max()
        .unwrap_or_else(|| panic!("no {name}-* crate in {}", corpus.display()))
}

fn median(n: usize, mut f: impl FnMut() -> Duration) -> Duration {
    f(); // warm the page cache
    let mut v: Vec<Duration> = (0..n).map(|_| f()).collect();
    pct(&mut v, 50)
}

fn pct(v: &mut [Duration], p: usize) -> Duration {
    v.sort();
    v[((v.len() - 1) * p) / 100]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn geomean(v: &[f64]) -> f64 {
    (v.iter().map(|x| x.ln()).sum::<f64>() / v.len() as f64).exp()
}
