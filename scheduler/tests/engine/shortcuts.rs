//! The decision pass's shortcuts at their edges (DESIGN §4.8): each case fails if a shortcut rules
//! out a placement that exists, or skips a host that would have been the better choice.

use scheduler::*;

use crate::support::{preempted, starts, World};

const TWO_TEAMS: &[(&str, f64)] = &[("a", 1.0), ("b", 1.0)];

/// Free work of `path`, resumable, started at `started_at` on `gpus` of `node`.
fn free_work(w: &mut World, path: &str, started_at: Time, node: u32, gpus: &[u32]) -> WorkloadId {
    w.running(path, 0, started_at, node, gpus)
}

#[test]
fn a_failed_search_rules_out_only_requests_larger_than_any_host_could_gather() {
    // Node 0 has 3 idle GPUs, node 1 has 2; everything else is a's own protected work. (No
    // debug headroom: it would keep the last idle GPU.)
    let config = Config {
        headroom_gpus: 0,
        ..Config::default()
    };
    let mut w = World::with_config(TWO_TEAMS, 2, 8, config);
    w.running("a", HOUR, 0, 0, &[0, 1, 2, 3, 4]);
    w.running("a", HOUR, 0, 1, &[0, 1, 2, 3, 4, 5]);
    let mut ask = |gpus, priority| {
        let mut spec = w.spec("a", gpus, HOUR);
        spec.priority = priority;
        w.submit_spec(spec)
    };
    // In queue order: 5 and 4 cannot fit anywhere (the failed 5 shows at most 3 fit on a host);
    // 3 fits on node 0, exactly; the next 3 no longer fits; 2 fits on node 1.
    ask(5, 4);
    ask(4, 3);
    let three = ask(3, 2);
    ask(3, 1);
    let two = ask(2, 0);
    let decision = w.decide();
    assert_eq!(
        starts(&decision),
        [
            (three, &Placement::on(NodeId(0), GpuSet::of(&[5, 6, 7]))),
            (two, &Placement::on(NodeId(1), GpuSet::of(&[6, 7]))),
        ]
    );
}

#[test]
fn equal_preemption_costs_go_to_the_host_left_with_fewer_idle_gpus() {
    // Both hosts offer one free-work victim losing 1,200 GPU-seconds. Node 0 would be left with 4
    // idle GPUs, node 1 with none: node 1 wins although node 0 is searched first.
    let mut w = World::new(TWO_TEAMS, 2, 8);
    w.now = 1_000;
    free_work(&mut w, "b", 800, 0, &[0, 1, 2, 3, 4, 5]);
    let victim = free_work(&mut w, "b", 700, 1, &[0, 1, 2, 3]);
    w.running("b", HOUR, 990, 1, &[4, 5, 6, 7]);
    let four = w.submit("a", 4, HOUR);
    let decision = w.decide();
    assert_eq!(preempted(&decision), [victim]);
    assert_eq!(
        starts(&decision),
        [(four, &Placement::on(NodeId(1), GpuSet::of(&[0, 1, 2, 3])))]
    );
}

#[test]
fn free_work_takes_idle_gpus_in_queue_order_as_larger_requests_stop_fitting() {
    // 4 idle GPUs: 2 on node 0, 1 each on nodes 1 and 2, under a's protected work.
    let mut w = World::new(TWO_TEAMS, 3, 8);
    w.running("a", HOUR, 0, 0, &[0, 1, 2, 3, 4, 5]);
    w.running("a", HOUR, 0, 1, &[0, 1, 2, 3, 4, 5, 6]);
    w.running("a", HOUR, 0, 2, &[0, 1, 2, 3, 4, 5, 6]);
    let mut free = |path: &str, gpus, priority| {
        let mut spec = w.spec(path, gpus, 0);
        spec.priority = priority;
        w.submit_spec(spec)
    };
    // b's free work in queue order: four 2-GPU requests, then three 1-GPU ones.
    let first = free("b", 2, 9);
    for priority in [8, 7, 6] {
        free("b", 2, priority);
    }
    let small = free("b", 1, 5);
    free("b", 1, 4);
    free("b", 1, 3);
    // a ranks ahead of b (equal shares, equal use, then by name): its free work goes first.
    let a = free("a", 1, 0);
    w.queued.reverse();
    let decision = w.decide();
    assert_eq!(
        starts(&decision),
        [
            (a, &Placement::on(NodeId(1), GpuSet::of(&[7]))),
            (first, &Placement::on(NodeId(0), GpuSet::of(&[6, 7]))),
            (small, &Placement::on(NodeId(2), GpuSet::of(&[7]))),
        ]
    );
}

