//! report.html's plots, each an `<svg>` drawn from the run's summary: the best time against
//! wall-clock time and every candidate's time by round here, each device's timeline in `timeline`. Each data mark
//! says what it shows in its class and `data-` attributes (README: "report.html"), so that the
//! page can be checked against the journal.

use std::collections::{BTreeMap, BTreeSet};

use super::svg::{Axis, Mark, Svg, Swatch, cross, legend, tick_label, x_axis, y_axis};
use super::{FailureKind, Fate, FinishedCandidate, RunSummary};
use crate::journal::{Event, JournalRecord, Step};
use crate::model::CandidateId;

impl RunSummary {
    /// What only the plots need: each candidate's fate, each evaluation's outcome, the beam.
    pub(super) fn observe_for_plots(&mut self, record: &JournalRecord) {
        match &record.event {
            Event::Evaluated {
                candidate, outcome, ..
            } => {
                self.last_evaluations.insert(*candidate, *outcome);
            }
            Event::CandidateFinished {
                candidate,
                parent,
                round,
                device,
                passed,
                time_ms,
                reason,
                duplicate_of,
                ..
            } => {
                // Needed no more once the candidate's fate is known: a long run holds none.
                let last_evaluation = self.last_evaluations.remove(candidate);
                let fate = match (passed, time_ms) {
                    (true, Some(time_ms)) => Fate::Verified { time_ms: *time_ms },
                    _ => {
                        let reason = reason
                            .clone()
                            .unwrap_or_else(|| "passed, but no time was recorded".into());
                        Fate::Failed {
                            kind: FailureKind::of(&reason, *duplicate_of, last_evaluation),
                            reason,
                        }
                    }
                };
                self.finished_seen += 1;
                self.candidates.insert(
                    *candidate,
                    FinishedCandidate {
                        parent: *parent,
                        round: *round,
                        device: *device,
                        finished: record.t,
                        order: self.finished_seen,
                        fate,
                    },
                );
            }
            Event::BeamUpdated { beam, .. } => {
                self.beam = beam.iter().map(|member| member.candidate).collect();
            }
            _ => {}
        }
    }
}

/// A candidate's folder (its prompt, reply, kernel and logs), relative to the report beside
/// it in the run directory.
pub(super) fn folder_of(candidate: CandidateId) -> String {
    format!("candidates/{candidate}/")
}

pub(super) const WIDTH: f64 = 960.0;
/// The plot areas' right edge.
pub(super) const RIGHT: f64 = WIDTH - 24.0;
/// The plot areas' left edge, where the vertical axis' labels end.
const LEFT: f64 = 72.0;
/// Where the legend's first row sits.
pub(super) const LEGEND: f64 = 20.0;

const BEST: &str = "#0072b2";
const EAGER: &str = "#d55e00";
const COMPILE: &str = "#cc79a7";

pub(super) fn step_colour(step: Step) -> &'static str {
    match step {
        Step::Verify => "#56b4e9",
        Step::Time => "#009e73",
        Step::Profile => "#e69f00",
        Step::Reference => "#cc79a7",
    }
}

fn failure_colour(kind: FailureKind) -> &'static str {
    match kind {
        FailureKind::WrongOutput => "#d55e00",
        FailureKind::Tampered => "#000000",
        FailureKind::Crashed => "#e69f00",
        FailureKind::WorkerDied => "#cc79a7",
        FailureKind::Unstartable => "#56b4e9",
        FailureKind::DeviceLost => "#f0e442",
        FailureKind::Duplicate => "#999999",
        FailureKind::NotEvaluated => "#8c6d00",
    }
}

/// The unit a time axis counts in, by the run's length: seconds, minutes or hours.
pub(super) struct TimeUnit {
    pub(super) seconds: f64,
    name: &'static str,
}

impl TimeUnit {
    fn for_run(seconds: f64) -> TimeUnit {
        let (seconds, name) = if seconds <= 180.0 {
            (1.0, "s")
        } else if seconds <= 3.0 * 3600.0 {
            (60.0, "min")
        } else {
            (3600.0, "h")
        };
        TimeUnit { seconds, name }
    }
}

/// The horizontal axis of wall-clock time, from the run's start to the journal's end.
pub(super) fn time_axis(summary: &RunSummary, left: f64) -> (Axis, TimeUnit) {
    let end = summary.end_seconds();
    let unit = TimeUnit::for_run(end);
    (Axis::linear(0.0, end / unit.seconds, left, RIGHT), unit)
}

