//! The `bash` pack's policy against hostile command lines: every word the shell expands is
//! inspected or refused (redirect targets of every kind, here-strings, here-document bodies,
//! assignments, expansions inside expansions), and no nesting can exhaust the stack or the CPU
//! of the process that checks it.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use cordon_core::packs::PackSpec;
use cordon_core::packs::bash::{BashSpec, check_command};
use cordon_core::{CallContext, Dispatcher, ToolRegistry};
use pretty_assertions::assert_eq;
use serde_json::{Value, json};

use crate::common::{call_one, failure_of};

/// A project directory `root` inside a temporary directory whose other files are "outside".
fn project() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("project");
    std::fs::create_dir_all(&root).unwrap();
    let root = root.canonicalize().unwrap();
    (dir, root)
}

fn spec(root: &Path, extra: Value) -> BashSpec {
    let mut spec = json!({"pack": "bash", "root": root, "allow": ["ls"]});
    if let (Value::Object(spec), Value::Object(extra)) = (&mut spec, extra) {
        spec.extend(extra);
    }
    match serde_json::from_value(spec).unwrap() {
        PackSpec::Bash(spec) => spec,
        other => panic!("not a bash pack: {other:?}"),
    }
}

fn assert_refused(spec: &BashSpec, root: &Path, cases: &[(&str, &str)]) {
    for (command, reason) in cases {
        let error = check_command(spec, root, command).expect_err(command);
        assert!(error.contains(reason), "{command:?}: {error}");
    }
}

#[test]
fn bash_inspects_redirect_targets_here_strings_and_here_documents() {
    let (dir, root) = project();
    let spec = spec(&root, json!({}));
    let outside = dir.path().join("outside.txt");
    let outside = outside.display();
    let duplicate_out = format!("ls >&{outside}");
    let duplicate_in = format!("ls <&{outside}");
    assert_refused(
        &spec,
        &root,
        &[
            // The reproduced attacks.
            ("ls >&$(id > f)", "command substitution"),
            ("ls <<< $(touch x)", "command substitution"),
            ("ls <<EOF\nhello $(touch x)\nEOF\n", "command substitution"),
            (&duplicate_out, "outside the project directory"),
            // Around them.
            ("ls 2>&$(touch x)", "command substitution"),
            ("ls <&`touch x`", "command substitution"),
            ("ls >&../outside.txt", "outside the project directory"),
            ("ls 2>&/etc/passwd", "outside the project directory"),
            (&duplicate_in, "outside the project directory"),
            ("ls >&$HOME", "plain path"),
            ("ls 3<>../outside.txt", "outside the project directory"),
            ("ls &>>../outside.txt", "outside the project directory"),
            ("ls > >(touch x)", "process substitution"),
            ("ls <<< \"$(touch x)\"", "command substitution"),
            ("ls <<< ${x:-`touch x`}", "command substitution"),
            ("ls <<EOF\n`touch x`\nEOF\n", "command substitution"),
            // Quotes are literal in a body: this one runs in bash.
            ("ls <<EOF\n'$(touch x)'\nEOF\n", "command substitution"),
            (
                "ls <<-EOF\n\t${x:-$(touch x)}\n\tEOF\n",
                "command substitution",
            ),
            ("ls <<EOF\n$((1 + 2))\nEOF\n", "arithmetic"),
            ("ls <<EOF\n${x:-y}\nEOF\n", "plain `${name}`"),
            ("ls <<EOF\n${a[$(touch x)]}\nEOF\n", "command substitution"),
            // `$'\x2e\x2e'` is `..`; `{a,b}` is two words.
            ("ls > $'\\x2e\\x2e/outside.txt'", "plain path"),
            ("ls > {..,x}/outside.txt", "plain path"),
        ],
    );
    for allowed in [
        "ls 2>&1",
        "ls >&2",
        "ls 2>&-",
        "ls 3>&1-",
        "ls <&0",
        "ls >&inside.txt",
        "ls <<< hello",
        "ls <<< \"$HOME\"",
        "ls <<EOF\nhome is $HOME, ${HOME}, $1 ${@}, price \\$(not run) \\`nor this\\`\nEOF\n",
        // A quoted delimiter leaves the body alone.
        "ls <<'EOF'\n$(not run) `nor this`\nEOF\n",
        "ls <<\"EOF\"\n$(not run)\nEOF\n",
        "ls > 'dir with spaces/../out.txt'",
    ] {
        assert_eq!(check_command(&spec, &root, allowed), Ok(()), "{allowed}");
    }
}

