//! `cordon demo`: Cordon's main job on embedded defaults — a model-written Python program
//! that calls tools (one batch for concurrent calls), tabulates them with pandas, handles a
//! schema violation, and a second program stopped by a CPU limit. The first run on a
//! machine fetches and builds the CPython image (minutes, with progress lines).

use std::process::ExitCode;
use std::sync::Arc;

use cordon_core::{Dispatcher, ToolRegistry};
use cordon_protocol::execution::{Language, Limits};
use cordon_sandbox::ExecutionRequest;

use crate::execution::execute_and_report;
use crate::exit::{EXIT_COMPLETED, EXIT_ERROR, EXIT_LIMIT};
use crate::setup::sandbox;

/// Options of `cordon demo`.
#[derive(Debug, clap::Args)]
pub struct DemoArgs {
    /// Print the JSON results instead of the program output.
    #[arg(long)]
    pub json: bool,
}

const TOOLS: &str = r#"{"tools": [
  {"name": "get_weather", "description": "Current weather for a city",
   "input_schema": {"type": "object", "properties": {"city": {"type": "string"}},
                    "required": ["city"], "additionalProperties": false},
   "handler": {"kind": "static", "result": {"temp_c": 21, "conditions": "sunny"}}},
  {"name": "send_report", "description": "Files a report",
   "input_schema": {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]},
   "handler": {"kind": "static", "result": {"filed": true}}}
]}"#;

const PROGRAM: &str = r#"
import asyncio
import pandas as pd   # numpy, pandas and matplotlib are loaded in the image: no wait

cities = ["Paris", "Oslo", "Cairo", "Lima"]
# Awaited together, these four calls leave the sandbox as one batch.
reports = await asyncio.gather(*[get_weather(city=c) for c in cities])
table = pd.DataFrame(reports, index=cities)
print(table)
print(f"mean {table.temp_c.mean():.1f} °C")

try:
    await get_weather(city=42)          # violates the tool's input schema
except ToolError as error:
    print(f"caught ToolError ({error.kind}): {error}")

filed = tools.call("send_report", {"text": f"{len(reports)} cities checked"})
{"cities": len(reports), "filed": filed["filed"]}
"#;

const RUNAWAY: &str = "n = 0\nwhile True:\n    n += 1\n";

/// `cordon demo`.
pub async fn run(args: DemoArgs) -> anyhow::Result<ExitCode> {
    let registry = ToolRegistry::from_json(TOOLS, "<demo tools>")?;
    let tools = Dispatcher::new(Arc::new(registry));
    let sandbox = sandbox(vec![Language::Python], 64).await?;

    eprintln!("── cordon demo 1/2: a program that calls tools ──");
    let request = ExecutionRequest::new(Language::Python, PROGRAM, tools.clone());
    let first = execute_and_report(&sandbox, request, args.json).await?;

    eprintln!("── cordon demo 2/2: a runaway loop under a 200 ms CPU limit ──");
    let limits = Limits {
        cpu_ms: 200,
        ..Limits::default()
    };
    let request = ExecutionRequest::new(Language::Python, RUNAWAY, tools).limits(limits);
    let second = execute_and_report(&sandbox, request, args.json).await?;

    // The demo succeeds when the first program completes and the second is stopped.
    let expected = (
        first == ExitCode::from(EXIT_COMPLETED),
        second == ExitCode::from(EXIT_LIMIT),
    );
    Ok(if expected == (true, true) {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(EXIT_ERROR)
    })
}