/// The wall-clock axis along a plot's bottom edge.
pub(super) fn time_x_axis(svg: &mut Svg, x: &Axis, unit: &TimeUnit, bottom: f64, top: f64) {
    let title = format!("wall-clock time since the run started ({})", unit.name);
    x_axis(svg, &labelled(x), bottom, top, &title);
}

fn labelled(axis: &Axis) -> Vec<(f64, String)> {
    axis.ticks()
        .into_iter()
        .map(|value| (axis.at(value), tick_label(value)))
        .collect()
}

/// A verified kernel faster than every one before it, when it finished.
struct Improvement {
    candidate: CandidateId,
    seconds: f64,
    time_ms: f64,
}

/// The best time as it fell: each verified candidate, in the order they finished, that beat
/// all before it (the initial kernel first).
fn improvements(summary: &RunSummary) -> Vec<Improvement> {
    let mut verified: Vec<(usize, f64, CandidateId, f64)> = summary
        .candidates
        .iter()
        .filter_map(|(id, candidate)| match candidate.fate {
            Fate::Verified { time_ms } => Some((
                candidate.order,
                summary.seconds_since_start(candidate.finished),
                *id,
                time_ms,
            )),
            Fate::Failed { .. } => None,
        })
        .collect();
    // In the journal's order: a time stamped to the millisecond can tie.
    verified.sort_by_key(|(order, ..)| *order);
    let mut best = f64::INFINITY;
    let mut out = Vec::new();
    for (_, seconds, candidate, time_ms) in verified {
        if time_ms < best {
            best = time_ms;
            out.push(Improvement {
                candidate,
                seconds,
                time_ms,
            });
        }
    }
    out
}

/// The best verified time against wall-clock time, with PyTorch eager and torch.compile as
/// lines when they were measured.
pub(super) fn best_over_time(summary: &RunSummary) -> String {
    const HEIGHT: f64 = 340.0;
    let (top, bottom) = (56.0, HEIGHT - 48.0);
    let (x, unit) = time_axis(summary, LEFT);
    let improvements = improvements(summary);
    let references: Vec<(&str, &str, &str, f64)> = [
        ("eager", "PyTorch eager", EAGER, summary.eager_ms),
        ("compile", "torch.compile", COMPILE, summary.compile_ms),
    ]
    .into_iter()
    .filter_map(|(which, name, colour, ms)| Some((which, name, colour, ms?)))
    .collect();
    let highest = improvements
        .iter()
        .map(|improvement| improvement.time_ms)
        .chain(references.iter().map(|reference| reference.3))
        .filter(|ms| ms.is_finite())
        .fold(0.0, f64::max);
    let y = Axis::linear(0.0, highest * 1.1, bottom, top);
    let mut svg = Svg::new(
        WIDTH,
        HEIGHT,
        "plot best-time",
        "The best verified time against wall-clock time",
    );
    time_x_axis(&mut svg, &x, &unit, bottom, top);
    y_axis(&mut svg, &labelled(&y), LEFT, RIGHT, "best time (ms)");
    let mut entries = vec![(
        Swatch::Line {
            colour: BEST,
            dashed: false,
        },
        "best verified kernel".to_string(),
    )];
    for (_, name, colour, _) in &references {
        entries.push((
            Swatch::Line {
                colour,
                dashed: true,
            },
            name.to_string(),
        ));
    }
    legend(&mut svg, LEFT, LEGEND, RIGHT, &entries);
    if let Some(first) = improvements.first() {
        let mut path = format!(
            "M{:.2} {:.2}",
            x.at(first.seconds / unit.seconds),
            y.at(first.time_ms)
        );
        for improvement in &improvements[1..] {
            path.push_str(&format!(
                "H{:.2}V{:.2}",
                x.at(improvement.seconds / unit.seconds),
                y.at(improvement.time_ms)
            ));
        }
        path.push_str(&format!("H{RIGHT:.2}"));
        svg.add(
            Mark::new("path")
                .attr("class", "best-line")
                .attr("d", path)
                .attr("fill", "none")
                .attr("stroke", BEST)
                .attr("stroke-width", 2),
        );
    } else {
        svg.label(
            (LEFT + RIGHT) / 2.0,
            (top + bottom) / 2.0,
            "middle",
            "no kernel verified yet",
        );
    }
    for improvement in &improvements {
        svg.add(
            Mark::new("circle")
                .attr("class", "best")
                .attr("data-candidate", improvement.candidate)
                .attr("data-ms", improvement.time_ms)
                .attr("data-seconds", format_args!("{:.3}", improvement.seconds))
                .px("cx", x.at(improvement.seconds / unit.seconds))
                .px("cy", y.at(improvement.time_ms))
                .attr("r", 4)
                .attr("fill", BEST)
                .title(format!(
                    "candidate {}: {:.4} ms, {:.1} s after the start",
                    improvement.candidate, improvement.time_ms, improvement.seconds
                )),
        );
    }
    for (which, name, colour, ms) in &references {
        let level = y.at(*ms);
        svg.add(
            Mark::new("line")
                .attr("class", "reference")
                .attr("data-which", which)
                .attr("data-ms", ms)
                .px("x1", LEFT)
                .px("y1", level)
                .px("x2", RIGHT)
                .px("y2", level)
                .attr("stroke", colour)
                .attr("stroke-width", 2)
                .attr("stroke-dasharray", "6 3")
                .title(format!("{name}: {ms:.4} ms")),
        );
        svg.label(RIGHT, level - 4.0, "end", &format!("{name} {ms:.4} ms"));
    }
    svg.finish()
}

