//! Sentences for people, built from the scheduler's reason data (DESIGN §4.6, §4.9).

use super::reasons::{
    AfterStop, Drain, DrainRule, Event, Party, PreemptRule, Preemption, WaitingFor,
};
use super::{PathRatio, StartEstimate};

/// `2 h`, `15 min`, `1 h 30 min`, `45 s`.
pub fn duration(seconds: i64) -> String {
    let seconds = seconds.max(0);
    let (h, m, s) = (seconds / 3600, seconds % 3600 / 60, seconds % 60);
    match (h, m, s) {
        (0, 0, s) => format!("{s} s"),
        (0, m, 0) => format!("{m} min"),
        (0, m, s) => format!("{m} min {s} s"),
        (h, 0, _) if h >= 48 && h % 24 == 0 => format!("{} d", h / 24),
        (h, 0, _) if h >= 48 => format!("{} d {} h", h / 24, h % 24),
        (h, 0, _) => format!("{h} h"),
        (h, m, _) => format!("{h} h {m} min"),
    }
}

/// `14:02:05 UTC` today, `2026-12-04 14:02:05 UTC` on another day: every time people read has
/// its zone, and its date unless it is today's.
pub fn moment(epoch_s: i64, now: i64) -> String {
    use crate::calendar::{clock, format_date, same_day};
    if same_day(epoch_s, now) {
        format!("{} UTC", clock(epoch_s))
    } else {
        format!("{} {} UTC", format_date(epoch_s), clock(epoch_s))
    }
}

/// A queued workload's estimated start, read at `now`: short, for the Queue page's column.
pub fn start_estimate_short(e: &StartEstimate, now: i64) -> String {
    match e.at {
        Some(at) if at <= now.max(e.as_of) => "next pass".into(),
        Some(at) => format!("~{} (in {})", moment(at, now), duration(at - now)),
        None => format!("after {}", moment(e.until, now)),
    }
}

/// The same as a sentence, with how it was estimated.
pub fn start_estimate(e: &StartEstimate, now: i64) -> String {
    let basis = "estimated by running the scheduler forward over the queue as it stands, each \
                 workload taking its project's median run time of the last two weeks; work \
                 submitted later that ranks ahead of it would delay it";
    match e.at {
        Some(at) if at <= now.max(e.as_of) => {
            format!("Expected to start at the scheduler's next pass ({basis}).")
        }
        Some(at) => format!(
            "Estimated start: about {} (in {}), {basis}.",
            moment(at, now),
            duration(at - now)
        ),
        None => format!(
            "Not expected to start before {}, as far as the projection looks ({basis}).",
            moment(e.until, now)
        ),
    }
}

/// A duration, or `—` where there is none.
pub fn duration_or_dash(seconds: Option<i64>) -> String {
    seconds.map(duration).unwrap_or_else(|| "—".into())
}

/// A usage ratio to two places, or `—` where there is none.
pub fn ratio_or_dash(value: Option<f64>) -> String {
    value
        .map(|r| format!("{r:.2}"))
        .unwrap_or_else(|| "—".into())
}

pub fn ratio(value: Option<f64>) -> String {
    value
        .map(|r| format!("{r:.2}"))
        .unwrap_or_else(|| "∞ (nothing funded)".to_string())
}

fn name_of(party: &Party) -> String {
    party
        .name
        .clone()
        .unwrap_or_else(|| format!("workload {}", party.workload_id))
}

fn then(then: AfterStop) -> &'static str {
    match then {
        AfterStop::Requeued => " It went back to the queue with its progress.",
        AfterStop::EndedPreempted => {
            " It was not resumable, so it ended; resubmit it to run again."
        }
        AfterStop::Failed => " It was not resumable, so it failed.",
    }
}

/// Why a workload was preempted or drained; `None` for events that did not stop it.
pub fn stop_reason(event: &Event, now: i64) -> Option<String> {
    match event {
        Event::Preempted(p) => Some(preemption(p, now)),
        Event::Drained(d) => Some(drain(d, now)),
        _ => None,
    }
}

