//! The report as Markdown: for a pull request's description or a terminal.

use super::text::{
    EXPLORED, args, calls_line, diff_totals, duration, issues, merge_label, not_committed, one_line, provenance,
    reviewed_files, slots, text, tool_counts, truthy, when,
};
use super::{Ended, Report};

/// The report in Markdown.
pub fn markdown(r: &Report) -> String {
    let mut o = String::new();
    putln!(o, "# Session report: {}\n", md(&one_line(&r.query, 100)));
    table_header(&mut o);
    putln!(o, "| Session | {} ({}) |", code(&r.session_id), cell(&r.intent));
    putln!(o, "| Outcome | {} |", cell(&r.outcome));
    putln!(o, "| Time | {} → {} ({}) |", when(&r.created_at), when(&r.ended_at), duration(r.total_ms));
    putln!(o, "| Recorded by | {} |", provenance(r.recorded_by));
    putln!(o, "| Calls | {} |", calls_line(r));
    let c = &r.counters;
    putln!(
        o,
        "| Counters | verification failures {}, quality reverts {}, interventions {}, compactions {}{} |",
        c.verification_failure_count,
        c.quality_revert_count,
        c.intervention_count,
        r.compaction_count,
        if r.forced_completion { ", **forced completion**" } else { "" }
    );
    for u in &r.user_outcomes {
        putln!(o, "| User's verdict | **{}** {} ({}) |", cell(&u.outcome), cell(&u.note), when(&u.recorded_at));
    }
    if r.ended != Ended::Completed {
        putln!(o, "\n> **{}**", md(&r.outcome));
    }

    putln!(o, "\n## Request\n");
    for line in r.query.lines() {
        putln!(o, "> {}", md(line));
    }
    if let Some(frame) = &r.query_frame {
        putln!(o, "\n### QueryFrame\n\n| Slot | Value | Quote from the request |\n|---|---|---|");
        for (name, value, quote) in slots(frame) {
            let quote = if quote.is_empty() { String::new() } else { format!("“{}”", cell(&quote)) };
            putln!(o, "| {} | {} | {quote} |", cell(&name), cell(&value));
        }
        for key in ["action_type", "target_symbols", "scope", "constraints"] {
            if !frame[key].is_null() {
                putln!(o, "| {key} | {} | |", cell(&text(&frame[key])));
            }
        }
    }

    putln!(o, "\n## Exploration\n");
    putln!(o, "| Phase | Time | Tool calls |\n|---|---|---|");
    for p in &r.time {
        putln!(o, "| {} | {} | {} |", cell(&p.phase), duration(p.ms), cell(&tool_counts(r, &p.phase)));
    }
    if !r.explored_files.is_empty() {
        let shown: Vec<String> = r.explored_files.iter().take(40).map(|f| code(f)).collect();
        let more = r.explored_files.len().saturating_sub(shown.len());
        let more = if more > 0 { format!(" and {more} more") } else { String::new() };
        putln!(o, "\n{} ({}): {}{more}", EXPLORED, r.explored_files.len(), shown.join(", "));
    }
    for s in r.steps.iter().filter(|s| s.phase == "EXPLORATION") {
        for f in s.payload["findings"].as_array().into_iter().flatten() {
            putln!(o, "- {}", md(&one_line(&text(f), 400)));
        }
    }
    for s in r.steps.iter().filter(|s| s.phase == "SEMANTIC") {
        putln!(o, "\nSemantic search {}:", code(&one_line(&text(&s.payload["search_query"]), 200)));
        for f in s.payload["search_results"].as_array().into_iter().flatten() {
            putln!(o, "- {}", md(&one_line(&text(f), 300)));
        }
    }

    if !r.hypotheses.is_empty() {
        putln!(o, "\n## Hypotheses\n");
        for h in &r.hypotheses {
            let mark = if truthy(&h["result"]) { "confirmed" } else { "not confirmed" };
            putln!(o, "- **{mark}**{}: {}", evidence_kind(h), md(&one_line(&text(&h["hypothesis"]), 300)));
            if !h["evidence"].is_null() {
                putln!(o, "  - evidence: {}", md(&one_line(&text(&h["evidence"]), 400)));
            }
        }
    }
    if let Some(impact) = &r.impact {
        putln!(o, "\n## Impact\n");
        nested(&mut o, impact, 0);
    }

    if !r.tasks.is_empty() {
        putln!(o, "\n## Plan and tasks\n");
        for t in &r.tasks {
            putln!(o, "### {}: {} ({})\n", md(&t.id), md(&one_line(&t.description, 200)), t.status);
            if t.failure_count > 0 {
                putln!(o, "Failed verification {} time(s).\n", t.failure_count);
            }
            for i in &t.items {
                let done = if i.status == "done" { "x" } else { " " };
                let mut tail = match (&i.evidence, &i.reason) {
                    (Some(e), _) => format!(" — {}", code(e)),
                    (None, Some(reason)) => format!(" — {} ({})", md(&i.status), md(&one_line(reason, 200))),
                    _ => format!(" — {}", md(&i.status)),
                };
                if i.unchanged {
                    tail.push_str(" — **cites lines this session did not change**");
                }
                if let Some(why) = &i.already_right {
                    tail.push_str(&format!(" — already right, claimed: {}", md(&one_line(why, 200))));
                }
                putln!(o, "- [{done}] {}{tail}", md(&one_line(&i.item, 200)));
                if let Some(q) = &i.quote {
                    if let Some(p) = &q.problem {
                        putln!(o, "  - **{}**", md(p));
                    }
                    let cited: Vec<String> = q
                        .lines
                        .iter()
                        .filter(|l| l.cited)
                        .map(|l| format!("{:>5}  {}", l.number, plain(&l.text)))
                        .collect();
                    if !cited.is_empty() {
                        fenced(&mut o, "  ", fence_lang(&q.path), &cited);
                    }
                }
            }
            o.push('\n');
        }
    }

    if !r.verification.is_empty() || !r.verify_commands.is_empty() || !r.witnessed_runs.is_empty() {
        putln!(o, "\n## Verification\n");
        if !r.verify_commands.is_empty() {
            putln!(
                o,
                "Commands the instructions named: {}\n",
                r.verify_commands.iter().map(|c| code(c)).collect::<Vec<_>>().join(", ")
            );
        }
        if !r.witnessed_runs.is_empty() {
            putln!(o, "Runs the server witnessed (`run_check`, in the work tree under the sandbox):\n");
            putln!(o, "| Run | Phase | Command | Outcome |\n|---|---|---|---|");
            for run in &r.witnessed_runs {
                putln!(
                    o,
                    "| {} | {} | {} | {} |",
                    run.id,
                    cell(&run.phase_label()),
                    cell_code(&run.command),
                    cell(&run.outcome())
                );
            }
            o.push('\n');
        }
        for v in &r.verification {
            let passed = if truthy(&v["passed"]) { "passed" } else { "failed" };
            let witnessed =
                if r.witnessed_runs.is_empty() { "claimed: the server witnessed no run" } else { "runs above" };
            putln!(
                o,
                "- **{passed}**, as the agent reported ({witnessed}; verifier: {}): {}",
                md(&one_line(&text(&v["verifier_used"]), 200)),
                md(&one_line(&text(&v["details"]), 600))
            );
        }
    }

    if !r.hook_refusals.is_empty() {
        putln!(o, "\n## Hook refusals\n");
        putln!(o, "Tool calls the hooks refused during the session (logged in this clone):\n");
        putln!(o, "| When | Client | Tool | Input | Why |\n|---|---|---|---|---|");
        for h in &r.hook_refusals {
            putln!(
                o,
                "| {} | {} | {} | {} | {} |",
                cell(&h.at),
                cell(&h.client),
                cell(&h.tool),
                cell_code(&h.input),
                cell(&h.reason)
            );
        }
        if r.hook_refusals.len() >= crate::hook_log::MAX_RECORDS {
            putln!(o, "\nThe log is full: later refusals were not kept.");
        }
    }

    if !r.reviews.is_empty() || !r.quality_reviews.is_empty() {
        putln!(o, "\n## Review\n");
        for (n, rv) in r.reviews.iter().enumerate() {
            putln!(o, "Review {}, the commit message:\n", n + 1);
            for line in text(&rv["commit_message"]).lines() {
                putln!(o, "> {}", md(line));
            }
            o.push('\n');
            putln!(o, "| File | Decision | Reason |\n|---|---|---|");
            for (file, decision, reason) in reviewed_files(rv) {
                putln!(
                    o,
                    "| {} | {}{} | {} |",
                    cell_code(&file),
                    cell(&decision),
                    not_committed(r, &file, &decision),
                    cell(&reason)
                );
            }
            o.push('\n');
        }
        for q in &r.quality_reviews {
            let issues = issues(q);
            let verdict = if issues.is_empty() { "passed".to_owned() } else { format!("{} issue(s)", issues.len()) };
            putln!(o, "- Quality review: score {}, {verdict}", md(&one_line(&text(&q["quality_score"]), 40)));
            for i in issues {
                putln!(o, "  - {}", md(&one_line(&i, 300)));
            }
        }
    }

    let g = &r.git;
    if g.task_branch.is_some() || g.merge_commit.is_some() {
        putln!(o, "\n## Commit and merge\n");
        table_header(&mut o);
        let row = |o: &mut String, k: &str, v: &Option<String>| {
            if let Some(v) = v {
                putln!(o, "| {k} | {} |", cell_code(v));
            }
        };
        row(&mut o, "Task branch", &g.task_branch);
        row(&mut o, "Base branch", &g.base_branch);
        row(&mut o, "Base commit", &g.base_commit);
        row(&mut o, "Task commit", &g.task_commit);
        row(&mut o, merge_label(r), &g.merge_commit);
        if !r.diff.is_empty() {
            let (a, d) = diff_totals(r);
            putln!(o, "\n{} file(s), +{a} −{d}:\n", r.diff.len());
            for f in &r.diff {
                let bin = match (f.binary, f.too_large) {
                    (_, true) => " (too large to diff)",
                    (true, _) => " (binary)",
                    _ => "",
                };
                putln!(o, "- {} {} +{} −{}{bin}", code(&f.path), f.change, f.additions, f.deletions);
            }
        }
        if let Some(note) = &g.note {
            putln!(o, "\n<details><summary>The merge note (refs/notes/code-intel)</summary>\n");
            let lines: Vec<String> = note.trim().lines().map(plain).collect();
            fenced(&mut o, "", "json", &lines);
            putln!(o, "</details>");
        }
    }

    putln!(o, "\n## Steps\n");
    for (n, s) in r.steps.iter().enumerate() {
        let task = s.task.as_deref().map(|t| format!(" ({})", md(t))).unwrap_or_default();
        putln!(
            o,
            "{}. **{}**{task} — {}, {} call(s): {}",
            n + 1,
            s.phase,
            duration(s.ms),
            s.calls.len(),
            md(&one_line(&s.summary, 300))
        );
        for c in &s.calls {
            let err = match (&c.error, &c.detail) {
                (Some(e), Some(d)) => format!(" → **{}**: {}", md(e), md(&one_line(d, 300))),
                (Some(e), None) => format!(" → **{}**", md(e)),
                _ => String::new(),
            };
            putln!(o, "   - {} {} ({} ms){err}", code(&c.tool), code(&one_line(&args(&c.args), 160)), c.ms);
        }
    }
    if !r.notes.is_empty() {
        putln!(o, "\n## Not shown\n");
        for n in &r.notes {
            putln!(o, "- {}", md(n));
        }
    }
    putln!(
        o,
        "\n---\nMade by {} (report version {}).",
        code(&format!("git code-intel report {}", r.session_id)),
        r.report_version
    );
    o
}

