//! `kactors bench`'s domain: the problems a bench runs (`problems`), its journal, bench.jsonl,
//! and what it says (`record`), each problem's result and the suite's figures as KernelBench
//! defines them (`figures`), and the bench's files (`render`). Plain functions and data: the
//! command (`commands/bench.rs`) runs the problems' runs and writes the files.

pub mod figures;
pub mod problems;
pub mod record;
pub mod render;