#[test]
fn bash_refuses_substitution_hidden_inside_expansions() {
    let (_dir, root) = project();
    let spec = spec(&root, json!({}));
    assert_refused(
        &spec,
        &root,
        &[
            // Defaults, patterns and replacements are expanded too.
            ("ls ${x:-$(touch x)}", "command substitution"),
            ("ls ${x:=`touch x`}", "command substitution"),
            ("ls ${x:+$(touch x)}", "command substitution"),
            ("ls ${x:?$(touch x)}", "command substitution"),
            ("ls ${x#$(touch x)}", "command substitution"),
            ("ls ${x%%$(touch x)}", "command substitution"),
            ("ls ${x/a/$(touch x)}", "command substitution"),
            ("ls ${x//$(touch x)/b}", "command substitution"),
            ("ls ${x^^$(touch x)}", "command substitution"),
            ("ls ${x:-${y:-${z:-$(touch x)}}}", "command substitution"),
            // Inside double quotes bash ignores these single quotes and runs it.
            ("ls \"${x:-'$(touch x)'}\"", "command substitution"),
            ("ls $\"$(touch x)\"", "command substitution"),
            // Arithmetic evaluates a name's value as code: `x='a[$(cmd)]'` runs `cmd`.
            ("ls $((1 + $(touch x)))", "arithmetic"),
            ("ls $((a[$(touch x)]))", "arithmetic"),
            ("ls $[1 + x]", "arithmetic"),
            ("ls ${x:='a[$(touch x)]'} $((x))", "command substitution"),
            ("ls ${x:=a[\\$\\(touch\\ x\\)]} $((x))", "arithmetic"),
            ("ls $(( x ))", "arithmetic"),
            ("ls ${a[x]}", "arithmetic"),
            ("ls ${a[$(touch x)]}", "arithmetic"),
            ("ls ${s:x}", "arithmetic"),
            ("ls ${s:1:x}", "arithmetic"),
            ("ls ${!x}", "indirect expansion"),
            ("ls ${!x:-y}", "indirect expansion"),
            ("ls ${x@P}", "prompt expansion"),
            // Variables for the command: PATH, LD_PRELOAD, GIT_CONFIG_* run other programs.
            ("x=$(touch x) ls", "setting variables"),
            ("PATH=. ls", "setting variables"),
            (
                "GIT_CONFIG_COUNT=1 GIT_CONFIG_KEY_0=core.pager ls",
                "setting variables",
            ),
            ("a[$(touch x)]=1 ls", "setting variables"),
            ("ls x=$(touch x)", "command substitution"),
            ("ls <(touch x)", "process substitution"),
        ],
    );
    for allowed in [
        "ls $((1 + 2 * (3 - 1)))",
        "ls ${HOME} \"$HOME/src\" ${x:-default} ${x#prefix} ${#x}",
        "ls '$(not run)' \"\\$(nor this)\" \\`nor\\ this\\` $'$(nor this)'",
        "ls ${a[0]} ${s:1:2} ${x@Q} ${!prefix*}",
        "ls CC=cc",
    ] {
        assert_eq!(check_command(&spec, &root, allowed), Ok(()), "{allowed}");
    }
}

#[test]
fn bash_refuses_builtins_and_options_that_evaluate_or_run() {
    let (_dir, root) = project();
    let spec = spec(
        &root,
        json!({"allow": ["ls", "read", "declare", "test", "[", "printf", "find", "rsync", "tar",
                         "git", "hash"]}),
    );
    assert_refused(
        &spec,
        &root,
        &[
            // Each of these runs `touch x` in bash 5.2 with a plain, quoted argument.
            ("read 'a[$(touch x)]' <<< 1", "evaluates its arguments"),
            ("declare 'a[$(touch x)]=1'", "evaluates its arguments"),
            ("test -v 'a[$(touch x)]'", "runs other commands"),
            ("[ -v 'a[$(touch x)]' ]", "runs other commands"),
            ("printf -v 'a[$(touch x)]' x", "runs other commands"),
            ("hash -p /bin/sh ls", "evaluates its arguments"),
            // Options that run programs, however they are spelled.
            ("find . -exe? rm {} ;", "plain words"),
            ("find . ${X:=-exec} rm {} ;", "plain words"),
            ("find . -{exec,} rm {} ;", "plain words"),
            ("find . {-exec,x} rm {} ;", "plain words"),
            ("git \"$X\" log", "plain words"),
            ("git a$X log", "plain words"),
            ("printf \"$X\" x", "plain words"),
            ("find . -exe'c' rm {} ;", "runs other commands"),
            ("rsync -avze 'sh -c id' a b", "runs other commands"),
            ("tar -xIsh -f a.tar", "runs other commands"),
            (
                "git --config-env=core.pager=HOME log",
                "runs other commands",
            ),
        ],
    );
    for allowed in [
        "test -f README.md",
        "printf '%s\\n' hello",
        "find . -name '*.rs'",
        "rsync -avz src/ dst/",
        "tar -xzf a.tar.gz",
        "git show HEAD@{1}",
        "git add src/*.rs",
        "git commit -m \"fix for $HOME\"",
        "printf '%s\\n' \"$HOME\" $HOME",
    ] {
        assert_eq!(check_command(&spec, &root, allowed), Ok(()), "{allowed}");
    }
}

