//! Knowing when the work tree changed, so a long-running server refreshes its index only then.
//!
//! Exactly the directories the gitignore-aware walk entered are watched, non-recursively, so
//! ignored trees such as `target/` or `node_modules/` cost no watches; a new directory shows up
//! as an event in its parent and the refresh that follows adds it.
//!
//! On Linux this talks to inotify directly, asking only for changes. (The `notify` crate also
//! subscribes to `IN_OPEN`, which wakes the watcher thread for every file our own tools read.)
//! Elsewhere it uses `notify`.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

/// Directory entries whose changes never matter: git's own state and ours.
const IGNORED_NAMES: &[&str] = &[".git", ".code-intel"];

pub struct TreeWatcher {
    dirty: Arc<AtomicBool>,
    backend: backend::Backend,
    watched: HashMap<PathBuf, backend::Handle>,
}

impl TreeWatcher {
    /// Starts watching nothing yet; [`TreeWatcher::sync_dirs`] says what. None when the platform
    /// refuses (out of inotify instances, say): the caller then checks on every lookup.
    pub fn start() -> Option<TreeWatcher> {
        let dirty = Arc::new(AtomicBool::new(false));
        match backend::Backend::start(Arc::clone(&dirty)) {
            Ok(backend) => Some(TreeWatcher { dirty, backend, watched: HashMap::new() }),
            Err(e) => {
                tracing::warn!("file watcher unavailable ({e}); checking the work tree on every lookup");
                None
            }
        }
    }

    /// Watches exactly `dirs`. If one cannot be watched, events could be missed, so the watcher
    /// gives up and reports itself incomplete.
    pub fn sync_dirs(&mut self, dirs: &[PathBuf]) {
        let wanted: std::collections::HashSet<&PathBuf> = dirs.iter().collect();
        let stale: Vec<PathBuf> = self.watched.keys().filter(|d| !wanted.contains(d)).cloned().collect();
        for dir in stale {
            if let Some(handle) = self.watched.remove(&dir) {
                self.backend.unwatch(&dir, handle);
            }
        }
        for dir in dirs {
            if self.watched.contains_key(dir) {
                continue;
            }
            match self.backend.watch(dir) {
                Ok(handle) => {
                    self.watched.insert(dir.clone(), handle);
                }
                Err(e) => {
                    tracing::warn!("cannot watch {} ({e}); checking the work tree on every lookup", dir.display());
                    for (dir, handle) in self.watched.drain() {
                        self.backend.unwatch(&dir, handle);
                    }
                    self.dirty.store(true, Ordering::Release);
                    return;
                }
            }
        }
    }

    /// Every directory of the last walk is watched.
    pub fn complete(&self) -> bool {
        !self.watched.is_empty()
    }

    /// Whether anything changed since the last call.
    pub fn take_dirty(&self) -> bool {
        self.dirty.swap(false, Ordering::AcqRel)
    }
}

fn ignored(name: Option<&std::ffi::OsStr>) -> bool {
    name.is_some_and(|n| IGNORED_NAMES.iter().any(|i| n == *i))
}

