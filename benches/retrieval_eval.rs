//! The retrieval set and its measures, shared by the retrieval benchmark (benches/retrieval.rs)
//! and its regression floor (tests/it/retrieval_quality.rs): a CodeSearchNet-style query set
//! built from CPython's standard library by `benches/retrieval_corpus.py` (the query is the
//! first sentence of a function's docstring; the indexed copy has no function docstrings).

use std::path::Path;

use code_intel_semantic::forest::ForestHit;
use serde::Deserialize;

/// One query and the function that answers it (lines in the stripped copy, 1-based).
#[derive(Debug, Clone, Deserialize)]
pub struct Query {
    pub query: String,
    pub file: String,
    /// `name` or `Class.name`.
    pub name: String,
    pub start_line: u32,
    pub end_line: u32,
}

/// The modules of the benchmark's set (paths relative to the standard library).
pub const BENCH_MODULES: &[&str] = &[
    "json",
    "http/server.py",
    "http/client.py",
    "http/cookiejar.py",
    "email",
    "argparse.py",
    "calendar.py",
    "configparser.py",
    "csv.py",
    "difflib.py",
    "ftplib.py",
    "gettext.py",
    "gzip.py",
    "inspect.py",
    "ipaddress.py",
    "logging",
    "mailbox.py",
    "pathlib.py",
    "pickle.py",
    "shutil.py",
    "smtplib.py",
    "statistics.py",
    "textwrap.py",
    "threading.py",
    "tarfile.py",
    "zipfile.py",
    "urllib",
    "fractions.py",
    "random.py",
    "subprocess.py",
    "tempfile.py",
    "tokenize.py",
    "string.py",
    "imaplib.py",
];

/// The modules of the small set the tests keep as a floor.
pub const SMALL_MODULES: &[&str] =
    &["json", "http/server.py", "difflib.py", "textwrap.py", "csv.py", "gzip.py", "calendar.py", "shutil.py"];

/// Writes the stripped copy of `modules` under `dir/src` and returns `count` queries drawn with
/// `seed` (python3 with its standard library must be on PATH).
pub fn build_set(dir: &Path, seed: u32, count: usize, modules: &[&str]) -> Result<Vec<Query>, String> {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("benches/retrieval_corpus.py");
    let queries = dir.join("queries.json");
    let out = std::process::Command::new("python3")
        .arg(&script)
        .arg(dir.join("src"))
        .arg(&queries)
        .arg(seed.to_string())
        .arg(count.to_string())
        .args(modules)
        .output()
        .map_err(|e| format!("running python3 {}: {e}", script.display()))?;
    if !out.status.success() {
        return Err(format!("{} failed: {}", script.display(), String::from_utf8_lossy(&out.stderr)));
    }
    eprint!("{}", String::from_utf8_lossy(&out.stderr));
    let text = std::fs::read_to_string(&queries).map_err(|e| format!("{}: {e}", queries.display()))?;
    serde_json::from_str(&text).map_err(|e| format!("{}: {e}", queries.display()))
}

/// The version of the `python3` on PATH (`3.11.7`): the query set depends on its standard
/// library's sources.
pub fn python_version() -> String {
    std::process::Command::new("python3")
        .args(["-c", "import platform; print(platform.python_version())"])
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
        .unwrap_or_default()
}

/// Whether `hit` is (a piece of) the function `q` names: same file, overlapping lines, same
/// last name segment.
pub fn answers(file: &str, start: u32, end: u32, symbol: &str, q: &Query) -> bool {
    let last = |s: &str| s.rsplit(['.', ':']).next().unwrap_or("").to_owned();
    file == format!("src/{}", q.file) && start <= q.end_line && end >= q.start_line && last(symbol) == last(&q.name)
}

/// The 1-based rank of the first hit that answers `q`, within the first `depth`.
pub fn rank_of(hits: &[ForestHit], q: &Query, depth: usize) -> Option<usize> {
    hits.iter().take(depth).position(|h| answers(&h.file, h.start_line, h.end_line, &h.symbol, q)).map(|p| p + 1)
}

/// recall@1, @5, @10 and MRR@10 of a ranking's ranks (None: not in the first 10).
#[derive(Debug, Clone, Copy, Default, serde::Serialize, Deserialize)]
pub struct Measures {
    pub r1: f64,
    pub r5: f64,
    pub r10: f64,
    pub mrr10: f64,
}

pub fn measures(ranks: &[Option<usize>]) -> Measures {
    let n = ranks.len().max(1) as f64;
    let within = |k: usize| ranks.iter().filter(|r| r.is_some_and(|r| r <= k)).count() as f64 / n;
    let mrr = ranks.iter().map(|r| r.filter(|&r| r <= 10).map_or(0.0, |r| 1.0 / r as f64)).sum::<f64>() / n;
    Measures { r1: within(1), r5: within(5), r10: within(10), mrr10: mrr }
}