#[test]
fn bash_refuses_empty_here_document_delimiters_that_hang_the_tokenizer() {
    let (_dir, root) = project();
    let spec = spec(&root, json!({}));
    // brush-parser's tokenizer loops forever, allocating until the process dies, on each of
    // these (the first was found by the `bash_policy` fuzz target).
    for command in [
        "5s \"$8 \"$( \"$( ls<<  \\` ",
        "ls $(<<  ",
        "ls $(<<\t ",
        "ls $(cat <<-  ",
        "ls <<'' ",
        "ls << \"\" ",
        "ls <<-'' ",
        "ls <<\"\"'' ",
        "ls $(<< \\\n x ",
        "ls <<x\nx\n<<'' ",
        "$l<<\u{c} s\u{c} ",
        "ls << \u{c}",
        "ls <<\\\\ ",
    ] {
        let error = check_command(&spec, &root, command).expect_err(command);
        assert!(error.contains("delimiter"), "{command:?}: {error}");
    }
    // An expansion still open where the body starts: a panic in the tokenizer (found by the
    // fuzz target), or the body moved into the expansion.
    for command in [
        "cat <<EOF $(( )\nEOF\n",
        "cat <<EOF&\\home is0$HOMO,:$k$(-defau-default} $((1 +lt} ((1 + ;)lt} $((1 +)\n$(touch x)\nEOF\n",
        "cat <<'EOF' $(echo\nEOF\ntouch x\n)\nEOF\n",
        "cat <<EOF `\nEOF\n`",
        "cq $( $(<e $(<<EOF is $))\n\nEOF\n",
        "ls \"$(cat <<EOF)\"\nx\nEOF\n",
    ] {
        let error = check_command(&spec, &root, command).expect_err(command);
        assert!(
            error.contains("line of the here-document"),
            "{command:?}: {error}"
        );
    }
    for allowed in [
        "ls <<EOF\nx\nEOF\n",
        "ls <<-'EOF'\nx\nEOF\n",
        "ls << \"E F\"\nx\nE F\n",
        "ls \"a << b\" <<< x",
        "ls <<\u{c}EOF\nx\nEOF\n",
    ] {
        assert_eq!(check_command(&spec, &root, allowed), Ok(()), "{allowed}");
    }
    // A here-document inside a substitution is fine where substitution is.
    let open = self::spec(&root, json!({"allow_subshells": true}));
    let inside = "ls \"$(ls <<EOF\nx\nEOF\n)\"";
    assert_eq!(check_command(&open, &root, inside), Ok(()));
}

#[test]
fn bash_refuses_what_makes_the_parser_panic() {
    let (_dir, root) = project();
    let spec = spec(&root, json!({}));
    // Each panicked inside brush-parser (an `unwrap` of an integer parse); found by the
    // `bash_policy` fuzz target.
    for (command, reason) in [
        (
            "grep -.xt 2>&3txt 99999999999999999999999999999999999992>&3",
            "file descriptor",
        ),
        ("ls 2147483648>x", "file descriptor"),
        ("ls ~+99999999999999999999999", "directory-stack"),
        ("ls ~-99999999999999999999999/x", "directory-stack"),
    ] {
        let error = check_command(&spec, &root, command).expect_err(command);
        assert!(error.contains(reason), "{command:?}: {error}");
    }
    assert_eq!(check_command(&spec, &root, "ls 2147483647>x"), Ok(()));
}