#[test]
fn free_work_that_fits_starts_even_when_smaller_free_work_of_its_leaf_fits_nowhere() {
    // One 8-GPU host, busy but for one GPU, and three idle 4-GPU hosts. An 8-GPU request fits on
    // no single host, but a 12-GPU gang fits on the three small ones: the scan must not give up on
    // the leaf because its smallest request does not fit (an earlier bucket skip did).
    let mut w = World::new(TWO_TEAMS, 4, 8);
    for node in &mut w.nodes[1..] {
        node.gpus = 4;
    }
    w.running("a", HOUR, 0, 0, &[0, 1, 2, 3, 4, 5, 6]);
    let mut eight = w.spec("b", 8, 0);
    eight.priority = 1;
    w.submit_spec(eight);
    let gang = w.submit("b", 12, 0);
    let decision = w.decide();
    let whole = |node| NodeGpus {
        node: NodeId(node),
        gpus: GpuSet::first(4),
    };
    let placement = Placement {
        parts: vec![whole(1), whole(2), whole(3)],
    };
    assert_eq!(starts(&decision), [(gang, &placement)]);
}

/// 13 hosts of 8 GPUs with a headroom (a hundredth of 104 GPUs would be none): hosts 0–10 are
/// full of `b`'s protected work, and `debug` GPUs of `b`'s debug work run on host 11, so the
/// fast lane (a tenth: 10 GPUs, no higher peak) has `10 - debug` left and the headroom is as much.
fn lane_nearly_full(shares: &[(&str, f64)], debug: u32) -> World {
    let config = Config {
        headroom_max_fraction: 1.0,
        fast_lane_peak: 0.0,
        ..Config::default()
    };
    let mut w = World::with_config(shares, 13, 8, config);
    for node in 0..11 {
        w.running("b", 8 * HOUR, 0, node, &[0, 1, 2, 3, 4, 5, 6, 7]);
    }
    let gpus: Vec<u32> = (0..debug).collect();
    w.running("b", 10 * 60, 0, 11, &gpus);
    w
}

/// `lane_nearly_full` with a lane room and headroom of 3 GPUs: hosts 11 and 12 have 1 and 2 idle
/// GPUs (the lane's reach: 3), and host 12 b's unprotected work that cannot resume on its other
/// 6 (returned); b is over its share, past the kill margin (set to the damping margin), so a may
/// kill it.
fn lane_short_of_headroom_beside_work_a_may_kill() -> (World, WorkloadId) {
    let mut w = lane_nearly_full(TWO_TEAMS, 7);
    let mut fragile = w.spec("b", 6, HOUR);
    fragile.resumable = false;
    let fragile = w.place(fragile, -2 * HOUR, &[(12, &[2, 3, 4, 5, 6, 7])]);
    w.history("b", 5_000.0);
    let config = Config {
        kill_margin: 0.0,
        ..*w.engine.config()
    };
    w.engine.set_config(config);
    (w, fragile)
}

