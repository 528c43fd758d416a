//! What this clone wrote, told apart from what arrived from elsewhere: a secret key that never
//! leaves the clone (`.git/code-intel/clone.key`, in the common git directory, so every work
//! tree of the clone shares it) and keyed blake3 MACs ("seals") over the exact bytes of what we
//! store. A session checkpoint, a finished session's history record or a Map entry whose seal
//! verifies was written here; anything else (a fetched ref, a hand-edited object) is data from
//! outside, never trusted to steer this clone.
//!
//! The key is made once, from the operating system's random source, and is never rewritten: a
//! new key would make everything sealed before look foreign. A key file that exists but cannot
//! be read is an error, not a reason to make another.

use std::path::{Path, PathBuf};

use crate::Error;

const KEY_FILE: &str = "clone.key";
/// The key file's contents: this header line, then the key as 64 hex digits.
const KEY_HEADER: &str = "git-code-intel clone key v1";

/// The clone's secret key.
#[derive(Clone)]
pub struct CloneKey {
    key: [u8; 32],
}

impl std::fmt::Debug for CloneKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("CloneKey(..)")
    }
}

/// Where the key of the repository whose common git directory is `common_dir` lives.
pub(crate) fn key_path(common_dir: &Path) -> PathBuf {
    crate::lock::state_dir(common_dir).join(KEY_FILE)
}

impl CloneKey {
    /// The key of `repo`'s clone, made on first use.
    pub fn of(repo: &gix::Repository) -> Result<CloneKey, Error> {
        CloneKey::load_or_create(repo.common_dir())
    }

    /// Reads the key under `common_dir`, or makes it when there is none. Two processes making
    /// it at once agree on one: the file is published with a hard link, which fails when the
    /// other got there first, and then its key is read.
    pub fn load_or_create(common_dir: &Path) -> Result<CloneKey, Error> {
        let path = key_path(common_dir);
        match std::fs::read_to_string(&path) {
            Ok(text) => {
                return parse(&text).ok_or_else(|| not_a_key(&path));
            }
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                return Err(crate::file("read", &path)(e));
            }
            Err(_) => {}
        }
        let mut key = [0u8; 32];
        getrandom::fill(&mut key).map_err(|e| Error::Invalid(format!("no random source for the clone key: {e}")))?;
        let dir = path.parent().map(Path::to_path_buf).unwrap_or_default();
        std::fs::create_dir_all(&dir).map_err(crate::file("create", &dir))?;
        let text = format!("{KEY_HEADER}\n{}\n", hex(&key));
        static MADE: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let n = MADE.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let tmp = dir.join(format!(".{KEY_FILE}.{}.{n}.tmp", std::process::id()));
        write_private(&tmp, text.as_bytes()).map_err(crate::file("write", &tmp))?;
        let published = std::fs::hard_link(&tmp, &path);
        code_intel_files::discard(&tmp);
        match published {
            Ok(()) => Ok(CloneKey { key }),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                let text = std::fs::read_to_string(&path).map_err(crate::file("read", &path))?;
                parse(&text).ok_or_else(|| not_a_key(&path))
            }
            Err(e) => Err(crate::file("write", &path)(e)),
        }
    }

    /// The seal of `bytes` in `domain` (what kind of record it is, so a seal of one kind never
    /// verifies another), as 64 hex digits.
    pub fn seal(&self, domain: &str, bytes: &[u8]) -> String {
        self.mac(domain, bytes).to_hex().to_string()
    }

    /// Whether `seal` is this clone's seal of `bytes` in `domain` (compared in constant time).
    pub fn verifies(&self, domain: &str, bytes: &[u8], seal: &[u8]) -> bool {
        let Ok(text) = std::str::from_utf8(seal) else { return false };
        let Ok(given) = blake3::Hash::from_hex(text.trim()) else { return false };
        // blake3::Hash's equality is constant-time.
        self.mac(domain, bytes) == given
    }

    fn mac(&self, domain: &str, bytes: &[u8]) -> blake3::Hash {
        let mut hasher = blake3::Hasher::new_keyed(&self.key);
        hasher.update(domain.as_bytes()).update(&[0]).update(bytes);
        hasher.finalize()
    }
}

fn parse(text: &str) -> Option<CloneKey> {
    let mut lines = text.lines();
    if lines.next()? != KEY_HEADER {
        return None;
    }
    let hash = blake3::Hash::from_hex(lines.next()?.trim()).ok()?;
    Some(CloneKey { key: *hash.as_bytes() })
}

fn hex(bytes: &[u8; 32]) -> String {
    blake3::Hash::from_bytes(*bytes).to_hex().to_string()
}

/// Writes a file only its owner can read.
fn write_private(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create(true).truncate(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    let mut file = options.open(path)?;
    file.write_all(bytes)?;
    file.sync_all()
}

fn not_a_key(path: &Path) -> Error {
    Error::Invalid(format!("{} is not a clone key", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_seal_verifies_only_its_bytes_its_domain_and_its_clone() {
        let a = tempfile::tempdir().unwrap();
        let b = tempfile::tempdir().unwrap();
        let key = CloneKey::load_or_create(a.path()).unwrap();
        let again = CloneKey::load_or_create(a.path()).unwrap();
        let other = CloneKey::load_or_create(b.path()).unwrap();
        let seal = key.seal("session", b"{\"x\":1}");
        assert!(again.verifies("session", b"{\"x\":1}", seal.as_bytes()), "the key is kept, not remade");
        assert!(!key.verifies("session", b"{\"x\":2}", seal.as_bytes()));
        assert!(!key.verifies("map", b"{\"x\":1}", seal.as_bytes()));
        assert!(!other.verifies("session", b"{\"x\":1}", seal.as_bytes()));
        assert!(!key.verifies("session", b"{\"x\":1}", b"not hex"));
    }

    #[test]
    fn racing_processes_agree_on_one_key() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().to_path_buf();
        let seals: Vec<String> = (0..8)
            .map(|_| {
                let root = root.clone();
                std::thread::spawn(move || CloneKey::load_or_create(&root).unwrap().seal("d", b"x"))
            })
            .collect::<Vec<_>>()
            .into_iter()
            .map(|h| h.join().unwrap())
            .collect();
        assert!(seals.windows(2).all(|w| w[0] == w[1]));
    }

    #[test]
    fn an_unreadable_key_is_an_error_not_a_new_key() {
        let dir = tempfile::tempdir().unwrap();
        let path = key_path(dir.path());
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, "garbage").unwrap();
        assert!(CloneKey::load_or_create(dir.path()).is_err());
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "garbage");
    }
}
