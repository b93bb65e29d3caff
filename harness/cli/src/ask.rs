//! `user_ask` under `cordon run`: the question goes to the terminal (stderr), the answer
//! comes from the program's standard input when the program came from a file, else from
//! `/dev/tty`.

use std::io::{BufRead, Write};

use cordon_protocol::execution::ClientToolResult;
use serde_json::{Value, json};

use crate::run::escape_controls;

/// Where answers are read from.
#[derive(Debug, Clone, Copy)]
pub enum AnswerSource {
    /// Standard input (the program was read from a file).
    Stdin,
    /// The controlling terminal (the program was read from standard input).
    Tty,
}

fn read_line(source: AnswerSource) -> std::io::Result<Option<String>> {
    let mut line = String::new();
    let read = match source {
        AnswerSource::Stdin => std::io::stdin().lock().read_line(&mut line)?,
        AnswerSource::Tty => {
            let tty = std::fs::File::open("/dev/tty")?;
            std::io::BufReader::new(tty).read_line(&mut line)?
        }
    };
    Ok((read > 0).then(|| line.trim_end_matches(['\n', '\r']).to_owned()))
}

/// Asks the question of a `user_ask` call and returns the result to submit.
pub fn answer(call_id: String, input: &Value, source: AnswerSource) -> ClientToolResult {
    let question = input
        .get("question")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let options: Vec<&str> = input
        .get("options")
        .and_then(Value::as_array)
        .map(|options| options.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    // The question is model-written: shown, never interpreted by the terminal.
    let mut prompt = format!("cordon: the program asks: {}\n", escape_controls(question));
    for (index, option) in options.iter().enumerate() {
        prompt.push_str(&format!("  {}. {}\n", index + 1, escape_controls(option)));
    }
    prompt.push_str(if options.is_empty() {
        "answer> "
    } else {
        "answer (a number or your own words)> "
    });
    let _ = std::io::stderr().write_all(prompt.as_bytes());
    let _ = std::io::stderr().flush();
    match read_line(source) {
        Ok(Some(line)) => {
            let chosen = line
                .trim()
                .parse::<usize>()
                .ok()
                .and_then(|number| number.checked_sub(1))
                .and_then(|index| options.get(index).copied())
                .or_else(|| {
                    options
                        .iter()
                        .copied()
                        .find(|option| *option == line.trim())
                });
            let output = match chosen {
                Some(option) => json!({"answer": option, "is_freeform": false}),
                None => json!({"answer": line, "is_freeform": true}),
            };
            ClientToolResult {
                call_id,
                output,
                is_error: false,
            }
        }
        Ok(None) | Err(_) => ClientToolResult {
            call_id,
            output: json!("nobody could be asked: no answer on the terminal"),
            is_error: true,
        },
    }
}