/// The decision, checked against the pass without shortcuts, both from the snapshot alone and
/// from the queue a driver naming its changes has kept (here its first pass: the lineup, with
/// each leaf's gangs and debug work, is built afresh).
fn decides_as_without_shortcuts(w: &World) -> Decision {
    let decision = w.decide();
    let reference = w
        .engine
        .fair_share_without_shortcuts(&w.state(), w.now)
        .unwrap();
    assert_eq!(decision, reference);
    let first = Changes {
        pass: 0,
        running: &[],
        queued: &[],
    };
    let kept = w.engine.decide_after(&w.state(), w.now, &first).unwrap();
    assert_eq!(kept, reference, "from the kept queue");
    decision
}

#[test]
fn debug_work_the_lane_has_no_room_for_is_not_held_back_with_equal_requests_before_it() {
    // Lane room and headroom 1 GPU; host 12 has 2 idle GPUs (lane's reach 2).
    let mut w = lane_nearly_full(TWO_TEAMS, 8);
    w.running("b", 10 * 60, 0, 12, &[0]);
    w.running("b", 8 * HOUR, 0, 12, &[1, 2, 3, 4, 5]);
    // Two 2-GPU requests are held back (2 < 1 + 2); the second is known from the first.
    let first = w.submit("a", 2, HOUR);
    let second = w.submit("a", 2, HOUR);
    // The same size, but debug work: too large for the lane's room, never held back.
    let debug = w.submit("a", 2, 10 * 60);
    let decision = decides_as_without_shortcuts(&w);
    assert_eq!(
        starts(&decision).iter().map(|s| s.0).collect::<Vec<_>>(),
        [debug]
    );
    for held in [first, second] {
        assert_eq!(
            w.explain(held).waiting_for,
            WaitReason::Headroom { kept_gpus: 1 },
            "{held:?}"
        );
    }
}

#[test]
fn once_the_lanes_reach_is_short_of_the_headroom_debug_work_is_still_searched() {
    // Lane room and headroom 3 GPUs; host 12 has 2 idle GPUs (lane's reach 2) and 2 GPUs of b's
    // unprotected work that cannot resume; b is over its share, past the damping margin (and the
    // kill margin, set to the damping margin here).
    let mut w = lane_nearly_full(&[("a", 1.0), ("b", 1.0), ("c", 1.0)], 7);
    w.running("b", 8 * HOUR, 0, 11, &[7]);
    w.running("b", 8 * HOUR, 0, 12, &[4, 5, 6, 7]);
    let mut fragile = w.spec("b", 2, HOUR);
    fragile.resumable = false;
    let fragile = w.place(fragile, -2 * HOUR, &[(12, &[2, 3])]);
    w.history("b", 5_000.0);
    let config = Config {
        kill_margin: 0.0,
        ..*w.engine.config()
    };
    w.engine.set_config(config);
    let held = w.submit("a", 1, HOUR);
    let also_held = w.submit("a", 1, HOUR);
    // 4 GPUs: more than the lane's room, so the allocated scan meets it after the held work: in
    // a's group, and alone in c's, which ranks after a's (equal ratios and shares: by name).
    let debug = w.submit("a", 4, 10 * 60);
    let other = w.submit("c", 4, 10 * 60);
    let decision = decides_as_without_shortcuts(&w);
    assert_eq!(
        starts(&decision).iter().map(|s| s.0).collect::<Vec<_>>(),
        [debug]
    );
    assert_eq!(preempted(&decision), [fragile]);
    // Without a's debug work, c's (alone in its group, after a's held work) starts there.
    w.queued.retain(|q| q.id != debug);
    let decision = decides_as_without_shortcuts(&w);
    assert_eq!(
        starts(&decision).iter().map(|s| s.0).collect::<Vec<_>>(),
        [other]
    );
    for id in [held, also_held] {
        assert!(matches!(
            w.explain(id).waiting_for,
            WaitReason::Headroom { .. }
        ));
    }
}

