//! What a call gives that is not text (an MCP tool's image or audio, a blob): each part is
//! kept as a file of its run, `runs/ID/content/N.EXT`, in the state directory
//! (`STATE/content/JOURNAL/ID/`, JOURNAL the journal's identity, so a new journal never
//! shows an old one's files under its own run numbers), and the run's `result` prints its
//! path. Files are written once, before the run's result is recorded, and never change;
//! they are read by offset, never whole. A call keeps its first `CONTENT_PARTS_KEPT`
//! parts. At start the content of runs that are gone (another journal's, a run that never
//! finished well) is removed.

use std::os::unix::fs::FileExt;
use std::path::PathBuf;

use super::Pipeline;
use crate::host::{extension, ContentPart, CONTENT_PARTS_KEPT};
use crate::state::Run;

impl Pipeline {
    fn content_root(&self) -> PathBuf {
        self.state_dir.join("content")
    }

    fn content_dir(&self, run: i64) -> PathBuf {
        self.content_root()
            .join(self.journal.id())
            .join(run.to_string())
    }

    /// Keep `parts` as the files of run `run`; the lines `result` prints for them (the
    /// absolute path, a tab, the type and size), or why they could not be kept.
    pub(in crate::world) fn keep_content(
        &self,
        run: i64,
        run_dir: &str,
        parts: &[ContentPart],
    ) -> String {
        if parts.is_empty() {
            return String::new();
        }
        let dir = self.content_dir(run);
        let mut out = String::new();
        if let Err(e) = std::fs::create_dir_all(&dir) {
            return format!(
                "warning: the call's {} could not be kept ({e})\n",
                crate::host::text::plural(parts.len() as i64, "content part", "content parts")
            );
        }
        for (i, p) in parts.iter().enumerate().take(CONTENT_PARTS_KEPT) {
            let name = format!("{}.{}", i + 1, extension(&p.mime));
            // Written beside, then renamed: a file of the run is whole or absent.
            let tmp = dir.join(format!(".{name}.part"));
            let kept = std::fs::write(&tmp, &p.bytes)
                .and_then(|()| std::fs::rename(&tmp, dir.join(&name)));
            match kept {
                Ok(()) => {
                    out.push_str(&format!(
                        "{run_dir}/content/{name}\t{}, {} bytes{}\n",
                        if p.mime.is_empty() {
                            "unknown type"
                        } else {
                            &p.mime
                        },
                        p.bytes.len(),
                        if p.note.is_empty() {
                            String::new()
                        } else {
                            format!(" · {}", p.note)
                        }
                    ));
                }
                Err(e) => {
                    let _ = std::fs::remove_file(&tmp);
                    out.push_str(&format!("warning: content part {} not kept: {e}\n", i + 1));
                }
            }
        }
        if parts.len() > CONTENT_PARTS_KEPT {
            out.push_str(&format!(
                "warning: {} not kept (a call keeps its first {CONTENT_PARTS_KEPT})\n",
                crate::host::text::plural(
                    (parts.len() - CONTENT_PARTS_KEPT) as i64,
                    "more content part was",
                    "more content parts were"
                )
            ));
        }
        out
    }

    /// Whether run `run` kept content files.
    pub(crate) fn has_content(&self, run: i64) -> bool {
        !self.content_names(run).is_empty()
    }

    /// The names of run `run`'s content files, in order (`1.png`, `2.wav`).
    pub(crate) fn content_names(&self, run: i64) -> Vec<String> {
        let Ok(dir) = std::fs::read_dir(self.content_dir(run)) else {
            return Vec::new();
        };
        let mut names: Vec<(u64, String)> = dir
            .filter_map(Result::ok)
            .filter_map(|d| d.file_name().into_string().ok())
            .filter_map(|n| {
                let (num, _) = n.split_once('.')?;
                Some((num.parse().ok()?, n.clone()))
            })
            .collect();
        names.sort();
        names.into_iter().map(|(_, n)| n).collect()
    }

    /// The file behind `runs/ID/content/NAME`.
    pub(crate) fn content_file(&self, run: i64, name: &str) -> PathBuf {
        self.content_dir(run).join(name)
    }

