//! One repository opened for exploration: its root, config, contract, and the symbol index with
//! the means to keep it fresh.
//!
//! Freshness: a long-running server watches the work tree ([`code_intel_codebase::TreeWatcher`]) and
//! refreshes the index on the next lookup after something changed. A one-shot command, or a
//! server whose watcher could not start, checks the work tree on every lookup instead.

use std::path::Path;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};

use code_intel_codebase::TreeWatcher;
use code_intel_codebase::config::Config;
use code_intel_codebase::index::refresh::{self, Lookup, RefreshReport};
use code_intel_codebase::index::{SymbolIndex, compact, store};
use code_intel_codebase::repo::Repo;
use code_intel_workflow::contract::{Contract, ContractMessage};

pub struct Workspace {
    pub repo: Repo,
    pub config: Config,
    pub contract: Contract,
    index: Arc<SharedIndex>,
    watch: bool,
    /// A one-shot command's way to fold a grown overlay into the base without waiting for it:
    /// this program, started detached (`index --background-compaction`). None: not at all (a
    /// library user; `index` still compacts).
    compactor: Option<std::path::PathBuf>,
    /// Semantic search: the model, the Forest and the Map's vectors.
    pub semantic: std::sync::Arc<code_intel_semantic::service::Semantic>,
}

/// How much stored syntax a server keeps decoded between lookups (about three times as much
/// memory once decoded).
const DECODED_CACHE_BYTES: usize = 8 << 20;

/// The index state, shared with the thread that builds the index in the background.
#[derive(Default)]
struct SharedIndex {
    state: Mutex<IndexState>,
    /// Signalled when a background build has installed the index.
    built: Condvar,
}

#[derive(Default)]
struct IndexState {
    index: Option<SymbolIndex>,
    report: RefreshReport,
    watcher: Option<TreeWatcher>,
    /// Counts the refreshes that changed the index (the Forest syncs when it moved).
    generation: u64,
    /// A background thread is building the index from nothing.
    building: bool,
    /// A background thread is folding the overlay into the base.
    compacting: bool,
}

impl Workspace {
    /// Opens the repository at `root`. With `watch` (the server), index freshness comes from a
    /// file watcher, and a missing index is built in the background.
    pub fn open(root: &Path, watch: bool) -> std::io::Result<Workspace> {
        let repo = Repo::discover(root)?;
        let (config, config_warning) = Config::load(repo.root());
        let (contract, contract_warning) = load_contract(repo.root());
        for warning in [config_warning, contract_warning].into_iter().flatten() {
            tracing::warn!("{warning}");
        }
        let semantic = std::sync::Arc::new(code_intel_semantic::service::Semantic::new(repo.root(), &config));
        Ok(Workspace { repo, config, contract, index: Arc::default(), watch, compactor: None, semantic })
    }

    /// The `{error, message}` of `tool_errors.query.<key>`.
    pub fn tool_error(&self, key: &code_intel_workflow::contract::Msg, vars: &[(&str, &str)]) -> ContractMessage {
        self.contract.error(key, vars)
    }

    /// The project's test, build and lint commands: declared in the config, else detected.
    pub fn verify_commands(&self) -> code_intel_codebase::verify::VerifyCommands {
        code_intel_codebase::verify::commands(self.repo.root(), &self.config.verify_commands)
    }

    /// Lets a one-shot command start `exe` detached to compact the index when its overlay has
    /// grown (the command itself does not wait for it).
    pub fn compact_with(&mut self, exe: std::path::PathBuf) {
        self.compactor = Some(exe);
    }

    /// True in the server: a missing index is built in the background.
    pub fn builds_index_in_background(&self) -> bool {
        self.watch
    }

    fn lock_index(&self) -> MutexGuard<'_, IndexState> {
        self.index.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Runs `f` on the whole, up-to-date symbol index, building it on first use.
    pub fn with_index<R>(&self, f: impl FnMut(&SymbolIndex, &RefreshReport) -> R) -> R {
        self.with_index_for(&Lookup::All, f)
    }