/// 4 hosts of 8 GPUs, no headroom: b's resumable run, out of its protection, holds hosts 0 and 1
/// and five GPUs of host 2 (the two teams are level, so a may not take it by fair share); host 2
/// has 3 idle GPUs, host 3 a free sweep on 2 GPUs beside b's protected work.
fn a_gang_may_free_host_two() -> World {
    let config = Config {
        headroom_gpus: 0,
        ..Config::default()
    };
    let mut w = World::with_config(TWO_TEAMS, 4, 8, config);
    w.now = HOUR;
    let all = [0, 1, 2, 3, 4, 5, 6, 7];
    let spec = w.spec("b", 21, 600);
    w.place(
        spec,
        HOUR - 1_200,
        &[(0, &all), (1, &all), (2, &[0, 1, 2, 3, 4])],
    );
    free_work(&mut w, "b", HOUR - 600, 3, &[0, 1]);
    w.running("b", HOUR, HOUR - 60, 3, &[2, 3, 4, 5, 6, 7]);
    w
}

#[test]
fn single_host_work_after_a_gang_that_left_gpus_idle_is_looked_at_again() {
    // b's resumable run holds hosts 0 and 1 and five GPUs of host 2, out of its protection; the
    // two teams are level, so a may not take it by fair share. Host 2 has 3 idle GPUs, host 3 a
    // free sweep on 2 GPUs beside b's protected work: a's first 4-GPU request finds no host with
    // 4, and the single-host requests after it wait unread. a's gang may take b's run (it is
    // behind the gang in the queue): it takes hosts 0 and 1 and leaves host 2 idle, where a's
    // later 4-GPU request fits before the first one is looked at again.
    let mut w = a_gang_may_free_host_two();
    let first = w.submit("a", 4, HOUR);
    let gang = w.submit("a", 16, HOUR);
    let later = w.submit("a", 4, HOUR);
    let decision = decides_as_without_shortcuts(&w);
    let started: Vec<WorkloadId> = starts(&decision).iter().map(|s| s.0).collect();
    assert_eq!(started, [gang, later, first]);
}

/// Three hosts of 8 GPUs at 1 h: host 0 idle, b's protected work on host 1 until 3 h and on host
/// 2 until 4 h. a's gang (first in a's queue) cannot start and reserves hosts 0 and 1 for 3 h;
/// behind it, a's 1-GPU request that cannot resume finds nothing open to it. No headroom.
fn a_gang_reserving_until_three_hours() -> (World, WorkloadId, WorkloadId) {
    let config = Config {
        headroom_gpus: 0,
        ..Config::default()
    };
    let mut w = World::with_config(TWO_TEAMS, 3, 8, config);
    w.now = HOUR;
    let all = [0, 1, 2, 3, 4, 5, 6, 7];
    w.running("b", 3 * HOUR, 0, 1, &all);
    w.running("b", 4 * HOUR, 0, 2, &all);
    let mut gang = w.spec("a", 16, HOUR);
    gang.priority = 1;
    let gang = w.submit_spec(gang);
    let mut fragile = w.spec("a", 1, HOUR);
    fragile.resumable = false;
    let fragile = w.submit_spec(fragile);
    (w, gang, fragile)
}

#[test]
fn resumable_work_that_ends_before_a_reservation_starts_there_after_work_that_cannot_resume_waited()
{
    // Host 0 is idle; b's protected work fills host 1 until 3 h and host 2 until 4 h. a's gang
    // (first in a's queue) cannot start and reserves hosts 0 and 1 for 3 h. Behind it, a's
    // 1-GPU request that cannot resume finds nothing open to it; one that can resume and is
    // protected for 10 minutes may use host 0 until then; one protected for 3 hours may not.
    let (mut w, gang, fragile) = a_gang_reserving_until_three_hours();
    let long = w.submit("a", 1, 3 * HOUR);
    let short = w.submit("a", 1, 10 * 60);
    let decision = decides_as_without_shortcuts(&w);
    let started: Vec<WorkloadId> = starts(&decision).iter().map(|s| s.0).collect();
    assert_eq!(started, [short]);
    assert_eq!(starts(&decision)[0].1.parts[0].node, NodeId(0));
    for id in [gang, fragile, long] {
        assert!(!started.contains(&id), "{id:?}");
    }
}

