//! The report of `ibprobe stream`, from a [`StreamOutcome`]: throughput
//! and the latency tail side by side (messages/s, operations per message,
//! per-message latency, time in batch, credit waits, flush causes), which
//! the one-message [`super::Report`] has no room for. Its JSON
//! (`ibprobe.stream/1`, in `report/README.md`) only ever grows.

use serde::Serialize;
use serde_json::json;

use super::format::Format;
use super::model::{
    us, Align, Block, Column, Csv, Document, JsonDoc, Quote, ReportError, Spacing, Table, Warning,
};
use crate::clock::Clock;
use crate::probe::outcome::StreamOutcome;
use crate::spec::{StreamSpec, Transport};
use crate::transport::TransportInfo;
use ibstats::latency::LatencyHistogram;

/// Percentiles of one stream distribution, ns.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct Tail {
    pub count: u64,
    pub p50: u64,
    pub p99: u64,
    pub p999: u64,
    pub p9999: u64,
    /// The true maximum (not a bucket bound).
    pub max: u64,
    pub mean: f64,
}

impl Tail {
    pub fn of(h: &LatencyHistogram) -> Tail {
        let s = h.summary();
        Tail {
            count: s.count,
            p50: s.p50_ns,
            p99: s.p99_ns,
            p999: s.p999_ns,
            p9999: s.p9999_ns,
            max: s.max_ns,
            mean: s.mean_ns,
        }
    }
}

/// A pipeline depth, or "off" (no acks).
pub(super) fn pipe(p: Option<u32>) -> String {
    p.map_or("off".into(), |d| d.to_string())
}

/// Everything the stream outputs print, computed once.
#[derive(Clone, Debug)]
pub struct StreamReport {
    pub transport: Transport,
    /// Its facts (device, slots, ...).
    pub info: TransportInfo,
    /// loopback or client.
    pub mode: &'static str,
    /// Message size, bytes.
    pub size: usize,
    pub spec: StreamSpec,
    pub clock: String,
    /// The clock's resolution (smallest step between two reads), ns.
    pub clock_resolution_ns: f64,
    pub out: StreamOutcome,
    pub warnings: Vec<Warning>,
    /// `--rate` (None: back to back).
    pub rate_hz: Option<f64>,
    /// `--fail-if`, checked (None: none given).
    pub fail_if: Option<super::threshold::FailIf>,
}

impl super::threshold::Measured for StreamReport {
    fn value(&self, m: super::threshold::Metric) -> Option<f64> {
        use super::threshold::Metric;
        match m {
            Metric::Lost => Some(self.out.lost() as f64),
            Metric::MsgsPerSec => Some(self.out.msgs_per_sec()),
            Metric::BytesPerSec => Some(self.bytes_per_sec()),
            Metric::CreditStalls => Some(self.out.send.credit_stalls as f64),
            _ => super::threshold::from_summary(&self.out.latency.summary(), m),
        }
    }
}

impl StreamReport {
    pub fn new(
        transport: Transport,
        info: TransportInfo,
        mode: &'static str,
        size: usize,
        spec: &StreamSpec,
        clock: &Clock,
        out: StreamOutcome,
    ) -> StreamReport {
        let mut warnings = Vec::new();
        let mut warn = |code, message| warnings.push(Warning { code, message });
        if out.lost() > 0 {
            warn(
                "lost",
                format!(
                    "{} of {} messages never arrived ({} slots missing)",
                    out.lost(),
                    out.send.msgs,
                    out.recv.lost_slots
                ),
            );
        }
        if out.recv.corrupt > 0 {
            warn(
                "corrupt",
                format!("{} messages arrived with a wrong payload", out.recv.corrupt),
            );
        }
        if out.send.missed_steps > 0 {
            warn(
                "missed_steps",
                format!(
                    "{} paced steps were missed (the sender was waiting for a credit, an ack or the CPU)",
                    out.send.missed_steps
                ),
            );
        }
        if out.send.interrupted || out.recv.interrupted {
            warn(
                "interrupted",
                "Ctrl-C ended the run early; the statistics cover what ran".into(),
            );
        }
        let l = out.latency.summary();
        if l.count > 0 {
            if let Some(m) = super::model::clock_resolution_warning("latency", &l, clock) {
                warn("clock_resolution", m);
            }
        }
        StreamReport {
            transport,
            info,
            mode,
            size,
            spec: spec.clone(),
            clock: clock.describe(),
            clock_resolution_ns: clock.resolution_ns(),
            out,
            warnings,
            rate_hz: None,
            fail_if: None,
        }
    }