    /// Bytes `offset..offset+size` of `runs/ID/content/NAME`, read from its file: an open
    /// of a large image holds no copy of it.
    pub(crate) fn read_content(
        &self,
        run: i64,
        name: &str,
        offset: u64,
        size: u32,
    ) -> std::io::Result<Vec<u8>> {
        let file = std::fs::File::open(self.content_file(run, name))?;
        let mut buf = vec![0u8; size as usize];
        let mut got = 0;
        while got < buf.len() {
            match file.read_at(&mut buf[got..], offset.saturating_add(got as u64)) {
                Ok(0) => break,
                Ok(n) => got += n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        buf.truncate(got);
        Ok(buf)
    }

    /// Remove the content of runs that are gone: other journals' (and the numbered folders
    /// kept before content was filed by journal, unless their run's `result` names each
    /// file with its size), runs this journal does not hold, runs that did not end `ok`
    /// (their `result` names no file), and pieces a crash left half written. Run before
    /// any call, so nothing is being written meanwhile.
    pub(super) fn sweep_content(&self) {
        let root = self.content_root();
        let Ok(dirs) = std::fs::read_dir(&root) else {
            return;
        };
        let ours = root.join(self.journal.id());
        for d in dirs.filter_map(Result::ok) {
            let name = d.file_name();
            let path = d.path();
            if path == ours {
                continue;
            }
            let legacy = name
                .to_str()
                .and_then(|n| n.parse::<i64>().ok())
                .filter(|id| self.names_its_files(*id, &path));
            match legacy {
                Some(id) => {
                    let _ = std::fs::create_dir_all(&ours);
                    if let Err(e) = std::fs::rename(&path, ours.join(id.to_string())) {
                        tracing::warn!("content of run {id} not moved: {e}");
                    }
                }
                None => remove(&path),
            }
        }
        let Ok(runs) = std::fs::read_dir(&ours) else {
            return;
        };
        for d in runs.filter_map(Result::ok) {
            let path = d.path();
            let kept = d
                .file_name()
                .to_str()
                .and_then(|n| n.parse::<i64>().ok())
                .and_then(|id| self.journal.get(id).ok().flatten())
                .is_some_and(|run| run.status == "ok");
            if !kept {
                remove(&path);
                continue;
            }
            for f in std::fs::read_dir(&path).into_iter().flatten().flatten() {
                if f.file_name().to_string_lossy().starts_with('.') {
                    let _ = std::fs::remove_file(f.path());
                }
            }
        }
    }

    /// Whether folder `dir` holds what run `id` of this journal kept: its `result` names
    /// every file there with its size (a folder left by an earlier journal does not).
    fn names_its_files(&self, id: i64, dir: &std::path::Path) -> bool {
        let Some(run) = self.journal.get(id).ok().flatten() else {
            return false;
        };
        let Ok(files) = std::fs::read_dir(dir) else {
            return false;
        };
        let mut any = false;
        for f in files.filter_map(Result::ok) {
            let name = f.file_name().to_string_lossy().into_owned();
            if name.starts_with('.') {
                continue;
            }
            let size = f.metadata().map(|m| m.len()).unwrap_or(u64::MAX);
            if !names_file(&run, &name, size) {
                return false;
            }
            any = true;
        }
        any && run.status == "ok"
    }
}

/// Whether `run`'s result has the line `keep_content` printed for file `name` of `size`.
fn names_file(run: &Run, name: &str, size: u64) -> bool {
    let line = format!("/content/{name}\t");
    run.result.lines().any(|l| {
        l.find(&line)
            .is_some_and(|at| l[at + line.len()..].contains(&format!(", {size} bytes")))
    })
}

fn remove(path: &std::path::Path) {
    let dir = std::fs::symlink_metadata(path).is_ok_and(|m| m.is_dir());
    let gone = if dir {
        std::fs::remove_dir_all(path)
    } else {
        std::fs::remove_file(path)
    };
    if let Err(e) = gone {
        tracing::warn!(
            "content of a run that is gone not removed ({}): {e}",
            path.display()
        );
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use crate::host::extension;
    use crate::state::Clean;
    use crate::world::settings::WorldSettings;
    use crate::world::tests::{caller, mem_world, MemHost};

    fn file(path: &Path, bytes: &[u8]) {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, bytes).unwrap();
    }

    #[test]
    fn a_start_removes_the_content_of_runs_that_are_gone_and_keeps_the_rest() {
        let state = tempfile::tempdir().unwrap();
        let host = std::sync::Arc::new(MemHost::default());
        let world = mem_world(
            WorldSettings::default(),
            &host,
            state.path(),
            Default::default(),
        );
        let journal = world.journal();
        let run = |status: &str, result: &str| {
            let began = journal
                .begin(&caller(1), "/mem", "media", "{}", &Clean::new(""))
                .unwrap();
            journal
                .finish(began.id, status, 0, &Clean::new(result), &[], &[])
                .unwrap();
            began.id
        };
        let line =
            |id: i64| format!("/mnt/w/mem/ops/media/runs/{id}/content/1.png\timage/png, 3 bytes\n");
        let (kept, failed) = (run("ok", &line(1)), run("failed", "error: no\n"));
        let legacy = run("ok", &line(3));
        let not_its_own = run("ok", "no content\n");
        let root = state.path().join("content");
        let ours = root.join(journal.id());
        file(&ours.join(format!("{kept}/1.png")), b"abc");
        file(&ours.join(format!("{kept}/.2.png.part")), b"half");
        file(&ours.join(format!("{failed}/1.png")), b"abc");
        file(&ours.join("99/1.png"), b"abc");
        file(&root.join("another-journal/1/1.png"), b"abc");
        // Folders by run number alone, as content was kept before: moved when their run's
        // result names each file with its size, removed otherwise.
        file(&root.join(format!("{legacy}/1.png")), b"abc");
        file(&root.join(format!("{not_its_own}/1.png")), b"abc");
        drop(world);
        let world = mem_world(
            WorldSettings::default(),
            &host,
            state.path(),
            Default::default(),
        );
        let mut left: Vec<String> = walkdir(&root)
            .iter()
            .map(|p| p.strip_prefix(&root).unwrap().display().to_string())
            .collect();
        left.sort();
        let id = world.journal().id().to_string();
        assert_eq!(
            left,
            [format!("{id}/{kept}/1.png"), format!("{id}/{legacy}/1.png")]
        );
        assert_eq!(
            world.calls().content_names(legacy),
            ["1.png"],
            "the moved folder is its run's"
        );
    }

    fn walkdir(dir: &Path) -> Vec<std::path::PathBuf> {
        let mut out = Vec::new();
        for e in std::fs::read_dir(dir).unwrap().flatten() {
            if e.file_type().unwrap().is_dir() {
                out.extend(walkdir(&e.path()));
            } else {
                out.push(e.path());
            }
        }
        out
    }

    #[test]
    fn a_type_names_its_extension_and_parameters_do_not_matter() {
        assert_eq!(extension("image/png"), "png");
        assert_eq!(extension("IMAGE/JPEG; q=0.9"), "jpg");
        assert_eq!(extension("audio/wav"), "wav");
        assert_eq!(extension("application/x-unknown"), "bin");
        assert_eq!(extension(""), "bin");
    }
}