fn table_header(o: &mut String) {
    o.push_str("| | |\n|---|---|\n");
}

/// Text as Markdown shows it and nothing more: the characters that would make a link, an HTML
/// tag, a code span or a table column are escaped (emphasis is left: it hides nothing), and
/// control characters (a terminal's escape sequences among them) dropped. What the session
/// holds came from an agent, or another clone.
fn md(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for ch in plain(s).chars() {
        match ch {
            '\\' | '`' | '[' | ']' | '|' => {
                out.push('\\');
                out.push(ch);
            }
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            c => out.push(c),
        }
    }
    out
}

/// Text without control characters (a tab is a space).
fn plain(s: &str) -> String {
    s.chars()
        .filter_map(|c| {
            if c == '\t' {
                Some(' ')
            } else if c.is_control() {
                None
            } else {
                Some(c)
            }
        })
        .collect()
}

/// Text fit for a table cell: one line, escaped.
fn cell(s: &str) -> String {
    md(&one_line(s, 300))
}

/// A code span holding `s` whatever backticks it has (CommonMark: a fence longer than any run
/// inside, padded with spaces when `s` starts or ends with one).
fn code(s: &str) -> String {
    let s = plain(&s.replace('\n', " "));
    let fence = "`".repeat(longest_backtick_run(&s) + 1);
    let pad = if s.starts_with('`') || s.ends_with('`') { " " } else { "" };
    format!("{fence}{pad}{s}{pad}{fence}")
}