#[test]
fn single_host_work_ruled_out_by_a_failure_is_searched_again_once_a_gang_left_gpus_idle() {
    // As in the case above: b's resumable run (hosts 0, 1 and five GPUs of host 2) is out of its
    // protection, host 2 has 3 idle GPUs and host 3 a free sweep on 2 GPUs beside b's protected
    // work. a's first 4-GPU request fails; its second is ruled out by that failure; a's 2-GPU
    // request (last) keeps the single-host work read one by one. The gang then takes b's run and
    // leaves host 2 idle: the 4-GPU request after it must be searched again, and starts there
    // before the 2-GPU one, and before the rescan gets to the first two.
    let mut w = a_gang_may_free_host_two();
    let mut ask = |gpus, priority| {
        let mut spec = w.spec("a", gpus, HOUR);
        spec.priority = priority;
        w.submit_spec(spec)
    };
    let first = ask(4, 5);
    let second = ask(4, 4);
    let gang = ask(16, 3);
    let later = ask(4, 2);
    let small = ask(2, 1);
    let decision = decides_as_without_shortcuts(&w);
    let started: Vec<WorkloadId> = starts(&decision).iter().map(|s| s.0).collect();
    // The first two wait: after `later` and `small`, host 2 has 2 idle GPUs left.
    assert_eq!(started, [gang, later, small]);
    for id in [first, second] {
        assert!(!started.contains(&id), "{id:?}");
    }
}

#[test]
fn work_of_a_size_the_headroom_held_back_is_searched_again_once_a_start_widened_the_lanes_reach() {
    let (mut w, fragile) = lane_short_of_headroom_beside_work_a_may_kill();
    let mut ask = |gpus, min_runtime, priority| {
        let mut spec = w.spec("a", gpus, min_runtime);
        spec.priority = priority;
        w.submit_spec(spec)
    };
    // a's first 1-GPU request is held back (3 < 3 + 1). Its 4-GPU debug work, too large for the
    // lane's room, takes host 12 from b's work and leaves 4 idle GPUs there (reach 5): a's next
    // 1-GPU request starts, before the rescan starts the first.
    let first = ask(1, HOUR, 3);
    let debug = ask(4, 10 * 60, 2);
    let second = ask(1, HOUR, 1);
    let decision = decides_as_without_shortcuts(&w);
    assert_eq!(preempted(&decision), [fragile]);
    assert_eq!(
        starts(&decision).iter().map(|s| s.0).collect::<Vec<_>>(),
        [debug, second, first]
    );
}

#[test]
fn a_request_smaller_than_work_the_headroom_held_back_starts_where_it_leaves_the_headroom() {
    // Lane room and headroom 2 GPUs; host 11 is full of b's debug work and host 12 idle: the
    // lane's reach is 8. a may kill nothing (the teams are level), so a request is held back
    // when 8 < 2 + its size: 8 GPUs are (twice, the second known from the first), 6 are not and
    // start, after which the 2 GPUs left are the headroom and hold back a's last request.
    let mut w = lane_nearly_full(TWO_TEAMS, 8);
    let mut ask = |gpus, priority| {
        let mut spec = w.spec("a", gpus, HOUR);
        spec.priority = priority;
        w.submit_spec(spec)
    };
    let held = [ask(8, 4), ask(8, 3)];
    let six = ask(6, 2);
    let last = ask(1, 1);
    let decision = decides_as_without_shortcuts(&w);
    assert_eq!(
        starts(&decision).iter().map(|s| s.0).collect::<Vec<_>>(),
        [six]
    );
    for id in held.into_iter().chain([last]) {
        assert_eq!(
            w.explain(id).waiting_for,
            WaitReason::Headroom { kept_gpus: 2 },
            "{id:?}"
        );
    }
}

