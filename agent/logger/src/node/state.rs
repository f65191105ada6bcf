//! The node logger's state directory: `lock` (held while a logger runs: one per
//! directory), `pid`, and `containers/<id>`, one file per registered container holding
//! its [`Registration`] (written whole, by a rename), so a logger started again after a
//! crash re-opens every container's FIFOs and goes on.

use std::fs::{self, File};
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use super::protocol::Registration;

/// The state directory's layout.
#[derive(Debug, Clone)]
pub struct StateDir {
    root: PathBuf,
}

impl StateDir {
    pub fn new(root: &Path) -> StateDir {
        StateDir { root: root.to_path_buf() }
    }

    pub fn lock(&self) -> PathBuf {
        self.root.join("lock")
    }

    pub fn pid(&self) -> PathBuf {
        self.root.join("pid")
    }

    pub fn containers(&self) -> PathBuf {
        self.root.join("containers")
    }

    fn container(&self, id: &str) -> PathBuf {
        self.containers().join(id)
    }

    /// Records a registration (replacing the file whole).
    pub fn save(&self, registration: &Registration, fields: &str) -> io::Result<()> {
        write_atomically(&self.container(&registration.id), fields.as_bytes())
    }

    /// Forgets container `id`.
    pub fn forget(&self, id: &str) -> io::Result<()> {
        match fs::remove_file(self.container(id)) {
            Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e),
            _ => Ok(()),
        }
    }

    /// Every registration recorded; a file that does not read as one is reported and
    /// removed.
    pub fn load(&self) -> io::Result<Vec<Registration>> {
        let mut found = Vec::new();
        for entry in fs::read_dir(self.containers())? {
            let path = entry?.path();
            if path.extension().is_some_and(|e| e == "tmp") {
                let _ = fs::remove_file(&path);
                continue;
            }
            let read = fs::read_to_string(&path).ok();
            match read.as_deref().and_then(|f| Registration::from_fields(f.trim_end())) {
                Some(registration) => found.push(registration),
                None => {
                    eprintln!(
                        "outpost-container-log: {} is not a registration; removing it",
                        path.display()
                    );
                    let _ = fs::remove_file(&path);
                }
            }
        }
        found.sort_by(|a, b| a.id.cmp(&b.id));
        Ok(found)
    }
}

/// Writes `path` whole: a reader (or a restarted logger) sees the old content or the new,
/// never a part.
pub fn write_atomically(path: &Path, content: &[u8]) -> io::Result<()> {
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".tmp");
    let tmp = PathBuf::from(tmp);
    let mut file = File::create(&tmp)?;
    file.write_all(content)?;
    drop(file);
    fs::rename(&tmp, path)
}
