//! What the shell will expand in a word, read from brush-parser's word pieces.
//!
//! Without `allow_subshells`, a word may expand variables but never run anything: command
//! substitution is refused wherever it sits, and so is every way bash has of evaluating a
//! variable's *value* as code — arithmetic on names (`$((x))`, `${s:x}`, `${a[x]}`: a value
//! `a[$(cmd)]` runs `cmd`), indirection (`${!x}`) and prompt expansion (`${x@P}`). The strings
//! brush-parser leaves unparsed inside an expansion (defaults, patterns, replacements) are
//! refused if they hold `$(`, `$[` or a backtick anywhere, quoted or not: inside `"${x:-'…'}"`
//! bash does not honour the single quotes. Last, a belt over the parser: every `$(`, `$[` and
//! backtick in the word's text must lie inside a piece that is known not to run (single or
//! ANSI-C quotes, an escape, checked arithmetic), so a piece brush-parser reads differently from
//! bash cannot hide one. A here-document body is read by a small exact scanner instead.

use std::ops::Range;

use brush_parser::ParserOptions;
use brush_parser::word::{self, Parameter, ParameterExpr, ParameterTransformOp, WordPiece};

use super::bounds::{self, MAX_EXPANSIONS};

const SUBSTITUTION: &str = "command substitution (`$( … )`, backticks) is not allowed";

/// How the shell reads a text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Quoting {
    /// A word of the command line.
    Word,
    /// A here-document body whose delimiter is unquoted: quotes are literal, expansions run.
    HereDocument,
}

/// Refuses what would run a command when `text` is expanded (see the module's comment).
pub(super) fn inspect(text: &str, quoting: Quoting, options: &ParserOptions) -> Result<(), String> {
    if quoting == Quoting::HereDocument {
        return here_document(text);
    }
    let pieces = parse(text, options)?;
    let walker = Walker { options };
    walker.pieces(&pieces, 0)?;
    // In order and disjoint, as the pieces are: a binary search finds the one around a byte.
    let mut inert = Vec::new();
    inert_ranges(&pieces, &mut inert);
    let bytes = text.as_bytes();
    let hidden = (0..bytes.len()).find(|&at| {
        let runs = bytes[at] == b'`'
            || (bytes[at] == b'$' && matches!(bytes.get(at + 1), Some(b'(' | b'[')));
        let around = inert.partition_point(|range| range.start <= at);
        runs && !(around > 0 && inert[around - 1].contains(&at))
    });
    match hidden {
        Some(_) => Err(SUBSTITUTION.into()),
        None => Ok(()),
    }
}

/// brush-parser's word parser, behind the bounds it needs (the command line's words were
/// checked already; this covers the words the grammar builds, such as `a=(x y)`).
fn parse(text: &str, options: &ParserOptions) -> Result<Vec<word::WordPieceWithSource>, String> {
    bounds::check_word(text, false)?;
    word::parse(text, options).map_err(|error| format!("the word `{text}` does not parse: {error}"))
}