#[cfg(target_os = "linux")]
mod backend {
    use std::path::Path;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};

    use super::ignored;
    use inotify::{EventMask, Inotify, WatchDescriptor, WatchMask, Watches};

    pub(super) type Handle = WatchDescriptor;

    pub(super) struct Backend {
        watches: Watches,
    }

    impl Backend {
        pub(super) fn start(dirty: Arc<AtomicBool>) -> std::io::Result<Backend> {
            let mut inotify = Inotify::init()?;
            let watches = inotify.watches();
            std::thread::Builder::new().name("code-intel-watch".into()).spawn(move || {
                let mut buffer = vec![0u8; 64 * 1024];
                loop {
                    match inotify.read_events_blocking(&mut buffer) {
                        Ok(events) => {
                            for event in events {
                                let lost = event.mask.contains(EventMask::Q_OVERFLOW);
                                if lost || (!event.mask.contains(EventMask::IGNORED) && !ignored(event.name)) {
                                    dirty.store(true, Ordering::Release);
                                }
                            }
                        }
                        Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                        Err(e) => {
                            tracing::warn!("file watcher stopped ({e}); the index may lag until restart");
                            dirty.store(true, Ordering::Release);
                            return;
                        }
                    }
                }
            })?;
            Ok(Backend { watches })
        }

        pub(super) fn watch(&mut self, dir: &Path) -> std::io::Result<Handle> {
            let mask = WatchMask::CREATE
                | WatchMask::DELETE
                | WatchMask::MODIFY
                | WatchMask::CLOSE_WRITE
                | WatchMask::MOVED_FROM
                | WatchMask::MOVED_TO
                | WatchMask::ATTRIB
                | WatchMask::DELETE_SELF
                | WatchMask::MOVE_SELF
                | WatchMask::ONLYDIR;
            self.watches.add(dir, mask)
        }

        pub(super) fn unwatch(&mut self, _dir: &Path, handle: Handle) {
            // Fails only when the directory is already gone, which removed the watch.
            if let Err(e) = self.watches.remove(handle) {
                tracing::debug!("unwatch: {e}");
            }
        }
    }
}

#[cfg(not(target_os = "linux"))]
mod backend {
    use std::path::Path;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};

    use super::ignored;
    use notify::{EventKind, RecursiveMode, Watcher};

    pub type Handle = ();

    pub struct Backend {
        watcher: notify::RecommendedWatcher,
    }

    impl Backend {
        pub fn start(dirty: Arc<AtomicBool>) -> notify::Result<Backend> {
            let handler = move |res: notify::Result<notify::Event>| match res {
                Ok(event) => {
                    let relevant = match event.kind {
                        EventKind::Access(notify::event::AccessKind::Close(notify::event::AccessMode::Write)) => true,
                        EventKind::Access(_) => false,
                        _ => true,
                    };
                    let ours = event.paths.iter().all(|p| p.components().any(|c| ignored(Some(c.as_os_str()))));
                    if relevant && !ours {
                        dirty.store(true, Ordering::Release);
                    }
                }
                // A lost event must not leave the index stale.
                Err(_) => dirty.store(true, Ordering::Release),
            };
            Ok(Backend { watcher: notify::recommended_watcher(handler)? })
        }

        pub fn watch(&mut self, dir: &Path) -> notify::Result<Handle> {
            self.watcher.watch(dir, RecursiveMode::NonRecursive)
        }

        pub fn unwatch(&mut self, dir: &Path, _handle: Handle) {
            let _ = self.watcher.unwatch(dir);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, Instant};

    fn becomes_dirty(w: &TreeWatcher) -> bool {
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline {
            if w.take_dirty() {
                return true;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        false
    }

    #[test]
    fn reports_changes_but_not_reads_or_our_own_directories() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("a.rs");
        std::fs::write(&file, "fn a() {}\n").unwrap();
        let mut w = TreeWatcher::start().unwrap();
        assert!(!w.complete());
        w.sync_dirs(&[dir.path().to_path_buf()]);
        assert!(w.complete());

        let _ = std::fs::read(&file).unwrap();
        std::fs::create_dir(dir.path().join(".code-intel")).unwrap();
        std::thread::sleep(Duration::from_millis(200));
        assert!(!w.take_dirty(), "reading a file or creating .code-intel is not a change");

        std::fs::write(&file, "fn b() {}\n").unwrap();
        assert!(becomes_dirty(&w), "an edit is a change");
        std::fs::write(dir.path().join("new.rs"), "").unwrap();
        assert!(becomes_dirty(&w), "a new file is a change");
        std::fs::remove_file(&file).unwrap();
        assert!(becomes_dirty(&w), "a deletion is a change");

        w.sync_dirs(&[]);
        assert!(!w.complete());
    }
}
