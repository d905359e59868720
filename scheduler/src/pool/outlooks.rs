//! A reserving gang's outlook kept from one pass to the next (DESIGN §4.8).
//!
//! Every pass, the first few blocked gangs each read every host to find when they could have
//! enough of them ([`Pool::gang_outlook`]), and most passes find for a gang what the last one
//! found: 68% of 275,000 outlooks on the 1,024-GPU month with gangs up to twice a team's share
//! are reused. A pass changes a few hosts, so the
//! kept pool keeps each gang's last outlook with what each host was to it — never its, ready now,
//! or ready at a moment — and a later outlook reads only the hosts whose runs changed since. It
//! is the same outlook when all of these hold: the gang is judged by the same leaves
//! ([`Blockers`]), each changed host is to it what it was, the same hosts are reserved, and no
//! host it was waiting for has become ready in between. Its earliest start is then the same too:
//! hosts ready now come before every later one, at whichever moment "now" is, so the choice of
//! hosts does not move unless the start itself was now, which is worked out again. When only the
//! changed hosts, the reserved ones or the moment differ, what every host is to the gang is still
//! known (the changed ones read again), and the outlook is put together from that without reading
//! the other hosts' holders; its earliest start is worked out again. Only a gang judged by other
//! leaves, or a host only its runs can tell of, reads every host afresh.

use super::{Blockers, Pool, Run};
use crate::cluster::{GpuSet, NodeGpus};
use crate::ids::{Time, WorkloadId};
use crate::placement::GangOutlook;

/// What one host was to a gang when its outlook read it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Seen {
    /// Not schedulable, or held by work the gang may never take.
    Never,
    /// Its runs may all be preempted now.
    Now,
    /// Its runs may all be preempted from this moment (later than the outlook's).
    At(Time),
}

impl Seen {
    pub(crate) fn of(ready: Option<Time>, now: Time) -> Seen {
        match ready {
            None => Seen::Never,
            Some(at) if at <= now => Seen::Now,
            Some(at) => Seen::At(at),
        }
    }
}

/// One gang's last outlook.
#[derive(Debug)]
struct Kept {
    gang: WorkloadId,
    gpus: u32,
    blockers: Blockers,
    /// Where the log of changed hosts stood when it was made.
    logged: usize,
    now: Time,
    /// The first moment after `now` at which a host becomes ready for it (`Time::MAX`: none).
    next_ready: Time,
    /// The hosts reserved then, a bit each.
    reserved: Vec<u64>,
    seen: Vec<Seen>,
    hosts: Vec<(Time, usize, GpuSet)>,
    reach_now: u32,
    /// Its earliest start, once asked.
    earliest: Option<Option<(Time, Vec<NodeGpus>)>>,
}

impl Kept {
    /// Keeps `outlook`, made at `now` with the log of changed hosts at `logged` and `reserved`
    /// hosts, what each host is to the gang being in `seen` already.
    fn record(&mut self, outlook: &GangOutlook, now: Time, logged: usize, reserved: &[u64]) {
        self.logged = logged;
        self.now = now;
        self.next_ready = (self.seen.iter())
            .filter_map(|s| match s {
                Seen::At(at) => Some(*at),
                _ => None,
            })
            .min()
            .unwrap_or(Time::MAX);
        self.reserved.clear();
        self.reserved.extend_from_slice(reserved);
        self.hosts.clear();
        self.hosts.extend_from_slice(outlook.hosts());
        self.reach_now = outlook.reach_now;
        self.earliest = None;
    }
}

/// The gangs' kept outlooks, and the log of hosts whose runs changed (what they depend on).
#[derive(Debug, Default)]
pub(crate) struct Outlooks {
    kept: Vec<Kept>,
    /// Hosts whose runs changed, in order, since the log was last cleared.
    log: Vec<u32>,
    /// Outlooks made or reused, to drop the least recently used first.
    uses: Vec<u64>,
    clock: u64,
    /// Scratch: the changed hosts a check reads, a bit each.
    marks: Vec<u64>,
    /// Scratch: the hosts reserved now, a bit each.
    reserved: Vec<u64>,
}

