//! The regex search: a Python-`re`-like pattern matched (as `re.search` does, anywhere in
//! the text) against each deferred tool's name, description and parameters. The `regex`
//! crate runs in time linear in the text, so no pattern can backtrack catastrophically;
//! the pattern's length and its compiled size are bounded too.

use regex::RegexBuilder;

use super::entry::SearchEntry;
use super::error::SearchError;

/// Characters a pattern may have (the vendor's bound).
pub(crate) const MAX_PATTERN_CHARS: usize = 200;
/// Bytes the compiled pattern may take: `(a{100}){100}` and friends are refused.
const MAX_COMPILED_BYTES: usize = 1 << 20;
/// How deeply groups and repetitions may nest.
const MAX_NESTING: u32 = 64;

/// The indexes of the entries `pattern` finds, best first: matches in the name, then in
/// the description, then in a parameter; declaration order within each.
pub(crate) fn regex_search(
    entries: &[SearchEntry],
    pattern: &str,
) -> Result<Vec<usize>, SearchError> {
    if pattern.is_empty() {
        return Err(SearchError::NoQuery);
    }
    let len = pattern.chars().count();
    if len > MAX_PATTERN_CHARS {
        return Err(SearchError::TooLong {
            len,
            max: MAX_PATTERN_CHARS,
        });
    }
    let regex = RegexBuilder::new(pattern)
        .size_limit(MAX_COMPILED_BYTES)
        .dfa_size_limit(MAX_COMPILED_BYTES)
        .nest_limit(MAX_NESTING)
        .build()
        .map_err(|e| SearchError::InvalidPattern(describe(&e)))?;
    let mut ranked: Vec<(usize, usize)> = entries
        .iter()
        .enumerate()
        .filter_map(|(index, entry)| {
            let rank = if regex.is_match(&entry.name) {
                0
            } else if regex.is_match(&entry.description) {
                1
            } else if entry.parameters.iter().any(|p| regex.is_match(p)) {
                2
            } else {
                return None;
            };
            Some((rank, index))
        })
        .collect();
    ranked.sort();
    Ok(ranked.into_iter().map(|(_, index)| index).collect())
}

/// The compile error as one line the model can act on.
fn describe(error: &regex::Error) -> String {
    match error {
        regex::Error::CompiledTooBig(_) => {
            "the pattern is too large once compiled; use a simpler one".to_owned()
        }
        other => {
            let text = other.to_string();
            let last = text
                .lines()
                .rev()
                .find(|l| l.starts_with("error:"))
                .unwrap_or("the pattern does not parse");
            format!(
                "{} (Python `re` syntax without look-around or backreferences)",
                last.trim_start_matches("error:").trim()
            )
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn entries() -> Vec<SearchEntry> {
        vec![
            SearchEntry::new("send_email", "Send a message", &json!({})),
            SearchEntry::new("get_weather", "Forecast for a city", &json!({})),
            SearchEntry::new(
                "book_flight",
                "Reserve a seat",
                &json!({"properties": {"weather_ok": {"type": "boolean"}}}),
            ),
            SearchEntry::new("notify", "Send a weather alert", &json!({})),
        ]
    }

    #[test]
    fn name_matches_come_before_description_and_parameter_matches() {
        assert_eq!(regex_search(&entries(), "weather").unwrap(), [1, 3, 2]);
        assert_eq!(regex_search(&entries(), "(?i)SEND").unwrap(), [0, 3]);
        assert_eq!(regex_search(&entries(), "^get_").unwrap(), [1]);
        assert_eq!(
            regex_search(&entries(), "nothing").unwrap(),
            Vec::<usize>::new()
        );
    }

    #[test]
    fn bad_long_and_huge_patterns_are_refused() {
        let invalid = regex_search(&entries(), "(unclosed").unwrap_err();
        assert!(
            matches!(invalid, SearchError::InvalidPattern(_)),
            "{invalid}"
        );
        let lookahead = regex_search(&entries(), "get(?=_)").unwrap_err();
        assert!(lookahead.to_string().contains("look-around"), "{lookahead}");
        let long = "a".repeat(MAX_PATTERN_CHARS + 1);
        assert!(matches!(
            regex_search(&entries(), &long),
            Err(SearchError::TooLong { .. })
        ));
        let huge = regex_search(&entries(), r"(\w{100}){100}").unwrap_err();
        assert!(huge.to_string().contains("too large"), "{huge}");
        assert_eq!(regex_search(&entries(), ""), Err(SearchError::NoQuery));
    }
}
