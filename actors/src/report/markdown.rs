//! report.md: the run's figures as text and tables, every one folded from the journal.

use std::fmt::Write as _;

use crate::journal::RunOutcome;
use crate::model::CandidateId;

use super::{FinalSubject, RunSummary};

/// `baseline / best` as a speedup, or a dash when either was not measured.
pub(super) fn ratio(baseline_ms: Option<f64>, best_ms: Option<f64>) -> String {
    match (baseline_ms, best_ms) {
        (Some(baseline), Some(best)) if best > 0.0 => format!("{:.2}×", baseline / best),
        _ => "–".into(),
    }
}

/// A size in decimal units: `512 B`, `14.2 kB`, `3.10 GB`.
fn bytes_text(bytes: u64) -> String {
    const UNITS: [&str; 5] = ["kB", "MB", "GB", "TB", "PB"];
    if bytes < 1000 {
        return format!("{bytes} B");
    }
    let mut value = bytes as f64;
    let mut unit = "B";
    for next in UNITS {
        if value < 1000.0 {
            break;
        }
        value /= 1000.0;
        unit = next;
    }
    if value < 10.0 {
        format!("{value:.2} {unit}")
    } else {
        format!("{value:.1} {unit}")
    }
}

/// A reason as one table cell: its first line, with the table's separator escaped.
pub(super) fn table_cell(text: &str) -> String {
    text.lines().next().unwrap_or_default().replace('|', "\\|")
}

/// A section listing `items`, one bullet each, after its `intro` (a paragraph or nothing);
/// nothing when there are none.
fn bullet_section(out: &mut String, title: &str, intro: &str, items: &[String]) {
    if items.is_empty() {
        return;
    }
    let _ = write!(out, "\n## {title}\n\n{intro}");
    for item in items {
        let _ = writeln!(out, "- {item}");
    }
}

impl RunSummary {
    /// Round 0 of a run that began with generation: the seeds, which passed, why the others
    /// did not, and the seed the search started from.
    fn render_generation(&self, out: &mut String) {
        if self.seeds.is_empty() {
            return;
        }
        let passed = self
            .seeds_ended
            .values()
            .filter(|why| why.is_none())
            .count();
        let _ = writeln!(
            out,
            "\n## Generation (round 0)\n\nSeeds asked for: {}; ended: {}; verified: {passed}. {}.",
            self.seeds.len(),
            self.seeds_ended.len(),
            match self.start_seed {
                Some(seed) => format!("The search started from seed {seed}"),
                None => "No first beam was made".to_string(),
            }
        );
        for (seed, why) in &self.seeds_ended {
            if let Some(why) = why {
                let _ = writeln!(out, "- seed {seed} failed: {}", table_cell(why));
            }
        }
    }