/// How a kept outlook compares with what the gang would find now.
enum Check {
    /// The same outlook, and the same earliest start unless that was now.
    Same,
    /// Some hosts are something else to the gang now (or the reserved hosts differ), all of
    /// them known without reading the others again.
    Patched,
    /// To be worked out afresh.
    Afresh,
}

/// At most this many gangs' outlooks are kept (a pass reads a few).
const KEPT: usize = 16;
/// The log is cleared (with every kept outlook) once this long.
const LOG: usize = 1 << 16;

impl Outlooks {
    /// Host `node`'s runs changed.
    pub(super) fn changed(&mut self, node: usize) {
        if self.log.len() >= LOG {
            self.log.clear();
            self.kept.clear();
            self.uses.clear();
        }
        self.log.push(node as u32);
    }
}

impl Pool {
    /// [`Pool::gang_outlook`] for `gang`, reusing its last outlook where nothing it depends on
    /// changed since (see the module's notes); its earliest start comes with it once worked out
    /// ([`Pool::keep_earliest`]).
    pub(crate) fn gang_outlook_kept(
        &self,
        gang: WorkloadId,
        gpus: u32,
        blockers: &Blockers,
        eventually: &impl Fn(&Run) -> bool,
        hosts: Vec<(Time, usize, GpuSet)>,
    ) -> GangOutlook {
        let mut outlooks = self.outlooks.borrow_mut();
        outlooks.clock += 1;
        let clock = outlooks.clock;
        let now = self.now;
        let found = outlooks
            .kept
            .iter()
            .position(|k| k.gang == gang && k.gpus == gpus);
        let Outlooks {
            kept,
            log,
            marks,
            reserved,
            ..
        } = &mut *outlooks;
        self.reserved_hosts(reserved);
        let check = match found {
            Some(i) => {
                let since = kept[i].logged;
                self.check(&mut kept[i], &log[since..], marks, blockers, reserved)
            }
            None => Check::Afresh,
        };
        if let (Some(i), Check::Same) = (found, &check) {
            outlooks.uses[i] = clock;
            let k = &outlooks.kept[i];
            let mut outlook = GangOutlook::from_parts(hosts, k.reach_now);
            outlook.hosts_mut().extend(
                k.hosts
                    .iter()
                    .map(|&(at, node, mask)| (at.max(now), node, mask)),
            );
            outlook.known_earliest = k
                .earliest
                .as_ref()
                .filter(|e| e.as_ref().is_none_or(|(at, _)| *at > now))
                .cloned();
            #[cfg(debug_assertions)]
            self.assert_same_outlook(&outlook, gpus, blockers, eventually);
            return outlook;
        }
        if let (Some(i), Check::Patched) = (found, &check) {
            // What each host is to the gang is known (the changed ones read again): the outlook
            // is put together from that, without reading the hosts' holders.
            let logged = log.len();
            let k = &mut kept[i];
            let mut outlook = GangOutlook::from_parts(hosts, 0);
            for (node, slot) in self.slots.iter().enumerate() {
                let at = match k.seen[node] {
                    Seen::Never => continue,
                    Seen::At(at) if at > now => at,
                    Seen::Now | Seen::At(_) => {
                        k.seen[node] = Seen::Now;
                        now
                    }
                };
                if at == now {
                    outlook.reach_now += slot.size;
                }
                if slot.reservation.is_none() {
                    outlook.hosts_mut().push((at, node, slot.all));
                }
            }
            k.record(&outlook, now, logged, reserved);
            outlooks.uses[i] = clock;
            #[cfg(debug_assertions)]
            self.assert_same_outlook(&outlook, gpus, blockers, eventually);
            return outlook;
        }
        // Worked out afresh, into the gang's entry (or the least recently used one when full).
        let slot = match found {
            Some(i) => i,
            None if outlooks.kept.len() < KEPT => {
                outlooks.kept.push(Kept {
                    gang,
                    gpus,
                    blockers: *blockers,
                    logged: 0,
                    now,
                    next_ready: Time::MAX,
                    reserved: Vec::new(),
                    seen: Vec::new(),
                    hosts: Vec::new(),
                    reach_now: 0,
                    earliest: None,
                });
                outlooks.uses.push(clock);
                outlooks.kept.len() - 1
            }
            None => (0..outlooks.uses.len())
                .min_by_key(|&i| outlooks.uses[i])
                .expect("full"),
        };
        let logged = outlooks.log.len();
        let Outlooks {
            kept,
            uses,
            reserved,
            ..
        } = &mut *outlooks;
        let k = &mut kept[slot];
        let (outlook, usable) =
            self.gang_outlook_seen(blockers, eventually, hosts, Some(&mut k.seen));
        if !usable {
            kept.swap_remove(slot);
            uses.swap_remove(slot);
            return outlook;
        }
        k.gang = gang;
        k.gpus = gpus;
        k.blockers = *blockers;
        k.record(&outlook, now, logged, reserved);
        uses[slot] = clock;
        outlook
    }

