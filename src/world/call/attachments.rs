//! What a call gives that is not text (an MCP tool's image or audio, a blob): each part is
//! kept as a file of its run, `runs/ID/content/N.EXT`, in the state directory
//! (`STATE/content/ID/`), and the run's `result` prints its path. Files are written once,
//! before the run's result is recorded, and never change.

use std::path::PathBuf;

use super::Pipeline;
use crate::host::{extension, ContentPart};

impl Pipeline {
    fn content_dir(&self, run: i64) -> PathBuf {
        self.state_dir.join("content").join(run.to_string())
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
                crate::hosts::text::plural(parts.len() as i64, "content part", "content parts")
            );
        }
        for (i, p) in parts.iter().enumerate() {
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
}

#[cfg(test)]
mod tests {
    use crate::host::extension;

    #[test]
    fn a_type_names_its_extension_and_parameters_do_not_matter() {
        assert_eq!(extension("image/png"), "png");
        assert_eq!(extension("IMAGE/JPEG; q=0.9"), "jpg");
        assert_eq!(extension("audio/wav"), "wav");
        assert_eq!(extension("application/x-unknown"), "bin");
        assert_eq!(extension(""), "bin");
    }
}