    pub fn render_markdown(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(out, "# kactors run report\n");
        if self.simulated {
            let _ = writeln!(
                out,
                "**Simulated run:** the noop platform ran no kernel; every verdict and time below comes from a deterministic model of the candidate's source.\n"
            );
        }
        if let Some((outcome, reason)) = &self.outcome {
            let _ = writeln!(
                out,
                "Outcome: **{}** ({reason}); wall time {:.1} s{}.\n",
                outcome.name(),
                self.wall_time().as_secs_f64(),
                self.down_note()
            );
            if let (RunOutcome::Interrupted, Some(command)) = (outcome, &self.resume_command) {
                let _ = writeln!(out, "To go on from here: `{command}`.\n");
            }
        } else if let Some(last) = self.last_record {
            let _ = writeln!(
                out,
                "Still going, or killed: no run_finished record yet; the journal's last record is from {} ({:.1} s of run time{}).\n",
                crate::journal::format_utc_millis(last),
                self.wall_time().as_secs_f64(),
                self.down_note()
            );
            if let Some(command) = &self.resume_command {
                let _ = writeln!(out, "If it was killed, `{command}` goes on from here.\n");
            }
        }
        self.render_final(&mut out);
        self.render_limits(&mut out);
        let _ = writeln!(out, "## Configuration\n");
        for (key, value) in &self.configuration {
            let _ = writeln!(out, "- {key}: {value}");
        }
        self.startup.render(&mut out);
        self.render_generation(&mut out);
        let _ = writeln!(out, "\n## Rounds\n");
        let _ = writeln!(
            out,
            "| round | proposed | verified | failed | duplicates | best (ms) | speedup vs initial | vs PyTorch eager | vs torch.compile | failures |"
        );
        let _ = writeln!(out, "|---|---|---|---|---|---|---|---|---|---|");
        for (round, row) in &self.rounds {
            let best = format!("{:.4} (candidate {})", row.best_ms, row.best_candidate);
            let best_ms = Some(row.best_ms);
            let speedup = self.speedup(best_ms);
            let vs_eager = ratio(self.eager_ms, best_ms);
            let vs_compile = ratio(self.compile_ms, best_ms);
            let failures = if row.failures.is_empty() {
                "–".to_string()
            } else {
                row.failures
                    .iter()
                    .map(|failure| table_cell(failure))
                    .collect::<Vec<_>>()
                    .join("; ")
            };
            let _ = writeln!(
                out,
                "| {round} | {} | {} | {} | {} | {best} | {speedup} | {vs_eager} | {vs_compile} | {failures} |",
                row.proposed, row.verified, row.failed, row.duplicates
            );
        }
        if self.token_duplicates + self.compiled_duplicates > 0 {
            let _ = writeln!(
                out,
                "\nDuplicates of an earlier candidate: {} with the same code (its tokens, comments and spacing aside; not evaluated), {} with the same compiled code (verified, not timed).",
                self.token_duplicates, self.compiled_duplicates
            );
        }
        if !self.tampering.is_empty() {
            let ids: Vec<String> = self.tampering.iter().map(ToString::to_string).collect();
            let _ = writeln!(
                out,
                "\nTampered with the evaluator's state (rejected; the evaluator restarted): candidates {}.",
                ids.join(", ")
            );
        }
        self.models.render(self.initial_ms, &mut out);
        let _ = writeln!(out, "\n## Best kernel\n");
        match (self.best(), self.initial_ms) {
            (Some((candidate, ms)), initial) => {
                let _ = writeln!(
                    out,
                    "Candidate {candidate}: {ms:.4} ms ({} {}; speedup {}; {} of the speed of light). Source: best_kernel.py.",
                    self.start_name(),
                    initial
                        .map(|i| format!("{i:.4} ms"))
                        .unwrap_or_else(|| "not measured".into()),
                    self.speedup(Some(ms)),
                    self.verification.percent_text(candidate)
                );
            }
            (None, _) => {
                let _ = writeln!(out, "No kernel was verified.");
            }
        }
        let reference = |ms: Option<f64>| {
            ms.map_or_else(|| "not measured".to_string(), |ms| format!("{ms:.4} ms"))
        };
        let _ = writeln!(
            out,
            "\nPyTorch eager: {}; torch.compile: {} (timed by the candidates' method on one device).",
            reference(self.eager_ms),
            reference(self.compile_ms)
        );
        self.verification.render(&mut out);
        let _ = writeln!(out, "\n## Devices\n");
        let _ = writeln!(
            out,
            "| device | name | seen by its evaluator | busy fraction |"
        );
        let _ = writeln!(out, "|---|---|---|---|");
        for (device, fraction) in self.busy_fractions() {
            let time = &self.devices[&device];
            let seen = time.seen.as_deref().unwrap_or("–");
            let _ = writeln!(
                out,
                "| {device} | {} | {seen} | {:.1}% |",
                time.name,
                fraction * 100.0
            );
        }
        bullet_section(
            &mut out,
            "Devices lost",
            "Retired from the run; what they had in flight ran again on a live device.\n\n",
            &self.devices_lost,
        );
        bullet_section(
            &mut out,
            "Agent restarts",
            "Node agents lost and started again; what they had in flight ran again on another device.\n\n",
            &self.agent_restarts,
        );
        bullet_section(&mut out, "Worker restarts", "", &self.worker_deaths);
        if let Some(sandbox) = &self.sandbox {
            if sandbox.setting == "off" {
                let _ = writeln!(
                    out,
                    "\n## Sandbox\n\nNone (`sandbox: off`): candidate code ran with the user's rights, network and files."
                );
            } else {
                let intro = format!(
                    "Candidate code ran in kactors' sandbox (`sandbox: {}`; SECURITY.md says what \
                     each protection covers):\n\n",
                    sandbox.setting
                );
                bullet_section(&mut out, "Sandbox", &intro, &sandbox.protections);
            }
        }
        self.render_resumes(&mut out);
        if let Some(note) = &self.profiling_note {
            let _ = writeln!(out, "\n## Profiling\n\nProfiling stopped: {note}");
        }
        self.render_disk(&mut out);
        self.render_cross_check(&mut out);
        out
    }

