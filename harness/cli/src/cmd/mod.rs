//! One module per subcommand: its options (`…Args`) and its `run`.

pub mod bench;
pub mod computer;
pub mod demo;
pub mod mcp;
pub mod prepare;
pub mod replay;
pub mod run;
pub mod serve;
pub mod tools;
