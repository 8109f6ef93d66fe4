//! Records the progress tests feed their sinks.

use std::time::SystemTime;

use actors::journal::{DeviceDescription, Event, JournalRecord, Step};
use actors::model::{CandidateId, DeviceId};

pub fn record(event: Event) -> JournalRecord {
    JournalRecord {
        t: SystemTime::UNIX_EPOCH,
        event,
    }
}

/// A noop run on `devices` simulated devices.
pub fn run_started(devices: u32) -> Event {
    Event::RunStarted {
        strategy: "noop".into(),
        platform: "noop".into(),
        simulated: true,
        search: "beam_search".into(),
        num_top_kernels: 2,
        num_bottlenecks: 2,
        max_rounds: 3,
        devices: (0..devices)
            .map(|device| {
                DeviceDescription::on_one_node(
                    DeviceId(device),
                    format!("noop simulated device {device}"),
                    None,
                )
            })
            .collect(),
        initial_source: String::new(),
        sandbox: None,
    }
}

/// Round 1's candidate `candidate` starts `step` on `device`.
pub fn step_started(candidate: u64, device: u32, step: Step) -> Event {
    Event::StepStarted {
        candidate: CandidateId(candidate),
        parent: None,
        round: 1,
        device: DeviceId(device),
        step,
    }
}