    pub fn bytes_per_sec(&self) -> f64 {
        self.out.msgs_per_sec() * self.size as f64
    }

    /// The run in `format` (perftest's one-line format has no stream row).
    pub fn render(&self, format: Format) -> Result<String, ReportError> {
        super::format::render(self, format)
    }

    fn flush_ns(&self) -> Option<u64> {
        self.spec.flush.map(|d| d.as_nanos() as u64)
    }

    /// The `ibprobe.stream/1` document.
    pub fn json(&self) -> serde_json::Value {
        let o = &self.out;
        let (s, r) = (&o.send, &o.recv);
        let mut v = json!({
            "schema": "ibprobe.stream/1",
            "transport": self.transport.name(),
            "mode": self.mode,
            "size": self.size,
            "rate_hz": self.rate_hz,
            "window": self.spec.window,
            "batch": self.spec.batch,
            "flush_ns": self.flush_ns(),
            "pipeline": self.spec.pipeline,
            "slots": self.spec.slots,
            "slot_size": self.spec.slot_size,
            "credit_return": self.spec.credit_return.name(),
            "credit_batch": self.spec.credit_batch,
            "msgs_per_sec": o.msgs_per_sec(),
            "bytes_per_sec": self.bytes_per_sec(),
            "ops_per_msg": o.ops_per_msg(),
            "ops_per_msg_total": o.ops_per_msg_total(),
            "messages": s.msgs,
            "delivered": r.msgs,
            "lost": o.lost(),
            "lost_slots": r.lost_slots + s.slots_given_up,
            "corrupt": r.corrupt,
            "data_posts": s.data_posts,
            "credit_msgs": r.credit_msgs,
            "ack_msgs": r.ack_msgs,
            "counter_writes": r.counter_writes,
            "credit_stalls": s.credit_stalls,
            "credit_stall_ns": o.credit_stall_ns,
            "ack_waits": s.ack_waits,
            "ack_wait_ns": o.ack_wait_ns,
            "flushes": {"fill": s.flushes[0], "timer": s.flushes[1], "explicit": s.flushes[2]},
        });
        // Two `json!`s: one of every field passes the macro's recursion limit.
        let more = json!({
            "max_in_flight": s.max_in_flight,
            "max_unconsumed": r.max_unconsumed,
            "max_unacked": s.max_unacked.max(r.max_unacked),
            "missed_steps": s.missed_steps,
            "transport_full": s.transport_full,
            "elapsed_ns": o.elapsed_ns,
            "interrupted": s.interrupted || r.interrupted,
            "latency_kind": self.latency_kind(),
            "latency": Tail::of(&o.latency),
            "latency_hdr": super::hdrlog::encode(&o.latency),
            "time_in_batch": Tail::of(&o.send_histos.in_batch),
            "credit_wait": Tail::of(&o.send_histos.credit_wait),
            "clock": self.clock,
            "clock_resolution_ns": self.clock_resolution_ns,
            "transport_detail": self.info.detail,
            "notes": o.notes,
            "counters": o.counters.as_ref().map(super::counters::json),
            "warnings": self.warnings,
        });
        if let (Some(a), serde_json::Value::Object(b)) = (v.as_object_mut(), more) {
            a.extend(b);
        }
        if let Some(st) = &o.stamp {
            v["t_send_split"] = json!({
                "before_hca_read": Tail::of(&st.split.before),
                "after_hca_read": Tail::of(&st.split.after),
                "latency": Tail::of(&st.split.latency),
                "stamp_pass_ns": st.pass_ns,
                "stamp_words": st.words,
                "stamp_cpu": st.cpu,
            });
        }
        if let Some(f) = &self.fail_if {
            v["fail_if"] = f.json();
        }
        v
    }

