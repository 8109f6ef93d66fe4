//! Devices whose node's agent is lost (issue 14): out of service while the agent is started
//! again, retired from the run when it cannot be, and the candidates that were on them placed
//! again on a live device, since they are not to blame.

use std::collections::BTreeSet;

use crate::journal::{Event, RunOutcome};
use crate::model::{CandidateId, DeviceId, KernelSource};
use crate::search::{Pacing, device_for, first_free_device};

use super::{Core, Out, Resolution, SearchState};

impl SearchState {
    /// Whether a loss of these devices' agent is news: one of them is still in service. Each
    /// evaluation that was on them reports the loss; the first takes them out of service.
    pub fn any_in_service(&self, devices: &[DeviceId]) -> bool {
        devices.iter().any(|device| self.is_in_service(*device))
    }
}

/// The record of a lost agent's restart, the `restarts`th: its new Slurm step serving its
/// devices again, or why it could not start, which retires them.
pub fn agent_restarted(
    node: String,
    devices: Vec<DeviceId>,
    restarts: u32,
    answer: Result<String, String>,
) -> Event {
    match answer {
        Ok(step) => Event::AgentRestarted {
            node,
            devices,
            restarts,
            step,
        },
        Err(reason) => Event::DevicesLost { devices, reason },
    }
}

impl Core {
    /// The devices in service, in order. When none is, those whose agent is starting again
    /// stand in (what is placed there waits for it); when every one is lost the run is ending,
    /// and the whole list stands in, so that whatever is placed meanwhile has a device.
    pub(super) fn live_devices(&self) -> Vec<DeviceId> {
        let devices = &self.config.devices;
        let serving: Vec<DeviceId> = devices
            .iter()
            .copied()
            .filter(|device| self.is_in_service(*device))
            .collect();
        if !serving.is_empty() {
            return serving;
        }
        let kept: Vec<DeviceId> = devices
            .iter()
            .copied()
            .filter(|device| !self.retired.contains(device))
            .collect();
        if kept.is_empty() {
            devices.clone()
        } else {
            kept
        }
    }

    /// The live device with the fewest evaluations queued or running (steady search).
    pub(super) fn first_free_device(&self) -> DeviceId {
        let live: BTreeSet<DeviceId> = self.live_devices().into_iter().collect();
        let mut load = self.device_load.clone();
        load.retain(|device, _| live.contains(device));
        first_free_device(&load)
    }

    /// Where a candidate goes whose device was lost: in rounds, candidate i to live device
    /// i mod (live devices); in steady search, the first free live device.
    fn device_for_moved(&self, id: CandidateId) -> DeviceId {
        match self.config.pacing {
            Pacing::Rounds => device_for(id, &self.live_devices()),
            Pacing::Steady { .. } => self.first_free_device(),
        }
    }

    /// Retires `devices`; when none is left the run cannot go on.
    pub(super) fn retire(&mut self, devices: &[DeviceId], reason: &str, out: &mut Out) {
        self.retired.extend(devices.iter().copied());
        self.restarting.retain(|device| !devices.contains(device));
        if self.every_device_lost() {
            self.finish(
                RunOutcome::Failed,
                format!("every device of the run was lost: {reason}"),
                out,
            );
        }
    }

    fn every_device_lost(&self) -> bool {
        self.config
            .devices
            .iter()
            .all(|device| self.retired.contains(device))
    }

    /// An evaluation ended because its device is gone: the device is out of service (its
    /// `agent_restarting` or `devices_lost` came first) and the candidate's attempt is
    /// evaluated again on a live device (each loss restarts a node within its budget or retires
    /// it, so this ends). With none left, the candidate fails with the loss as its reason, and
    /// the run.
    pub(super) fn evaluated_on_lost_device(
        &mut self,
        id: CandidateId,
        reason: String,
        out: &mut Out,
    ) {
        let Some(candidate) = self.candidates.get(&id) else {
            return;
        };
        let source = candidate
            .source()
            .cloned()
            .unwrap_or_else(|| KernelSource::new(""));
        if self.every_device_lost() {
            let resolution = Resolution::Rejected {
                source,
                reason: reason.clone(),
                judged: false,
                simulated: false,
            };
            self.resolve(id, resolution, out);
            return self.retire(&[], &reason, out);
        }
        let device = self.device_for_moved(id);
        *self.device_load.entry(device).or_insert(0) += 1;
        let candidate = self
            .candidates
            .get_mut(&id)
            .expect("the candidate was looked up above");
        candidate.device = device;
        out.push(candidate.evaluation(id, source));
    }

    pub(super) fn is_retired(&self, device: DeviceId) -> bool {
        self.retired.contains(&device)
    }

    pub(super) fn is_in_service(&self, device: DeviceId) -> bool {
        !self.retired.contains(&device) && !self.restarting.contains(&device)
    }
}
