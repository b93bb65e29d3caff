//! The `bash` pack: one `bash` tool that runs a command line in `root`.
//!
//! Two layers. **Policy**, deny by default and checked on the command line as a real shell
//! parser (brush-parser) sees it: each command of a pipeline must be in `allow` and not in
//! `deny`; chains (`;`, `&&`, `||`, `&`), compound commands, subshells (`( … )`, `$( … )`,
//! backticks, process substitution) in any word the shell expands (`words`), ways of
//! evaluating a variable's value as code (arithmetic on names, `${!x}`), variables set for a
//! command, commands that run other commands (`bash -c`, `eval`, `exec`, `xargs`, `env`,
//! `find -exec` …) and redirections to files outside `root` are refused with a reason the
//! model can read, unless the pack opts in (`allow_chains`, `allow_subshells`). The command
//! line's size and nesting are bounded before the parser runs (`bounds`): it recurses per
//! level. **Containment**, where the host has bubblewrap and user namespaces:
//! the command runs with no network, the system read-only, `/home`, `/root`, `/run` and
//! `/tmp` empty, `root` as its only writable directory, and its own PID namespace. Without
//! bubblewrap only the policy, a clean environment, the time limit and the process-group
//! kill remain (see `docs/tool-packs.md`).

use std::collections::BTreeMap;
use std::path::{Component, Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use brush_parser::ast;
use cordon_protocol::tool::Policy;
use futures::future::BoxFuture;
use serde::Deserialize;
use serde_json::{Value, json};
use tokio::io::AsyncReadExt;

use crate::host_process::{DEFAULT_COMMAND_PATH, GroupKiller};
use crate::provider::ToolProvider;

mod bounds;
mod words;

use words::{Quoting, literal};

/// Options of `{"pack": "bash", …}`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct BashSpec {
    /// The working directory, and with bubblewrap the only writable one.
    pub root: PathBuf,
    /// Commands that may run (by name: `git`, `ls`).
    #[serde(default)]
    pub allow: Vec<String>,
    /// Commands that may never run (wins over `allow`).
    #[serde(default)]
    pub deny: Vec<String>,
    /// Kill the command after this long.
    #[serde(default = "default_timeout_ms")]
    pub timeout_ms: u64,
    /// stdout + stderr returned at most; the rest is cut.
    #[serde(default = "default_max_output_bytes")]
    pub max_output_bytes: usize,
    /// Pass Cordon's environment through (otherwise only `PATH`, `HOME` = root, `LANG`).
    #[serde(default)]
    pub inherit_env: bool,
    /// Allow `;`, `&&`, `||`, `&` and brace groups.
    #[serde(default)]
    pub allow_chains: bool,
    /// Allow subshells, command and process substitution, shells and command runners,
    /// variables set for a command, and arithmetic or indirection on variables.
    #[serde(default)]
    pub allow_subshells: bool,
    /// Refuse to run at all when bubblewrap cannot contain the command.
    #[serde(default)]
    pub require_containment: bool,
    /// Policy of the `bash` tool.
    #[serde(default)]
    pub policy: Policy,
}

fn default_timeout_ms() -> u64 {
    10_000
}

fn default_max_output_bytes() -> usize {
    32 << 10
}

