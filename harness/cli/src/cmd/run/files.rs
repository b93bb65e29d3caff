//! `cordon run`'s files: `--workspace DIR` (DIR's files in, the program's changes back),
//! `--file NAME=PATH` (one file in) and `--out DIR` (what the program wrote, out).
//!
//! The guest's workspace is in memory (`cordon_sandbox::Workspace`): DIR is copied in before
//! the run, within the quotas, and the changes are copied back after it. Symbolic links in
//! DIR are followed only when they resolve inside DIR; nothing is ever written through a
//! link, so a program cannot make Cordon write outside the directories it was given.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use cordon_protocol::execution::Limits;
use cordon_sandbox::{Quota, Workspace};

/// Options of `cordon run` for files.
#[derive(Debug, Clone, clap::Args)]
pub struct FileArgs {
    /// Make DIR the program's workspace (`/workspace`, its working directory): its files are
    /// copied in, and what the program creates, changes or deletes there is applied to DIR
    /// afterwards. The workspace quotas apply.
    #[arg(long, value_name = "DIR")]
    pub workspace: Option<PathBuf>,
    /// Copy the file at PATH into the workspace as NAME (repeatable).
    #[arg(long = "file", value_name = "NAME=PATH")]
    pub files: Vec<String>,
    /// Copy the files the program wrote into DIR afterwards.
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
}

/// The workspace of one run and what it held before the program started.
#[derive(Debug)]
pub struct Prepared {
    /// The workspace to hand to the execution.
    pub workspace: Workspace,
    /// path → (size, modified) before the run.
    before: HashMap<String, (u64, u64)>,
    /// Files that came from `--workspace DIR`.
    loaded: Vec<String>,
}

/// Builds the run's workspace. Every program gets one, as over HTTP and MCP, so a relative
/// `open("out.csv", "w")` just works; without `--workspace` or `--out` it is discarded.
pub fn prepare(args: &FileArgs, limits: &Limits) -> anyhow::Result<Prepared> {
    let workspace = Workspace::new(Quota {
        bytes: limits.workspace_bytes,
        files: limits.workspace_files,
    });
    let mut loaded = Vec::new();
    if let Some(dir) = &args.workspace {
        let root = dir
            .canonicalize()
            .with_context(|| format!("--workspace {}", dir.display()))?;
        if !root.is_dir() {
            bail!("--workspace {}: not a directory", dir.display());
        }
        load_dir(&workspace, &root, &root, "", &mut loaded)?;
    }
    for spec in &args.files {
        let Some((name, path)) = spec.split_once('=') else {
            bail!("--file {spec}: expected NAME=PATH");
        };
        let bytes = std::fs::read(path).with_context(|| format!("--file {spec}"))?;
        workspace
            .write(name, &bytes)
            .with_context(|| format!("--file {spec}"))?;
    }
    let before = workspace
        .list()
        .into_iter()
        .map(|entry| (entry.path, (entry.size, entry.modified_ns)))
        .collect();
    Ok(Prepared {
        workspace,
        before,
        loaded,
    })
}

fn load_dir(
    workspace: &Workspace,
    root: &Path,
    dir: &Path,
    prefix: &str,
    loaded: &mut Vec<String>,
) -> anyhow::Result<()> {
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .with_context(|| format!("reading {}", dir.display()))?
        .collect::<Result<_, _>>()
        .with_context(|| format!("reading {}", dir.display()))?;
    entries.sort_by_key(std::fs::DirEntry::file_name);
    for entry in entries {
        let Some(name) = entry.file_name().to_str().map(str::to_owned) else {
            eprintln!(
                "cordon: skipped {}: the name is not UTF-8",
                entry.path().display()
            );
            continue;
        };
        let path = entry.path();
        let relative = if prefix.is_empty() {
            name
        } else {
            format!("{prefix}/{name}")
        };
        // A link is followed only when it resolves inside the workspace directory.
        let resolved = match path.canonicalize() {
            Ok(resolved) if resolved.starts_with(root) => resolved,
            _ => {
                eprintln!(
                    "cordon: skipped {}: it points outside the workspace directory",
                    path.display()
                );
                continue;
            }
        };
        if resolved.is_dir() {
            if resolved != path {
                eprintln!(
                    "cordon: skipped {}: links to directories are not followed",
                    path.display()
                );
                continue;
            }
            load_dir(workspace, root, &path, &relative, loaded)?;
        } else if resolved.is_file() {
            let bytes =
                std::fs::read(&resolved).with_context(|| format!("reading {}", path.display()))?;
            workspace
                .write(&relative, &bytes)
                .with_context(|| format!("--workspace: {}", path.display()))?;
            loaded.push(relative);
        }
    }
    Ok(())
}

/// Writes `bytes` at `dir/relative`, creating directories, never through a symbolic link.
fn write_under(dir: &Path, relative: &str, bytes: &[u8]) -> anyhow::Result<()> {
    let mut at = dir.to_path_buf();
    let parts: Vec<&str> = relative.split('/').collect();
    for (index, part) in parts.iter().enumerate() {
        at.push(part);
        let last = index + 1 == parts.len();
        match std::fs::symlink_metadata(&at) {
            Ok(meta) if meta.file_type().is_symlink() => {
                bail!("{} is a symbolic link; not written through", at.display())
            }
            Ok(meta) if !last && !meta.is_dir() => {
                bail!("{} is in the way (not a directory)", at.display())
            }
            Ok(_) => {}
            Err(_) if !last => {
                std::fs::create_dir(&at).with_context(|| format!("creating {}", at.display()))?
            }
            Err(_) => {}
        }
    }
    std::fs::write(&at, bytes).with_context(|| format!("writing {}", at.display()))
}

impl Prepared {
    /// Applies the run's changes to `--workspace DIR` and copies what it wrote to `--out`.
    pub fn finish(&self, args: &FileArgs) -> anyhow::Result<()> {
        let after = self.workspace.list();
        let written: Vec<&cordon_sandbox::FileEntry> = after
            .iter()
            .filter(|entry| self.before.get(&entry.path) != Some(&(entry.size, entry.modified_ns)))
            .collect();
        if let Some(dir) = &args.workspace {
            for entry in &written {
                let bytes = self.workspace.read(&entry.path)?;
                write_under(dir, &entry.path, &bytes)?;
            }
            // Files the program deleted are deleted from DIR (never through a link).
            for path in &self.loaded {
                if !after.iter().any(|entry| &entry.path == path) {
                    let target = dir.join(path);
                    if std::fs::symlink_metadata(&target).is_ok_and(|meta| meta.is_file()) {
                        std::fs::remove_file(&target)
                            .with_context(|| format!("deleting {}", target.display()))?;
                    }
                }
            }
        }
        if let Some(out) = &args.out {
            std::fs::create_dir_all(out).with_context(|| format!("--out {}", out.display()))?;
            for entry in &written {
                let bytes = self.workspace.read(&entry.path)?;
                write_under(out, &entry.path, &bytes)?;
            }
        }
        Ok(())
    }
}
