//! The semantic benchmarks (issue 5), in-process with the real model:
//! - the whole indexing pipeline (walk, parse, chunk, embed, faiss, save) against bare fastembed
//!   embedding the same chunk texts, in one run: throughput ratio (target >= 0.9);
//! - peak RSS of the process after indexing;
//! - incremental sync of one modified file with the model warm (target < 300 ms);
//! - semantic search p50 at 100k chunks (target < 20 ms).

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use code_intel_codebase::config::Config;
use code_intel_codebase::lang::Lang;
use code_intel_codebase::repo::Repo;
use code_intel_codebase::{syntax, walk};
use code_intel_semantic::chunk_file;
use code_intel_semantic::embed::{DEFAULT_MODEL, FP32_MODEL, named_model_dir};
use code_intel_semantic::forest::{Forest, StoredChunk, embedding_text, key_of};
use code_intel_semantic::service::Semantic;

use super::{ms, pct};

const QUERIES: &[&str] = &[
    "compute the ratio of matching elements",
    "parse a glob pattern into a regular expression",
    "read a file into a byte buffer",
    "serialize a struct to json",
    "spawn a thread pool and join the workers",
    "lower_bound",
    "unified diff hunk header",
    "retry the request after a timeout",
    "hash map with a custom hasher",
    "convert a path to a string lossily",
];

/// Copies `src` of the crate `name` (the newest version) from the corpus into a fresh git
/// repository under the temporary directory.
fn crate_repo(corpus: &Path, name: &str) -> PathBuf {
    let found = super::newest_crate(corpus, name);
    let root = std::env::temp_dir().join(format!("code-intel-bench-{name}"));
    let _ = std::fs::remove_dir_all(&root);
    std::fs::create_dir_all(&root).unwrap();
    let copied = std::process::Command::new("cp").arg("-a").arg(found.join("src")).arg(root.join("src")).status();
    assert!(copied.is_ok_and(|s| s.success()), "copying {}", found.display());
    let _ = std::process::Command::new("git").args(["init", "-q"]).current_dir(&root).status();
    root
}