/// A code span in a table cell (a `|` would end the cell, even inside the span).
fn cell_code(s: &str) -> String {
    code(&s.replace('|', "¦"))
}

/// A fenced code block of `lines`, the fence longer than any run of backticks in them.
fn fenced(o: &mut String, indent: &str, lang: &str, lines: &[String]) {
    let fence = "`".repeat(lines.iter().map(|l| longest_backtick_run(l)).max().unwrap_or(0).max(2) + 1);
    putln!(o, "\n{indent}{fence}{lang}");
    for l in lines {
        putln!(o, "{indent}{l}");
    }
    putln!(o, "{indent}{fence}\n");
}

fn longest_backtick_run(s: &str) -> usize {
    s.split(|c| c != '`').map(str::len).max().unwrap_or(0)
}

fn fence_lang(path: &str) -> &'static str {
    match path.rsplit('.').next().unwrap_or("") {
        "rs" => "rust",
        "py" => "python",
        "js" | "mjs" | "cjs" => "javascript",
        "ts" | "tsx" => "typescript",
        "go" => "go",
        "java" => "java",
        "c" | "h" => "c",
        "cc" | "cpp" | "hpp" => "cpp",
        "rb" => "ruby",
        "sh" => "sh",
        _ => "",
    }
}

/// An object or list as nested bullets.
fn nested(o: &mut String, v: &serde_json::Value, depth: usize) {
    let pad = "  ".repeat(depth);
    match v {
        serde_json::Value::Object(map) => {
            for (k, v) in map {
                if v.is_object() || v.is_array() {
                    putln!(o, "{pad}- **{k}**");
                    nested(o, v, depth + 1);
                } else {
                    putln!(o, "{pad}- **{k}**: {}", one_line(&text(v), 300));
                }
            }
        }
        serde_json::Value::Array(items) => {
            for v in items {
                if v.is_object() || v.is_array() {
                    nested(o, v, depth);
                } else {
                    putln!(o, "{pad}- {}", one_line(&text(v), 300));
                }
            }
        }
        other => {
            putln!(o, "{pad}- {}", one_line(&text(other), 300));
        }
    }
}

