//! Bounds on a command line's size and nesting, checked before each stage of brush-parser.
//!
//! brush-parser recurses once per level of nesting and a stack overflow cannot be caught: it
//! aborts the whole process. Its tokenizer recurses on `$( … )`, `${ … }`, `$(( … ))` and
//! `$[ … ]`; its grammar on `( … )`, `{ …; }`, `[[ ! ( … ) ]]` and the bodies of `if`, `while`,
//! `until`, `for`, `select`, `case`, functions and `coproc`; its word parser on the same
//! expansions and on `( … )` and `[ … ]` inside them (subshells, arithmetic, subscripts).
//! Unoptimized, each level costs up to 16 KiB of stack, so 128 levels overflow a 2 MiB tokio
//! worker (every profile of this workspace optimizes dependencies, which costs far less). The word parser also takes time exponential in the nesting of subscripted
//! expansions (`${a[${a[…]}]}`: three levels, with a subscript inside, took seconds), and the grammar in the number of
//! unclosed `(` and `case` (it backtracks). Backticks, `!` before a pipeline, long pipelines
//! and lists do not recurse (measured). Some inputs make brush-parser loop forever or panic
//! (an empty here-document delimiter, a file descriptor past `i32`, `~+N` past `usize`):
//! those are refused here too.
//!
//! So each stage is bounded before it runs, by *totals* of what can make it recurse, not by
//! depths: a closer the shell does not see as one (`'}'`, `\)`, a `case` pattern's `)`) would
//! fool a depth counted without a shell's view of quoting, a total cannot be fooled. Totals are
//! conservative: a legitimate command rarely has 64 `$(`/`${` or 12 subshells and keywords.

use brush_parser::Token;

/// The longest command line accepted (Linux refuses a single argument over 128 KiB anyway).
pub(super) const MAX_COMMAND_BYTES: usize = 64 << 10;
/// The most `$( … )`, `${ … }` and `$[ … ]` (before tokenizing).
pub(super) const MAX_EXPANSIONS: usize = 64;
/// The most subshells, groups, tests and keywords (before parsing), and the deepest the
/// checker itself goes. The grammar backtracks: its time doubles with each unclosed `(` or
/// `case` (24 took seconds), so this is kept small.
pub(super) const MAX_NESTING: usize = 12;
/// The most `(` and `[`, and the most `$(`, `$[` and backticks, in one word that holds
/// expansions (before the word parser). Unbalanced, each makes its time double or triple
/// (`$( $(( $(( …` took seconds at eight).
const MAX_WORD_BRACKETS: usize = 12;
const MAX_WORD_SUBSTITUTIONS: usize = 4;
/// The most subscripted expansions `${name[…]}` (exponential time in the word parser).
const MAX_SUBSCRIPTED: usize = 2;