/// The most candidates a plot draws one mark each: past it, the candidates plot draws cells
/// of rounds × time with their counts, and the lineage the survivors' ancestry, so that
/// report.html stays a few megabytes and opens at once at 100,000 candidates (issue 24).
pub(super) const MARKS_LIMIT: usize = 2_000;
/// Columns (of rounds) and rows (of log time) of the candidates plot's cells.
const CELL_COLUMNS: u32 = 160;
const CELL_ROWS: usize = 40;

/// Every candidate whose fate is known, by round: verified ones at their time (log scale), the
/// beam ringed, failed ones as crosses in a band above, coloured by reason. Past
/// [`MARKS_LIMIT`] candidates, cells count them instead, and only the beam and each improvement
/// of the best keep a mark of their own.
pub(super) fn candidates_by_round(summary: &RunSummary) -> String {
    const HEIGHT: f64 = 400.0;
    let band = (64.0, 88.0);
    let (top, bottom) = (100.0, HEIGHT - 48.0);
    let last_round = summary
        .candidates
        .values()
        .map(|candidate| candidate.round)
        .max()
        .unwrap_or(0);
    let x = Axis::linear(-0.5, f64::from(last_round) + 0.5, LEFT, RIGHT);
    let times: Vec<f64> = summary
        .candidates
        .values()
        .filter_map(|candidate| match candidate.fate {
            Fate::Verified { time_ms } if time_ms.is_finite() && time_ms > 0.0 => Some(time_ms),
            _ => None,
        })
        .collect();
    let fastest = times.iter().copied().fold(f64::INFINITY, f64::min);
    let slowest = times.iter().copied().fold(0.0, f64::max);
    let y = Axis::log(fastest / 1.25, slowest * 1.25, bottom, top);
    let mut svg = Svg::new(
        WIDTH,
        HEIGHT,
        "plot candidates",
        "Every candidate's time by round, the beam ringed, failures by reason",
    );
    let stride = last_round / 24 + 1;
    let round_ticks: Vec<(f64, String)> = (0..=last_round)
        .step_by(stride as usize)
        .map(|round| (x.at(f64::from(round)), round.to_string()))
        .collect();
    x_axis(
        &mut svg,
        &round_ticks,
        bottom,
        top,
        "round (0: the initial kernel)",
    );
    y_axis(&mut svg, &labelled(&y), LEFT, RIGHT, "time (ms, log scale)");
    svg.add(
        Mark::new("rect")
            .attr("class", "failure-band")
            .px("x", LEFT)
            .px("y", band.0)
            .px("width", RIGHT - LEFT)
            .px("height", band.1 - band.0)
            .attr("fill", "#fbeee6"),
    );
    svg.label(LEFT - 8.0, band.1 - 8.0, "end", "failed");

    let summarized = summary.candidates.len() > MARKS_LIMIT;
    let mut kinds = Vec::new();
    let mut by_round: BTreeMap<u32, Vec<(CandidateId, &FinishedCandidate)>> = BTreeMap::new();
    if summarized {
        let cells = Cells::count(summary, last_round, (fastest / 1.25, slowest * 1.25));
        cells.draw(&mut svg, &x, &y, band);
        kinds = cells.failures.keys().map(|(_, kind)| *kind).collect();
        let alone: BTreeSet<CandidateId> = summary
            .beam
            .iter()
            .copied()
            .chain(improvements(summary).iter().map(|i| i.candidate))
            .collect();
        for id in alone {
            if let Some(candidate) = summary.candidates.get(&id) {
                by_round
                    .entry(candidate.round)
                    .or_default()
                    .push((id, candidate));
            }
        }
    } else {
        for (id, candidate) in &summary.candidates {
            by_round
                .entry(candidate.round)
                .or_default()
                .push((*id, candidate));
        }
    }
    for (round, members) in &by_round {
        let count = members.len() as f64;
        for (index, (id, candidate)) in members.iter().enumerate() {
            let offset = if summarized {
                0.0
            } else {
                -0.35 + 0.7 * (index as f64 + 0.5) / count
            };
            let cx = x.at(f64::from(*round) + offset);
            let whose = match candidate.parent {
                Some(parent) => format!(
                    "candidate {id} (round {round}, parent {parent}, device {})",
                    candidate.device
                ),
                None => format!("candidate {id}, the initial kernel"),
            };
            match &candidate.fate {
                Fate::Verified { time_ms } => {
                    let cy = y.at(*time_ms);
                    let in_beam = summary.beam.contains(id);
                    let beam_note = if in_beam { "; in the beam" } else { "" };
                    svg.add(
                        Mark::new("circle")
                            .attr("class", "candidate")
                            .attr("data-candidate", id)
                            .attr("data-round", round)
                            .attr("data-fate", "verified")
                            .attr("data-ms", time_ms)
                            .px("cx", cx)
                            .px("cy", cy)
                            .attr("r", 4)
                            .attr("fill", BEST)
                            .link(folder_of(*id))
                            .title(format!("{whose}: {time_ms:.4} ms{beam_note}")),
                    );
                    if in_beam {
                        svg.add(
                            Mark::new("circle")
                                .attr("class", "beam")
                                .attr("data-candidate", id)
                                .px("cx", cx)
                                .px("cy", cy)
                                .attr("r", 7)
                                .attr("fill", "none")
                                .attr("stroke", "#000")
                                .attr("stroke-width", 1.5),
                        );
                    }
                }
                Fate::Failed { kind, reason } => {
                    if !kinds.contains(kind) {
                        kinds.push(*kind);
                    }
                    let reason = reason.lines().next().unwrap_or_default();
                    svg.add(
                        Mark::new("path")
                            .attr("class", "candidate")
                            .attr("data-candidate", id)
                            .attr("data-round", round)
                            .attr("data-fate", "failed")
                            .attr("data-reason", kind.name())
                            .attr("d", cross(cx, (band.0 + band.1) / 2.0, 4.0))
                            .attr("stroke", failure_colour(*kind))
                            .attr("stroke-width", 2)
                            .link(folder_of(*id))
                            .title(format!("{whose}: {}: {reason}", kind.label())),
                    );
                }
            }
        }
    }
    kinds.sort();
    kinds.dedup();
    let mut entries = vec![
        (Swatch::Dot { colour: BEST }, "verified".to_string()),
        (Swatch::Ring, "in the beam".to_string()),
    ];
    if summarized {
        entries.push((
            Swatch::Block { colour: BEST },
            format!(
                "{} candidates counted in cells (the darker, the more); alone: the beam and each new best",
                summary.candidates.len()
            ),
        ));
    }
    entries.extend(kinds.into_iter().map(|kind| {
        (
            Swatch::Cross {
                colour: failure_colour(kind),
            },
            kind.label().to_string(),
        )
    }));
    legend(&mut svg, LEFT, LEGEND, RIGHT, &entries);
    if summary.candidates.is_empty() {
        svg.label(
            (LEFT + RIGHT) / 2.0,
            (top + bottom) / 2.0,
            "middle",
            "no candidate finished yet",
        );
    }
    svg.finish()
}