/// What a hypothesis's evidence is, as the server judged it (nothing for a session from before
/// it judged): " (witnessed run 2)", " (code)", " (reasoning only, claimed)".
pub(super) fn evidence_kind(h: &serde_json::Value) -> String {
    match h["evidence_kind"].as_str() {
        Some("witnessed_run") => {
            let runs: Vec<String> = h["runs"].as_array().into_iter().flatten().map(|r| r.to_string()).collect();
            format!(" (witnessed run {})", runs.join(", "))
        }
        Some("code") => " (code)".to_owned(),
        Some("reasoning") => " (reasoning only, claimed)".to_owned(),
        _ => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_from_a_session_stays_text_in_markdown() {
        assert_eq!(md("see [here](http://x) <b>|</b>"), "see \\[here\\](http://x) &lt;b&gt;\\|&lt;/b&gt;");
        assert_eq!(md("\u{1b}]0;title\u{7}red"), "\\]0;titlered", "control characters dropped");
        assert_eq!(code("src/a.rs"), "`src/a.rs`");
        assert_eq!(code("a``b"), "```a``b```");
        assert_eq!(code("`x"), "`` `x ``");
        let mut o = String::new();
        fenced(&mut o, "", "", &["```".to_owned(), "x".to_owned()]);
        assert!(o.starts_with("\n````\n```\nx\n````"), "{o}");
    }
}
