//! Prometheus metrics at `/metrics` (OpenMetrics text, by the Prometheus project's own client).
//!
//! Two kinds: what happens (HTTP requests, scheduler passes, preemptions), counted as it happens in
//! [`Metrics`], one registry per server; and how things stand (GPUs, queue, usage ratios,
//! delivered over owed, heartbeats), read from the database when scraped ([`scrape`]), so every
//! replica answers the same and nothing is kept twice.

pub mod http;
pub mod scrape;

use prometheus_client::{
    encoding::EncodeLabelSet,
    metrics::{
        counter::Counter,
        family::Family,
        histogram::{exponential_buckets, Histogram},
    },
    registry::Registry,
};

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RequestLabels {
    /// The route as declared (`/api/v1/workloads/:id`), never the raw path.
    pub route: String,
    pub method: String,
    pub status: u16,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RouteLabels {
    pub route: String,
    pub method: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct PreemptLabels {
    pub cluster: String,
    /// The scheduler's rule (`fair-share`, `free-work`, `fast-lane`, …) or `drain`.
    pub rule: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct SourceLabels {
    /// What a page's snapshot was built on: see [`PageSnapshot`].
    pub source: &'static str,
}

/// What a snapshot built for pages was built on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PageSnapshot {
    /// The leader's latest pass's tree, nodes and ledger under its copy of the queue.
    Base,
    /// Everything read from the database (a follower, a change of shape, an old pass).
    Read,
}

impl PageSnapshot {
    fn label(self) -> &'static str {
        match self {
            PageSnapshot::Base => "base",
            PageSnapshot::Read => "read",
        }
    }
}

type Seconds = Family<RouteLabels, Histogram, fn() -> Histogram>;

/// Request latencies from 1 ms to about 33 s.
fn request_histogram() -> Histogram {
    Histogram::new(exponential_buckets(0.001, 2.0, 16))
}

/// The counted metrics of one server.
pub struct Metrics {
    registry: Registry,
    requests: Family<RequestLabels, Counter>,
    request_seconds: Seconds,
    pass_seconds: Histogram,
    preemptions: Family<PreemptLabels, Counter>,
    /// Snapshots built for pages on the latest pass's base, and read whole.
    pages_on_base: Counter,
    pages_read: Counter,
}

impl Default for Metrics {
    fn default() -> Self {
        let mut registry = Registry::default();
        let requests = Family::<RequestLabels, Counter>::default();
        registry.register(
            "hourglass_http_requests",
            "HTTP requests answered, by route, method and status",
            requests.clone(),
        );
        let request_seconds: Seconds = Family::new_with_constructor(request_histogram);
        registry.register(
            "hourglass_http_request_duration_seconds",
            "Time to answer an HTTP request (to the response's head), by route and method",
            request_seconds.clone(),
        );
        // Passes from 1 ms to about 16 s.
        let pass_seconds = Histogram::new(exponential_buckets(0.001, 2.0, 15));
        registry.register(
            "hourglass_scheduler_pass_seconds",
            "Scheduler passes on the leader, from asking for the write lock to committing",
            pass_seconds.clone(),
        );
        let preemptions = Family::<PreemptLabels, Counter>::default();
        registry.register(
            "hourglass_preemptions",
            "Runs stopped by the scheduler, by the rule that stopped them",
            preemptions.clone(),
        );
        let page_snapshots = Family::<SourceLabels, Counter>::default();
        registry.register(
            "hourglass_page_snapshots",
            "Snapshots built for pages, by what they were built on: the leader's latest pass's tree, \
             nodes and ledger under its copy of the queue (base), or everything read (read)",
            page_snapshots.clone(),
        );
        // Both sources from the start, at 0: a dashboard sees none read whole, not no data.
        let series = |source: PageSnapshot| {
            page_snapshots
                .get_or_create(&SourceLabels {
                    source: source.label(),
                })
                .clone()
        };
        Metrics {
            registry,
            pages_on_base: series(PageSnapshot::Base),
            pages_read: series(PageSnapshot::Read),
            requests,
            request_seconds,
            pass_seconds,
            preemptions,
        }
    }
}

impl Metrics {
    /// One request answered.
    pub fn request(&self, route: &str, method: &str, status: u16, seconds: f64) {
        self.requests
            .get_or_create(&RequestLabels {
                route: route.to_string(),
                method: method.to_string(),
                status,
            })
            .inc();
        self.request_seconds
            .get_or_create(&RouteLabels {
                route: route.to_string(),
                method: method.to_string(),
            })
            .observe(seconds);
    }

    /// One scheduler pass on the leader.
    pub fn pass(&self, seconds: f64) {
        self.pass_seconds.observe(seconds);
    }

    /// Runs stopped by one committed decision, by cluster and rule.
    pub fn stopped(&self, rules: &[(String, &'static str)]) {
        for (cluster, rule) in rules {
            self.preemptions
                .get_or_create(&PreemptLabels {
                    cluster: cluster.clone(),
                    rule: (*rule).into(),
                })
                .inc();
        }
    }

    fn pages_built(&self, source: PageSnapshot) -> &Counter {
        match source {
            PageSnapshot::Base => &self.pages_on_base,
            PageSnapshot::Read => &self.pages_read,
        }
    }

    /// A snapshot built for pages (pages that share the leader's latest pass's count none).
    pub fn page_snapshot(&self, source: PageSnapshot) {
        self.pages_built(source).inc();
    }

    /// How many snapshots for pages were built on `source`.
    pub fn page_snapshots(&self, source: PageSnapshot) -> u64 {
        self.pages_built(source).get()
    }

    /// The counted metrics in the text format (no `# EOF`: the scrape adds its gauges first).
    pub fn encode(&self, out: &mut String) -> std::fmt::Result {
        prometheus_client::encoding::text::encode_registry(out, &self.registry)
    }
}