/// The candidates plot's cells past [`MARKS_LIMIT`]: verified candidates counted by a column of
/// rounds and a row of log time, failed ones by a column and their reason.
struct Cells {
    rounds_per_column: u32,
    /// The log-time range the rows divide.
    times: (f64, f64),
    verified: BTreeMap<(u32, usize), u32>,
    failures: BTreeMap<(u32, FailureKind), u32>,
}

impl Cells {
    fn count(summary: &RunSummary, last_round: u32, times: (f64, f64)) -> Cells {
        let mut cells = Cells {
            rounds_per_column: (last_round + 1).div_ceil(CELL_COLUMNS),
            times,
            verified: BTreeMap::new(),
            failures: BTreeMap::new(),
        };
        for candidate in summary.candidates.values() {
            let column = candidate.round / cells.rounds_per_column;
            match &candidate.fate {
                Fate::Verified { time_ms } => {
                    *cells
                        .verified
                        .entry((column, cells.row(*time_ms)))
                        .or_default() += 1;
                }
                Fate::Failed { kind, .. } => {
                    *cells.failures.entry((column, *kind)).or_default() += 1;
                }
            }
        }
        cells
    }

    /// The row of a time: a time outside the range (not finite, not positive) takes the
    /// nearest end, as the axis draws it.
    fn row(&self, time_ms: f64) -> usize {
        let (low, high) = (self.times.0.ln(), self.times.1.ln());
        let share = (time_ms.ln() - low) / (high - low);
        if share.is_nan() {
            return 0;
        }
        ((share * CELL_ROWS as f64) as usize).min(CELL_ROWS - 1)
    }

