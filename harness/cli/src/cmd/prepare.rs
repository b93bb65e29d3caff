//! `cordon prepare`: fetches and builds guest images ahead of their first use, so the first
//! execution (or a server's first request) does not wait for it. The CPython image is the
//! one that takes minutes: a ~100 MB download from PyPI, then a snapshot and a compile.

use std::process::ExitCode;
use std::time::Instant;

use anyhow::Context;
use cordon_protocol::execution::Language;

use crate::setup::sandbox;

/// Options of `cordon prepare`.
#[derive(Debug, clap::Args)]
pub struct PrepareArgs {
    /// Languages to prepare (python, python-lite, javascript); all when none is named.
    #[arg(value_name = "LANG")]
    pub languages: Vec<String>,
}

/// `cordon prepare`.
pub async fn run(args: PrepareArgs) -> anyhow::Result<ExitCode> {
    let languages = if args.languages.is_empty() {
        Language::ALL.to_vec()
    } else {
        args.languages
            .iter()
            .map(|name| {
                Language::parse(name).with_context(|| {
                    format!("unknown language `{name}` (use python, python-lite or javascript)")
                })
            })
            .collect::<anyhow::Result<Vec<_>>>()?
    };
    let sandbox = sandbox(Vec::new(), 1).await?;
    for language in languages {
        let started = Instant::now();
        eprintln!("cordon: preparing {}", language.as_str());
        sandbox
            .prepare(language)
            .await
            .with_context(|| format!("preparing {}", language.as_str()))?;
        eprintln!(
            "cordon: {} is ready ({:.1} s)",
            language.as_str(),
            started.elapsed().as_secs_f64()
        );
    }
    Ok(ExitCode::SUCCESS)
}