/// Programs that are shells or run other programs given as arguments.
const RUNNERS: &[&str] = &[
    "sh", "bash", "dash", "zsh", "ksh", "fish", "csh", "tcsh", "busybox", "eval", "exec", "source",
    ".", "env", "xargs", "nohup", "timeout", "nice", "command", "builtin", "sudo", "su", "doas",
    "setsid", "stdbuf", "chroot", "unshare", "nsenter", "watch", "script", "parallel", "time",
    "trap",
];
/// Bash builtins that evaluate a name given as data (`read 'a[$(cmd)]'`, `declare`, `let`
/// run `cmd`) or change what a name runs (`hash -p`, `enable -f`, `alias`).
const EVALUATORS: &[&str] = &[
    "let", "declare", "typeset", "local", "readonly", "export", "unset", "read", "mapfile",
    "getopts", "compgen", "complete", "hash", "enable", "alias", "fc", "bind",
];
/// Arguments by which a program runs another (`find -exec rm {} ;`), the single-letter options
/// that do when bundled (`rsync -avze CMD`), and whether options end at the first operand
/// (`printf FORMAT …`). An argument that is not a plain word must start with a fixed
/// character other than `-`, so that no expansion can spell one of these options.
const EXEC_ARGS: &[(&str, &[&str], &[char], bool)] = &[
    ("find", &["-exec", "-execdir", "-ok", "-okdir"], &[], false),
    (
        "git",
        &[
            "-c",
            "--config-env",
            "--exec-path",
            "--exec",
            "--upload-pack",
            "--receive-pack",
        ],
        &[],
        false,
    ),
    ("rsync", &["-e", "--rsh", "--rsync-path"], &['e'], false),
    (
        "tar",
        &[
            "--to-command",
            "--use-compress-program",
            "-I",
            "-F",
            "--checkpoint-action",
            "--info-script",
            "--new-volume-script",
        ],
        &['I', 'F'],
        false,
    ),
    // `test -v 'a[$(cmd)]'` and `printf -v 'a[$(cmd)]'` evaluate the subscript.
    ("test", &["-v", "-R"], &[], false),
    ("[", &["-v", "-R"], &[], false),
    ("printf", &["-v"], &[], true),
];

/// Runs the pack's `bash` calls.
#[derive(Debug)]
pub(crate) struct BashPack {
    spec: BashSpec,
    root: PathBuf,
    bwrap: Option<PathBuf>,
}

/// Whether bubblewrap works here (installed, and namespaces allowed): it is tried once.
fn find_bwrap() -> Option<PathBuf> {
    let path = ["/usr/bin/bwrap", "/usr/local/bin/bwrap", "/bin/bwrap"]
        .into_iter()
        .map(PathBuf::from)
        .find(|path| path.is_file())?;
    let works = std::process::Command::new(&path)
        .args([
            "--ro-bind",
            "/",
            "/",
            "--dev",
            "/dev",
            "--unshare-net",
            "--unshare-pid",
            "--die-with-parent",
            "--",
            "/bin/true",
        ])
        .env_clear()
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|status| status.success());
    works.then_some(path)
}

impl BashPack {
    pub(crate) fn new(spec: BashSpec) -> Result<Self, String> {
        let root = spec
            .root
            .canonicalize()
            .map_err(|error| format!("root {}: {error}", spec.root.display()))?;
        if !root.is_dir() {
            return Err(format!("root {} is not a directory", root.display()));
        }
        let bwrap = find_bwrap();
        if bwrap.is_none() && spec.require_containment {
            return Err(
                "require_containment is set but bubblewrap is not usable here (install Debian's \
                 `bubblewrap`; user namespaces must be allowed)"
                    .into(),
            );
        }
        Ok(BashPack { spec, root, bwrap })
    }

    /// Whether commands run inside bubblewrap.
    pub(crate) fn contained(&self) -> bool {
        self.bwrap.is_some()
    }

    pub(crate) fn description(&self) -> String {
        let mut allowed: Vec<&str> = self.spec.allow.iter().map(String::as_str).collect();
        allowed.sort_unstable();
        let mut text = format!(
            "Run a command line in the project directory and get its exit code, stdout and \
             stderr. Allowed commands: {}.",
            if allowed.is_empty() {
                "none".to_owned()
            } else {
                allowed.join(", ")
            }
        );
        if !self.spec.allow_chains {
            text.push_str(" One command or one pipeline per call (no ;, &&, ||).");
        }
        if !self.spec.allow_subshells {
            text.push_str(" No $(...), backticks or subshells.");
        }
        text.push_str(&format!(
            " Killed after {} ms; output capped at {} bytes.",
            self.spec.timeout_ms, self.spec.max_output_bytes
        ));
        if self.contained() {
            text.push_str(" No network; only the project directory is writable.");
        }
        text
    }