/// Why a workload's node stopped it.
pub fn drain(d: &Drain, now: i64) -> String {
    let at = moment(d.at, now);
    let then = then(d.then);
    let node = &d.node;
    let min_runtime = duration(d.victim_min_runtime_s);
    match d.rule {
        DrainRule::HostDown => format!(
            "Stopped at {at} because node {node} went down (its agent stopped answering).{then}"
        ),
        DrainRule::AgentStopped => format!(
            "Stopped at {at} by the agent on node {node}: {}.{then}",
            d.note.as_deref().unwrap_or("it stopped its runs")
        ),
        DrainRule::HostCordoned => format!(
            "Drained at {at} because node {node} was cordoned for maintenance and your {min_runtime} minimum runtime had passed.{then}"
        ),
        DrainRule::HostUnhealthy => {
            let why = d
                .node_reason
                .as_ref()
                .map(|r| format!(" ({r})"))
                .unwrap_or_default();
            format!(
                "Drained at {at} because node {node} was unhealthy{why} and your {min_runtime} minimum runtime had passed.{then}"
            )
        }
    }
}

/// Why a workload was preempted, naming the rule that allowed it.
pub fn preemption(p: &Preemption, now: i64) -> String {
    let at = moment(p.at, now);
    let then = then(p.then);
    let min_runtime = duration(p.victim_min_runtime_s);
    let by = format!(
        "{} (project {}, ratio {})",
        name_of(&p.preemptor),
        p.preemptor.leaf,
        ratio(p.preemptor.ratio)
    );
    match (p.rule, &p.split) {
        (PreemptRule::FreeWork, _) => format!(
            "Preempted at {at} by {by}: it ran for free (minimum runtime 0), and free work gives way to any funded workload.{then}"
        ),
        (PreemptRule::FastLane, _) => format!(
            "Preempted at {at} by {by}: a short debug workload may take the GPUs of resumable work whose minimum runtime has passed, whatever its project (the fast lane, charged to the debug workload's project), and your {min_runtime} minimum runtime had passed.{then}"
        ),
        (PreemptRule::Reserved, _) => format!(
            "Preempted at {at} by {by}: those GPUs were reserved for it, a multi-node workload ahead of yours in the queue; yours started there because its {min_runtime} minimum runtime would end before the reservation, and it had.{then}"
        ),
        (PreemptRule::FairShare, Some(split)) => format!(
            "Preempted at {at} by {by} because {} was at ratio {} — more over-served than {} at {} by more than the {:.2} margin — and your {min_runtime} minimum runtime had passed.{then}",
            split.victim_side,
            ratio(split.victim_side_ratio),
            split.preemptor_side,
            ratio(split.preemptor_side_ratio),
            split.margin,
        ),
        (PreemptRule::FairShare, None) => format!(
            "Preempted at {at} by {by} because {} was more over-served, and your {min_runtime} minimum runtime had passed.{then}",
            p.victim.leaf
        ),
        (PreemptRule::Priority, _) => format!("Preempted at {at} by {by} (priority rule).{then}"),
    }
}

/// What a queued workload waits for.
pub fn waiting_for(value: &WaitingFor, now: i64) -> String {
    match value {
        WaitingFor::StartsNow { .. } => "Nothing: it starts on the scheduler's next pass.".into(),
        WaitingFor::OwnReservation { at, .. } => format!(
            "GPUs are reserved for it; it starts by {} when the work on them finishes or becomes preemptible.",
            moment(*at, now)
        ),
        WaitingFor::ReservedAhead { holder_name, at, .. } => format!(
            "The GPUs it fits on are reserved for {} (ahead of it, from {}), and its own minimum runtime would not end before then.",
            holder_name.as_deref().unwrap_or("a larger workload"),
            moment(*at, now)
        ),
        WaitingFor::Capacity {
            idle_gpus,
            protected_gpus,
            protected_until,
            outranking_gpus,
            within_margin_gpus,
            holders,
        } => {
            let mut text = format!("Capacity: {idle_gpus} GPUs are idle.");
            if *protected_gpus > 0 {
                text += &format!(
                    " {protected_gpus} GPUs run work it may preempt once their minimum runtime ends{}.",
                    protected_until.map(|t| format!(" (first at {})", moment(t, now))).unwrap_or_default()
                );
            }
            if *outranking_gpus > 0 {
                text += &format!(" {outranking_gpus} GPUs run work of projects ranked at least as well as yours.");
            }
            if *within_margin_gpus > 0 {
                text += &format!(" {within_margin_gpus} GPUs run work within the damping margin of yours (the wider kill margin for work that cannot resume).");
            }
            if !holders.is_empty() {
                let named: Vec<String> = holders
                    .iter()
                    .map(|h| {
                        let name = h.name.clone().unwrap_or_else(|| format!("workload {}", h.workload_id));
                        let when = match h.preemptible_at {
                            Some(t) => format!("it may take them from {}", moment(t, now)),
                            None => "not preemptible by it: its project ranks at least as well or within the damping margin".to_string(),
                        };
                        format!("{name} ({}, {} GPU{}: {when})", h.project, h.gpus, if h.gpus == 1 { "" } else { "s" })
                    })
                    .collect();
                text += &format!(" Held by {}.", named.join("; "));
            }
            text
        }
        WaitingFor::Headroom { kept_gpus } => format!(
            "It would start now, but only on the last {kept_gpus} GPUs that short debug work can take at once; they are kept for it, and it starts when more work finishes or passes its minimum runtime."
        ),
        WaitingFor::IdleOnly {
            idle_gpus,
            funded_waiting: true,
            ..
        } => format!(
            "It runs for free (minimum runtime 0) and cannot resume, so it starts only while no funded work is waiting: free work is stopped whenever funded work needs its GPUs, and work that cannot resume loses its progress then. Funded work is waiting now; {idle_gpus} GPUs are idle."
        ),
        WaitingFor::IdleOnly {
            idle_gpus,
            resumable_ahead: 0,
            ..
        } => format!(
            "It runs for free (minimum runtime 0), so it takes only idle GPUs after all funded work; {idle_gpus} are idle."
        ),
        WaitingFor::IdleOnly {
            idle_gpus,
            resumable_ahead,
            ..
        } => format!(
            "It runs for free (minimum runtime 0) and cannot resume, so it takes only idle GPUs after all funded work and after free work that can resume ({resumable_ahead} waiting): free work is stopped whenever funded work needs its GPUs, and work that cannot resume loses its progress then. {idle_gpus} GPUs are idle."
        ),
        WaitingFor::HostsOutOfService { nodes } => format!(
            "It fits only on nodes that take no new work: {}.",
            nodes.join(", ")
        ),
        WaitingFor::TooLarge { gpus, largest_placement } => format!(
            "It asks for {gpus} GPUs but the largest placement on this cluster is {largest_placement}."
        ),
    }
}