    /// What the run directory holds, and what was removed from it as the run went.
    fn render_disk(&self, out: &mut String) {
        let _ = writeln!(out, "\n## Disk\n");
        match self.run_dir_bytes {
            Some((at, bytes)) => {
                let _ = write!(
                    out,
                    "The run directory holds {} ({bytes} bytes, measured {:.1} s after the start).",
                    bytes_text(bytes),
                    self.seconds_since_start(at)
                );
            }
            None => {
                let _ = write!(out, "The run directory has not been measured yet.");
            }
        }
        let (candidates, removed) = self.caches_removed;
        let _ = writeln!(
            out,
            " The caches of {candidates} candidate(s) that could no longer become parents were removed as the run went: {} ({removed} bytes).",
            bytes_text(removed)
        );
    }

    /// Each profiled kernel's event time against the device time its profiler measured for the
    /// same call: more than 10% apart means one of the two did not measure the kernel's own work.
    fn render_cross_check(&self, out: &mut String) {
        let pairs: Vec<(CandidateId, f64, f64)> = self
            .profile_times
            .iter()
            .filter_map(|(candidate, profiled)| {
                Some((*candidate, *self.event_times.get(candidate)?, *profiled))
            })
            .collect();
        if pairs.is_empty() {
            return;
        }
        let _ = writeln!(out, "\n## Event time against the profiler's device time\n");
        let _ = writeln!(
            out,
            "| candidate | event time (ms) | profiler (ms) | difference | |"
        );
        let _ = writeln!(out, "|---|---|---|---|---|");
        for (candidate, event, profiled) in pairs {
            let difference = (event - profiled).abs() / profiled.max(f64::MIN_POSITIVE);
            let flag = if difference > 0.10 {
                "**flagged: more than 10% apart**"
            } else {
                "ok"
            };
            let _ = writeln!(
                out,
                "| {candidate} | {event:.4} | {profiled:.4} | {:.1}% | {flag} |",
                difference * 100.0
            );
        }
    }