/// Before tokenizing: the length, and expansions counted anywhere, quoted or not (a
/// here-document's body and a single-quoted script included).
pub(super) fn check_text(command: &str) -> Result<(), String> {
    if command.len() > MAX_COMMAND_BYTES {
        return Err(format!(
            "the command line is {} bytes, more than the {MAX_COMMAND_BYTES} allowed: write \
             long content to a file first",
            command.len()
        ));
    }
    let bytes = command.as_bytes();
    let expansions = bytes
        .windows(2)
        .filter(|pair| pair[0] == b'$' && matches!(pair[1], b'(' | b'{' | b'['))
        .count();
    if expansions > MAX_EXPANSIONS {
        return Err(format!(
            "the command line has {expansions} `$( … )`, `${{ … }}` or `$[ … ]` (counted even \
             inside quotes), more than the {MAX_EXPANSIONS} allowed: split it into simpler \
             commands"
        ));
    }
    // Each line is scanned once, from its first here-document on.
    let mut scanned_to = 0;
    for at in (0..bytes.len()).filter(|&at| here_document_at(bytes, at)) {
        if empty_here_tag(&bytes[at + 2..]) {
            return Err(format!(
                "the here-document at byte {at} needs a delimiter word such as EOF, 'EOF' or \
                 \"EOF\" right after `<<` (at most one space before it)"
            ));
        }
        if at < scanned_to {
            continue;
        }
        // The body starts on the next line; an expansion opened or closed after the `<<` on
        // its line makes brush-parser panic (`cat <<EOF $(( )`, `$(<<EOF x)`) or move the
        // body into it.
        let line = bytes[at..]
            .split(|byte| *byte == b'\n')
            .next()
            .unwrap_or_default();
        scanned_to = at + line.len();
        let expands = line
            .iter()
            .any(|byte| matches!(byte, b'`' | b')' | b'}' | b']'))
            || line
                .windows(2)
                .any(|pair| pair[0] == b'$' && matches!(pair[1], b'(' | b'{' | b'['));
        if expands {
            return Err(format!(
                "the line of the here-document at byte {at} has `$(`, `${{`, `$[`, a backtick \
                 or a closing `)`, `}}` or `]` after `<<`: end the line after the delimiter \
                 and close what is open after the body"
            ));
        }
    }
    // `~+N` names the Nth directory of the stack; brush-parser panics on an N past `usize`.
    if (0..bytes.len()).any(|at| huge_tilde_at(bytes, at)) {
        return Err("a `~+N` or `~-N` directory-stack reference has too many digits".into());
    }
    let subscripted = (0..bytes.len())
        .filter(|&at| subscripted_at(bytes, at))
        .count();
    if subscripted > MAX_SUBSCRIPTED {
        return Err(format!(
            "the command line has {subscripted} subscripted expansions `${{name[…]}}`, more than \
             the {MAX_SUBSCRIPTED} allowed"
        ));
    }
    Ok(())
}

/// Whether a here-document operator `<<` (or `<<-`) is at `at`; `<<<` is a here-string.
/// Found anywhere, quoted or not.
fn here_document_at(bytes: &[u8], at: usize) -> bool {
    bytes.get(at..).is_some_and(|rest| rest.starts_with(b"<<"))
        && bytes.get(at + 2) != Some(&b'<')
        && (at == 0 || bytes[at - 1] != b'<')
}

/// Whether the delimiter after `<<` may be empty. brush-parser takes the token after `<<`,
/// trims ASCII whitespace from its start (a form feed is part of a word to it) and unquotes it;
/// an empty result at the end of the input makes its tokenizer loop forever, allocating
/// (`ls <<'' `, `ls <<\f `, `$(<<  `: found by the `bash_policy` fuzz target). So refused: no
/// word (a newline, an operator), a word of nothing but quotes, escapes and whitespace, a line
/// continuation, and two blanks (inside `$( … )` blanks are part of the token).
fn empty_here_tag(rest: &[u8]) -> bool {
    let rest = rest.strip_prefix(b"-").unwrap_or(rest);
    let blanks = rest
        .iter()
        .take_while(|byte| matches!(byte, b' ' | b'\t' | b'\x0b' | b'\x0c' | b'\r'))
        .count();
    let rest = &rest[blanks..];
    let word_len = rest
        .iter()
        .take_while(|byte| !b" \t\n;|&<>()".contains(byte))
        .count();
    let bare = rest[..word_len].iter().any(|byte| {
        !matches!(byte, b'\'' | b'"' | b'$' | b'\\' | b'\x0b') && !byte.is_ascii_whitespace()
    });
    blanks > 1 || rest.starts_with(b"\\\n") || !bare
}

/// Whether `~`, `~+` or `~-` followed by ten or more digits starts at `at`.
fn huge_tilde_at(bytes: &[u8], at: usize) -> bool {
    let Some(rest) = bytes.get(at..).and_then(|rest| rest.strip_prefix(b"~")) else {
        return false;
    };
    let rest = rest
        .strip_prefix(b"+")
        .or(rest.strip_prefix(b"-"))
        .unwrap_or(rest);
    rest.iter().take_while(|byte| byte.is_ascii_digit()).count() >= 10
}

