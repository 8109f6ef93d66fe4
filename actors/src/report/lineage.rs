//! report.html's lineage: which parent each candidate came from, the bottleneck its proposal
//! addressed, and what became of it, as a tree on one screen: a column per round, a mark per
//! candidate joined to its parent, the details in each mark's hover title.

use std::collections::{BTreeMap, BTreeSet};

use super::plots::{MARKS_LIMIT, RIGHT, WIDTH, folder_of};
use super::svg::{Mark, Svg};
use super::{Fate, RunSummary};
use crate::model::CandidateId;

const TOP: f64 = 40.0;
const LEFT: f64 = 40.0;
/// The tallest the tree grows: a round of more candidates than fit packs them closer.
const MOST_HEIGHT: f64 = 620.0;
const ROW: f64 = 14.0;

impl RunSummary {
    /// The bottleneck a candidate's proposal was asked to address: its parent's analysis, in
    /// the order the proposals take them.
    fn bottleneck_of(&self, candidate: CandidateId) -> Option<&str> {
        let (parent, index) = self.planned.get(&candidate)?;
        self.analyses
            .get(parent)?
            .get(*index as usize)
            .map(String::as_str)
    }
}

/// The candidates the tree draws: every one whose fate the journal records, or past
/// [`MARKS_LIMIT`] the survivors' ancestry: the best's line first, then the beam's, as far up
/// as the limit allows (every candidate is still counted in the candidates plot and report.md).
fn drawn(summary: &RunSummary) -> BTreeSet<CandidateId> {
    if summary.candidates.len() <= MARKS_LIMIT {
        return summary.candidates.keys().copied().collect();
    }
    let mut drawn = BTreeSet::new();
    let survivors = summary
        .best()
        .map(|(id, _)| id)
        .into_iter()
        .chain(summary.beam.iter().copied());
    for survivor in survivors {
        let mut at = Some(survivor);
        while let Some(id) = at {
            if drawn.len() >= MARKS_LIMIT || !drawn.insert(id) {
                break;
            }
            at = summary
                .candidates
                .get(&id)
                .and_then(|candidate| candidate.parent);
        }
    }
    drawn.retain(|id| summary.candidates.contains_key(id));
    drawn
}

/// The lineage tree of every candidate whose fate the journal records (past [`MARKS_LIMIT`],
/// of the survivors' ancestry).
pub(super) fn lineage(summary: &RunSummary) -> String {
    let drawn = drawn(summary);
    let mut rounds: BTreeMap<u32, Vec<CandidateId>> = BTreeMap::new();
    for id in &drawn {
        rounds
            .entry(summary.candidates[id].round)
            .or_default()
            .push(*id);
    }
    let tallest = rounds.values().map(Vec::len).max().unwrap_or(1).max(1);
    let row = (MOST_HEIGHT / tallest as f64).min(ROW);
    let height = TOP + tallest as f64 * row + 24.0;
    let columns = rounds.len().max(1) as f64;
    let column = ((RIGHT - LEFT) / columns).min(160.0);
    let mut svg = Svg::new(
        WIDTH,
        height,
        "plot lineage",
        "Each candidate joined to its parent, a column per round: verified in green, failed in red, the best ringed",
    );
    let best = summary.best().map(|(id, _)| id);
    let mut at: BTreeMap<CandidateId, (f64, f64)> = BTreeMap::new();
    // Columns narrower than a label name every few rounds, so that the names never overlap.
    let labelled_every = (64.0 / column).ceil().max(1.0) as usize;
    for (index, (round, mut ids)) in rounds.into_iter().enumerate() {
        let x = LEFT + column * (index as f64 + 0.5);
        if index % labelled_every == 0 {
            svg.label(x, TOP - 16.0, "middle", &format!("round {round}"));
        }
        // Under their parents, so that the edges cross as little as they can.
        ids.sort_by(|a, b| {
            let parent_y = |id: &CandidateId| {
                summary.candidates[id]
                    .parent
                    .and_then(|parent| at.get(&parent))
                    .map_or(0.0, |(_, y)| *y)
            };
            parent_y(a).total_cmp(&parent_y(b)).then(a.cmp(b))
        });
        for (slot, id) in ids.iter().enumerate() {
            at.insert(*id, (x, TOP + row * (slot as f64 + 0.5)));
        }
    }
    if drawn.len() < summary.candidates.len() {
        svg.label(
            LEFT,
            TOP - 30.0,
            "start",
            &format!(
                "the ancestry of the best and the beam: {} of {} candidates",
                drawn.len(),
                summary.candidates.len()
            ),
        );
    }
    for (id, candidate) in &summary.candidates {
        let (Some(parent), Some((x, y))) = (candidate.parent, at.get(id)) else {
            continue;
        };
        if let Some((px, py)) = at.get(&parent) {
            svg.add(
                Mark::new("line")
                    .attr("class", "lineage-edge")
                    .px("x1", *px)
                    .px("y1", *py)
                    .px("x2", *x)
                    .px("y2", *y)
                    .attr("stroke", "#c8c8c8"),
            );
        }
    }
    for id in &drawn {
        let candidate = &summary.candidates[id];
        let (x, y) = at[id];
        let addressed = summary
            .bottleneck_of(*id)
            .map(|title| format!(", addressing {title}"))
            .unwrap_or_default();
        let from = candidate
            .parent
            .map(|parent| format!(" from {parent}"))
            .unwrap_or_else(|| " (the initial kernel)".into());
        let (fate, colour, result) = match &candidate.fate {
            Fate::Verified { time_ms } => ("verified", "#2e7d32", format!("{time_ms:.4} ms")),
            Fate::Failed { reason, .. } => ("failed", "#c62828", format!("failed: {reason}")),
        };
        let mut mark = Mark::new("circle")
            .attr("class", "lineage-node")
            .attr("data-candidate", id)
            .attr("data-fate", fate)
            .px("cx", x)
            .px("cy", y)
            .px("r", (row / 2.0 - 1.0).clamp(1.5, 4.0))
            .attr("fill", colour);
        if let Some(parent) = candidate.parent {
            mark = mark.attr("data-parent", parent);
        }
        if best == Some(*id) {
            mark = mark
                .attr("data-best", "true")
                .attr("stroke", "#111")
                .attr("stroke-width", 2);
        }
        svg.add(mark.link(folder_of(*id)).title(format!(
            "candidate {id}{from} (round {}){addressed}: {result}",
            candidate.round
        )));
    }
    svg.finish()
}