    /// The headline: the finale's figures, re-timed in one fresh process, interleaved.
    fn render_final(&self, out: &mut String) {
        if self.final_times.is_empty() {
            return;
        }
        let _ = writeln!(
            out,
            "## Headline: re-timed in one fresh evaluator, interleaved, two passes\n"
        );
        let _ = writeln!(out, "| timed | pass 1 (ms) | pass 2 (ms) |");
        let _ = writeln!(out, "|---|---|---|");
        for (subject, figures) in &self.final_times {
            let name = match subject {
                FinalSubject::Kernel(candidate) if *candidate == self.start() => self.start_name(),
                FinalSubject::Kernel(candidate) => format!("candidate {candidate}"),
                FinalSubject::Eager => "PyTorch eager".into(),
                FinalSubject::Compile => "torch.compile".into(),
            };
            let cells: Vec<String> = figures
                .iter()
                .map(|figure| match figure {
                    Ok(ms) => format!("{ms:.4}"),
                    Err(error) => error.clone(),
                })
                .collect();
            let _ = writeln!(out, "| {name} | {} |", cells.join(" | "));
        }
        let mean = |subject| self.final_mean(subject);
        if let Some((best, _)) = self.best() {
            let best_ms = mean(FinalSubject::Kernel(best));
            let _ = writeln!(
                out,
                "\nBest kernel (candidate {best}): {} vs the {}, {} vs PyTorch eager, {} vs torch.compile (means of the two passes).",
                ratio(mean(FinalSubject::Kernel(self.start())), best_ms),
                self.start_name(),
                ratio(mean(FinalSubject::Eager), best_ms),
                ratio(mean(FinalSubject::Compile), best_ms)
            );
        }
        if let Some(user_test) = &self.user_test {
            let _ = writeln!(
                out,
                "\nThe user's test.py on the best kernel, staged in final/: {user_test}."
            );
        }
        let _ = writeln!(out);
    }

    /// The mean of the finale's passes that timed `subject`.
    pub(super) fn final_mean(&self, subject: FinalSubject) -> Option<f64> {
        let figures: Vec<f64> = self
            .final_times
            .get(&subject)?
            .iter()
            .filter_map(|f| f.as_ref().ok().copied())
            .collect();
        (!figures.is_empty()).then(|| figures.iter().sum::<f64>() / figures.len() as f64)
    }

    pub(super) fn speedup(&self, best_ms: Option<f64>) -> String {
        ratio(self.initial_ms, best_ms)
    }

    /// How long no process ran, when a run was resumed: not in the wall time.
    fn down_note(&self) -> String {
        match self.resumes.len() {
            0 => String::new(),
            resumes => format!(
                ", not counting {:.1} s between a death and its resume ({resumes} resume(s))",
                self.down_seconds()
            ),
        }
    }

    /// The limits the run reached, each with when and what became of the evaluations in
    /// flight.
    fn render_limits(&self, out: &mut String) {
        for limit in &self.limits {
            let cancelled = if limit.evaluations_cancelled {
                "the evaluations still in flight after their grace were cancelled"
            } else {
                "no new proposals; the evaluations in flight were let finish"
            };
            let _ = writeln!(
                out,
                "Limit reached {:.1} s after the start: **{}** ({}); {cancelled}.\n",
                self.seconds_since_start(limit.at),
                limit.limit,
                table_cell(&limit.reason)
            );
        }
    }

    /// Each resume: how the process before ended, how long nothing ran, what was taken up
    /// again.
    fn render_resumes(&self, out: &mut String) {
        if self.resumes.is_empty() {
            return;
        }
        let _ = writeln!(out, "\n## Resumes\n");
        let _ = writeln!(
            out,
            "| resumed at (s) | the process before | down (s) | evaluated again | requests in flight | replies from disk | orphans ended | torn last line | forced changes |"
        );
        let _ = writeln!(out, "|---|---|---|---|---|---|---|---|---|");
        for resume in &self.resumes {
            let down = self.seconds_since_start(resume.resumed_at)
                - self.seconds_since_start(resume.down_since);
            let forced = if resume.forced_changes.is_empty() {
                "–".to_string()
            } else {
                table_cell(&resume.forced_changes.join("; "))
            };
            let _ = writeln!(
                out,
                "| {:.1} | {} | {down:.1} | {} | {} | {} | {} | {} | {forced} |",
                self.seconds_since_start(resume.resumed_at),
                table_cell(&resume.previous_end),
                resume.evaluated_again,
                resume.requests_pending,
                resume.replies_recovered,
                resume.orphans_ended,
                if resume.torn_line { "cut off" } else { "–" },
            );
        }
        let _ = writeln!(
            out,
            "\nSteps a death interrupted end at the dead process's last record; busy fractions and the wall time leave out the time between a death and its resume."
        );
    }
}