/// Why a waiting workload's project ranks where it does, in words: at the first level of its path
/// where another sibling ranks first, who that is and how both are served.
pub fn rank_in_words(path: &[PathRatio]) -> String {
    let Some((step, ahead)) = path.iter().find_map(|s| {
        s.ahead
            .as_ref()
            .map(|a| (s, a))
            .filter(|_| s.sibling_rank > 1)
    }) else {
        return "Its project ranks first at every level of the budget tree: its work is next in line."
            .to_string();
    };
    let served = |r: f64| {
        if r < 1.0 {
            "under-served"
        } else {
            "over-served"
        }
    };
    let (ours, theirs) = (&step.path, &ahead.path);
    match (step.ratio, ahead.ratio) {
        (None, _) => format!(
            "{ours} has no funded time in the window, so funded siblings such as {theirs} go first."
        ),
        (Some(o), Some(t)) if t < o && (o < 1.0) == (t < 1.0) => {
            let more = if o < 1.0 { "more so" } else { "less so" };
            format!(
                "{ours} is {} (ratio {o:.2}) but {theirs} is {more} ({t:.2}), so {theirs}'s work goes first.",
                served(o)
            )
        }
        (Some(o), Some(t)) if t < o => format!(
            "{theirs} is under-served (ratio {t:.2}) and {ours} is not ({o:.2}), so {theirs}'s work goes first."
        ),
        (Some(o), Some(t)) => match (step.recent_ratio, ahead.recent_ratio) {
            (Some(our_recent), Some(their_recent)) if their_recent < our_recent => format!(
                "{ours} and {theirs} are about as served over the week ({o:.2} and {t:.2}), but {theirs} has used less of its share over the last two hours ({their_recent:.2} against {our_recent:.2}), so its work goes first."
            ),
            _ => format!(
                "{ours} and {theirs} are equally served ({o:.2} and {t:.2}); ties go to the larger share, then by name, so {theirs}'s work goes first."
            ),
        },
        (Some(o), None) => format!(
            "{theirs} ranks ahead of {ours} (ratio {o:.2})."
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn step(
        path: &str,
        ratio: f64,
        recent: f64,
        rank: u32,
        ahead: Option<(&str, f64, f64)>,
    ) -> PathRatio {
        PathRatio {
            path: path.into(),
            usage_gpu_h: 0.0,
            allocated_gpu_h: 0.0,
            ratio: Some(ratio),
            recent_ratio: Some(recent),
            sibling_rank: rank,
            siblings: 3,
            ahead: ahead.map(|(p, r, rr)| super::super::AheadSibling {
                path: p.into(),
                ratio: Some(r),
                recent_ratio: Some(rr),
            }),
        }
    }

    #[test]
    fn capacity_names_who_holds_the_gpus_and_from_when_they_may_be_taken() {
        let waiting: WaitingFor = serde_json::from_value(serde_json::json!({
            "kind": "capacity", "idle_gpus": 0, "protected_gpus": 8, "protected_until": 57_600,
            "outranking_gpus": 4, "within_margin_gpus": 0,
            "holders": [
                { "workload_id": 7, "name": "pretrain-7", "project": "lang/pretrain", "gpus": 8, "preemptible_at": 57_600 },
                { "workload_id": 9, "name": null, "project": "lang/eval", "gpus": 4, "preemptible_at": null }
            ]
        }))
        .unwrap();
        let text = super::waiting_for(&waiting, 0);
        assert!(
            text.ends_with("Held by pretrain-7 (lang/pretrain, 8 GPUs: it may take them from 16:00:00 UTC); workload 9 (lang/eval, 4 GPUs: not preemptible by it: its project ranks at least as well or within the damping margin)."),
            "{text}"
        );
    }

    #[test]
    fn the_rank_is_explained_at_the_first_level_where_someone_else_goes_first() {
        let path = [
            step("lang", 0.7, 0.7, 1, None),
            step("lang/eval", 0.8, 0.9, 2, Some(("lang/posttrain", 0.6, 0.5))),
        ];
        assert_eq!(
            rank_in_words(&path),
            "lang/eval is under-served (ratio 0.80) but lang/posttrain is more so (0.60), so lang/posttrain's work goes first."
        );
        let over = [step("science", 1.3, 1.0, 2, Some(("lang", 0.9, 1.0)))];
        assert_eq!(
            rank_in_words(&over),
            "lang is under-served (ratio 0.90) and science is not (1.30), so lang's work goes first."
        );
        let recent = [step("a/x", 1.0, 1.6, 2, Some(("a/y", 1.01, 0.2)))];
        assert!(rank_in_words(&recent).contains(
            "a/y has used less of its share over the last two hours (0.20 against 1.60)"
        ));
        let first = [step("lang", 0.5, 0.5, 1, None)];
        assert!(rank_in_words(&first).starts_with("Its project ranks first"));
    }
    use serde_json::{json, Value};

    /// The sentence for a stored event, read through the JSON contract the server writes.
    fn stop_reason(kind: &str, detail: &Value) -> String {
        let event = Event::from_parts(kind, &detail.to_string()).expect("a valid event");
        super::stop_reason(&event, 0).expect("a stop")
    }

    fn waiting_for(value: &Value) -> String {
        super::waiting_for(
            &serde_json::from_value(value.clone()).expect("a valid wait"),
            0,
        )
    }

    #[test]
    fn a_fair_share_preemption_reads_as_a_sentence_with_both_ratios() {
        let detail = json!({
            "rule": "fair-share", "at": 50_520,
            "preemptor": { "workload_id": 7, "name": "olmo-pretrain-7", "leaf": "ai/a1", "ratio": 0.41 },
            "victim": { "workload_id": 3, "name": "sweep", "leaf": "ai/b2", "ratio": 1.37 },
            "split": { "preemptor_side": "ai/a1", "preemptor_side_ratio": 0.41, "victim_side": "ai/b2",
                       "victim_side_ratio": 1.37, "margin": 0.02 },
            "victim_min_runtime_s": 7200, "then": "requeued",
        });
        let text = stop_reason("preempted", &detail);
        assert!(
            text.starts_with(
                "Preempted at 14:02:00 UTC by olmo-pretrain-7 (project ai/a1, ratio 0.41)"
            ),
            "{text}"
        );
        assert!(text.contains("ai/b2 was at ratio 1.37"), "{text}");
        assert!(
            text.contains("your 2 h minimum runtime had passed"),
            "{text}"
        );
        assert!(
            text.ends_with("back to the queue with its progress."),
            "{text}"
        );
    }

    #[test]
    fn free_work_that_cannot_resume_says_it_waits_behind_free_work_that_can() {
        let plain = waiting_for(&json!({ "kind": "idle-only", "idle_gpus": 2 }));
        assert_eq!(
            plain,
            "It runs for free (minimum runtime 0), so it takes only idle GPUs after all funded work; 2 are idle."
        );
        let behind =
            waiting_for(&json!({ "kind": "idle-only", "idle_gpus": 0, "resumable_ahead": 12 }));
        assert!(
            behind.contains("cannot resume")
                && behind.contains("after free work that can resume (12 waiting)")
                && behind.ends_with("0 GPUs are idle."),
            "{behind}"
        );
    }

    #[test]
    fn free_work_that_cannot_resume_says_it_waits_while_funded_work_waits() {
        let text = waiting_for(&json!({
            "kind": "idle-only", "idle_gpus": 3, "resumable_ahead": 0, "funded_waiting": true,
        }));
        assert!(
            text.contains("cannot resume, so it starts only while no funded work is waiting")
                && text.ends_with("Funded work is waiting now; 3 GPUs are idle."),
            "{text}"
        );
    }

    #[test]
    fn a_workload_held_back_by_the_debug_headroom_says_so_and_for_how_many_gpus() {
        let text = waiting_for(&json!({ "kind": "headroom", "kept_gpus": 8 }));
        assert!(
            text.contains("the last 8 GPUs that short debug work can take at once"),
            "{text}"
        );
    }

    #[test]
    fn fast_lane_and_reservation_preemptions_say_which_rule_took_the_gpus() {
        let detail = |rule: &str| {
            json!({
                "rule": rule, "at": 50_520,
                "preemptor": { "workload_id": 7, "name": "debug-7", "leaf": "ai/a1", "ratio": 1.2 },
                "victim": { "workload_id": 3, "name": "train", "leaf": "ai/b2", "ratio": 0.9 },
                "split": null, "victim_min_runtime_s": 3600, "then": "requeued",
            })
        };
        let lane = stop_reason("preempted", &detail("fast-lane"));
        assert!(lane.starts_with("Preempted at 14:02:00 UTC by debug-7 (project ai/a1, ratio 1.20): a short debug workload"), "{lane}");
        assert!(
            lane.contains("your 1 h minimum runtime had passed"),
            "{lane}"
        );
        let reserved = stop_reason("preempted", &detail("reserved"));
        assert!(
            reserved.contains("those GPUs were reserved for it"),
            "{reserved}"
        );
        assert!(!reserved.contains("priority rule"), "{reserved}");
    }

    #[test]
    fn a_drain_names_the_node_and_the_minimum_runtime() {
        let detail = json!({ "rule": "host-unhealthy", "at": 0, "node": "gpu-7", "victim_min_runtime_s": 900, "then": "requeued" });
        assert!(stop_reason("drained", &detail)
            .contains("node gpu-7 was unhealthy and your 15 min minimum runtime"));
        let checked = json!({ "rule": "host-unhealthy", "at": 0, "node": "gpu-7", "node_reason": "GPU 3: Xid 79", "victim_min_runtime_s": 900, "then": "requeued" });
        assert!(
            stop_reason("drained", &checked).contains("node gpu-7 was unhealthy (GPU 3: Xid 79)")
        );
    }

    #[test]
    fn a_moment_has_its_zone_and_its_date_unless_it_is_today() {
        let now = 1_796_083_199; // 2026-11-30 23:59:59 UTC
        assert_eq!(super::moment(now - 60, now), "23:58:59 UTC");
        assert_eq!(super::moment(now + 1, now), "2026-12-01 00:00:00 UTC");
    }

    #[test]
    fn a_start_estimate_reads_as_a_time_and_how_far_off_or_as_a_bound() {
        let now = 1_796_000_000 - 1_796_000_000 % 86_400 + 10 * 3600;
        let soon = StartEstimate {
            at: Some(now + 35 * 60),
            until: now + 7 * 86_400,
            as_of: now - 10,
        };
        assert_eq!(
            start_estimate_short(&soon, now),
            "~10:35:00 UTC (in 35 min)"
        );
        assert!(start_estimate(&soon, now).starts_with("Estimated start: about 10:35:00 UTC (in 35 min), estimated by running the scheduler forward"));
        let now_start = StartEstimate {
            at: Some(now - 10),
            ..soon
        };
        assert_eq!(start_estimate_short(&now_start, now), "next pass");
        let later = StartEstimate { at: None, ..soon };
        assert_eq!(
            start_estimate_short(&later, now),
            format!(
                "after {} 10:00:00 UTC",
                crate::calendar::format_date(now + 7 * 86_400)
            )
        );
        assert!(start_estimate(&later, now).starts_with("Not expected to start before"));
    }

    #[test]
    fn durations_read_naturally() {
        assert_eq!(duration(0), "0 s");
        assert_eq!(duration(90), "1 min 30 s");
        assert_eq!(duration(8 * 3600), "8 h");
        assert_eq!(duration(900), "15 min");
        assert_eq!(duration(5400), "1 h 30 min");
        assert_eq!(duration(45), "45 s");
        assert_eq!(duration(3 * 86_400), "3 d");
        assert_eq!(duration(3 * 86_400 + 5 * 3600), "3 d 5 h");
    }
}