/// An expanded here-document body, read without the word parser (which takes exponential
/// time on an unbalanced body: `$( $(( …` on a few lines took seconds). The body's syntax is
/// simple enough to read exactly: quotes are literal, a backslash escapes `$`, a backtick, a
/// backslash or a newline. Substitution and arithmetic are refused outright, and of `${ … }`
/// only the plain `${name}` is accepted; `$name` and the special parameters are fine.
fn here_document(text: &str) -> Result<(), String> {
    let bytes = text.as_bytes();
    let mut at = 0;
    let mut braced = false;
    while at < bytes.len() {
        match (bytes[at], bytes.get(at + 1)) {
            (b'\\', Some(b'$' | b'`' | b'\\' | b'\n')) => at += 2,
            (b'`', _) | (b'$', Some(b'(' | b'[')) => {
                return Err(
                    "command substitution and arithmetic (`$( … )`, `$(( … ))`, `$[ … ]`, \
                     backticks) are not allowed in a here-document body: quote its delimiter \
                     (`<<'EOF'`) to pass the body unexpanded"
                        .into(),
                );
            }
            (b'$', Some(b'{')) => {
                let name = bytes[at + 2..]
                    .iter()
                    .take_while(|byte| byte.is_ascii_alphanumeric() || **byte == b'_')
                    .count();
                let special = matches!(
                    bytes.get(at + 2),
                    Some(b'@' | b'*' | b'#' | b'?' | b'-' | b'$' | b'!')
                );
                let end = at + 2 + if name > 0 { name } else { usize::from(special) };
                braced |= end == at + 2 || bytes.get(end) != Some(&b'}');
                at = end;
            }
            _ => at += 1,
        }
    }
    if braced {
        return Err(
            "in a here-document body only plain `${name}` expansions are allowed (no \
             `${name:-…}`, `${name[…]}` or `${!name}`): quote its delimiter (`<<'EOF'`) to pass \
             the body unexpanded"
                .into(),
        );
    }
    Ok(())
}

/// The byte ranges of pieces that expand nothing: quotes, escapes, arithmetic already checked.
fn inert_ranges(pieces: &[word::WordPieceWithSource], out: &mut Vec<Range<usize>>) {
    for piece in pieces {
        match &piece.piece {
            WordPiece::SingleQuotedText(_)
            | WordPiece::AnsiCQuotedText(_)
            | WordPiece::EscapeSequence(_)
            | WordPiece::ArithmeticExpression(_) => out.push(piece.start_index..piece.end_index),
            WordPiece::DoubleQuotedSequence(inner)
            | WordPiece::GettextDoubleQuotedSequence(inner) => inert_ranges(inner, out),
            WordPiece::Text(_)
            | WordPiece::TildeExpansion(_)
            | WordPiece::ParameterExpansion(_)
            | WordPiece::CommandSubstitution(_)
            | WordPiece::BackquotedCommandSubstitution(_) => {}
        }
    }
}

struct Walker<'a> {
    options: &'a ParserOptions,
}