/// This process's peak resident memory (VmHWM), in MB.
pub fn peak_rss_mb() -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find(|l| l.starts_with("VmHWM:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|kb| kb.parse::<f64>().ok())
        .map_or(0.0, |kb| kb / 1024.0)
}

pub fn run(corpus: &Path) {
    println!("\n## semantic: indexing pipeline vs bare fastembed (crate `similar`, real model)");
    let root = crate_repo(corpus, "similar");
    let config = Config::default();
    let repo = Repo::at(&root).unwrap();
    let semantic = Semantic::new(&root, &config);
    let loaded = semantic.loaded().expect("model (run scripts/model.sh)");
    let rss_before = peak_rss_mb();
    let t = Instant::now();
    let report = semantic.sync_now(&repo, &config, false, 0, &|_, _| {}).unwrap();
    let pipeline = t.elapsed();
    let rss_after = peak_rss_mb();
    let texts: Vec<String> = {
        let forest = loaded.forest.read().unwrap();
        let mut files: Vec<&String> = forest.files.keys().collect();
        files.sort();
        let mut out = Vec::new();
        for rel in files {
            let source = std::fs::read_to_string(root.join(rel)).unwrap_or_default();
            let lang = Lang::detect(Path::new(rel));
            let syn = lang.map(|l| (l, syntax::extract(l, source.as_bytes())));
            for c in chunk_file(rel, &source, syn.as_ref().map(|(l, s)| (*l, s)), 512) {
                out.push(embedding_text(&c));
            }
        }
        out
    };
    let t = Instant::now();
    for batch in texts.chunks(256) {
        loaded.embedder.embed(batch).unwrap();
    }
    let bare = t.elapsed();
    // The same texts sorted by length, as the pipeline batches them: what is left of the ratio
    // is the pipeline's own cost (walk, parse, chunk, cache, faiss, save).
    let mut sorted = texts.clone();
    sorted.sort_by_key(String::len);
    let t = Instant::now();
    for batch in sorted.chunks(128) {
        loaded.embedder.embed(batch).unwrap();
    }
    let bare_sorted = t.elapsed();
    let n = report.chunks as f64;
    println!(
        "pipeline {:.1} s ({} chunks, {} embedded, {:.1} chunks/s)   bare fastembed {:.1} s ({} texts, {:.1} chunks/s)   throughput ratio {:.2} (target >= 0.9)",
        pipeline.as_secs_f64(),
        report.chunks,
        report.embedded,
        n / pipeline.as_secs_f64(),
        bare.as_secs_f64(),
        texts.len(),
        texts.len() as f64 / bare.as_secs_f64(),
        (n / pipeline.as_secs_f64()) / (texts.len() as f64 / bare.as_secs_f64())
    );
    println!(
        "bare fastembed on the same texts sorted by length: {:.1} s; pipeline throughput ratio to it {:.2}",
        bare_sorted.as_secs_f64(),
        (n / pipeline.as_secs_f64()) / (sorted.len() as f64 / bare_sorted.as_secs_f64())
    );
    println!(
        "peak RSS: {rss_before:.0} MB with the model loaded, {rss_after:.0} MB after indexing (embedding in slices of 128 chunks), {:.0} MB after bare fastembed too",
        peak_rss_mb()
    );

    println!("\n## semantic: int8 (the default) against fp32, the same pipeline on the same crate");
    println!("| model | chunks/s | model.onnx |");
    println!("|---|---|---|");
    for model in [DEFAULT_MODEL, FP32_MODEL] {
        let root = crate_repo(corpus, "similar");
        let config = Config { embedding_model: model.into(), ..Config::default() };
        let repo = Repo::at(&root).unwrap();
        let semantic = Semantic::new(&root, &config);
        semantic.loaded().expect("model (run scripts/model.sh)");
        let t = Instant::now();
        let report = semantic.sync_now(&repo, &config, false, 0, &|_, _| {}).unwrap();
        let size = named_model_dir(model)
            .and_then(|d| std::fs::metadata(d.join("model.onnx")).ok())
            .map_or(0.0, |m| m.len() as f64 / 1e6);
        println!("| {model} | {:.1} | {size:.1} MB |", report.chunks as f64 / t.elapsed().as_secs_f64());
    }
    println!(
        "(recall@5 of both: `cargo test --release --test retrieval_quality -- --nocapture`, which scripts/bench.sh runs)"
    );

    println!("\n## semantic: incremental sync of one modified file, model warm");
    let target = root.join("src/udiff.rs");
    let original = std::fs::read_to_string(&target).unwrap();
    let mut times = Vec::new();
    for i in 0..7 {
        std::fs::write(
            &target,
            format!("{original}\n/// Bench edit {i}.\npub fn bench_edit_{i}() -> usize {{ {i} }}\n"),
        )
        .unwrap();
        let t = Instant::now();
        let r = semantic.sync_now(&repo, &config, false, 0, &|_, _| {}).unwrap();
        times.push(t.elapsed());
        assert_eq!(r.files_changed, 1);
    }
    println!(
        "p50 {:.0} ms, max {:.0} ms over 7 edits of src/udiff.rs ({} chunks in the Forest) (target < 300 ms)",
        ms(pct(&mut times.clone(), 50)),
        ms(*times.iter().max().unwrap()),
        report.chunks
    );

    search_at_scale(corpus, &semantic);
}

/// A Forest of 100,000 real chunks from the corpus. Embedding 100k chunks takes most of an hour
/// on 2 cores, so the vectors are the model's real vectors of 2,000 of them, each reused for
/// the others with a little noise: the flat scan's cost does not depend on the values.
fn search_at_scale(corpus: &Path, semantic: &Semantic) {
    const TARGET: usize = 100_000;
    const REAL: usize = 2_000;
    println!("\n## semantic: search at {TARGET} chunks (p50 of {} queries x 5)", QUERIES.len());
    let loaded = semantic.loaded().unwrap();
    let dim = loaded.embedder.dimension;
    let config = Config::default();
    let ws_repo = Repo::at(corpus).unwrap();
    let walked = walk::walk(&ws_repo, &config, corpus, &walk::WalkOptions::default()).unwrap();
    let mut files: Vec<(String, Vec<StoredChunk>)> = Vec::new();
    let mut total = 0;
    for f in walked.files.iter().filter(|f| f.rel.ends_with(".rs")) {
        if total >= TARGET {
            break;
        }
        let Ok(source) = std::fs::read_to_string(&f.abs) else { continue };
        let syn = syntax::extract(Lang::Rust, source.as_bytes());
        let chunks: Vec<StoredChunk> = chunk_file(&f.rel, &source, Some((Lang::Rust, &syn)), 512)
            .into_iter()
            .map(|chunk| StoredChunk { key: key_of(&chunk), chunk, shared: None })
            .collect();
        total += chunks.len();
        files.push((f.rel.clone(), chunks));
    }
    let sample: Vec<String> =
        files.iter().flat_map(|(_, c)| c.iter()).take(REAL).map(|c| embedding_text(&c.chunk)).collect();
    let t = Instant::now();
    let real = loaded.embedder.embed(&sample).unwrap();
    println!("embedded {REAL} real chunks in {:.0} s", t.elapsed().as_secs_f64());
    let mut forest = Forest::new(loaded.fingerprint, dim as u32).unwrap();
    let mut seed = 0x9e37_79b9_7f4a_7c15_u64;
    let mut next = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        (seed >> 40) as f32 / (1u64 << 24) as f32 - 0.5
    };
    let mut i = 0;
    for (rel, chunks) in files {
        let mut flat = Vec::with_capacity(chunks.len() * dim);
        for _ in &chunks {
            let base = &real[i % real.len()];
            let mut v: Vec<f32> = base.iter().map(|x| x + 0.02 * next()).collect();
            let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
            v.iter_mut().for_each(|x| *x /= norm);
            flat.extend(v);
            i += 1;
        }
        forest.put_file(&rel, (0, 0, [0; 32]), chunks, &flat).unwrap();
    }
    println!("forest: {} chunks, {} files", forest.chunk_count(), forest.files.len());
    let mut whole = Vec::new();
    let mut dense = Vec::new();
    let mut lexical = Vec::new();
    for _ in 0..5 {
        for q in QUERIES {
            let t = Instant::now();
            let v = semantic.embed_one(q).unwrap();
            let _ = forest.search(&v, q, 10, code_intel_semantic::forest::DEFAULT_FUSION).unwrap();
            whole.push(t.elapsed());
            let t = Instant::now();
            let _ = forest.search_dense(&v, 50).unwrap();
            dense.push(t.elapsed());
            let t = Instant::now();
            let _ = forest.search_lexical(q, 50);
            lexical.push(t.elapsed());
        }
    }
    let p = |v: &mut Vec<Duration>| (ms(pct(v, 50)), ms(pct(v, 95)));
    let (w50, w95) = p(&mut whole);
    let (d50, _) = p(&mut dense);
    let (l50, _) = p(&mut lexical);
    println!(
        "semantic search (embed query + faiss + BM25 + fusion) p50 {w50:.1} ms p95 {w95:.1} ms (target p50 < 20 ms); faiss alone p50 {d50:.1} ms, BM25 alone p50 {l50:.1} ms"
    );
}