    fn knobs_line(&self) -> String {
        // shm's ring holds only what can be in flight (`shm_ring_slots`):
        // say so beside --slots, so the line agrees with the transport's.
        let ring = self.spec.shm_ring_slots();
        let ring = if self.transport == Transport::Shm && ring < self.spec.slots {
            format!(" (the shm ring holds {ring}: twice what can be in flight)")
        } else {
            String::new()
        };
        format!(
            "window {} · batch {} · flush {} · pipeline {} · credit return {} (every {}) · {} slots of {} B{ring}",
            self.spec.window,
            self.spec.batch,
            self.spec
                .flush
                .map_or("off".to_string(), ibhost::duration::format),
            pipe(self.spec.pipeline),
            self.spec.credit_return,
            self.spec.credit_batch,
            self.spec.slots,
            self.spec.slot_size
        )
    }

    /// What `latency` measures: `one_way` (hand-over to delivery, one
    /// clock, loopback) or `credit_round_trip` (hand-over to the slot's
    /// credit back at the sender, across hosts).
    pub fn latency_kind(&self) -> &'static str {
        if self.mode == "client" {
            "credit_round_trip"
        } else {
            "one_way"
        }
    }

    /// The distributions of the table, with `--stamp-thread`'s split.
    fn tail_rows(&self) -> impl Iterator<Item = (&'static str, Tail)> + '_ {
        let latency = if self.mode == "client" {
            "latency (hand-over -> credit back)"
        } else {
            "latency (hand-over -> delivery)"
        };
        let h = &self.out.send_histos;
        std::iter::once((latency, &self.out.latency))
            .chain(self.split())
            .chain([
                ("hand-over -> post (batch, credits)", &h.in_batch),
                ("credit/ack wait per slot", &h.credit_wait),
            ])
            .map(|(name, h)| (name, Tail::of(h)))
    }

    /// `--stamp-thread`'s two distributions, named (none without it).
    pub fn split(&self) -> Vec<(&'static str, &LatencyHistogram)> {
        self.out
            .stamp
            .iter()
            .flat_map(|st| {
                [
                    ("split: hand-over -> HCA read", &st.split.before),
                    ("split: HCA read -> delivery", &st.split.after),
                ]
            })
            .collect()
    }

    /// The CSV cells of this run (columns of [`CSV_HEADER`]).
    pub fn csv_cells(&self) -> Vec<String> {
        let o = &self.out;
        let l = Tail::of(&o.latency);
        let mut row = vec![
            self.transport.to_string(),
            self.size.to_string(),
            self.rate_hz.unwrap_or(0.0).to_string(),
            self.spec.window.to_string(),
            self.spec.batch.to_string(),
            self.flush_ns().unwrap_or(0).to_string(),
            self.spec.pipeline.unwrap_or(0).to_string(),
            format!("{:.1}", o.msgs_per_sec()),
            format!("{:.6}", o.ops_per_msg()),
            format!("{:.6}", o.ops_per_msg_total()),
        ];
        row.extend(
            [
                o.send.credit_stalls,
                o.lost(),
                l.count,
                l.p50,
                l.p99,
                l.p999,
                l.p9999,
                l.max,
                o.send.flushes[1],
            ]
            .map(|v| v.to_string()),
        );
        row.extend(super::counters::csv_cells(o.counters.as_ref()));
        row
    }
}