/// Whether `${name[`, `${!name[` or `${#name[` starts at `at`.
fn subscripted_at(bytes: &[u8], at: usize) -> bool {
    let Some(rest) = bytes.get(at..).and_then(|rest| rest.strip_prefix(b"${")) else {
        return false;
    };
    let rest = rest
        .strip_prefix(b"!")
        .or(rest.strip_prefix(b"#"))
        .unwrap_or(rest);
    let name = rest
        .iter()
        .take_while(|byte| byte.is_ascii_alphanumeric() || **byte == b'_')
        .count();
    name > 0 && rest.get(name) == Some(&b'[')
}

/// Words that open a construct the grammar recurses into.
const OPENERS: &[&str] = &[
    "{", "[[", "!", "if", "while", "until", "for", "select", "case", "function", "coproc",
];

/// Before parsing: the tokens that open a nested construct (the tokenizer has settled what is
/// quoted, so an `if` inside quotes is part of a word and not counted), then each word.
pub(super) fn check_tokens(tokens: &[Token]) -> Result<(), String> {
    let openers = tokens
        .iter()
        .filter(|token| match token {
            Token::Operator(operator, _) => operator == "(",
            Token::Word(word, _) => OPENERS.contains(&word.as_str()),
        })
        .count();
    if openers > MAX_NESTING {
        return Err(format!(
            "the command line has {openers} subshells, groups, tests and keywords (`(`, `{{`, \
             `[[`, `!`, `if`, `while`, `for`, `case` …), more than the {MAX_NESTING} allowed: \
             split it into simpler commands"
        ));
    }
    for (at, token) in tokens.iter().enumerate() {
        let Token::Word(word, _) = token else {
            continue;
        };
        // A here-document's body follows its delimiter (`<<`, `EOF`, body, `EOF`); it is read
        // by `words` without the word parser, and only the grammar's array-element test
        // (`name[`) could parse it.
        let body = at >= 2
            && matches!(&tokens[at - 2], Token::Operator(operator, _) if operator == "<<" || operator == "<<-")
            && matches!(&tokens[at - 1], Token::Word(..));
        // The grammar reads an all-digit word before `<` or `>` as a file descriptor and
        // panics when it is not an `i32` (`99999999999>x`, or an empty word there).
        let before_redirect = matches!(
            tokens.get(at + 1),
            Some(Token::Operator(operator, _)) if operator.starts_with(['<', '>'])
        );
        if before_redirect
            && word.bytes().all(|byte| byte.is_ascii_digit())
            && word.parse::<i32>().is_err()
        {
            return Err(format!(
                "`{word}` is not a file descriptor number a redirection can use"
            ));
        }
        check_word(word, body)?;
    }
    Ok(())
}

/// Before the word parser: a word with expansions, or that starts like an array element
/// (`name[`, which the grammar parses as arithmetic), has at most so many brackets and
/// substitutions. A here-document body only in the second case.
pub(super) fn check_word(text: &str, body: bool) -> Result<(), String> {
    let bytes = text.as_bytes();
    let substitutions = bytes
        .windows(2)
        .filter(|pair| pair[0] == b'$' && matches!(pair[1], b'(' | b'['))
        .count()
        + bytes.iter().filter(|byte| **byte == b'`').count();
    let expands = substitutions > 0 || text.contains("${");
    let name = bytes
        .iter()
        .take_while(|byte| byte.is_ascii_alphanumeric() || **byte == b'_')
        .count();
    let element = name > 0 && bytes.get(name) == Some(&b'[');
    if !element && (body || !expands) {
        return Ok(());
    }
    let brackets = bytes
        .iter()
        .filter(|byte| matches!(byte, b'(' | b'['))
        .count();
    if brackets > MAX_WORD_BRACKETS || substitutions > MAX_WORD_SUBSTITUTIONS {
        return Err(format!(
            "a word with expansions has {brackets} `(` and `[` and {substitutions} `$(`, `$[` \
             and backticks, more than the {MAX_WORD_BRACKETS} and {MAX_WORD_SUBSTITUTIONS} \
             allowed: split it into simpler commands"
        ));
    }
    Ok(())
}