    /// Runs `f` on an index that answers `lookup` exactly as the whole index would.
    ///
    /// With an index (in memory or on disk), that is the index, brought up to date. Without
    /// one, a lookup that names what it needs is answered from the files that can matter
    /// ([`refresh::refresh_subset`]; the report's `fast_path` says so), and the server starts
    /// building the whole index in the background. A one-shot command does not build it then:
    /// `git code-intel index` does.
    pub fn with_index_for<R>(&self, lookup: &Lookup, mut f: impl FnMut(&SymbolIndex, &RefreshReport) -> R) -> R {
        let mut state = self.lock_index();
        let mut stored = None;
        if state.index.is_none() && !state.building {
            stored = store::load(self.repo.root());
        }
        // No index yet (or still being built): a lookup that names what it needs is answered
        // first, with both cores; then the server builds the whole index in the background.
        if state.index.is_none() && stored.is_none() && *lookup != Lookup::All {
            let start_build = self.watch && !std::mem::replace(&mut state.building, self.watch);
            drop(state);
            let (index, report) = refresh::refresh_subset(&self.repo, &self.config, lookup);
            let answer = f(&index, &report);
            drop(index);
            if start_build {
                self.start_background_build();
            }
            return answer;
        }
        while state.building {
            state = self.index.built.wait(state).unwrap_or_else(|p| p.into_inner());
        }
        let first_use = state.index.is_none();
        if first_use && self.watch {
            state.watcher = TreeWatcher::start();
        }
        // A refresh checks the walk stamp first (one stat per directory and indexed file): when
        // nothing changed it returns the stored index as it is, and when something did it looks
        // only at that.
        let needs_refresh = first_use
            || match &state.watcher {
                Some(w) if w.complete() => w.take_dirty(),
                _ => true,
            };
        if needs_refresh {
            let previous = state.index.take().or(stored).unwrap_or_default();
            self.refresh_into(&mut state, previous, false);
        }
        let empty = SymbolIndex::default();
        let answer = f(state.index.as_ref().unwrap_or(&empty), &state.report);
        if state.report.compaction_due {
            self.start_compaction(&mut state);
        }
        if !state.index.as_ref().is_some_and(SymbolIndex::is_corrupt) {
            if let Some(index) = state.index.as_mut() {
                index.trim(DECODED_CACHE_BYTES);
            }
            return answer;
        }
        // A posting list or a file failed its check while being read: rebuild from nothing and
        // answer again, from the rebuilt index.
        state.index = None;
        self.refresh_into(&mut state, SymbolIndex::default(), true);
        f(state.index.as_ref().unwrap_or(&empty), &state.report)
    }

    /// In the server, builds the whole index on a background thread and installs it when done;
    /// the watcher starts first, so what changes during the build is refreshed after it.
    fn start_background_build(&self) {
        let mut state = self.lock_index();
        state.watcher = TreeWatcher::start();
        drop(state);
        let shared = Arc::clone(&self.index);
        let (repo, config) = (self.repo.clone(), self.config.clone());
        let spawned = std::thread::Builder::new().name("index-build".into()).spawn(move || {
            let (index, report) = refresh::refresh(&repo, &config, SymbolIndex::default(), true);
            let mut state = shared.state.lock().unwrap_or_else(|p| p.into_inner());
            if let Some(watch) = state.watcher.as_mut() {
                watch.sync_dirs(&report.dirs);
            }
            state.generation += 1;
            state.index = Some(index);
            state.report = report;
            state.building = false;
            shared.built.notify_all();
        });
        if let Err(e) = spawned {
            tracing::warn!("could not start building the index in the background: {e}");
            let mut state = self.lock_index();
            state.building = false;
            self.index.built.notify_all();
        }
    }
}

impl Workspace {
    /// Folds the overlay into the base without making anyone wait: in the server, on a thread
    /// that swaps the compacted index in only if no refresh changed the index meanwhile (else
    /// a later one tries again); in a one-shot command, in a detached process of its own.
    fn start_compaction(&self, state: &mut IndexState) {
        state.report.compaction_due = false;
        let root = self.repo.root().to_path_buf();
        if !self.watch {
            if let Some(exe) = &self.compactor {
                spawn_detached(exe, &root, &["index", "--symbols-only", "--background-compaction"]);
            }
            return;
        }
        if std::mem::replace(&mut state.compacting, true) {
            return;
        }
        let Some(expected) = state.index.as_ref().map(SymbolIndex::checksum) else {
            state.compacting = false;
            return;
        };
        let shared = Arc::clone(&self.index);
        let spawned = std::thread::Builder::new().name("index-compaction".into()).spawn(move || {
            // However this thread ends (a panic included), a later compaction may start.
            let _done = CompactionDone(Arc::clone(&shared));
            let aside = code_intel_codebase::index::compact::Lock::take(&root).and_then(|lock| {
                let snapshot = store::load(&root).filter(|i| i.checksum() == expected)?;
                let aside = compact::write_aside(&root, &snapshot);
                Some((lock, aside))
            });
            let mut state = shared.state.lock().unwrap_or_else(|p| p.into_inner());
            match aside {
                Some((_lock, Ok(aside))) if state.index.as_ref().map(SymbolIndex::checksum) == Some(expected) => {
                    match compact::install(&root, &aside, expected) {
                        Ok(index) => state.index = Some(index),
                        Err(e) => tracing::warn!("could not install the compacted index: {e}"),
                    }
                }
                Some((_lock, Ok(aside))) => {
                    // A refresh moved the index on meanwhile: this base is already behind.
                    code_intel_codebase::derived::discard(aside);
                }
                Some((_, Err(e))) => tracing::warn!("could not compact the index: {e}"),
                None => {}
            }
        });
        if let Err(e) = spawned {
            tracing::warn!("could not start compacting the index: {e}");
            state.compacting = false;
        }
    }