impl Walker<'_> {
    fn pieces(&self, pieces: &[word::WordPieceWithSource], depth: usize) -> Result<(), String> {
        for piece in pieces {
            match &piece.piece {
                WordPiece::Text(_)
                | WordPiece::SingleQuotedText(_)
                | WordPiece::AnsiCQuotedText(_)
                | WordPiece::EscapeSequence(_)
                | WordPiece::TildeExpansion(_) => {}
                WordPiece::DoubleQuotedSequence(inner)
                | WordPiece::GettextDoubleQuotedSequence(inner) => self.pieces(inner, depth)?,
                WordPiece::CommandSubstitution(_) | WordPiece::BackquotedCommandSubstitution(_) => {
                    return Err(SUBSTITUTION.into());
                }
                WordPiece::ArithmeticExpression(expression) => arithmetic(&expression.value)?,
                WordPiece::ParameterExpansion(expression) => self.parameter(expression, depth)?,
            }
        }
        Ok(())
    }

    fn parameter(&self, expression: &ParameterExpr, depth: usize) -> Result<(), String> {
        let mut strings: Vec<&Option<String>> = Vec::new();
        let mut sums = Vec::new();
        let (parameter, indirect) = match expression {
            ParameterExpr::Parameter {
                parameter,
                indirect,
            }
            | ParameterExpr::ParameterLength {
                parameter,
                indirect,
            } => (parameter, *indirect),
            ParameterExpr::UseDefaultValues {
                parameter,
                indirect,
                default_value: value,
                ..
            }
            | ParameterExpr::AssignDefaultValues {
                parameter,
                indirect,
                default_value: value,
                ..
            }
            | ParameterExpr::IndicateErrorIfNullOrUnset {
                parameter,
                indirect,
                error_message: value,
                ..
            }
            | ParameterExpr::UseAlternativeValue {
                parameter,
                indirect,
                alternative_value: value,
                ..
            }
            | ParameterExpr::RemoveSmallestSuffixPattern {
                parameter,
                indirect,
                pattern: value,
            }
            | ParameterExpr::RemoveLargestSuffixPattern {
                parameter,
                indirect,
                pattern: value,
            }
            | ParameterExpr::RemoveSmallestPrefixPattern {
                parameter,
                indirect,
                pattern: value,
            }
            | ParameterExpr::RemoveLargestPrefixPattern {
                parameter,
                indirect,
                pattern: value,
            }
            | ParameterExpr::UppercaseFirstChar {
                parameter,
                indirect,
                pattern: value,
            }
            | ParameterExpr::UppercasePattern {
                parameter,
                indirect,
                pattern: value,
            }
            | ParameterExpr::LowercaseFirstChar {
                parameter,
                indirect,
                pattern: value,
            }
            | ParameterExpr::LowercasePattern {
                parameter,
                indirect,
                pattern: value,
            } => {
                strings.push(value);
                (parameter, *indirect)
            }
            ParameterExpr::ReplaceSubstring {
                parameter,
                indirect,
                pattern,
                replacement,
                ..
            } => {
                self.nested(pattern, depth)?;
                strings.push(replacement);
                (parameter, *indirect)
            }
            ParameterExpr::Substring {
                parameter,
                indirect,
                offset,
                length,
            } => {
                sums.push(&offset.value);
                sums.extend(length.iter().map(|length| &length.value));
                (parameter, *indirect)
            }
            ParameterExpr::Transform {
                parameter,
                indirect,
                op,
            } => {
                if matches!(op, ParameterTransformOp::PromptExpand) {
                    return Err(
                        "prompt expansion `${name@P}` is not allowed: it runs a variable's \
                         `$( … )`"
                            .into(),
                    );
                }
                (parameter, *indirect)
            }
            // Names only: no value is expanded.
            ParameterExpr::VariableNames { .. } | ParameterExpr::MemberKeys { .. } => {
                return Ok(());
            }
        };
        if indirect {
            return Err(
                "indirect expansion `${!name}` is not allowed: it expands a name held in a \
                 variable, and `a[$( … )]` there runs a command"
                    .into(),
            );
        }
        match parameter {
            Parameter::NamedWithIndex { index, .. } => sums.push(index),
            Parameter::Positional(_)
            | Parameter::Special(_)
            | Parameter::Named(_)
            | Parameter::NamedWithAllIndices { .. } => {}
        }
        for sum in sums {
            arithmetic(sum)?;
        }
        for text in strings.into_iter().flatten() {
            self.nested(text, depth)?;
        }
        Ok(())
    }

    /// A string brush-parser left unparsed inside an expansion: refused if it could substitute
    /// in any quoting, then read with quotes literal so that every expansion in it is seen.
    fn nested(&self, text: &str, depth: usize) -> Result<(), String> {
        if text.contains('`') || text.contains("$(") || text.contains("$[") {
            return Err(SUBSTITUTION.into());
        }
        if !text.contains('$') {
            return Ok(());
        }
        if depth >= MAX_EXPANSIONS {
            return Err(format!(
                "expansions nest more than {MAX_EXPANSIONS} deep: split the command"
            ));
        }
        let pieces = word::parse_heredoc(text, self.options)
            .map_err(|error| format!("the expansion `{text}` does not parse: {error}"))?;
        self.pieces(&pieces, depth + 1)
    }
}

/// Arithmetic must be on plain numbers: bash evaluates a name's value as an expression, and a
/// subscript there (`a[$(cmd)]`) runs a command.
pub(super) fn arithmetic(text: &str) -> Result<(), String> {
    let plain = text
        .chars()
        .all(|c| c.is_ascii_digit() || c.is_ascii_whitespace() || "+-*/%<>=!&|^~?:,()".contains(c));
    if plain {
        Ok(())
    } else {
        Err(format!(
            "arithmetic and subscripts on anything but plain numbers (`{text}`) are not allowed: \
             bash evaluates a variable's value there as code"
        ))
    }
}