    /// The policy: `Ok` or the reason it is refused.
    pub(crate) fn check(&self, command: &str) -> Result<(), String> {
        check_command(&self.spec, &self.root, command)
    }

    async fn run(&self, command: &str) -> Result<Value, String> {
        self.check(command)
            .map_err(|reason| format!("refused: {reason}"))?;
        let mut env = BTreeMap::new();
        if self.spec.inherit_env {
            env.extend(std::env::vars());
        }
        env.entry("PATH".to_owned())
            .or_insert_with(|| DEFAULT_COMMAND_PATH.to_owned());
        env.insert("HOME".to_owned(), self.root.to_string_lossy().into_owned());
        env.entry("LANG".to_owned())
            .or_insert_with(|| "C.UTF-8".to_owned());
        let root = self.root.to_string_lossy().into_owned();
        let mut process = match &self.bwrap {
            Some(bwrap) => {
                let mut process = tokio::process::Command::new(bwrap);
                process.args([
                    "--ro-bind",
                    "/",
                    "/",
                    "--dev",
                    "/dev",
                    "--proc",
                    "/proc",
                    "--tmpfs",
                    "/tmp",
                    "--tmpfs",
                    "/home",
                    "--tmpfs",
                    "/root",
                    "--tmpfs",
                    "/run",
                    "--bind",
                    &root,
                    &root,
                    "--chdir",
                    &root,
                    "--unshare-net",
                    "--unshare-pid",
                    "--unshare-ipc",
                    "--unshare-uts",
                    "--die-with-parent",
                    "--new-session",
                    "--",
                    "/bin/bash",
                    "--noprofile",
                    "--norc",
                    "-c",
                    command,
                ]);
                process
            }
            None => {
                let mut process = tokio::process::Command::new("/bin/bash");
                process
                    .args(["--noprofile", "--norc", "-c", command])
                    .current_dir(&self.root);
                process
            }
        };
        let mut child = process
            .env_clear()
            .envs(&env)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0)
            .kill_on_drop(true)
            .spawn()
            .map_err(|error| format!("cannot start the shell: {error}"))?;
        let _group = GroupKiller(
            child
                .id()
                .and_then(|id| i32::try_from(id).ok())
                .and_then(rustix::process::Pid::from_raw),
        );
        let cap = self.spec.max_output_bytes;
        let stdout = child.stdout.take();
        let stderr = child.stderr.take();
        let work = async {
            let (out, err) = tokio::join!(read_some(stdout, cap), read_some(stderr, cap));
            let status = child.wait().await;
            (out, err, status)
        };
        let timeout = Duration::from_millis(self.spec.timeout_ms);
        let Ok(((mut out, out_cut), (mut err, err_cut), status)) =
            tokio::time::timeout(timeout, work).await
        else {
            return Err(format!(
                "the command did not finish within {} ms and was killed",
                self.spec.timeout_ms
            ));
        };
        let status = status.map_err(|error| format!("lost track of the shell: {error}"))?;
        // One budget for both streams, stdout first.
        let mut truncated = out_cut || err_cut;
        if out.len() + err.len() > cap {
            truncated = true;
            err.truncate(cap.saturating_sub(out.len().min(cap)));
            out.truncate(cap);
        }
        Ok(json!({
            "exit_code": status.code(),
            "stdout": String::from_utf8_lossy(&out),
            "stderr": String::from_utf8_lossy(&err),
            "truncated": truncated,
            "contained": self.contained(),
        }))
    }
}