#[test]
fn bash_refuses_what_takes_the_parser_exponential_time() {
    let (_dir, root) = project();
    let spec = spec(
        &root,
        json!({"allow_chains": true, "allow_subshells": true}),
    );
    let strict = self::spec(&root, json!({}));
    // Each took seconds to minutes of CPU (the first two found by the fuzz target as
    // timeouts): the grammar and the word parser backtrack on unclosed constructs.
    let cases = [
        "(( (((((((((((((($*l(((((((($*ls \"$h[)\" ` `lss\\s \"$h[)\" ` `lss\\\\l``".to_owned(),
        "ca\"[\"t <<EOF\nhomd is $U\u{7f}F$(((((((HOME( $;{x:-dUUUU\u{7f}F$((((((((((((((((A)))\nE, \
         ${x:(tEOF$ouhx\"+\"c )\nEOF\n"
            .to_owned(),
        format!("{} ls", "(".repeat(24)),
        format!("{} ls", "case x in a) ".repeat(16)),
        format!("ls {}", "${a[".repeat(6)),
        format!("ls \"$( {}\"", "$(( ".repeat(8)),
        format!("ls \"$( {}\"", "$( ".repeat(12)),
        format!("ls \"${{x:{}1}}\"", "(".repeat(24)),
        format!("ls <<EOF\n$( {}\nEOF\n", "$(( ".repeat(8)),
        format!("ls <<EOF\n${{x:{}1}}\nEOF\n", "(".repeat(24)),
    ];
    for command in &cases {
        // Returning at all is the point; where substitution is allowed, a here-document body
        // is passed to bash without being parsed, so it may be accepted.
        let _ = check_command(&spec, &root, command);
        assert!(
            check_command(&strict, &root, command).is_err(),
            "{command:?}"
        );
    }
}

/// Runs `check` on a thread with `stack` bytes of stack: a stack overflow aborts the test
/// binary, so merely returning proves the bound.
fn on_stack<T: Send + 'static>(stack: usize, check: impl FnOnce() -> T + Send + 'static) -> T {
    std::thread::Builder::new()
        .stack_size(stack)
        .spawn(check)
        .unwrap()
        .join()
        .unwrap()
}

/// `prefix`, then `open` `levels` times, `inner`, and `close` as often.
fn nested(prefix: &str, open: &str, inner: &str, close: &str, levels: usize) -> String {
    format!(
        "{prefix}{}{inner}{}",
        open.repeat(levels),
        close.repeat(levels)
    )
}

#[test]
fn bash_refuses_deep_nesting_on_a_tokio_sized_stack() {
    let (_dir, root) = project();
    // Subshells, groups and substitutions allowed: the checker walks as deep as it may.
    let spec = spec(
        &root,
        json!({"allow_chains": true, "allow_subshells": true}),
    );
    let cases = [
        ("", "( ", "ls", " )"),
        ("ls ", "$(", "ls", ")"),
        ("ls ", "\"$(", "ls", ")\""),
        ("", "{ ", "ls", "; }"),
        ("[[ ", "! ", "x", " ]]"),
        ("[[ ", "( ", "x", " ) ]]"),
        ("ls ", "${x:-", "x", "}"),
        ("ls ", "\"${x:-", "x", "}\""),
        ("ls ", "$((", "1", "))"),
        ("ls ", "$[", "1", "]"),
        ("", "if true; then ", "ls", "; fi"),
        ("", "while ", "ls", "; do ls; done"),
        ("ls ", "x[", "1", "]"),
        ("ls ", "$( (", "ls", ") )"),
        ("ls ", "${a[", "0", "]}"),
        // Time exponential in the grammar: unclosed `(` and `case`.
        ("", "(", "ls", ""),
        ("", "case x in a) ", "ls", ""),
        // Closers the shell does not see as such cannot lower the count.
        ("", "{ '}' ", "ls", "; }"),
        ("ls ", "$( ')' ", "ls", ")"),
    ];
    let outcomes = on_stack(2 << 20, move || {
        let mut outcomes = Vec::new();
        for (prefix, open, inner, close) in cases {
            // 100,000 levels, and 1,000 (short of the length cap: the nesting is refused).
            for levels in [100_000, 1_000] {
                let command = nested(prefix, open, inner, close, levels);
                outcomes.push((
                    format!("{open} x{levels}"),
                    check_command(&spec, &root, &command),
                ));
            }
        }
        outcomes
    });
    for (case, outcome) in outcomes {
        let error = outcome.expect_err(&case);
        assert!(error.contains("more than"), "{case}: {error}");
    }
}

