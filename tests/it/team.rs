//! A team on one bare remote: three clones, each with a live session in its own server, finish
//! sessions, record outcomes, and fetch, pull and push the shared refs (the Forest too) in a
//! seeded random order, some pushes at the same moment. At the end every clone holds every
//! record any clone wrote (0 lost), each sees its own entries as local and the others' as
//! shared, a teammate's vectors reach the others, no fetch ever touched a live session, and
//! `git fsck --strict` is clean everywhere.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use crate::common::flows::{explore, front, gates_no};
use crate::common::mcp_client::{BIN, Client, connect, ok};
use crate::common::{fsck_clean, git};
use code_intel_gitstate::shared;
use code_intel_semantic::map::{MapStore, Origin};
use code_intel_session::session::store::SessionStore;

const STEPS: usize = 24;
const SEED: u64 = 23;

struct Member {
    name: String,
    _dir: tempfile::TempDir,
    root: PathBuf,
    client: Client,
    /// The session left open in this clone's server: no fetch may touch it.
    live: String,
    sessions: usize,
    finished: Vec<String>,
    /// Notes of the outcomes this clone recorded.
    notes: Vec<String>,
}

/// Runs the CLI with `--json` in `root`; its answer.
fn cli(root: &Path, args: &[&str]) -> Value {
    let out = std::process::Command::new(BIN).arg("--json").args(args).current_dir(root).output().unwrap();
    assert!(out.status.success(), "{args:?} in {}: {}", root.display(), String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{args:?}: {e}"))
}

/// The live session as stored: its checkpoint commit.
fn live_checkpoint(m: &Member) -> String {
    git(&m.root, &["rev-parse", &format!("refs/worktree/code-intel/sessions/{}", m.live)])
}

/// Starts a session in `m`'s server and takes it through DOCUMENT_RESEARCH and QUERY_FRAME.
async fn open_live(m: &mut Member) {
    m.sessions += 1;
    let query = format!("Where does login check the token? ({} #{})", m.name, m.sessions);
    let r = ok(&m.client, "start_session", json!({"intent": "INVESTIGATE", "query": query})).await;
    m.live = r["session_id"].as_str().unwrap().to_owned();
    front(&m.client).await;
}

/// Runs `what` (a fetch, pull or push) and asserts the live session did not move.
async fn untouched(m: &Member, what: &str, run: impl FnOnce()) {
    let before = live_checkpoint(m);
    let status = ok(&m.client, "get_session_status", json!({})).await;
    run();
    assert_eq!(live_checkpoint(m), before, "{what} in {} moved its live session", m.name);
    let after = ok(&m.client, "get_session_status", json!({})).await;
    assert_eq!(
        (&after["session_id"], &after["phase"], &after["step"]),
        (&status["session_id"], &status["phase"], &status["step"])
    );
}

async fn member(remote: &Path, name: &str) -> Member {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join(name);
    git(dir.path(), &["clone", "-q", remote.to_str().unwrap(), root.to_str().unwrap()]);
    // A plain `git fetch` stages the shared refs, as `init --share` configures it.
    for spec in shared::fetch_refspecs("origin") {
        git(&root, &["config", "--add", "remote.origin.fetch", &spec]);
    }
    // A file only this clone has: its vectors reach the others only through the shared Forest.
    let helpers: String = (0..6)
        .map(|k| format!("def only_in_{name}_{k}(value):\n    \"\"\"Helper {k} that only clone {name} has.\"\"\"\n    return value * {k} + {}\n\n\n", name.len()))
        .collect();
    std::fs::write(root.join(format!("src/team_{name}.py")), helpers).unwrap();
    let client = connect(&root).await;
    let mut m = Member {
        name: name.to_owned(),
        _dir: dir,
        root,
        client,
        live: String::new(),
        sessions: 0,
        finished: Vec::new(),
        notes: Vec::new(),
    };
    open_live(&mut m).await;
    m
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_team_loses_no_record_and_no_fetch_touches_a_live_session() {
    let remote = tempfile::tempdir().unwrap();
    git(remote.path(), &["init", "-q", "--bare"]);
    let seed = crate::common::committed_project();
    git(seed.path(), &["remote", "add", "origin", remote.path().to_str().unwrap()]);
    git(seed.path(), &["push", "-q", "origin", "main"]);
    git(remote.path(), &["symbolic-ref", "HEAD", "refs/heads/main"]);
    let mut team =
        vec![member(remote.path(), "a").await, member(remote.path(), "b").await, member(remote.path(), "c").await];

    let mut rng = fastrand::Rng::with_seed(SEED);
    let mut outcomes = 0;
    for step in 0..STEPS {
        let i = rng.usize(..team.len());
        match rng.u8(..6) {
            // Finish the live session, credit it with a success, and open the next one.
            0 | 1 => {
                let m = &mut team[i];
                explore(&m.client).await;
                let done = gates_no(&m.client).await;
                assert_eq!(done["phase"], "SESSION_COMPLETE", "{done}");
                m.finished.push(m.live.clone());
                let r = ok(
                    &m.client,
                    "record_outcome",
                    json!({"outcome": "success", "note": format!("{} finished", m.live)}),
                )
                .await;
                // The last session this clone finished, whatever a merge made newest.
                assert_eq!(r["session_id"], json!(m.live), "step {step}: {r}");
                m.notes.push(format!("{} finished", m.live));
                open_live(m).await;
            }
            // An outcome for the live session.
            2 => {
                let m = &mut team[i];
                outcomes += 1;
                let note = format!("{} outcome {outcomes}", m.name);
                ok(&m.client, "record_outcome", json!({"outcome": "partial", "note": note})).await;
                m.notes.push(note);
            }
            // A plain fetch.
            3 => {
                let m = &team[i];
                untouched(m, "git fetch", || {
                    git(&m.root, &["fetch", "-q", "origin"]);
                })
                .await;
            }
            // A pull, or a push.
            4 => {
                let m = &team[i];
                let verb = if rng.bool() { "pull" } else { "push" };
                untouched(m, verb, || {
                    cli(&m.root, &["share", verb]);
                })
                .await;
            }
            // Two clones push at the same moment: one retries after the other.
            _ => {
                let j = (i + 1 + rng.usize(..team.len() - 1)) % team.len();
                let (a, b) = (team[i].root.clone(), team[j].root.clone());
                let (before_a, before_b) = (live_checkpoint(&team[i]), live_checkpoint(&team[j]));
                let pushes = [a, b].map(|root| std::thread::spawn(move || cli(&root, &["share", "push"])));
                for p in pushes {
                    let report = p.join().unwrap();
                    assert!(report["pushed"].as_array().is_some_and(|p| !p.is_empty()), "{report}");
                }
                assert_eq!((live_checkpoint(&team[i]), live_checkpoint(&team[j])), (before_a, before_b));
            }
        }
    }
    // Everyone publishes, then everyone pulls.
    for m in &team {
        untouched(m, "the last push", || {
            cli(&m.root, &["share", "push"]);
        })
        .await;
    }
    for m in &team {
        untouched(m, "the last pull", || {
            cli(&m.root, &["share", "pull"]);
        })
        .await;
    }

    let finished: BTreeSet<String> = team.iter().flat_map(|m| m.finished.clone()).collect();
    let notes: BTreeSet<String> = team.iter().flat_map(|m| m.notes.clone()).collect();
    assert!(finished.len() >= 2 && notes.len() >= 3, "the run did too little: {finished:?} {notes:?}");
    for m in &team {
        // Every finished session of every clone, each marked as this clone's or not.
        let history = SessionStore::open(&m.root).unwrap().history(10_000).unwrap();
        let ids: BTreeSet<String> =
            history.iter().filter_map(|f| f.record["session_id"].as_str().map(str::to_owned)).collect();
        assert_eq!(ids, finished, "{}: the history lost records", m.name);
        for f in &history {
            let id = f.record["session_id"].as_str().unwrap_or_default().to_owned();
            assert_eq!(f.here, m.finished.contains(&id), "{}: {id} is {} here", m.name, f.here);
        }
        // Every outcome of every clone.
        let repo = gix::open(&m.root).unwrap();
        let logged: BTreeSet<String> =
            code_intel_gitstate::log::read(&repo, code_intel_gitstate::log::OUTCOME_LOG, 10_000)
                .unwrap()
                .iter()
                .filter_map(|r| r["note"].as_str().map(str::to_owned))
                .collect();
        assert_eq!(logged, notes, "{}: the OutcomeLog lost records", m.name);
        // A Map entry for every finished session, this clone's own as local.
        let read = MapStore::open(&m.root).unwrap().read().unwrap();
        let learned: BTreeSet<String> = read.entries.iter().map(|s| s.entry.session_id.clone()).collect();
        assert_eq!(learned, finished, "{}: the Map lost entries", m.name);
        for s in &read.entries {
            let own = m.finished.contains(&s.entry.session_id);
            assert_eq!(s.origin == Origin::Local, own, "{}: {:?} for {}", m.name, s.origin, s.entry.session_id);
        }
        assert!(read.skipped.is_empty(), "{:?}", read.skipped);
        fsck_clean(&m.root);
    }
    fsck_clean(remote.path());

    // The other clones' own files: their vectors came through the shared Forest, so a sync
    // embeds nothing of them but its spot checks.
    let a = &team[0];
    for other in &team[1..] {
        let name = format!("src/team_{}.py", other.name);
        std::fs::copy(other.root.join(&name), a.root.join(&name)).unwrap();
    }
    let synced = cli(&a.root, &["forest", "import"]);
    assert_eq!(synced["embedded"], synced["shared_checked"], "{synced}");
    assert!(synced["shared_used"].as_u64().unwrap() >= 1, "{synced}");

    for m in team {
        m.client.cancel().await.unwrap();
    }
}