/// Reads up to `cap` bytes, then drains the rest (so the program is not blocked on a full
/// pipe); says whether anything was cut.
async fn read_some(
    stream: Option<impl tokio::io::AsyncRead + Unpin>,
    cap: usize,
) -> (Vec<u8>, bool) {
    let Some(mut stream) = stream else {
        return (Vec::new(), false);
    };
    let mut kept = Vec::new();
    let mut cut = false;
    let mut buffer = [0u8; 8192];
    loop {
        match stream.read(&mut buffer).await {
            Ok(0) | Err(_) => return (kept, cut),
            Ok(read) => {
                let room = cap.saturating_sub(kept.len());
                kept.extend_from_slice(&buffer[..read.min(room)]);
                cut |= read > room;
            }
        }
    }
}

impl ToolProvider for BashPack {
    fn call<'a>(
        &'a self,
        _tool: &'a str,
        input: &'a Value,
    ) -> BoxFuture<'a, Result<Value, String>> {
        Box::pin(async move {
            let command = input
                .get("command")
                .and_then(Value::as_str)
                .ok_or("`command` (a string) is required")?;
            self.run(command).await
        })
    }
}

// ---- the policy ------------------------------------------------------------------------

/// Checks a command line against `spec`; the error is the reason, for the model.
///
/// Each stage of the parser is bounded before it runs (see `bounds`), so no command line can
/// exhaust the stack or the CPU here, whatever thread this runs on.
pub fn check_command(spec: &BashSpec, root: &Path, command: &str) -> Result<(), String> {
    let options = brush_parser::ParserOptions::default();
    bounds::check_text(command)?;
    let tokens = brush_parser::uncached_tokenize_str(command, &options.tokenizer_options())
        .map_err(|error| format!("the command line does not parse: {error}"))?;
    bounds::check_tokens(&tokens)?;
    let program = brush_parser::parse_tokens(&tokens, &options)
        .map_err(|error| format!("the command line does not parse: {error}"))?;
    let checker = Checker {
        spec,
        root,
        options: &options,
    };
    let items: Vec<&ast::CompoundListItem> = program
        .complete_commands
        .iter()
        .flat_map(|list| list.0.iter())
        .collect();
    if items.is_empty() {
        return Err("the command line is empty".into());
    }
    checker.list(&items, 0)
}

struct Checker<'a> {
    spec: &'a BashSpec,
    root: &'a Path,
    options: &'a brush_parser::ParserOptions,
}

