//! `search_text`: ripgrep's engine in-process (grep-searcher + grep-regex over the shared walk).

use code_intel_workflow::contract::catalogue as msg;
use std::collections::BTreeMap;
use std::sync::Mutex;

use grep_matcher::Matcher;
use grep_regex::{RegexMatcher, RegexMatcherBuilder};
use grep_searcher::{BinaryDetection, Searcher, SearcherBuilder, Sink, SinkContext, SinkMatch};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::page::{MAX_RESPONSE_BYTES, take_page};
use super::{SkippedFiles, ToolResult, Workspace};
use code_intel_codebase::walk::{self, WalkOptions, WalkedFile};

pub const MAX_PATTERNS: usize = 5;
pub const DEFAULT_MAX_RESULTS: usize = 100;
const MAX_CONTEXT_LINES: u32 = 20;
/// Longer matched or context lines are cut (minified code has megabyte lines).
const MAX_LINE_CHARS: usize = 400;

/// One pattern, or several searched in the same pass.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum Patterns {
    One(String),
    Many(Vec<String>),
}

impl Patterns {
    pub fn into_vec(self) -> Vec<String> {
        match self {
            Patterns::One(p) => vec![p],
            Patterns::Many(v) => v,
        }
    }
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema, clap::Args)]
pub struct SearchTextParams {
    /// A regular expression (ripgrep syntax), or a list of at most 5 searched in parallel.
    #[arg(skip)]
    pub pattern: Option<Patterns>,
    /// A file or directory to search (default: everything).
    #[arg(long)]
    pub path: Option<String>,
    /// A ripgrep file type: rust, py, js, ts, go, java, md, …
    #[arg(long)]
    pub file_type: Option<String>,
    /// Match case exactly (default true).
    #[arg(long, num_args = 0..=1, default_missing_value = "true")]
    pub case_sensitive: Option<bool>,
    /// Treat the patterns as literal text, not regular expressions.
    #[arg(long, num_args = 0..=1, default_missing_value = "true")]
    pub fixed_strings: Option<bool>,
    /// Lines of context to return before and after each match.
    #[arg(long)]
    pub context_lines: Option<u32>,
    /// The most matches to return in all (default 100).
    #[arg(long)]
    pub max_results: Option<usize>,
    /// Skip this many matches (from a previous `next_offset`).
    #[arg(long)]
    pub offset: Option<usize>,
    /// Also search hidden files (`.github/`, `.env`; never `.git`).
    #[arg(long, num_args = 0..=1, default_missing_value = "true")]
    pub hidden: Option<bool>,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct ContextLine {
    pub line: u64,
    pub text: String,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct TextMatch {
    pub pattern: String,
    pub file: String,
    pub line: u64,
    /// 1-based byte column of the first match on the line.
    pub column: u64,
    pub text: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub before: Vec<ContextLine>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub after: Vec<ContextLine>,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct SearchTextOutput {
    pub patterns: Vec<String>,
    /// Ordered by file, line, then pattern.
    pub matches: Vec<TextMatch>,
    pub returned: usize,
    pub files_searched: usize,
    /// More matches exist past this page; continue with `offset: next_offset`.
    pub has_more: bool,
    pub next_offset: Option<usize>,
    pub truncated: bool,
    pub truncation_warning: Option<String>,
    pub skipped: SkippedFiles,
    /// Hidden entries directly under the searched directory that were not searched (pass
    /// `hidden: true` to search them); absent when there are none or they were searched.
    #[serde(skip_serializing_if = "Vec::is_empty", default)]
    pub hidden_not_searched: Vec<String>,
}

pub fn search_text(ws: &Workspace, params: SearchTextParams) -> ToolResult<SearchTextOutput> {
    let patterns: Vec<String> = params.pattern.clone().map(Patterns::into_vec).unwrap_or_default();
    let patterns: Vec<String> = patterns.into_iter().filter(|p| !p.is_empty()).collect();
    if patterns.is_empty() {
        return Err(ws.tool_error(&msg::NO_PATTERN, &[]).into());
    }
    if patterns.len() > MAX_PATTERNS {
        let (max, count) = (MAX_PATTERNS.to_string(), patterns.len().to_string());
        return Err(ws.tool_error(&msg::TOO_MANY_PATTERNS, &[("max", &max), ("count", &count)]).into());
    }
    let case_sensitive = params.case_sensitive.unwrap_or(true);
    let fixed = params.fixed_strings.unwrap_or(false);
    let matchers = patterns
        .iter()
        .map(|p| {
            RegexMatcherBuilder::new()
                .case_insensitive(!case_sensitive)
                .fixed_strings(fixed)
                .line_terminator(Some(b'\n'))
                .build(p)
                .map_err(|e| {
                    let msg = e.to_string();
                    ws.tool_error(&msg::INVALID_REGEX, &[("pattern", p), ("error", msg.trim())]).into()
                })
        })
        .collect::<ToolResult<Vec<RegexMatcher>>>()?;

    let start_rel = ws.scope_prefix(params.path.as_deref())?;
    let start = ws.repo.root().join(&start_rel);
    let hidden = params.hidden.unwrap_or(false);
    let context = params.context_lines.unwrap_or(0).min(MAX_CONTEXT_LINES) as usize;
    let offset = params.offset.unwrap_or(0);
    let max_results = params.max_results.unwrap_or(DEFAULT_MAX_RESULTS).max(1);
    let wanted = offset.saturating_add(max_results).saturating_add(1);

    // Files are searched on the walker's threads as they are found; the collector keeps the
    // first `wanted` matches in path order, so pages are stable whatever the thread timing.
    let collector = Mutex::new(Collector::new(wanted));
    let walked = walk::walk_each(
        &ws.repo,
        &ws.config,
        &start,
        &WalkOptions { file_type: params.file_type.as_deref(), hidden, ..WalkOptions::default() },
        |f| {
            let result = search_file(&f, &patterns, &matchers, context);
            collector.lock().unwrap_or_else(|p| p.into_inner()).add(result);
        },
    )
    .map_err(|e| ws.invalid_argument("file_type", &e.to_string()))?;
    let Collector { by_file, binary, files_searched, .. } = collector.into_inner().unwrap_or_else(|p| p.into_inner());
    let mut binary = binary;
    binary.sort();
    let found: Vec<TextMatch> = by_file.into_values().flatten().collect();

    let total_seen = found.len();
    let page = take_page(found.into_iter().skip(offset), offset, max_results, MAX_RESPONSE_BYTES);
    let has_more = page.next_offset.is_some() || total_seen > offset + page.items.len();
    let next_offset = has_more.then_some(offset + page.items.len());
    Ok(SearchTextOutput {
        patterns,
        returned: page.items.len(),
        matches: page.items,
        files_searched,
        has_more,
        next_offset,
        truncated: page.truncated,
        truncation_warning: page.truncated.then(|| ws.truncation_warning()),
        skipped: SkippedFiles::new(walked.too_large, binary, ws.config.max_file_size),
        hidden_not_searched: super::hidden_not_searched(ws, &start, hidden),
    })
}

/// The first `wanted` matches in path order, from files arriving in any order.
struct Collector {
    wanted: usize,
    by_file: BTreeMap<String, Vec<TextMatch>>,
    kept: usize,
    binary: Vec<String>,
    files_searched: usize,
}

impl Collector {
    fn new(wanted: usize) -> Self {
        Collector { wanted, by_file: BTreeMap::new(), kept: 0, binary: Vec::new(), files_searched: 0 }
    }

    fn add(&mut self, result: FileResult) {
        self.files_searched += 1;
        if result.binary {
            self.binary.push(result.rel);
            return;
        }
        if result.matches.is_empty() {
            return;
        }
        // Once enough matches are held, a file sorting after all of them cannot make the page.
        if self.kept >= self.wanted && self.by_file.last_key_value().is_some_and(|(last, _)| result.rel > *last) {
            return;
        }
        self.kept += result.matches.len();
        self.by_file.insert(result.rel, result.matches);
        while let Some((_, last)) = self.by_file.last_key_value() {
            if self.kept - last.len() < self.wanted {
                break;
            }
            self.kept -= last.len();
            self.by_file.pop_last();
        }
    }
}

struct FileResult {
    rel: String,
    binary: bool,
    matches: Vec<TextMatch>,
}

fn search_file(file: &WalkedFile, patterns: &[String], matchers: &[RegexMatcher], context: usize) -> FileResult {
    let mut result = FileResult { rel: file.rel.clone(), binary: false, matches: Vec::new() };
    let Ok(bytes) = std::fs::read(&file.abs) else { return result };
    let mut searcher = SearcherBuilder::new()
        .binary_detection(BinaryDetection::quit(b'\x00'))
        .line_number(true)
        .before_context(context)
        .after_context(context)
        .build();
    for (pattern, matcher) in patterns.iter().zip(matchers) {
        let mut sink = Collect { matcher, lines: Vec::new(), binary: false };
        if searcher.search_slice(matcher, &bytes, &mut sink).is_err() {
            continue;
        }
        if sink.binary {
            result.binary = true;
            result.matches.clear();
            return result;
        }
        attach(&mut result.matches, pattern, &file.rel, sink.lines, context);
    }
    result.matches.sort_by_key(|m| m.line);
    result
}

/// Lines reported by the searcher: matches (with their column) and context.
struct Collect<'m> {
    matcher: &'m RegexMatcher,
    lines: Vec<(u64, Option<u64>, String)>,
    binary: bool,
}

impl Sink for Collect<'_> {
    type Error = std::io::Error;

    fn matched(&mut self, _: &Searcher, m: &SinkMatch<'_>) -> Result<bool, Self::Error> {
        let bytes = m.bytes();
        let column = self.matcher.find(bytes).ok().flatten().map(|r| r.start() as u64 + 1).unwrap_or(1);
        self.lines.push((m.line_number().unwrap_or(0), Some(column), line_text(bytes)));
        Ok(true)
    }

    fn context(&mut self, _: &Searcher, c: &SinkContext<'_>) -> Result<bool, Self::Error> {
        self.lines.push((c.line_number().unwrap_or(0), None, line_text(c.bytes())));
        Ok(true)
    }

    fn binary_data(&mut self, _: &Searcher, _: u64) -> Result<bool, Self::Error> {
        self.binary = true;
        Ok(false)
    }
}

/// Turns the searcher's lines into matches carrying the context lines around them.
fn attach(out: &mut Vec<TextMatch>, pattern: &str, rel: &str, lines: Vec<(u64, Option<u64>, String)>, context: usize) {
    for (i, (line, column, text)) in lines.iter().enumerate() {
        let Some(column) = column else { continue };
        let near = |other: u64| other.abs_diff(*line) <= context as u64;
        let before = lines[..i]
            .iter()
            .rev()
            .take_while(|(l, _, _)| near(*l))
            .map(|(l, _, t)| ContextLine { line: *l, text: t.clone() })
            .collect::<Vec<_>>()
            .into_iter()
            .rev()
            .collect();
        let after = lines[i + 1..]
            .iter()
            .take_while(|(l, _, _)| near(*l))
            .map(|(l, _, t)| ContextLine { line: *l, text: t.clone() })
            .collect();
        out.push(TextMatch {
            pattern: pattern.to_owned(),
            file: rel.to_owned(),
            line: *line,
            column: *column,
            text: text.clone(),
            before,
            after,
        });
    }
}

fn line_text(bytes: &[u8]) -> String {
    let trimmed = bytes.strip_suffix(b"\n").unwrap_or(bytes);
    let trimmed = trimmed.strip_suffix(b"\r").unwrap_or(trimmed);
    let text = String::from_utf8_lossy(trimmed);
    match text.char_indices().nth(MAX_LINE_CHARS) {
        Some((i, _)) => format!("{}…", &text[..i]),
        None => text.into_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn result(rel: &str, lines: &[u64]) -> FileResult {
        let matches = lines
            .iter()
            .map(|&line| TextMatch {
                pattern: "p".into(),
                file: rel.into(),
                line,
                column: 1,
                text: String::new(),
                before: Vec::new(),
                after: Vec::new(),
            })
            .collect();
        FileResult { rel: rel.into(), binary: false, matches }
    }

    fn kept(c: &Collector) -> Vec<(String, u64)> {
        c.by_file.values().flatten().map(|m| (m.file.clone(), m.line)).collect()
    }

    #[test]
    fn collector_keeps_the_first_matches_in_path_order_whatever_the_arrival_order() {
        let files = [("a.rs", vec![1, 2]), ("b.rs", vec![3]), ("c.rs", vec![4, 5]), ("d.rs", vec![6])];
        let mut forward = Collector::new(3);
        let mut backward = Collector::new(3);
        for (rel, lines) in &files {
            forward.add(result(rel, lines));
        }
        for (rel, lines) in files.iter().rev() {
            backward.add(result(rel, lines));
        }
        let expected = vec![("a.rs".to_owned(), 1), ("a.rs".to_owned(), 2), ("b.rs".to_owned(), 3)];
        assert_eq!(kept(&forward), expected);
        assert_eq!(kept(&backward), expected);
        assert_eq!(forward.files_searched, 4);
    }

    #[test]
    fn collector_records_binary_files_and_counts_files_without_matches() {
        let mut c = Collector::new(10);
        c.add(FileResult { rel: "x.bin".into(), binary: true, matches: Vec::new() });
        c.add(result("empty.rs", &[]));
        assert_eq!(c.binary, vec!["x.bin".to_owned()]);
        assert_eq!(c.files_searched, 2);
        assert!(c.by_file.is_empty());
    }
}