#[test]
fn work_that_may_kill_is_not_held_back_by_its_size_alone() {
    // The lane's reach is 3, its headroom 3. a's 1-GPU request is held back (3 < 3 + 1). Its
    // 6-GPU request can only start by killing b's work, whose GPUs the lane could not have
    // taken: it takes nothing from the lane's reach, is not held back, and starts.
    let (mut w, fragile) = lane_short_of_headroom_beside_work_a_may_kill();
    let mut ask = |gpus, priority| {
        let mut spec = w.spec("a", gpus, HOUR);
        spec.priority = priority;
        w.submit_spec(spec)
    };
    let held = ask(1, 2);
    let six = ask(6, 1);
    let decision = decides_as_without_shortcuts(&w);
    assert_eq!(preempted(&decision), [fragile]);
    assert_eq!(
        starts(&decision).iter().map(|s| s.0).collect::<Vec<_>>(),
        [six]
    );
    assert!(matches!(
        w.explain(held).waiting_for,
        WaitReason::Headroom { .. }
    ));
}

#[test]
fn gangs_after_one_that_cannot_start_wait_but_one_that_may_backfill_the_reservation_is_tried() {
    // Hosts 0 and 4 are idle; b's protected work fills host 1 until 3 h, hosts 2 and 3 until
    // 4 h. One reservation is offered: a's first gang takes it (hosts 0, 1 and 4, for 3 h). a's
    // second gang cannot start and is not offered one; the gangs as large or larger after it
    // cannot start either, but a resumable one whose minimum runtime ends before 3 h may use
    // hosts 0 and 4, and must still be looked at: it starts there.
    let config = Config {
        headroom_gpus: 0,
        max_reservations: 1,
        ..Config::default()
    };
    let mut w = World::with_config(TWO_TEAMS, 5, 8, config);
    w.now = HOUR;
    let all = [0, 1, 2, 3, 4, 5, 6, 7];
    w.running("b", 3 * HOUR, 0, 1, &all);
    w.running("b", 4 * HOUR, 0, 2, &all);
    w.running("b", 4 * HOUR, 0, 3, &all);
    let mut ask = |gpus, min_runtime, resumable, priority| {
        let mut spec = w.spec("a", gpus, min_runtime);
        spec.resumable = resumable;
        spec.priority = priority;
        w.submit_spec(spec)
    };
    let first = ask(24, HOUR, false, 9);
    let second = ask(16, HOUR, false, 8);
    let larger = ask(24, HOUR, false, 7);
    let long = ask(16, 3 * HOUR, true, 6);
    let largest = ask(32, HOUR, false, 5);
    let short = ask(16, 10 * 60, true, 4);
    let decision = decides_as_without_shortcuts(&w);
    let started: Vec<WorkloadId> = starts(&decision).iter().map(|s| s.0).collect();
    assert_eq!(started, [short]);
    for id in [first, second, larger, long, largest] {
        assert!(!started.contains(&id), "{id:?}");
    }
}

#[test]
fn single_host_work_that_may_backfill_a_reservation_is_tried_after_work_that_may_not_was_passed_over(
) {
    // As above: a's gang reserves hosts 0 and 1 for 3 h, and a's 1-GPU request that cannot
    // resume finds nothing open to it. The resumable requests after it whose minimum runtime
    // ends after 3 h wait, whatever their size; one of 30 minutes (not debug work, which is
    // always looked at) may use host 0 and starts there.
    let (mut w, gang, fragile) = a_gang_reserving_until_three_hours();
    let long = w.submit("a", 1, 3 * HOUR);
    let longer = w.submit("a", 2, 4 * HOUR);
    let short = w.submit("a", 2, 30 * 60);
    let decision = decides_as_without_shortcuts(&w);
    let started: Vec<WorkloadId> = starts(&decision).iter().map(|s| s.0).collect();
    assert_eq!(started, [short]);
    assert_eq!(starts(&decision)[0].1.parts[0].node, NodeId(0));
    for id in [gang, fragile, long, longer] {
        assert!(!started.contains(&id), "{id:?}");
    }
}