    /// Keeps `gang`'s earliest start for `gpus`, as worked out from the outlook last made for it.
    pub(crate) fn keep_earliest(
        &self,
        gang: WorkloadId,
        gpus: u32,
        earliest: &Option<(Time, Vec<NodeGpus>)>,
    ) {
        let mut outlooks = self.outlooks.borrow_mut();
        if let Some(k) = outlooks
            .kept
            .iter_mut()
            .find(|k| k.gang == gang && k.gpus == gpus)
        {
            k.earliest = Some(earliest.clone());
        }
    }

    /// How kept outlook `k` compares with what the gang would find now (see the module's notes),
    /// noting in it what each changed host is to the gang now. `changed` are the hosts whose runs
    /// changed since it was made (a host may be listed more than once: `marks` is scratch to read
    /// each once).
    fn check(
        &self,
        k: &mut Kept,
        changed: &[u32],
        marks: &mut Vec<u64>,
        blockers: &Blockers,
        reserved: &[u64],
    ) -> Check {
        let now = self.now;
        if now < k.now
            || k.blockers != *blockers
            // Reading more changed hosts than there are would cost more than the outlook.
            || changed.len() > 4 * self.slots.len()
        {
            return Check::Afresh;
        }
        marks.clear();
        marks.resize(self.slots.len().div_ceil(64), 0);
        for &node in changed {
            marks[node as usize / 64] |= 1 << (node % 64);
        }
        let mut same = now < k.next_ready && k.reserved == reserved;
        for (word, &bits) in marks.iter().enumerate() {
            let mut bits = bits;
            while bits != 0 {
                let node = word * 64 + bits.trailing_zeros() as usize;
                bits &= bits - 1;
                let ready = if self.slots[node].schedulable() {
                    self.ready_by_holders(node, blockers)
                } else {
                    Some(None)
                };
                // A host only its runs can tell of: read them all afresh.
                let Some(ready) = ready else {
                    return Check::Afresh;
                };
                let seen = Seen::of(ready, now);
                if seen != k.seen[node] {
                    k.seen[node] = seen;
                    same = false;
                }
            }
        }
        if same {
            Check::Same
        } else {
            Check::Patched
        }
    }

    /// Into `bits`, the hosts held by live reservations, a bit each.
    fn reserved_hosts(&self, bits: &mut Vec<u64>) {
        bits.clear();
        bits.resize(self.slots.len().div_ceil(64), 0);
        for (i, h) in self.held.iter().enumerate().filter(|(_, h)| h.live) {
            for part in &h.parts {
                let node = part.node.index();
                if self.slots[node].reservation == Some(i as u32) {
                    bits[node / 64] |= 1 << (node % 64);
                }
            }
        }
    }

    #[cfg(debug_assertions)]
    fn assert_same_outlook(
        &self,
        kept: &GangOutlook,
        gpus: u32,
        blockers: &Blockers,
        eventually: &impl Fn(&Run) -> bool,
    ) {
        let mut fresh = self.gang_outlook(blockers, eventually, Vec::new());
        assert_eq!(
            kept.reach_now, fresh.reach_now,
            "a kept outlook's reach now"
        );
        assert_eq!(kept.hosts(), fresh.hosts(), "a kept outlook's hosts");
        if let Some(earliest) = &kept.known_earliest {
            assert_eq!(earliest, &fresh.earliest(gpus), "a kept earliest start");
        }
    }
}