impl Document for StreamReport {
    fn noun(&self) -> &'static str {
        "stream row"
    }

    fn blocks(&self) -> Vec<Block> {
        let o = &self.out;
        let (s, r) = (&o.send, &o.recv);
        let context = vec![
            format!(
                "ibprobe stream · {} {} · {} B messages · {}",
                self.transport, self.mode, self.size, self.info.detail
            ),
            self.knobs_line(),
            format!("clock: {}", self.clock),
            String::new(),
            format!(
                "throughput   {:.0} msg/s · {:.1} MB/s payload · {} delivered of {} ({} lost)",
                o.msgs_per_sec(),
                self.bytes_per_sec() / 1e6,
                r.msgs,
                s.msgs,
                o.lost()
            ),
            format!(
                "operations   {:.4} data posts/msg · {:.4} with credits and acks ({} data, {} credit msgs, {} acks, {} counter writes)",
                o.ops_per_msg(),
                o.ops_per_msg_total(),
                s.data_posts,
                r.credit_msgs,
                r.ack_msgs,
                r.counter_writes
            ),
            format!(
                "flushes      fill {} · timer {} · explicit {}",
                s.flushes[0], s.flushes[1], s.flushes[2]
            ),
            format!(
                "stalls       credit {} ({} us) · ack {} ({} us) · max in flight {} · max unconsumed {} · max unacked {}",
                s.credit_stalls,
                us(o.credit_stall_ns),
                s.ack_waits,
                us(o.ack_wait_ns),
                s.max_in_flight,
                r.max_unconsumed,
                s.max_unacked.max(r.max_unacked)
            ),
            String::new(),
        ];
        let mut columns: Vec<Column> = ["msg/s", "ops/msg", "ops/msg (all)", "credit stalls"]
            .map(|t| Column::new(t, 0, Align::RIGHT))
            .into();
        columns.push(Column::new("flushes fill/timer/explicit", 0, Align::LEFT));
        let summary = Table::block(
            columns,
            " ",
            vec![vec![
                format!("{:.0}", o.msgs_per_sec()),
                format!("{:.4}", o.ops_per_msg()),
                format!("{:.4}", o.ops_per_msg_total()),
                s.credit_stalls.to_string(),
                format!("{}/{}/{}", s.flushes[0], s.flushes[1], s.flushes[2]),
            ]],
        );
        let c = |t, w| Column::new(t, w, Align::RIGHT);
        let tails = self.tail_rows().map(|(name, d)| {
            let mut row = vec![name.to_string(), d.count.to_string()];
            row.extend([d.p50, d.p99, d.p999, d.p9999, d.max].map(us));
            row
        });
        let mut columns = vec![
            Column::new("distribution (us)", 34, Align::LEFT),
            c("count", 9),
        ];
        columns.extend(["p50", "p99", "p99.9", "p99.99", "max"].map(|t| c(t, 10)));
        let tails = Table::block(columns, " ", tails.collect());
        let counters: Vec<String> = o
            .counters
            .iter()
            .flat_map(super::counters::table_lines)
            .collect();
        let notes = o.notes.iter().map(|n| format!("note: {n}"));
        vec![
            Block::Context(context),
            Block::Title {
                bold: "ibprobe stream".into(),
                rest: format!(
                    " · {} {} · {} B · {}",
                    self.transport,
                    self.mode,
                    self.size,
                    self.knobs_line()
                ),
            },
            Block::OnlyMarkdown(Box::new(summary)),
            tails,
            Block::Context(counters.iter().cloned().chain(notes).collect()),
            Block::List(counters, Spacing::None),
            Block::OnlyText(Box::new(Block::Warnings {
                list: self.warnings.clone(),
                gap: false,
                style: Quote::Together,
            })),
        ]
    }

    fn fail_if(&self) -> Option<&super::threshold::FailIf> {
        self.fail_if.as_ref()
    }

    /// One header line and one row (the sweep writes many rows); with
    /// --fail-if one more column, the violated expressions (`;`).
    fn csv(&self) -> Option<Csv> {
        let mut header = CSV_HEADER.to_string();
        let mut row = self.csv_cells();
        if let Some(st) = &self.out.stamp {
            header.push_str(STAMP_CSV_HEADER);
            for h in [&st.split.before, &st.split.after] {
                let t = Tail::of(h);
                row.extend([t.count, t.p50, t.p99].map(|v| v.to_string()));
            }
        }
        if let Some(f) = &self.fail_if {
            header.push_str(",fail_if_violated");
            row.push(f.csv_cell());
        }
        Some(Csv {
            header,
            rows: vec![row],
        })
    }

    fn json(&self) -> Option<Box<dyn JsonDoc + '_>> {
        Some(Box::new(StreamReport::json(self)))
    }
}

/// The columns a stream CSV row gains with `--stamp-thread` (after the
/// usual ones, before `fail_if_violated`).
pub const STAMP_CSV_HEADER: &str = ",before_hca_read_count,before_hca_read_p50_ns,before_hca_read_p99_ns,after_hca_read_count,after_hca_read_p50_ns,after_hca_read_p99_ns";

/// Columns of a stream CSV row; the last ten are the sending thread's
/// counters (empty where not counted): `report::counters::csv_header`.
pub const CSV_HEADER: &str = "transport,size,rate_hz,window,batch,flush_ns,pipeline,msgs_per_sec,ops_per_msg,ops_per_msg_total,credit_stalls,lost,count,p50_ns,p99_ns,p999_ns,p9999_ns,max_ns,timer_flushes,\
context_switches,involuntary_context_switches,cpu_migrations,page_faults_minor,page_faults_major,cycles,instructions,cache_misses,interrupts,smis";
