//! The natural-language search: Okapi BM25 (k1 = 1.2, b = 0.75) over each deferred tool's
//! name, description and parameters, split into lower-case words (`get_weather` and
//! `getWeather` are the words `get` and `weather`).

use std::collections::HashMap;

use super::entry::SearchEntry;
use super::error::SearchError;

/// Characters a query may have.
pub(crate) const MAX_QUERY_CHARS: usize = 1000;
/// Term-frequency saturation.
const K1: f64 = 1.2;
/// Length normalisation.
const B: f64 = 0.75;

/// The indexes of the entries that share a word with `query`, best score first (ties in
/// declaration order).
pub(crate) fn bm25_search(entries: &[SearchEntry], query: &str) -> Result<Vec<usize>, SearchError> {
    let len = query.chars().count();
    if len > MAX_QUERY_CHARS {
        return Err(SearchError::TooLong {
            len,
            max: MAX_QUERY_CHARS,
        });
    }
    let mut terms = words(query);
    terms.sort();
    terms.dedup();
    if terms.is_empty() {
        return Err(SearchError::NoQuery);
    }
    let documents: Vec<HashMap<String, usize>> = entries
        .iter()
        .map(|entry| {
            let mut counts = HashMap::new();
            for field in entry.fields() {
                for word in words(field) {
                    *counts.entry(word).or_insert(0) += 1;
                }
            }
            counts
        })
        .collect();
    let lengths: Vec<f64> = documents
        .iter()
        .map(|d| d.values().sum::<usize>() as f64)
        .collect();
    let count = documents.len() as f64;
    let average = (lengths.iter().sum::<f64>() / count.max(1.0)).max(1.0);
    // Each query word's inverse document frequency, counted once.
    let idfs: Vec<f64> = terms
        .iter()
        .map(|term| {
            let with_term = documents.iter().filter(|d| d.contains_key(term)).count() as f64;
            (1.0 + (count - with_term + 0.5) / (with_term + 0.5)).ln()
        })
        .collect();
    let mut scored: Vec<(f64, usize)> = Vec::new();
    for (index, document) in documents.iter().enumerate() {
        let mut score = 0.0;
        for (term, idf) in terms.iter().zip(&idfs) {
            let Some(&tf) = document.get(term) else {
                continue;
            };
            let tf = tf as f64;
            score += idf * tf * (K1 + 1.0) / (tf + K1 * (1.0 - B + B * lengths[index] / average));
        }
        if score > 0.0 {
            scored.push((score, index));
        }
    }
    scored.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
    Ok(scored.into_iter().map(|(_, index)| index).collect())
}

/// Lower-case words of `text`: runs of letters and digits, split where a lower-case letter
/// meets an upper-case one.
fn words(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut current = String::new();
    let mut previous_lower = false;
    for c in text.chars() {
        if !c.is_alphanumeric() {
            previous_lower = false;
            if !current.is_empty() {
                out.push(std::mem::take(&mut current));
            }
            continue;
        }
        if c.is_uppercase() && previous_lower && !current.is_empty() {
            out.push(std::mem::take(&mut current));
        }
        previous_lower = c.is_lowercase();
        current.extend(c.to_lowercase());
    }
    if !current.is_empty() {
        out.push(current);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn words_split_snake_and_camel_case() {
        assert_eq!(
            words("getWeather for_CITY 42x"),
            ["get", "weather", "for", "city", "42x"]
        );
    }

    #[test]
    fn the_tool_sharing_rare_words_ranks_first() {
        let entries = vec![
            SearchEntry::new(
                "send_email",
                "Send an email message to a person",
                &json!({}),
            ),
            SearchEntry::new(
                "get_weather",
                "Current weather for a city",
                &json!({"properties": {"city": {"description": "the city"}}}),
            ),
            SearchEntry::new("get_time", "Current time in a city", &json!({})),
        ];
        let found = bm25_search(&entries, "what is the weather like in Paris").unwrap();
        assert_eq!(found.first(), Some(&1), "{found:?}");
        assert!(!found.contains(&0), "{found:?}");
        let found = bm25_search(&entries, "city").unwrap();
        assert_eq!(found, [1, 2], "two mentions of city beat one");
        assert_eq!(bm25_search(&entries, " ?! "), Err(SearchError::NoQuery));
    }
}