/// The word's text when it is literal: quotes removed, and no expansion of any kind (variables,
/// globs, braces, tildes, escapes in `$'…'`), so the shell will see exactly this text.
pub(super) fn literal(text: &str, options: &ParserOptions) -> Option<String> {
    let pieces = parse(text, options).ok()?;
    let mut out = String::new();
    // The unquoted text alone, quoted characters masked, to find globs and brace expansion.
    let mut shape = String::new();
    collect(&pieces, &mut out, &mut shape, false)?;
    if globs(&shape) || brace_expansion(&shape) {
        return None;
    }
    Some(out)
}

/// Whether every word the text expands to starts with a fixed character other than `-`, so
/// that none can be an option: `src/*.rs`, `HEAD@{1}`, `"fix $x"` (not `$x`, `-*`, `{-c,x}`,
/// nor `a$x`, whose unquoted expansion may split into more words).
pub(super) fn never_an_option(text: &str, options: &ParserOptions) -> bool {
    let Ok(pieces) = parse(text, options) else {
        return false;
    };
    let plain = |text: &str| {
        text.chars()
            .next()
            .is_some_and(|first| !"-*?[{~".contains(first))
    };
    let starts_plain = match pieces.first().map(|piece| &piece.piece) {
        Some(WordPiece::Text(text) | WordPiece::SingleQuotedText(text)) => plain(text),
        Some(WordPiece::DoubleQuotedSequence(inner)) => {
            matches!(inner.first().map(|piece| &piece.piece), Some(WordPiece::Text(text)) if plain(text))
        }
        _ => false,
    };
    let splits = pieces.iter().any(|piece| {
        matches!(
            piece.piece,
            WordPiece::ParameterExpansion(_)
                | WordPiece::CommandSubstitution(_)
                | WordPiece::BackquotedCommandSubstitution(_)
                | WordPiece::ArithmeticExpression(_)
        )
    });
    starts_plain && !splits
}

/// Whether unquoted text has a glob: `*`, `?`, `[…]`, or an extended glob's `(`. A lone `[`
/// (the `test` command) is not one.
fn globs(shape: &str) -> bool {
    shape.contains(['*', '?', '('])
        || shape
            .find('[')
            .is_some_and(|open| shape[open..].contains(']'))
}

fn collect(
    pieces: &[word::WordPieceWithSource],
    out: &mut String,
    shape: &mut String,
    quoted: bool,
) -> Option<()> {
    for piece in pieces {
        match &piece.piece {
            WordPiece::Text(text) => {
                out.push_str(text);
                if quoted {
                    shape.extend(text.chars().map(|_| '_'));
                } else {
                    shape.push_str(text);
                }
            }
            WordPiece::SingleQuotedText(text) => {
                out.push_str(text);
                shape.extend(text.chars().map(|_| '_'));
            }
            // `$'\x2e'` is `.`: only escape-free ANSI-C text is taken as it reads.
            WordPiece::AnsiCQuotedText(text) if !text.contains('\\') => {
                out.push_str(text);
                shape.extend(text.chars().map(|_| '_'));
            }
            WordPiece::EscapeSequence(text) => {
                let escaped = text.strip_prefix('\\').unwrap_or(text);
                // A line continuation is removed, not kept as a newline.
                if escaped != "\n" {
                    out.push_str(escaped);
                    shape.extend(escaped.chars().map(|_| '_'));
                }
            }
            WordPiece::DoubleQuotedSequence(inner) => collect(inner, out, shape, true)?,
            _ => return None,
        }
    }
    Some(())
}

/// Whether unquoted text has `{…,…}` or `{…..…}`, which bash expands into several words.
fn brace_expansion(shape: &str) -> bool {
    let Some(open) = shape.find('{') else {
        return false;
    };
    let Some(close) = shape[open..].rfind('}') else {
        return false;
    };
    let inside = &shape[open..open + close];
    inside.contains(',') || inside.contains("..")
}