impl Checker<'_> {
    fn list(&self, items: &[&ast::CompoundListItem], depth: usize) -> Result<(), String> {
        // The bounds keep this far lower already; this keeps the checker's own recursion
        // bounded whatever the parser accepts.
        if depth > bounds::MAX_NESTING {
            return Err(format!(
                "groups and subshells nest more than {} deep",
                bounds::MAX_NESTING
            ));
        }
        let chained = items.len() > 1
            || items.iter().any(|item| {
                !item.0.additional.is_empty() || matches!(item.1, ast::SeparatorOperator::Async)
            });
        if chained && !self.spec.allow_chains {
            return Err(
                "chains (`;`, `&&`, `||`, `&`, several lines) are not allowed: run one command or \
                 one pipeline per call"
                    .into(),
            );
        }
        for item in items {
            for (_, pipeline) in item.0.iter() {
                for command in &pipeline.seq {
                    self.command(command, depth)?;
                }
            }
        }
        Ok(())
    }

    fn compound_list(&self, list: &ast::CompoundList, depth: usize) -> Result<(), String> {
        let items: Vec<&ast::CompoundListItem> = list.0.iter().collect();
        self.list(&items, depth + 1)
    }

    fn command(&self, command: &ast::Command, depth: usize) -> Result<(), String> {
        match command {
            ast::Command::Simple(simple) => self.simple(simple),
            ast::Command::Compound(compound, redirects) => {
                match compound {
                    ast::CompoundCommand::Subshell(subshell) if self.spec.allow_subshells => {
                        self.compound_list(&subshell.list, depth)?;
                    }
                    ast::CompoundCommand::Subshell(_) => {
                        return Err("subshells `( … )` are not allowed".into());
                    }
                    ast::CompoundCommand::BraceGroup(group) if self.spec.allow_chains => {
                        self.compound_list(&group.list, depth)?;
                    }
                    _ => {
                        return Err(
                            "compound commands (`{ … }`, if, for, while, until, case) are not \
                             allowed: run one command or one pipeline per call"
                                .into(),
                        );
                    }
                }
                for redirect in redirects.iter().flat_map(|redirects| redirects.0.iter()) {
                    self.redirect(redirect)?;
                }
                Ok(())
            }
            ast::Command::Function(_) => Err("defining functions is not allowed".into()),
            ast::Command::ExtendedTest(..) => Err("`[[ … ]]` is not allowed; use `test`".into()),
        }
    }

    fn simple(&self, simple: &ast::SimpleCommand) -> Result<(), String> {
        if let Some(prefix) = &simple.prefix {
            for item in &prefix.0 {
                if let ast::CommandPrefixOrSuffixItem::AssignmentWord(..) = item
                    && !self.spec.allow_subshells
                {
                    return Err(
                        "setting variables (`NAME=value command`) is not allowed: variables \
                         such as PATH, LD_PRELOAD, BASH_ENV or GIT_CONFIG_* make programs run \
                         other commands"
                            .into(),
                    );
                }
            }
        }
        let items = simple
            .prefix
            .iter()
            .flat_map(|prefix| prefix.0.iter())
            .chain(simple.suffix.iter().flat_map(|suffix| suffix.0.iter()));
        let mut args = Vec::new();
        for item in items {
            match item {
                ast::CommandPrefixOrSuffixItem::IoRedirect(redirect) => self.redirect(redirect)?,
                // `make CC=cc` is an argument; for `declare`, `export` … an assignment (those
                // are refused by name below unless `allow_subshells`).
                ast::CommandPrefixOrSuffixItem::Word(word)
                | ast::CommandPrefixOrSuffixItem::AssignmentWord(_, word) => {
                    self.word(&word.value)?;
                    args.push(word.value.as_str());
                }
                ast::CommandPrefixOrSuffixItem::ProcessSubstitution(..) => {
                    if !self.spec.allow_subshells {
                        return Err("process substitution `<( … )` is not allowed".into());
                    }
                }
            }
        }
        let Some(name_word) = &simple.word_or_name else {
            return Err(
                "the command line runs no command (only assignments or redirections)".into(),
            );
        };
        self.word(&name_word.value)?;
        let Some(name) = literal(&name_word.value, self.options) else {
            return Err(format!(
                "the command name `{}` must be a plain word (no variables or expansions)",
                name_word.value
            ));
        };
        if self.spec.deny.contains(&name) {
            return Err(format!("`{name}` is denied"));
        }
        let base = name.rsplit('/').next().unwrap_or(&name);
        let runs = RUNNERS.contains(&base) || EVALUATORS.contains(&base) || base == "readarray";
        if runs && !self.spec.allow_subshells {
            return Err(format!(
                "`{name}` runs other commands or evaluates its arguments as code (shells, eval, \
                 exec, xargs, env, declare, read …) and is not allowed"
            ));
        }
        if !self.spec.allow.contains(&name) {
            let mut allowed: Vec<&str> = self.spec.allow.iter().map(String::as_str).collect();
            allowed.sort_unstable();
            return Err(format!(
                "`{name}` is not an allowed command; allowed: {}",
                if allowed.is_empty() {
                    "none".to_owned()
                } else {
                    allowed.join(", ")
                }
            ));
        }
        if !self.spec.allow_subshells
            && let Some((_, flags, letters, leading)) =
                EXEC_ARGS.iter().find(|(program, ..)| *program == base)
        {
            for text in &args {
                let Some(arg) = literal(text, self.options) else {
                    if !words::never_an_option(text, self.options) {
                        return Err(format!(
                            "the arguments of `{name}` must be plain words or start with a fixed \
                             character other than `-` (`{text}` could expand to an option, and \
                             some of its options run other commands)"
                        ));
                    }
                    if *leading {
                        break;
                    }
                    continue;
                };
                let long = flags
                    .iter()
                    .any(|flag| arg == *flag || arg.starts_with(&format!("{flag}=")));
                // `-xI prog`, `-avze cmd`: a bundle of single-letter options.
                let bundled = arg.len() > 1
                    && arg.starts_with('-')
                    && !arg.starts_with("--")
                    && arg.chars().skip(1).any(|letter| letters.contains(&letter));
                if long || bundled {
                    return Err(format!(
                        "`{name} {arg}` runs other commands and is not allowed"
                    ));
                }
                if *leading && !arg.starts_with('-') {
                    break;
                }
            }
        }
        Ok(())
    }

    /// Refuses what would run a command when the word is expanded (see `words`).
    fn word(&self, text: &str) -> Result<(), String> {
        if self.spec.allow_subshells {
            return Ok(());
        }
        words::inspect(text, Quoting::Word, self.options)
    }

    /// Every redirection is inspected: its file like `>`'s, what it feeds like a word.
    fn redirect(&self, redirect: &ast::IoRedirect) -> Result<(), String> {
        match redirect {
            ast::IoRedirect::File(_, _, target) => match target {
                ast::IoFileRedirectTarget::Filename(word) => self.target(&word.value),
                ast::IoFileRedirectTarget::Fd(_) => Ok(()),
                // `>&2`, `2>&1`, `<&0`, `>&-`, `3>&1-`; anything else (`>&file`,
                // `>&$(cmd)`) names a file once expanded, so it is checked as one.
                ast::IoFileRedirectTarget::Duplicate(word) => {
                    let fd = word.value.trim_end_matches('-');
                    if fd.bytes().all(|byte| byte.is_ascii_digit())
                        && word.value.len() <= fd.len() + 1
                    {
                        Ok(())
                    } else {
                        self.target(&word.value)
                    }
                }
                ast::IoFileRedirectTarget::ProcessSubstitution(..) => {
                    if self.spec.allow_subshells {
                        Ok(())
                    } else {
                        Err("process substitution `>( … )` is not allowed".into())
                    }
                }
            },
            ast::IoRedirect::OutputAndError(word, _) => self.target(&word.value),
            ast::IoRedirect::HereString(_, word) => self.word(&word.value),
            ast::IoRedirect::HereDocument(_, document) => {
                // A quoted delimiter (`<<'EOF'`) leaves the body as it is.
                if self.spec.allow_subshells || !document.requires_expansion {
                    return Ok(());
                }
                words::inspect(&document.doc.value, Quoting::HereDocument, self.options)
            }
        }
    }

    /// A redirection's file must be a plain path inside `root` (or `/dev/null`).
    fn target(&self, text: &str) -> Result<(), String> {
        self.word(text)?;
        let Some(path) = literal(text, self.options) else {
            return Err(format!(
                "the redirection target `{text}` must be a plain path (no variables or globs)"
            ));
        };
        if path == "/dev/null" {
            return Ok(());
        }
        let joined = self.root.join(&path);
        let mut lexical = PathBuf::new();
        for component in joined.components() {
            match component {
                Component::ParentDir => {
                    lexical.pop();
                }
                Component::CurDir => {}
                other => lexical.push(other),
            }
        }
        // A link inside root pointing out would be followed by the shell: resolve what
        // exists of the path too.
        let mut existing = lexical.as_path();
        while !existing.exists() {
            match existing.parent() {
                Some(parent) => existing = parent,
                None => break,
            }
        }
        let resolved = existing
            .canonicalize()
            .unwrap_or_else(|_| existing.to_path_buf());
        if !lexical.starts_with(self.root) || !resolved.starts_with(self.root) {
            return Err(format!(
                "redirection to `{path}` is outside the project directory"
            ));
        }
        Ok(())
    }
}