    /// The time at a row's lower edge.
    fn row_floor(&self, row: usize) -> f64 {
        let (low, high) = (self.times.0.ln(), self.times.1.ln());
        (low + (high - low) * row as f64 / CELL_ROWS as f64).exp()
    }

    fn rounds(&self, column: u32) -> (u32, u32) {
        let first = column * self.rounds_per_column;
        (first, first + self.rounds_per_column - 1)
    }

    fn draw(&self, svg: &mut Svg, x: &Axis, y: &Axis, band: (f64, f64)) {
        let most = self.verified.values().copied().max().unwrap_or(1);
        for (&(column, row), &count) in &self.verified {
            let (first, last) = self.rounds(column);
            let (low, high) = (self.row_floor(row), self.row_floor(row + 1));
            let left = x.at(f64::from(first) - 0.5);
            let top = y.at(high);
            // The darker, the more: log-scaled, so that a cell of one still shows.
            let shade = 0.15 + 0.85 * f64::from(count).ln_1p() / f64::from(most).ln_1p();
            svg.add(
                Mark::new("rect")
                    .attr("class", "candidate-cell")
                    .attr("data-fate", "verified")
                    .attr("data-round-from", first)
                    .attr("data-round-to", last)
                    .attr("data-ms-from", format_args!("{low:.6}"))
                    .attr("data-ms-to", format_args!("{high:.6}"))
                    .attr("data-count", count)
                    .px("x", left)
                    .px("y", top)
                    .px("width", (x.at(f64::from(last) + 0.5) - left).max(0.5))
                    .px("height", (y.at(low) - top).max(0.5))
                    .attr("fill", BEST)
                    .attr("fill-opacity", format_args!("{shade:.3}"))
                    .title(format!(
                        "{count} verified in rounds {first}–{last}, {low:.4}–{high:.4} ms"
                    )),
            );
        }
        let mut column_failures: BTreeMap<u32, u32> = BTreeMap::new();
        for (&(column, _), &count) in &self.failures {
            *column_failures.entry(column).or_default() += count;
        }
        let mut stacked: BTreeMap<u32, f64> = BTreeMap::new();
        for (&(column, kind), &count) in &self.failures {
            let (first, last) = self.rounds(column);
            let left = x.at(f64::from(first) - 0.5);
            let height = (band.1 - band.0) * f64::from(count) / f64::from(column_failures[&column]);
            let below = stacked.entry(column).or_insert(band.1);
            *below -= height;
            svg.add(
                Mark::new("rect")
                    .attr("class", "candidate-cell")
                    .attr("data-fate", "failed")
                    .attr("data-reason", kind.name())
                    .attr("data-round-from", first)
                    .attr("data-round-to", last)
                    .attr("data-count", count)
                    .px("x", left)
                    .px("y", *below)
                    .px("width", (x.at(f64::from(last) + 0.5) - left).max(0.5))
                    .px("height", height)
                    .attr("fill", failure_colour(kind))
                    .title(format!(
                        "{count} failed in rounds {first}–{last}: {}",
                        kind.label()
                    )),
            );
        }
    }
}
