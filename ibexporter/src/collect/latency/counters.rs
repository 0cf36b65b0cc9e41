//! The probing thread's counters per probe: context switches, migrations,
//! page faults, interrupts on its CPU, SMIs (and cycles, instructions,
//! cache misses where a PMU exists), summed over every round of a series.
//!
//! Why it exists: a p99 that jumps on the dashboard has a cause; these
//! counters, on the same series labels and time axis as
//! `ibprobe_latency_seconds`, say whether the probe was preempted, faulted
//! or interrupted while it measured (`ibnoise::counters`, read before
//! and after each round, never per message).
//!
//! | family | type | labels |
//! |---|---|---|
//! | `ibprobe_probe_context_switches_total` | counter | source, target, transport, op, size_bytes |
//! | `ibprobe_probe_involuntary_context_switches_total` | counter | same |
//! | `ibprobe_probe_cpu_migrations_total` | counter | same |
//! | `ibprobe_probe_page_faults_minor_total` | counter | same |
//! | `ibprobe_probe_page_faults_major_total` | counter | same |
//! | `ibprobe_probe_cycles_total` | counter | same (PMU only) |
//! | `ibprobe_probe_instructions_total` | counter | same (PMU only) |
//! | `ibprobe_probe_cache_misses_total` | counter | same (PMU only) |
//! | `ibprobe_probe_interrupts_total` | counter | same: interrupts on the probing CPU(s) |
//! | `ibprobe_probe_smis_total` | counter | same (readable MSR only) |
//!
//! A counter this host cannot count (no PMU, perf_event_open refused, no
//! msr module) has no samples: the family is left out, never zero.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use ibnoise::counters::{Counter, Counts, N};
use prometheus_client::collector::Collector;
use prometheus_client::encoding::DescriptorEncoder;

use super::super::encode::{counters, Labels};
use super::families::SeriesKey;

/// The family name of `c` as Prometheus shows it (with `_total`).
pub fn family_name(c: Counter) -> String {
    format!("ibprobe_probe_{}_total", c.name())
}

/// Counters summed per series, shared by the engine (writes) and the
/// registry (reads at scrape).
#[derive(Clone, Debug, Default)]
pub struct CounterStore {
    sums: Arc<Mutex<BTreeMap<SeriesKey, [Option<u64>; N]>>>,
}

impl CounterStore {
    /// Adds one round's counters to `key`'s sums.
    pub fn record(&self, key: &SeriesKey, c: &Counts) {
        let mut m = self.sums.lock().unwrap_or_else(|p| p.into_inner());
        let e = m.entry(key.clone()).or_insert([None; N]);
        let mut sum = Counts(*e);
        sum.add(c);
        *e = sum.0;
    }

    /// Forgets a series that is no longer probed.
    pub fn forget(&self, key: &SeriesKey) {
        self.sums
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(key);
    }
}

fn labels(k: &SeriesKey) -> Labels {
    vec![
        ("source", k.source.clone()),
        ("target", k.target.clone()),
        ("transport", k.transport.clone()),
        ("op", k.op.clone()),
        ("size_bytes", k.size_bytes.clone()),
    ]
}

impl Collector for CounterStore {
    fn encode(&self, mut enc: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let m = self.sums.lock().unwrap_or_else(|p| p.into_inner());
        for &c in Counter::ALL {
            let samples: Vec<(Labels, u64)> = m
                .iter()
                .filter_map(|(k, v)| Counts(*v).get(c).map(|n| (labels(k), n)))
                .collect();
            let name = family_name(c);
            let help = format!(
                "Probe rounds: {} (ibprobe counters, read before and after each round)",
                c.help()
            );
            counters(
                &mut enc,
                name.strip_suffix("_total").unwrap_or(&name),
                &help,
                None,
                &samples,
            )?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use prometheus_client::registry::Registry;

    #[test]
    fn rounds_add_up_and_missing_counters_have_no_family() {
        let s = CounterStore::default();
        let k = SeriesKey {
            source: "h".into(),
            target: "loopback".into(),
            transport: "shm".into(),
            op: "send".into(),
            size_bytes: "32".into(),
        };
        let mut c = Counts::default();
        c.set(Counter::ContextSwitches, Some(2));
        c.set(Counter::Interrupts, Some(10));
        s.record(&k, &c);
        s.record(&k, &c);
        let mut reg = Registry::default();
        reg.register_collector(Box::new(s.clone()));
        let mut out = String::new();
        prometheus_client::encoding::text::encode(&mut out, &reg).unwrap();
        assert!(
            out.contains("ibprobe_probe_context_switches_total{source=\"h\",target=\"loopback\",transport=\"shm\",op=\"send\",size_bytes=\"32\"} 4"),
            "{out}"
        );
        assert!(out.contains("ibprobe_probe_interrupts_total{"), "{out}");
        assert!(!out.contains("ibprobe_probe_cycles"), "{out}");
        s.forget(&k);
        let mut out = String::new();
        prometheus_client::encoding::text::encode(&mut out, &reg).unwrap();
        assert!(!out.contains("ibprobe_probe_context_switches"), "{out}");
    }
}