#[test]
fn bash_checks_the_deepest_accepted_nesting_with_room_to_spare() {
    let (_dir, root) = project();
    // Just under each bound.
    let cases: Vec<String> = vec![
        nested("", "( ls; ", "ls", " )", 12),
        nested("ls ", "$(", "ls", ")", 4),
        nested("ls ", "\"$(", "ls", ")\"", 4),
        nested("ls ", "$(", "ls", ")", 1).repeat(16),
        nested("", "{ ", "ls", "; }", 12),
        nested("ls ", "${x:-", "x", "}", 64),
        nested("ls ", "\"${x:-", "x", "}\"", 64),
        nested("ls ", "$[", "1", "]", 4),
        nested("ls ", "$((", "1", "))", 4),
        nested("[[ ", "( ", "x", " )", 11) + " ]]",
        nested("ls $((", "(", "1", ")", 10) + "))",
        nested("ls ", "x[", "1", "]", 12),
        nested("", "x[", "1", "]", 12) + "=1 ls",
        nested("", "if true; then ", "ls", "; fi", 12),
        // Unclosed, the worst case of the grammar's backtracking.
        format!("{} ls", "(".repeat(12)),
        format!("{} ls", "case x in a) ".repeat(12)),
        nested("ls <<EOF\n", "${x:-", "x", "}", 64) + "\nEOF\n",
        // Exponential in the word parser past a few levels; two are fine.
        nested("ls ", "${a[", "0", "]}", 2),
    ];
    // With everything allowed the checker walks groups and subshells; with nothing allowed
    // it walks every expansion. On half of a tokio worker's stack, in a debug build (the
    // deepest frames).
    let specs = [
        spec(
            &root,
            json!({"allow_chains": true, "allow_subshells": true}),
        ),
        spec(&root, json!({})),
    ];
    let checked_root = root.clone();
    let outcomes = on_stack(1 << 20, move || {
        let mut outcomes = Vec::new();
        for spec in &specs {
            for command in &cases {
                let outcome = check_command(spec, &checked_root, command);
                outcomes.push((command.clone(), outcome));
            }
        }
        outcomes
    });
    for (command, outcome) in outcomes {
        if let Err(error) = outcome {
            // Refused for what it is (an `if`, a substitution), never for its depth.
            assert!(!error.contains("more than"), "{command}: {error}");
        }
    }
    // One more subscripted level is refused before the word parser sees it.
    let spec = spec(&root, json!({}));
    let error = check_command(&spec, &root, &nested("ls ", "${a[", "0", "]}", 3)).unwrap_err();
    assert!(error.contains("subscripted"), "{error}");
}

fn pack(spec: Value) -> Dispatcher {
    let spec: PackSpec = serde_json::from_value(spec).unwrap();
    let mut registry = ToolRegistry::empty();
    registry.add_pack(&spec).unwrap();
    Dispatcher::new(Arc::new(registry))
}

async fn run(tools: &Dispatcher, command: &str) -> Result<Value, String> {
    let called = call_one(
        tools,
        &CallContext::new("e"),
        "bash",
        json!({"command": command}),
    )
    .await;
    match &called.result {
        Ok(text) => Ok(serde_json::from_str(text).unwrap()),
        Err(_) => Err(failure_of(&called).message),
    }
}

#[tokio::test]
async fn bash_attacks_are_refused_and_run_nothing() {
    let (dir, root) = project();
    let tools = pack(json!({"pack": "bash", "root": root, "allow": ["ls"]}));
    let outside = dir.path();
    let mark = |name: &str| outside.join(name);
    let attacks = [
        (format!("ls >&$(touch {})", mark("a1").display()), "a1"),
        (format!("ls <<< $(touch {})", mark("a2").display()), "a2"),
        (
            format!("ls <<EOF\n$(touch {})\nEOF\n", mark("a3").display()),
            "a3",
        ),
        (format!("ls >&{}", mark("a4").display()), "a4"),
        (format!("ls 2>&{}", mark("a5").display()), "a5"),
        (
            format!("ls ${{x:='a[$(touch {})]'}} $((x))", mark("a6").display()),
            "a6",
        ),
        (
            format!("ls \"${{x:-'$(touch {})'}}\"", mark("a7").display()),
            "a7",
        ),
        (
            format!("ls <<EOF\n'$(touch {})'\nEOF\n", mark("a8").display()),
            "a8",
        ),
    ];
    for (command, created) in &attacks {
        let error = run(&tools, command).await.unwrap_err();
        assert!(error.starts_with("refused:"), "{command}: {error}");
        assert!(!mark(created).exists(), "{command} created {created}");
    }
    // Nesting deep enough to overflow any stack is refused, and the pack keeps serving.
    let deep = nested("", "( ", "ls", " )", 20_000);
    let error = run(&tools, &deep).await.unwrap_err();
    assert!(
        error.starts_with("refused:") && error.contains("more than"),
        "{error}"
    );
    let listed = run(&tools, "ls").await.unwrap();
    assert_eq!(listed["exit_code"], 0, "{listed}");
    assert_eq!(
        std::fs::read_dir(outside).unwrap().count(),
        1,
        "only the project"
    );
}
