//! The kactors actor runtime: typed messages, the actors (Supervisor, Manager, GpuWorker,
//! Profiler, LlmBroker, Collector, Watchdog), the search strategies and the journal schema.
//!
//! This crate never spawns a process, opens a socket or touches a GPU: it reaches the outside
//! world only through the traits in [`ports`], which the `kactors` package implements.

pub mod analysis;
pub mod civil_date;
pub mod collector;
pub mod finale;
pub mod gpu_worker;
pub mod journal;
pub mod llm_broker;
pub mod manager;
pub mod model;
pub mod panic_note;
pub mod ports;
pub mod profile;
pub mod profiler;
pub mod report;
pub mod search;
pub mod search_state;
pub mod speed_of_light;
pub mod supervision;
pub mod supervisor;
pub mod text;
pub mod time_limit;
pub mod tokens;
pub mod watchdog;
