//! The report as one self-contained HTML page: inline CSS and SVG, no script, no external
//! asset, nothing fetched. Every text from the session (the agent's words, a teammate's data,
//! code) is escaped.

use super::text::{
    EXPLORED, args, calls_line, diff_totals, duration, issues, merge_label, not_committed, one_line, provenance,
    reviewed_files, slots, text, tool_counts, truthy, when,
};
use super::{Ended, Report};

/// Phase colours, in the order phases first appear.
const PALETTE: [&str; 18] = [
    "#2b6cb0", "#dd6b20", "#2f855a", "#805ad5", "#c53030", "#2c7a7b", "#b7791f", "#d53f8c", "#4a5568", "#63b3ed",
    "#68d391", "#975a16", "#9f7aea", "#f6ad55", "#285e61", "#e53e3e", "#1a365d", "#718096",
];

const STYLE: &str = "body{font:15px/1.45 system-ui,-apple-system,'Segoe UI',sans-serif;color:#1a202c;margin:0;background:#f7fafc}
main{max-width:1180px;margin:0 auto;padding:24px 32px 48px;background:#fff}
h1{font-size:24px;margin:0 0 12px}h2{font-size:19px;margin:28px 0 10px;border-bottom:1px solid #e2e8f0;padding-bottom:4px}
h3{font-size:16px;margin:18px 0 6px}table{border-collapse:collapse;margin:6px 0}
td,th{border:1px solid #e2e8f0;padding:4px 8px;vertical-align:top;text-align:left}th{background:#edf2f7;white-space:nowrap}
code,pre{font:13px/1.4 ui-monospace,'DejaVu Sans Mono',monospace}pre{background:#f7fafc;border:1px solid #e2e8f0;padding:8px;overflow:auto;margin:6px 0}
.outcome{padding:10px 14px;border-radius:6px;margin:10px 0;font-weight:600}
.completed{background:#f0fff4;border:1px solid #9ae6b4}.cleaned,.failed{background:#fff5f5;border:1px solid #feb2b2}.in_progress{background:#fffff0;border:1px solid #faf089}
.quote{color:#4a5568;font-style:italic}.cited{background:#fefcbf;display:block}.ctx{color:#718096;display:block}
.add{background:#e6ffed;display:block}.del{background:#ffeef0;display:block}.hunk{color:#6b46c1;display:block}
.muted{color:#718096}.ok{color:#2f855a;font-weight:600}.bad{color:#c53030;font-weight:600}
details{margin:4px 0}summary{cursor:pointer}";

/// The report as a self-contained HTML page.
pub fn html(r: &Report) -> String {
    let mut o = String::new();
    put!(
        o,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><meta name=\"viewport\" content=\"width=device-width\">\
         <title>Session report {}</title><style>{STYLE}</style></head><body><main>\n",
        e(&r.session_id)
    );
    putln!(o, "<h1>Session report: {}</h1>", e(&one_line(&r.query, 120)));
    let class = match (r.ended, r.forced_completion) {
        (Ended::Completed, false) => "completed",
        (Ended::Completed, true) => "failed",
        (Ended::Cleaned, _) => "cleaned",
        (Ended::InProgress, _) => "in_progress",
    };
    putln!(o, "<div class=\"outcome {class}\">{}</div>", e(&r.outcome));
    o.push_str("<table>");
    row(&mut o, "Session", &format!("<code>{}</code> ({})", e(&r.session_id), e(&r.intent)));
    row(&mut o, "Time", &format!("{} → {} ({})", e(&when(&r.created_at)), e(&when(&r.ended_at)), duration(r.total_ms)));
    row(&mut o, "Recorded by", provenance(r.recorded_by));
    row(&mut o, "Calls", &e(&calls_line(r)));
    let c = &r.counters;
    row(
        &mut o,
        "Counters",
        &format!(
            "verification failures {}, quality reverts {}, interventions {}, compactions {}{}",
            c.verification_failure_count,
            c.quality_revert_count,
            c.intervention_count,
            r.compaction_count,
            if r.forced_completion { ", <span class=\"bad\">forced completion</span>" } else { "" }
        ),
    );
    for u in &r.user_outcomes {
        row(
            &mut o,
            "User's verdict",
            &format!(
                "<b>{}</b> {} <span class=\"muted\">{}</span>",
                e(&u.outcome),
                e(&u.note),
                e(&when(&u.recorded_at))
            ),
        );
    }
    o.push_str("</table>\n");

    o.push_str("<h2>Timeline</h2>\n");
    timeline(&mut o, r);
    o.push_str("<h2>Where the time went</h2>\n");
    time_chart(&mut o, r);

    o.push_str("<h2>Request</h2>\n");
    putln!(o, "<blockquote>{}</blockquote>", e(&r.query).replace('\n', "<br>"));
    if let Some(frame) = &r.query_frame {
        o.push_str("<h3>QueryFrame</h3><table><tr><th>Slot</th><th>Value</th><th>Quote from the request</th></tr>");
        for (name, value, quote) in slots(frame) {
            let quote = if quote.is_empty() {
                String::new()
            } else {
                format!("<span class=\"quote\">“{}”</span>", e(&quote))
            };
            put!(o, "<tr><td>{}</td><td>{}</td><td>{quote}</td></tr>", e(&name), e(&value));
        }
        for key in ["action_type", "target_symbols", "scope", "constraints"] {
            if !frame[key].is_null() {
                put!(o, "<tr><td>{key}</td><td colspan=\"2\">{}</td></tr>", e(&text(&frame[key])));
            }
        }
        o.push_str("</table>\n");
    }

    o.push_str("<h2>Exploration and tool calls</h2>\n<table><tr><th>Phase</th><th>Time</th><th>Tools</th></tr>");
    for p in &r.time {
        put!(
            o,
            "<tr><td>{}</td><td>{}</td><td>{}</td></tr>",
            e(&p.phase),
            duration(p.ms),
            e(&tool_counts(r, &p.phase))
        );
    }
    o.push_str("</table>\n");
    if !r.explored_files.is_empty() {
        let files: Vec<String> = r.explored_files.iter().map(|f| format!("<code>{}</code>", e(f))).collect();
        putln!(o, "<p>{} ({}): {}</p>", EXPLORED, r.explored_files.len(), files.join(", "));
    }
    let findings: Vec<String> = r
        .steps
        .iter()
        .filter(|s| s.phase == "EXPLORATION")
        .flat_map(|s| s.payload["findings"].as_array().cloned().unwrap_or_default())
        .map(|f| format!("<li>{}</li>", e(&text(&f))))
        .collect();
    if !findings.is_empty() {
        putln!(o, "<h3>Findings</h3><ul>{}</ul>", findings.concat());
    }
    for s in r.steps.iter().filter(|s| s.phase == "SEMANTIC") {
        put!(o, "<h3>Semantic search <code>{}</code></h3><ul>", e(&text(&s.payload["search_query"])));
        for f in s.payload["search_results"].as_array().into_iter().flatten() {
            put!(o, "<li>{}</li>", e(&text(f)));
        }
        o.push_str("</ul>\n");
    }

    if !r.hypotheses.is_empty() {
        o.push_str("<h2>Hypotheses</h2><ul>");
        for h in &r.hypotheses {
            let (class, mark) = if truthy(&h["result"]) { ("ok", "confirmed") } else { ("bad", "not confirmed") };
            put!(
                o,
                "<li><span class=\"{class}\">{mark}</span><span class=\"muted\">{}</span> {}",
                e(&super::markdown::evidence_kind(h)),
                e(&text(&h["hypothesis"]))
            );
            if !h["evidence"].is_null() {
                put!(o, "<br><span class=\"muted\">evidence:</span> {}", e(&text(&h["evidence"])));
            }
            o.push_str("</li>");
        }
        o.push_str("</ul>\n");
    }
    if let Some(impact) = &r.impact {
        o.push_str("<h2>Impact</h2>\n");
        nested(&mut o, impact);
    }

    if !r.tasks.is_empty() {
        o.push_str("<h2>Plan and tasks, with the evidence in the commit</h2>\n");
        for t in &r.tasks {
            putln!(o, "<h3>{}: {} <span class=\"muted\">({})</span></h3>", e(&t.id), e(&t.description), e(&t.status));
            if t.failure_count > 0 {
                putln!(o, "<p class=\"bad\">Failed verification {} time(s).</p>", t.failure_count);
            }
            o.push_str("<ul>");
            for i in &t.items {
                let (class, mark) = if i.status == "done" { ("ok", "done") } else { ("muted", i.status.as_str()) };
                put!(o, "<li><span class=\"{class}\">{}</span> {}", e(mark), e(&i.item));
                if let Some(reason) = &i.reason {
                    put!(o, " <span class=\"muted\">— {}</span>", e(reason));
                }
                if let Some(ev) = &i.evidence {
                    put!(o, " <code>{}</code>", e(ev));
                }
                if i.unchanged {
                    put!(o, " <span class=\"bad\">cites lines this session did not change</span>");
                }
                if let Some(why) = &i.already_right {
                    put!(o, " <span class=\"muted\">— already right, claimed: {}</span>", e(why));
                }
                if let Some(q) = &i.quote {
                    if let Some(p) = &q.problem {
                        put!(o, "<br><span class=\"bad\">{}</span>", e(p));
                    }
                    if !q.lines.is_empty() {
                        put!(o, "<pre title=\"{} at {}\">", e(&q.path), e(&q.commit));
                        for l in &q.lines {
                            let class = if l.cited { "cited" } else { "ctx" };
                            put!(o, "<span class=\"{class}\">{:>5}  {}</span>", l.number, e(&l.text));
                        }
                        o.push_str("</pre>");
                    }
                }
                o.push_str("</li>");
            }
            o.push_str("</ul>\n");
        }
    }

    if !r.verification.is_empty() || !r.verify_commands.is_empty() || !r.witnessed_runs.is_empty() {
        o.push_str("<h2>Verification</h2>\n");
        if !r.verify_commands.is_empty() {
            let cmds: Vec<String> = r.verify_commands.iter().map(|c| format!("<code>{}</code>", e(c))).collect();
            putln!(o, "<p>Commands the instructions named: {}</p>", cmds.join(", "));
        }
        if !r.witnessed_runs.is_empty() {
            o.push_str("<p>Runs the server witnessed (<code>run_check</code>, in the work tree under the sandbox):</p><table><tr><th>Run</th><th>Phase</th><th>Command</th><th>Outcome</th></tr>");
            for run in &r.witnessed_runs {
                let class = if run.succeeded() { "ok" } else { "bad" };
                put!(
                    o,
                    "<tr><td>{}</td><td>{}</td><td><code>{}</code></td><td class=\"{class}\">{}</td></tr>",
                    run.id,
                    e(&run.phase_label()),
                    e(&run.command),
                    e(&run.outcome())
                );
            }
            o.push_str("</table>\n");
        }
        o.push_str("<ul>");
        for v in &r.verification {
            let (class, word) = if truthy(&v["passed"]) { ("ok", "passed") } else { ("bad", "failed") };
            let witnessed =
                if r.witnessed_runs.is_empty() { "claimed: the server witnessed no run" } else { "runs above" };
            put!(
                o,
                "<li><span class=\"{class}\">{word}</span>, as the agent reported ({witnessed}; verifier: {}): {}</li>",
                e(&text(&v["verifier_used"])),
                e(&text(&v["details"]))
            );
        }
        o.push_str("</ul>\n");
    }

    if !r.hook_refusals.is_empty() {
        o.push_str("<h2>Hook refusals</h2>\n<p class=\"muted\">Tool calls the hooks refused during the session (logged in this clone).</p>\n<table><tr><th>When</th><th>Client</th><th>Tool</th><th>Input</th><th>Why</th></tr>");
        for h in &r.hook_refusals {
            put!(
                o,
                "<tr><td>{}</td><td>{}</td><td>{}</td><td><code>{}</code></td><td>{}</td></tr>",
                e(&h.at),
                e(&h.client),
                e(&h.tool),
                e(&h.input),
                e(&h.reason)
            );
        }
        o.push_str("</table>\n");
    }

    if !r.reviews.is_empty() || !r.quality_reviews.is_empty() {
        o.push_str("<h2>Review decisions</h2>\n");
        for rv in &r.reviews {
            put!(
                o,
                "<p>The commit message:</p><pre>{}</pre><table><tr><th>File</th><th>Decision</th><th>Reason</th></tr>",
                e(&text(&rv["commit_message"]))
            );
            for (file, decision, reason) in reviewed_files(rv) {
                put!(
                    o,
                    "<tr><td><code>{}</code></td><td>{}{}</td><td>{}</td></tr>",
                    e(&file),
                    e(&decision),
                    not_committed(r, &file, &decision),
                    e(&reason)
                );
            }
            o.push_str("</table>\n");
        }
        for q in &r.quality_reviews {
            let issues = issues(q);
            let verdict = if issues.is_empty() {
                "<span class=\"ok\">passed</span>".to_owned()
            } else {
                format!("<span class=\"bad\">{} issue(s)</span>", issues.len())
            };
            put!(o, "<p>Quality review: score {}, {verdict}</p>", e(&text(&q["quality_score"])));
            if !issues.is_empty() {
                let items: Vec<String> = issues.iter().map(|i| format!("<li>{}</li>", e(i))).collect();
                put!(o, "<ul>{}</ul>", items.concat());
            }
        }
    }

    let g = &r.git;
    if g.task_branch.is_some() || g.merge_commit.is_some() {
        o.push_str("<h2>Commit and merge</h2><table>");
        for (k, v) in [
            ("Task branch", &g.task_branch),
            ("Base branch", &g.base_branch),
            ("Base commit", &g.base_commit),
            ("Task commit", &g.task_commit),
            (merge_label(r), &g.merge_commit),
        ] {
            if let Some(v) = v {
                row(&mut o, k, &format!("<code>{}</code>", e(v)));
            }
        }
        o.push_str("</table>\n");
        if let Some(note) = &g.note {
            putln!(
                o,
                "<details><summary>The merge note (refs/notes/code-intel)</summary><pre>{}</pre></details>",
                e(note.trim())
            );
        }
    }
    if !r.diff.is_empty() {
        let (a, d) = diff_totals(r);
        putln!(o, "<h2>Diff <span class=\"muted\">{} file(s), +{a} −{d}</span></h2>", r.diff.len());
        for f in &r.diff {
            put!(
                o,
                "<h3><code>{}</code> <span class=\"muted\">{} +{} −{}</span></h3>",
                e(&f.path),
                f.change,
                f.additions,
                f.deletions
            );
            if f.binary || f.too_large || f.patch.is_empty() {
                let why = if f.too_large {
                    "too large to diff"
                } else if f.binary {
                    "binary"
                } else {
                    "past the report's diff budget"
                };
                put!(o, "<p class=\"muted\">{why}</p>");
                continue;
            }
            o.push_str("<pre>");
            for line in f.patch.lines() {
                let class = if line.starts_with("+++") || line.starts_with("---") {
                    "ctx"
                } else if line.starts_with('+') {
                    "add"
                } else if line.starts_with('-') {
                    "del"
                } else if line.starts_with("@@") {
                    "hunk"
                } else {
                    "ctx"
                };
                put!(o, "<span class=\"{class}\">{}</span>", e(line));
            }
            if f.truncated {
                o.push_str("<span class=\"muted\">… cut here</span>");
            }
            o.push_str("</pre>\n");
        }
    }

    o.push_str("<h2>Steps and their tool calls</h2>\n");
    for (n, s) in r.steps.iter().enumerate() {
        let task = s.task.as_deref().map(|t| format!(" ({})", e(t))).unwrap_or_default();
        put!(
            o,
            "<details><summary><b>{}. {}</b>{task} — {}, {} call(s)</summary><p>{}</p>",
            n + 1,
            e(&s.phase),
            duration(s.ms),
            s.calls.len(),
            e(&s.summary)
        );
        if !s.calls.is_empty() {
            o.push_str("<table><tr><th>Tool</th><th>Arguments</th><th>Time</th><th>Result</th></tr>");
            for c in &s.calls {
                let result = match &c.error {
                    Some(err) => {
                        format!("<span class=\"bad\">{}</span> {}", e(err), e(c.detail.as_deref().unwrap_or_default()))
                    }
                    None if c.files > 0 => format!("ok, {} file(s)", c.files),
                    None => "ok".into(),
                };
                put!(
                    o,
                    "<tr><td><code>{}</code></td><td><code>{}</code></td><td>{} ms</td><td>{result}</td></tr>",
                    e(&c.tool),
                    e(&one_line(&args(&c.args), 200)),
                    c.ms
                );
            }
            o.push_str("</table>");
        }
        o.push_str("</details>\n");
    }
    if !r.notes.is_empty() {
        o.push_str("<h2>Not shown</h2><ul>");
        for n in &r.notes {
            put!(o, "<li>{}</li>", e(n));
        }
        o.push_str("</ul>\n");
    }
    putln!(
        o,
        "<p class=\"muted\">Made by <code>git code-intel report {} --html</code> (report version {}).</p></main></body></html>",
        e(&r.session_id),
        r.report_version
    );
    o
}

fn row(o: &mut String, key: &str, value_html: &str) {
    put!(o, "<tr><th>{key}</th><td>{value_html}</td></tr>");
}

/// Escapes text for HTML content and attribute values.
fn e(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for ch in s.chars() {
        match ch {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

fn colour(r: &Report, phase: &str) -> &'static str {
    let index = r.time.iter().position(|p| p.phase == phase).unwrap_or(0);
    PALETTE[index % PALETTE.len()]
}

/// The steps on one bar, each as wide as its share of the time (a sliver at least).
fn timeline(o: &mut String, r: &Report) {
    const WIDTH: f64 = 1100.0;
    let total = r.steps.iter().map(|s| s.ms.max(1)).sum::<u64>().max(1) as f64;
    put!(o, "<svg width=\"{WIDTH}\" height=\"64\" viewBox=\"0 0 {WIDTH} 64\" role=\"img\" aria-label=\"timeline\">");
    let mut x = 0.0;
    for (n, s) in r.steps.iter().enumerate() {
        let w = (s.ms.max(1) as f64 / total * WIDTH).max(3.0);
        put!(
            o,
            "<rect x=\"{x:.1}\" y=\"4\" width=\"{w:.1}\" height=\"32\" fill=\"{}\" stroke=\"#fff\"><title>{}. {} — {}</title></rect>",
            colour(r, &s.phase),
            n + 1,
            e(&s.phase),
            duration(s.ms)
        );
        if w > 7.0 * short_phase(&s.phase).len() as f64 + 6.0 {
            put!(
                o,
                "<text x=\"{:.1}\" y=\"54\" font-size=\"11\" fill=\"#4a5568\">{}</text>",
                x + 2.0,
                e(&short_phase(&s.phase))
            );
        }
        x += w;
    }
    o.push_str("</svg>\n<p class=\"muted\">");
    let legend: Vec<String> = r
        .time
        .iter()
        .map(|p| format!("<span style=\"color:{}\">■</span> {}", colour(r, &p.phase), e(&p.phase)))
        .collect();
    o.push_str(&legend.join(" &nbsp; "));
    o.push_str("</p>\n");
}

/// A bar per phase: its total time, and its tool calls.
fn time_chart(o: &mut String, r: &Report) {
    let max = r.time.iter().map(|p| p.ms).max().unwrap_or(1).max(1) as f64;
    let height = r.time.len() * 26 + 8;
    put!(
        o,
        "<svg width=\"900\" height=\"{height}\" viewBox=\"0 0 900 {height}\" role=\"img\" aria-label=\"time by phase\">"
    );
    for (n, p) in r.time.iter().enumerate() {
        let y = n * 26 + 4;
        let w = (p.ms as f64 / max * 520.0).max(2.0);
        put!(
            o,
            "<text x=\"0\" y=\"{}\" font-size=\"12\" fill=\"#1a202c\">{}</text><rect x=\"190\" y=\"{y}\" width=\"{w:.1}\" height=\"18\" fill=\"{}\"/>\
             <text x=\"{:.1}\" y=\"{}\" font-size=\"12\" fill=\"#4a5568\">{} · {} call(s)</text>",
            y + 14,
            e(&p.phase),
            colour(r, &p.phase),
            196.0 + w,
            y + 14,
            duration(p.ms),
            p.calls
        );
    }
    o.push_str("</svg>\n");
}

fn short_phase(phase: &str) -> String {
    phase.chars().take(14).collect()
}

/// An object or list as nested HTML lists.
fn nested(o: &mut String, v: &serde_json::Value) {
    match v {
        serde_json::Value::Object(map) => {
            o.push_str("<ul>");
            for (k, v) in map {
                put!(o, "<li><b>{}</b>", e(k));
                if v.is_object() || v.is_array() {
                    nested(o, v);
                } else {
                    put!(o, ": {}", e(&text(v)));
                }
                o.push_str("</li>");
            }
            o.push_str("</ul>");
        }
        serde_json::Value::Array(items) => {
            o.push_str("<ul>");
            for v in items {
                o.push_str("<li>");
                if v.is_object() || v.is_array() {
                    nested(o, v);
                } else {
                    o.push_str(&e(&text(v)));
                }
                o.push_str("</li>");
            }
            o.push_str("</ul>");
        }
        other => {
            put!(o, "<p>{}</p>", e(&text(other)));
        }
    }
}
