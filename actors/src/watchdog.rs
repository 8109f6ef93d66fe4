//! The Watchdog: every child process group is registered here with a deadline. Past it, the
//! whole group gets SIGTERM, then after the grace period SIGKILL. It is the only actor that
//! signals processes, and it does so only through the `GroupSignaller` port.

use std::collections::HashMap;
use std::time::Duration;

use actix::prelude::*;

use crate::collector::{Collector, Record};
use crate::journal::Event;
use crate::ports::{GroupId, GroupSignaller};

/// Watch a process group: past `deadline` from now it is ended.
#[derive(Message)]
#[rtype(result = "WatchId")]
pub struct Watch {
    pub group: GroupId,
    pub deadline: Duration,
    pub label: String,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct WatchId(u64);

/// The group's work finished. Answers whether the deadline had already passed, so the caller
/// can tell a timeout from a crash.
#[derive(Message)]
#[rtype(result = "bool")]
pub struct Release(pub WatchId);

/// End every watched group now: SIGTERM, grace, SIGKILL (first SIGINT).
#[derive(Message)]
#[rtype(result = "()")]
pub struct TerminateAll;

/// SIGKILL every watched group at once (second SIGINT).
#[derive(Message)]
#[rtype(result = "()")]
pub struct KillAll;

struct Watched {
    group: GroupId,
    label: String,
    deadline_timer: Option<SpawnHandle>,
    expired: bool,
}

pub struct Watchdog {
    signaller: Box<dyn GroupSignaller>,
    grace: Duration,
    collector: Option<Addr<Collector>>,
    watched: HashMap<WatchId, Watched>,
    next_id: u64,
}

impl Watchdog {
    pub fn new(
        signaller: Box<dyn GroupSignaller>,
        grace: Duration,
        collector: Option<Addr<Collector>>,
    ) -> Self {
        Watchdog {
            signaller,
            grace,
            collector,
            watched: HashMap::new(),
            next_id: 0,
        }
    }

    fn journal(&self, label: &str, action: &str) {
        if let Some(collector) = &self.collector {
            collector.do_send(Record(Event::ChildDeadline {
                label: label.to_string(),
                action: action.to_string(),
            }));
        }
    }

    /// SIGTERM now and SIGKILL after the grace period. The SIGKILL is sent even when the leader
    /// has exited by then: grandchildren that ignored SIGTERM are still in the group.
    fn end_group(&mut self, id: WatchId, ctx: &mut Context<Self>) {
        let Some(watched) = self.watched.get_mut(&id) else {
            return;
        };
        if watched.expired {
            return;
        }
        watched.expired = true;
        let (group, label) = (watched.group, watched.label.clone());
        self.signaller.terminate(group);
        self.journal(&label, "terminate");
        ctx.run_later(self.grace, move |watchdog, _| {
            watchdog.signaller.kill(group);
            watchdog.journal(&label, "kill");
        });
    }
}

impl Actor for Watchdog {
    type Context = Context<Self>;
}

/// A cheap handle that adapters in `src/` use to register their children.
#[derive(Clone)]
pub struct WatchdogClient(Addr<Watchdog>);

impl WatchdogClient {
    pub fn new(address: Addr<Watchdog>) -> Self {
        WatchdogClient(address)
    }

    /// Registers the group; `None` when the Watchdog is gone (the run is shutting down), in
    /// which case the caller should not start work.
    pub async fn watch(
        &self,
        group: GroupId,
        deadline: Duration,
        label: impl Into<String>,
    ) -> Option<WatchId> {
        self.0
            .send(Watch {
                group,
                deadline,
                label: label.into(),
            })
            .await
            .ok()
    }

    /// Returns whether the deadline had passed before the release.
    pub async fn release(&self, id: WatchId) -> bool {
        self.0.send(Release(id)).await.unwrap_or(false)
    }
}

impl Handler<Watch> for Watchdog {
    type Result = MessageResult<Watch>;

    fn handle(&mut self, message: Watch, ctx: &mut Context<Self>) -> Self::Result {
        let id = WatchId(self.next_id);
        self.next_id += 1;
        let timer = ctx.run_later(message.deadline, move |watchdog, ctx| {
            watchdog.end_group(id, ctx)
        });
        self.watched.insert(
            id,
            Watched {
                group: message.group,
                label: message.label,
                deadline_timer: Some(timer),
                expired: false,
            },
        );
        MessageResult(id)
    }
}

impl Handler<Release> for Watchdog {
    type Result = bool;

    fn handle(&mut self, message: Release, ctx: &mut Context<Self>) -> bool {
        match self.watched.remove(&message.0) {
            Some(watched) => {
                if let Some(timer) = watched.deadline_timer {
                    ctx.cancel_future(timer);
                }
                watched.expired
            }
            None => false,
        }
    }
}

impl Handler<TerminateAll> for Watchdog {
    type Result = ();

    fn handle(&mut self, _: TerminateAll, ctx: &mut Context<Self>) {
        let ids: Vec<WatchId> = self.watched.keys().copied().collect();
        for id in ids {
            self.end_group(id, ctx);
        }
    }
}

impl Handler<KillAll> for Watchdog {
    type Result = ();

    fn handle(&mut self, _: KillAll, _: &mut Context<Self>) {
        for watched in self.watched.values_mut() {
            watched.expired = true;
            self.signaller.kill(watched.group);
        }
    }
}