    /// `git code-intel index --background-compaction`: folds the stored overlay into the base
    /// when it is due, unless another process is doing it.
    pub fn compact_if_due(&self) -> std::io::Result<bool> {
        let root = self.repo.root();
        let Some(_lock) = compact::Lock::take(root) else { return Ok(false) };
        let Some(index) = store::load(root).filter(compact::due) else { return Ok(false) };
        compact::compact(root, &index).map(|_| true)
    }

    /// Refreshes the symbol index and returns its generation, which moves whenever a refresh
    /// changed it: the Forest's cue that files changed. While the index is being built in the
    /// background it does not wait: the generation moves when the build is installed.
    pub fn index_generation(&self) -> u64 {
        {
            let state = self.lock_index();
            if state.building {
                return state.generation;
            }
        }
        self.with_index(|_, _| ());
        self.lock_index().generation
    }

    /// Brings the index up to date now (`rebuild`: from nothing, re-parsing every file) and
    /// reports what it holds. Backs `git code-intel index`.
    pub fn index_now(&self, rebuild: bool) -> IndexStats {
        let mut state = self.lock_index();
        while state.building {
            state = self.index.built.wait(state).unwrap_or_else(|p| p.into_inner());
        }
        // A server's watcher starts before the walk, so what changes during it is seen after.
        if self.watch && state.watcher.is_none() {
            state.watcher = TreeWatcher::start();
        }
        let previous = if rebuild {
            SymbolIndex::default()
        } else {
            state.index.take().or_else(|| store::load(self.repo.root())).unwrap_or_default()
        };
        // Stored as one base: `index` also folds any overlay in.
        self.refresh_into(&mut state, previous, true);
        let index = state.index.as_ref();
        IndexStats {
            files: index.map_or(0, SymbolIndex::file_count),
            symbols: index.map_or(0, SymbolIndex::symbol_count),
            parsed: state.report.parsed,
            removed: state.report.removed,
            too_large: state.report.too_large.len(),
            binary: state.report.binary.len(),
        }
    }

    fn refresh_into(&self, state: &mut IndexState, previous: SymbolIndex, force_save: bool) {
        let (index, report) = refresh::refresh(&self.repo, &self.config, previous, force_save);
        if let Some(watch) = state.watcher.as_mut() {
            watch.sync_dirs(&report.dirs);
        }
        if report.changed || state.index.is_none() {
            state.generation += 1;
        }
        state.index = Some(index);
        state.report = report;
    }
}

/// Clears [`IndexState::compacting`] when the compaction thread ends, however it ends.
struct CompactionDone(Arc<SharedIndex>);

impl Drop for CompactionDone {
    fn drop(&mut self) {
        self.0.state.lock().unwrap_or_else(|p| p.into_inner()).compacting = false;
    }
}

/// The phase contract: the default, with the project's overrides (`.code-intel/phase_contract.yml`)
/// when it has them. A file that cannot be read is reported in the warning and ignored, so the
/// tools keep working.
pub fn load_contract(root: &Path) -> (Contract, Option<String>) {
    let path = root.join(code_intel_workflow::contract::OVERRIDE_PATH);
    match std::fs::read_to_string(&path) {
        Ok(text) => Contract::with_overrides(&text, &path.display().to_string()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => (Contract::builtin(), None),
        Err(e) => (Contract::builtin(), Some(format!("{}: {e}; using the default contract", path.display()))),
    }
}

/// Starts `exe args…` in `dir`, detached (its own process group, no terminal, not waited for).
fn spawn_detached(exe: &Path, dir: &Path, args: &[&str]) {
    let mut command = std::process::Command::new(exe);
    command
        .args(args)
        .current_dir(dir)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    #[cfg(unix)]
    std::os::unix::process::CommandExt::process_group(&mut command, 0);
    match command.spawn() {
        // Not waited for: it outlives this command.
        Ok(child) => drop(child),
        Err(e) => tracing::debug!("could not start {}: {e}", exe.display()),
    }
}

/// What `git code-intel index` reports.
#[derive(Debug, Clone, serde::Serialize)]
pub struct IndexStats {
    pub files: usize,
    pub symbols: usize,
    pub parsed: usize,
    pub removed: usize,
    pub too_large: usize,
    pub binary: usize,
}
